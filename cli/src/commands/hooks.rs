//! `l3m hooks test AGENT EVENT.json`: what an agent's hook decides about one event, and
//! whether the harness would let it.
//!
//! The hook runs exactly as the sequencer runs it: checked, then evaluated in `l3m-program`
//! under its limits (`l3m_programs::hooks::Hook`); its proposal is then admitted or refused by
//! core's `hooks::decide`, the same function the writer calls. The mail reach is the agent's
//! grant when the stack is up, else its default reach (its subtree and ancestors) plus each
//! `--mail` cover; the programs a hook may defer to are the agent's tame `agent/programs/*.star`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use l3m_core::effects::Tier;
use l3m_core::grant::{MailCover, default_mail};
use l3m_core::hooks::{HookContext, decide};
use l3m_core::log::{Disposition, EventId, EventSource};
use l3m_core::names::AgentName;
use l3m_core::refs::paths;
use l3m_core::story;
use l3m_programs::decl::PROGRAMS_DIR;
use l3m_programs::hooks::{HOOKS_FILE, Hook, event_json};
use l3m_programs::process::Evaluator;
use l3m_programs::{LoadError, RunError};
use serde_json::{Value, json};

use crate::context::{Context, agent};
use crate::error::CliError;

/// Try out an agent's hook (`agent/hooks.star`).
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Run the hook on one event: exit 0 admissible, 1 refused or inadmissible, 2 usage.
    ///
    /// Runs AGENT's hook (`agent/hooks.star` in its ACR, the persona branch's worktree, or
    /// `--file`) on the event in EVENT.json, in the `l3m-program` evaluator under its limits as
    /// the sequencer would, and prints the disposition it proposes and whether the event admits
    /// it; if not, the rule and the default the harness would journal instead.
    ///
    /// EVENT.json is the event as the hook sees it, e.g. `{"kind": "letter", "letter_id": "l1",
    /// "from": "alice/main", "text": "hello"}` (a reply adds `"in_reply_to"`); other kinds are
    /// `vigil` (`vigil`), `child-done` (`child`), `program-done` (`program`), `deadline` and
    /// `notice`. `id` defaults to `e1` and `text` to "".
    ///
    /// A hook returns "show", "dismiss", "ignore" or "close", or a dict: {"kind": "reply",
    /// "text": …}, {"kind": "forward", "to": …}, {"kind": "defer", "program": …},
    /// {"kind": "retire-child", "child": …}.
    Test(TestArgs),
}

/// The arguments of `l3m hooks test` (its help is the `Test` variant's).
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The agent whose hook it is, e.g. `alice/main`.
    pub agent: String,
    /// The event, as JSON.
    pub event: PathBuf,
    /// Run this hooks file instead of the one on the agent's persona branch (no hub needed).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// A mail cover to assume the agent holds beyond its default reach (its subtree and
    /// ancestors), e.g. `human:bob` (repeatable). Given any, the hub's grant is not read;
    /// given none, it is read when the stack is up.
    #[arg(long = "mail", value_name = "COVER")]
    pub mail: Vec<String>,
    /// The `l3m-program` evaluator; default: the one beside `l3m`.
    #[arg(long)]
    pub evaluator: Option<PathBuf>,
    /// Print JSON: `{file, event, proposed, admissible, rule, reason, journaled, failure}`.
    #[arg(long)]
    pub json: bool,
}

/// Dispatches `l3m hooks …`.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Test(args) => cmd_test(args, cx).await,
    }
}

/// The event in EVENT.json: its id, source and text.
fn read_event(path: &PathBuf) -> Result<(EventId, EventSource, String), CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{} is not JSON: {e}", path.display())))?;
    let source: EventSource = serde_json::from_value(value.clone()).map_err(|e| {
        CliError::usage(format!(
            "{} is not an event ({e}); e.g. {{\"kind\": \"letter\", \"letter_id\": \"l1\", \
             \"from\": \"alice/main\", \"text\": \"hello\"}}",
            path.display()
        ))
    })?;
    let id = value.get("id").and_then(Value::as_str).unwrap_or("e1");
    let id = EventId::new(id)
        .map_err(|e| CliError::usage(format!("{}: bad `id`: {e}", path.display())))?;
    let body = match value.get("text") {
        None => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(other) => {
            return Err(CliError::usage(format!(
                "{}: `text` must be a string, not {other}",
                path.display()
            )));
        }
    };
    Ok((id, source, body))
}

/// The agent's mail reach: from its grant when the hub answers, else its default reach and
/// the `--mail` covers. The second value says which.
async fn mail_reach(
    cx: &Context,
    agent: &AgentName,
    extra: &[String],
) -> Result<(BTreeSet<MailCover>, &'static str), CliError> {
    let mut covers = default_mail(agent);
    for cover in extra {
        covers.insert(
            MailCover::parse(cover).map_err(|e| CliError::usage(format!("--mail {cover}: {e}")))?,
        );
    }
    if !extra.is_empty() {
        return Ok((covers, "default and --mail"));
    }
    match cx.connect().await {
        Ok(session) => match session.client.read_grant(agent).await {
            Ok(view) => {
                covers.extend(view.grant.mail);
                Ok((covers, "grant"))
            }
            Err(e) => Err(e.into()),
        },
        Err(_) => Ok((covers, "default (the stack is not up)")),
    }
}

/// The programs in `dir` (`<name>.star`) that pass the seal and type checks (made here, as
/// `l3m program check` makes them), with their tiers:
/// what a hook may name (a tame one). The surface against the agent's grant is not checked
/// here, so a program the grant leaves absent is still listed.
fn programs_in(dir: &std::path::Path) -> BTreeMap<String, Tier> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeMap::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let file_name = e.file_name().to_str()?.to_owned();
            file_name.strip_suffix(".star")?;
            let file = format!("{PROGRAMS_DIR}/{file_name}");
            let source = std::fs::read_to_string(e.path()).ok()?;
            let decl = l3m_programs::evaluate::check(&file, &source).ok()?;
            Some((decl.name, decl.footprint.tier()))
        })
        .collect()
}

/// Runs `l3m hooks test`.
async fn cmd_test(args: TestArgs, cx: Context) -> Result<(), CliError> {
    let agent = agent(&args.agent)?;
    let (id, source, text) = read_event(&args.event)?;
    let evaluator = match &args.evaluator {
        Some(path) => Evaluator::new(path.clone()),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| Evaluator::beside(&exe))
            .ok_or_else(|| {
                CliError::usage("no `l3m-program` beside `l3m`; pass --evaluator PATH")
            })?,
    };
    let (path, programs) = match &args.file {
        Some(path) => (path.clone(), BTreeMap::new()),
        None => {
            let acr = cx.hub()?.root().join(paths::acr(&agent));
            let programs = programs_in(&acr.join(PROGRAMS_DIR));
            (acr.join(HOOKS_FILE), programs)
        }
    };
    let file = match &args.file {
        Some(path) => path.display().to_string(),
        None => HOOKS_FILE.to_owned(),
    };
    let source_text = std::fs::read_to_string(&path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    let (mail, reach) = mail_reach(&cx, &agent, &args.mail).await?;
    let event = event_json(&id, &source, &text);
    let hook = match Hook::check(&evaluator, &file, &source_text) {
        Ok(hook) => hook,
        Err(refused) => return refused_at_load(&refused, &event, args.json),
    };
    let proposal = hook
        .decide(std::slice::from_ref(&event))
        .pop()
        .unwrap_or_else(|| {
            Err(RunError {
                file: file.clone(),
                line: None,
                rule: l3m_programs::Rule::Evaluator,
                detail: "no answer".into(),
            })
        });
    let cx = HookContext {
        agent: &agent,
        mail: &mail,
        programs: &programs,
        carries: l3m_core::hooks::CARRIED,
    };
    match proposal {
        Ok(proposed) => {
            let decided = decide(&cx, &source, proposed.clone());
            report(&file, &event, &proposed, &decided, reach, args.json)
        }
        Err(failed) => failed_at_run(&failed, &event, &source, args.json),
    }
}

fn report(
    file: &str,
    event: &Value,
    proposed: &Disposition,
    decided: &l3m_core::hooks::Decided,
    reach: &str,
    as_json: bool,
) -> Result<(), CliError> {
    let refused = decided.refused.as_ref().map(|(_, why)| why);
    if as_json {
        outln!(
            "{}",
            json!({
                "file": file,
                "event": event,
                "proposed": proposed,
                "admissible": refused.is_none(),
                "rule": refused.map(|w| w.rule()),
                "reason": refused.map(ToString::to_string),
                "journaled": decided.disposition,
                "mail_reach": reach,
                "failure": null,
            })
        );
    } else {
        outln!("{file}: proposes {}", story::disposition(proposed));
        match refused {
            None => outln!("admissible: the harness journals it as proposed"),
            Some(why) => outln!(
                "inadmissible, rule {}: {why}\nthe harness journals the default instead: {}",
                why.rule(),
                story::disposition(&decided.disposition)
            ),
        }
        outln!("(mail reach: {reach})");
    }
    match refused {
        None => Ok(()),
        Some(why) => Err(CliError::Runtime(format!(
            "inadmissible, rule {}: {why}",
            why.rule()
        ))),
    }
}

fn refused_at_load(refused: &LoadError, event: &Value, as_json: bool) -> Result<(), CliError> {
    if as_json {
        outln!(
            "{}",
            json!({
                "file": refused.file,
                "event": event,
                "proposed": null,
                "admissible": false,
                "rule": refused.rule,
                "reason": refused.to_string(),
                "journaled": null,
                "failure": {"stage": refused.rule.stage(), "line": refused.line, "detail": refused.detail},
            })
        );
    }
    Err(CliError::Runtime(format!(
        "{refused}\nthe hook would be absent: every event gets the default disposition"
    )))
}

fn failed_at_run(
    failed: &RunError,
    event: &Value,
    source: &EventSource,
    as_json: bool,
) -> Result<(), CliError> {
    let default = Disposition::without_hook(source);
    if as_json {
        outln!(
            "{}",
            json!({
                "file": failed.file,
                "event": event,
                "proposed": null,
                "admissible": false,
                "rule": failed.rule,
                "reason": failed.to_string(),
                "journaled": default,
                "failure": {"stage": "run", "line": failed.line, "detail": failed.detail},
            })
        );
    }
    Err(CliError::Runtime(format!(
        "{failed}\nthe harness journals the default instead: {}",
        story::disposition(&default)
    )))
}
