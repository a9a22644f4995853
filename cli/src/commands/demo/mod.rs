//! `l3m demo`: a fresh hub, the whole stack in this process, and a real scenario end to end.
//!
//! Everything is the real machinery — hubd's gates and Git store, the sequencers' single-writer
//! loops, the ring's tokens and undo chain, the tool table — over the in-process bus. Only the
//! model is scripted (unless the human's l3m.toml configures one), and the output says so.
//!
//! The scenario: the human spawns `lead`; `lead` spawns `lead/worker` under a narrower grant;
//! the worker writes and edits a file with tame tools, commits on its work branch and mails its
//! parent; `lead` is refused a widening spawn, and the refusal names the axis; a rewind of the
//! worker restores the file from the undo chain, moves its work branch back to before its
//! commit, and reports its letter as not undone; a host credential issued for `lead/` opens
//! its worker's sequencer session but not the whole hub, and revoking it ends that session;
//! and `lead` mails `bob` on a second hub, `south` (its own hubd, sequencers and bus, paired
//! through two postmen over QUIC with mutual TLS): bob's letter arrives with its true origin,
//! bob's read comes back as a receipt, and a letter to no one there comes back as a bounce;
//! and `tidy`, granted the sandboxed shell, has a shell call deliberated by a reviewer of
//! another model family (unclear, then safe once better justified) and run in the sandbox
//! (`review`; skipped, saying why, without bubblewrap or with the human's own model); and
//! `maker`, granted `build` and `run`, builds a project in a container with no network and runs
//! the artifact by its digest (`build`; skipped, saying why, without a Docker engine or the
//! `l3m/busybox:dev` image, or with the human's own model); and `keeper` keeps time with
//! vigils, one its own and one the human pinned on it, which it cannot cancel (`vigil`); and
//! `smith` writes a sealed program with tame edits and, at its next boot, calls it as its own
//! tool, run in a sandboxed evaluator (`program`; skipped, saying why, without bubblewrap).
//! The demo checks each step and exits non-zero if one did not happen.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hubd::store::HubOptions;
use indicatif::ProgressBar;
use l3m_core::axis::Axis;
use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::grant::{GrantFile, SpawnRequest};
use l3m_core::log::{EventSource, Record, RecordBody};
use l3m_core::names::{AgentName, HumanName};
use l3m_wire::bus::{Bus, LocalBus};
use l3m_wire::client::HubClient;
use l3m_wire::subjects::HubId;

mod airmail;
mod build;
mod credentials;
mod image;
mod program;
mod review;
mod vigil;

use crate::context::Context;
use crate::embedded::{Embedded, sequencer_config, start_sequencers};
use crate::error::CliError;
use crate::render;

/// The scenario's data, compiled in so the demo runs from any folder.
const LEAD_GRANT: &str = include_str!("lead-grant.toml");
const LEAD_SCRIPT: &str = include_str!("lead.toml");
const WORKER_SCRIPT: &str = include_str!("worker.toml");
const BOB_SCRIPT: &str = include_str!("bob.toml");
const TIDY_SCRIPT: &str = include_str!("tidy.toml");
const KEEPER_SCRIPT: &str = include_str!("keeper.toml");
const SMITH_SCRIPT: &str = include_str!("smith.toml");
const MODELS: &str = include_str!("models.toml");

/// What the worker first writes: the rewind must bring this back byte for byte.
const FIRST_DRAFT: &str =
    "# Notes\n\n- l3m keeps every fact in git.\n- capabilty grows; authority does not.\n";

/// Run the demo: a fresh hub in a new folder, hubd and the sequencers in this process, and a
/// scenario that exercises spawning under a narrower grant, tame file tools, a commit, a
/// letter, a refused widening, a rewind, a revoked credential, and airmail to a second hub
/// (`ROOT/south`) with its receipt and a bounce. Prints the agent tree, a few Log lines per agent
/// and the cost table, and where the hub is so you can read it with plain `git`.
///
/// The model is scripted (answers read from files, labelled `scripted` in every Log) unless
/// your l3m.toml sets `default_model`; then both agents use your model and the checks that
/// depend on the script's choices are reported, not enforced.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to make the demo hub (default: a new folder `L3M_HOME/demos/<time>`).
    #[arg(long, value_name = "DIR")]
    pub hub_root: Option<PathBuf>,
    /// How long the scenario may take before the demo gives up.
    #[arg(long, value_name = "SECS", default_value_t = 120)]
    pub timeout_secs: u64,
}

/// Which model the demo runs: the script, or the human's configured one.
enum Models {
    Scripted,
    Configured(PathBuf),
}

/// Runs `l3m demo`.
pub async fn cmd_demo(args: Args, cx: Context) -> Result<(), CliError> {
    let root = match args.hub_root {
        Some(dir) => dir,
        None => cx.home.join("demos").join(stamp()),
    };
    let models = match sequencer_config(&cx.document_path()) {
        Ok(config) if config.default_model.is_some() => Models::Configured(cx.document_path()),
        // No document, or one that configures no model: the script answers.
        _ => Models::Scripted,
    };
    match &models {
        Models::Scripted => println!(
            "l3m demo — the model is SCRIPTED: its answers are read from files (see \
             cli/src/commands/demo/); hubd, the sequencers, the tools and Git are real."
        ),
        Models::Configured(path) => println!(
            "l3m demo — the model is the one {} configures; everything else is real.",
            path.display()
        ),
    }
    let scripted = matches!(models, Models::Scripted);
    let report = run(&root, models, Duration::from_secs(args.timeout_secs)).await?;
    println!("\n{}", report.text);
    println!(
        "the hub is at {}; read it with plain git, e.g.\n  git --git-dir {}/hub.git log --oneline refs/l3m/a/lead/_/log",
        root.display(),
        root.display()
    );
    let failed: Vec<&str> = report
        .checks
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(what, _)| *what)
        .collect();
    if scripted && !failed.is_empty() {
        return Err(CliError::Runtime(format!(
            "the demo did not go as scripted: {}",
            failed.join("; ")
        )));
    }
    Ok(())
}

/// What the scenario showed.
struct Report {
    text: String,
    checks: Vec<(&'static str, bool)>,
}

fn stamp() -> String {
    format!("demo-{}", render::time::now_ms())
}

fn runtime(what: impl std::fmt::Display) -> CliError {
    CliError::Runtime(what.to_string())
}

fn name(s: &str) -> Result<AgentName, CliError> {
    AgentName::parse(s).map_err(runtime)
}

async fn run(root: &Path, models: Models, timeout: Duration) -> Result<Report, CliError> {
    let bar = crate::output::spinner("making a fresh hub");
    let human = HumanName::parse("alice").map_err(runtime)?;
    let mut grant = crate::commands::init::root_grant(None, &human)?.grant;
    // The demo's root may airmail the second hub, so lead may be granted it.
    let south = l3m_core::names::OfficeName::parse(airmail::SOUTH).map_err(runtime)?;
    grant.airmail.insert(south.clone());
    grant.mail.insert(l3m_core::grant::MailCover::Office(south));
    review::widen(&mut grant)?;
    build::widen(&mut grant);
    make_hub(root, &human, grant)?;
    let scripted = matches!(models, Models::Scripted);
    let (mut config, config_dir) = match models {
        Models::Scripted => {
            let dir = root.join("demo-scripts");
            std::fs::create_dir_all(&dir).map_err(|e| CliError::io("make", &dir, e))?;
            for (file, text) in [
                ("lead.toml", LEAD_SCRIPT),
                ("worker.toml", WORKER_SCRIPT),
                ("bob.toml", BOB_SCRIPT),
                ("tidy.toml", TIDY_SCRIPT),
                ("keeper.toml", KEEPER_SCRIPT),
                ("smith.toml", SMITH_SCRIPT),
                ("maker.toml", &build::script()?),
                ("models.toml", MODELS),
            ] {
                let path = dir.join(file);
                std::fs::write(&path, text).map_err(|e| CliError::io("write", path, e))?;
            }
            (sequencer_config(&dir.join("models.toml"))?, dir)
        }
        Models::Configured(path) => {
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            (sequencer_config(&path)?, dir)
        }
    };

    bar.set_message("starting hubd and the sequencer supervisor in this process");
    let bus: Arc<dyn Bus> = Arc::new(LocalBus::new());
    let hub_id = HubId::parse("demo").map_err(runtime)?;
    let hubd = Embedded::start(Arc::clone(&bus), root, hub_id.clone()).await?;
    let reviewing =
        review::Reviewing::start(Arc::clone(&bus), &hub_id, &mut config, scripted).await?;
    let building = build::Building::start(Arc::clone(&bus), &hub_id, root, scripted, &bar).await?;
    let programs = program::Programs::prepare(root, &mut config)?;
    let sequencers =
        start_sequencers(Arc::clone(&bus), root, &hub_id, config.clone(), &config_dir).await?;
    let me = human_session(Arc::clone(&bus), &hub_id, root, &human).await?;
    bar.set_message("making a second hub, south, and pairing the two hubs' postmen");
    let north = airmail::North {
        root,
        me: &me,
        bus,
        hub_id,
    };
    let south = airmail::open_south(north, root.join("south"), &human, config, &config_dir).await?;

    let services = Services {
        reviewing: &reviewing,
        building: &building,
        programs: &programs,
    };
    let outcome = scenario(&me, &south, services, root, &bar, timeout).await;
    bar.finish_and_clear();
    reviewing.stop();
    building.stop();
    south.stop().await;
    sequencers.stop().await;
    hubd.stop().await;
    outcome
}

/// A fresh hub at `root` whose human is `human`, with `grant` as the bound of her roots.
fn make_hub(root: &Path, human: &HumanName, grant: l3m_core::grant::Grant) -> Result<(), CliError> {
    std::fs::create_dir_all(root).map_err(|e| CliError::io("make", root, e))?;
    drop(
        hubd::init::init_hub(
            root,
            HubOptions::default(),
            human.clone(),
            grant,
            render::time::now_ms(),
        )
        .map_err(runtime)?,
    );
    Ok(())
}

/// A session of `human` with the hub at `root`, served as `hub_id` on `bus`.
async fn human_session(
    bus: Arc<dyn Bus>,
    hub_id: &HubId,
    root: &Path,
    human: &HumanName,
) -> Result<HubClient, CliError> {
    let key =
        l3m_wire::credential::KeyFile::read(&root.join(l3m_core::refs::paths::human_key(human)))
            .map_err(runtime)?;
    let duty = Duty::Human {
        human: human.clone(),
    };
    Ok(HubClient::open(bus, hub_id.clone(), &key, duty).await?)
}

/// What the later steps need beside the hub: each is running, or says why its step is skipped.
struct Services<'a> {
    reviewing: &'a review::Reviewing,
    building: &'a build::Building,
    programs: &'a program::Programs,
}

async fn scenario(
    me: &HubClient,
    south: &airmail::South,
    services: Services<'_>,
    root: &Path,
    bar: &ProgressBar,
    timeout: Duration,
) -> Result<Report, CliError> {
    let lead = name("lead")?;
    let worker = name("lead/worker")?;
    let lead_grant: GrantFile = toml::from_str(LEAD_GRANT).map_err(runtime)?;
    lead_grant.check().map_err(runtime)?;
    bar.set_message("spawning lead and giving it its task");
    me.spawn(SpawnRequest {
        child: lead.clone(),
        grant: lead_grant.grant,
        loan: Fuel {
            model_calls: 40,
            bytes: 4_000_000,
            wakes: 20,
        },
        driven: false,
        persona: None,
        fork: None,
    })
    .await?;
    me.send_letter(
        lead.as_str(),
        Some("task"),
        "Have a worker write, fix and commit workspace/notes.md, then tell me.",
    )
    .await?;

    bar.set_message("lead and its worker are working");
    let deadline = Instant::now() + timeout;
    let lead_log = loop {
        let log = me.read_log_from(&lead, 0).await?.records;
        if answered_the_workers_letter(&log, &worker) {
            break log;
        }
        if Instant::now() > deadline {
            return Err(runtime(format!(
                "the scenario did not finish within {timeout:?}; `l3m log` on the hub at {} shows how far it got",
                root.display()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let worker_log = me.read_log_from(&worker, 0).await?.records;

    let mut checks = Vec::new();
    let mut text = String::new();
    let refusal = lead_log.iter().find_map(|r| match &r.body {
        RecordBody::ToolResult {
            output,
            refusal: Some(refusal),
            ..
        } if refusal.axis == Some(Axis::Net) => Some(output.clone()),
        _ => None,
    });
    checks.push((
        "the widening spawn was refused naming the axis `net`",
        refusal.is_some(),
    ));
    text.push_str(&format!(
        "refused widening: {}\n",
        refusal.as_deref().unwrap_or("(none seen)")
    ));
    let committed = worker_log.iter().any(|r| {
        matches!(&r.body, RecordBody::ToolResult { output, is_error: false, .. } if output.contains("commit"))
    });
    checks.push(("the worker committed on its work branch", committed));

    bar.set_message("rewinding the worker to before its edit");
    let notes = root
        .join(l3m_core::refs::paths::acr(&worker))
        .join("workspace/notes.md");
    let Some(seq) = first_write_result(&worker_log) else {
        return Err(runtime(
            "the worker's Log has no file write to rewind to; `l3m log lead/worker` shows why",
        ));
    };
    let before = std::fs::read_to_string(&notes).unwrap_or_default();
    let rewound = super::rewind::rewind(me, &worker, seq, "the demo undoes the edit").await?;
    let restored =
        wait_for_file(&notes, FIRST_DRAFT, Duration::from_secs(10)).await && before != FIRST_DRAFT;
    text.push_str(&format!(
        "rewind of {worker} to record {seq} ({}): {}\n",
        if rewound.online { "online" } else { "offline" },
        rewound.forecast.narrate(true)
    ));
    checks.push(("the rewind restored the file from the undo chain", restored));
    let branch_back = rewound.forecast.branches.len() == 1
        && branches_settled(me, &worker, seq, Duration::from_secs(10)).await?;
    checks.push((
        "the rewind moved the work branch back to before the commit",
        branch_back,
    ));
    let letter_kept = rewound
        .forecast
        .not_undone
        .iter()
        .any(|n| n.class == l3m_core::effects::EffectClass::Mail);
    checks.push((
        "the rewind reported the letter it cannot take back",
        letter_kept,
    ));

    bar.set_message("waiting for lead's airmail, its receipt and its bounce");
    let left = deadline.saturating_duration_since(Instant::now());
    let seen = airmail::settle(me, south, &lead, left.max(Duration::from_secs(20))).await?;
    text.push_str(&seen.text);
    checks.extend(seen.checks);

    bar.set_message("a shell call under review: tidy proposes, a reviewer deliberates");
    let left = deadline.saturating_duration_since(Instant::now());
    let seen = review::step(
        me,
        services.reviewing,
        root,
        left.max(Duration::from_secs(30)),
    )
    .await?;
    text.push_str(&seen.text);
    checks.extend(seen.checks);

    bar.set_message("a W^X build: maker builds with no network and runs by digest");
    let left = deadline.saturating_duration_since(Instant::now());
    let seen = build::step(
        me,
        services.building,
        root,
        left.max(Duration::from_secs(60)),
    )
    .await?;
    text.push_str(&seen.text);
    checks.extend(seen.checks);

    bar.set_message("vigils: keeper is told when its reminders fire, one pinned by you");
    let left = deadline.saturating_duration_since(Instant::now());
    let seen = vigil::step(me, left.max(Duration::from_secs(30))).await?;
    text.push_str(&seen.text);
    checks.extend(seen.checks);

    bar.set_message("self-extension: smith writes its own tool and uses it after a reboot");
    let left = deadline.saturating_duration_since(Instant::now());
    let seen = program::step(me, services.programs, left.max(Duration::from_secs(30))).await?;
    text.push_str(&seen.text);
    checks.extend(seen.checks);

    bar.set_message("issuing and revoking a host credential for lead/");
    let seen = credentials::step(me, &lead, &worker).await?;
    text.push_str(&seen.text);
    checks.extend(seen.checks);

    let tree = me.list_agents().await?;
    text.push_str(&format!(
        "\nthe agent tree:\n{}\n",
        render::tree::draw(&tree.agents, &BTreeMap::new())
    ));
    let mut stats = BTreeMap::new();
    for (agent, log) in [
        (&lead, &lead_log),
        (&worker, &me.read_log_from(&worker, 0).await?.records),
    ] {
        text.push_str(&format!("the last lines of {agent}'s Log:\n"));
        for record in log.iter().rev().take(6).rev() {
            text.push_str(&format!("  {}\n", render::log::line(record)));
        }
        stats.insert(agent.to_string(), render::stats::fold(log));
    }
    text.push_str(&format!("\ncost:\n{}", render::stats::table(&stats)));
    text.push_str("\nchecks:\n");
    for (what, ok) in &checks {
        text.push_str(&format!(
            "  [{}] {what}\n",
            if *ok { "ok" } else { "FAILED" }
        ));
    }
    Ok(Report { text, checks })
}

/// Whether `lead` has journaled a letter from `worker` and answered it.
fn answered_the_workers_letter(log: &[Record], worker: &AgentName) -> bool {
    let letter = log.iter().position(|r| {
        matches!(&r.body, RecordBody::Event { source: EventSource::Letter { from, .. }, .. }
            if from.to_string() == worker.as_str())
    });
    letter.is_some_and(|at| {
        log[at..]
            .iter()
            .any(|r| matches!(r.body, RecordBody::TurnEnd))
    })
}

/// The seq of the result of the worker's first file write: the rewind target.
fn first_write_result(log: &[Record]) -> Option<u64> {
    log.iter().find_map(|r| match &r.body {
        RecordBody::ToolResult {
            effects,
            is_error: false,
            ..
        } if !effects.is_empty() => Some(r.seq),
        _ => None,
    })
}

/// Waits until a second rewind of `agent` to `to` would move no branch: the first one's branch
/// moves are done (an online rewind restores after its record is appended).
async fn branches_settled(
    me: &HubClient,
    agent: &AgentName,
    to: u64,
    within: Duration,
) -> Result<bool, CliError> {
    let deadline = Instant::now() + within;
    loop {
        let (_, again) = super::rewind::forecast(me, agent, to).await?;
        if again.branches.is_empty() {
            return Ok(true);
        }
        if Instant::now() > deadline {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `path` holds `text` (an online rewind restores after its record is appended).
async fn wait_for_file(path: &Path, text: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Spawns root agent `agent` with `grant` (TOML) and a small loan, runs `prepare` (its ACR now
/// exists; nothing has woken it yet), and mails it `task`.
async fn assign(
    me: &HubClient,
    agent: &AgentName,
    grant: &str,
    prepare: impl AsyncFnOnce() -> Result<(), CliError>,
    task: &str,
) -> Result<(), CliError> {
    me.spawn(SpawnRequest {
        child: agent.clone(),
        grant: toml::from_str(grant).map_err(runtime)?,
        loan: Fuel {
            model_calls: 10,
            bytes: 1_000_000,
            wakes: 5,
        },
        driven: false,
        persona: None,
        fork: None,
    })
    .await?;
    prepare().await?;
    me.send_letter(agent.as_str(), Some("task"), task).await?;
    Ok(())
}

/// `agent`'s Log once its turn has ended, or an error naming `what` did not finish `within`.
async fn until_turn_end(
    me: &HubClient,
    agent: &AgentName,
    what: &str,
    within: Duration,
) -> Result<Vec<Record>, CliError> {
    let deadline = Instant::now() + within;
    loop {
        let log = me.read_log_from(agent, 0).await?.records;
        if log.iter().any(|r| matches!(r.body, RecordBody::TurnEnd)) {
            return Ok(log);
        }
        if Instant::now() > deadline {
            return Err(runtime(format!(
                "{agent}'s {what} did not finish within {within:?}; `l3m log {agent}` shows how far it got"
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
