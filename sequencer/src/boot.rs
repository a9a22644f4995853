//! Boot: take the lease, fold the Log, close what a dead process left open, assemble the
//! prompt, journal the budget, and hand the writer its first pass.
//!
//! If the turn was live when the last process died, boot closes it with `close_at_boot`
//! (exactly what an interrupt does, except that a wild call at a stalemate keeps waiting for
//! its card) and then, if it closed anything, journals a shown harness notice saying the
//! sequencer restarted. A shown event is new input, so core's `plan` owes a model call and the
//! turn carries on from the Log as it stands; there is no other resume path. A card answered
//! while no sequencer ran is read from the cards chain and journaled like any answer.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::acr::Acr;
use l3m_core::log::Disposition;
use l3m_core::names::AgentName;
use l3m_core::owed::{self, Signal};
use l3m_wire::client::HubClient;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::drive::Driven;
use crate::outlet::SessionOutlet;
use crate::prompt::{self, Persona};
use crate::toolbox::Toolbox;
use crate::undo::HubUndo;
use crate::writer::{Input, Models, Next, Session, run_loop};
use crate::{AgentRun, Exit, SequencerError};

/// The reason boot gives for what it closes.
pub const RESTARTED: &str = "the sequencer restarted";

/// A booted session, ready to run.
pub(crate) struct Booted {
    session: Session,
    rx: mpsc::UnboundedReceiver<Input>,
    lease: u64,
    client: HubClient,
    agent: AgentName,
    tasks: CancellationToken,
    first: Option<Exit>,
}

/// Takes `agent`'s lease, or says who holds it.
pub(crate) async fn take_lease(
    client: &HubClient,
    agent: &AgentName,
    holder: &str,
    ttl: Duration,
) -> Result<u64, SequencerError> {
    match client.acquire_lease(agent, holder, ttl).await {
        Ok(held) => Ok(held.token),
        Err(e) if e.is_conflict() => Err(SequencerError::LeaseHeld {
            agent: agent.to_string(),
            message: e.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

fn read_persona(acr: &Path) -> Persona {
    let read = |name: &str| std::fs::read_to_string(acr.join("agent").join(name)).ok();
    Persona {
        instructions: read("instructions.md"),
        personality: read("personality.md"),
        memories: read("memories.md"),
        system: read("system.md"),
    }
}

pub(crate) async fn boot(
    run: &AgentRun,
    tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
    shutdown: CancellationToken,
) -> Result<Booted, SequencerError> {
    let AgentRun {
        agent,
        client,
        config,
        provider_factory,
        holder,
        ..
    } = run;
    let labels = config.models_for(agent)?;
    let primary = provider_factory(&labels.model)?;
    let fallback = match &labels.fallback {
        Some(label) => Some((
            provider_factory(label)?,
            config.model_name(label).to_owned(),
            config.model_notes(label),
        )),
        None => None,
    };
    let models = Models {
        primary: (
            primary,
            config.model_name(&labels.model).to_owned(),
            config.model_notes(&labels.model),
        ),
        fallback,
        economy: crate::model::Economy::of(config, &labels.model),
    };
    let lease = take_lease(client, agent, holder, config.sequencer.lease_ttl()).await?;
    let booted = boot_holding(run, tools, shutdown, models, lease).await;
    if booted.is_err()
        && let Err(e) = client.release_lease(agent, lease).await
    {
        // It lapses at its ttl; until then a restart is refused, naming this holder.
        tracing::warn!(%agent, error = %e, "could not release the lease after a failed boot");
    }
    booted
}

/// The rest of [`boot`], holding the lease `lease`; [`boot`] gives it back if this fails.
async fn boot_holding(
    run: &AgentRun,
    tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
    shutdown: CancellationToken,
    models: Models,
    lease: u64,
) -> Result<Booted, SequencerError> {
    let AgentRun {
        forest,
        agent,
        client,
        config,
        ..
    } = run;
    let tasks = shutdown.child_token();
    // A boot that fails stops what it started (the watcher, the lease renewal).
    let stop_on_failure = tasks.clone().drop_guard();
    let (tx, rx) = mpsc::unbounded_channel();
    // Subscribe before reading, so nothing that moves after the reads is missed.
    let watch = crate::inputs::watch(client, agent).await?;
    let read = client.read_log_from(agent, 0).await?;
    let grant = client.read_grant(agent).await?;
    let acr = Acr::at(forest, agent);
    acr.ready(client).await?;
    let acr = acr.root();
    // No call survives a restart: the children the last process's calls drove are retired.
    let driven = Driven::default();
    let left = crate::drive::retire_left(client, agent, &driven).await?;
    let outlet: Arc<dyn l3m_ring::effects::HubOutlet> = Arc::new(SessionOutlet::new(
        client.clone(),
        tokio::runtime::Handle::current(),
        driven.clone(),
        acr.to_path_buf(),
    ));
    let undo = Arc::new(HubUndo::open(client.clone(), agent.clone()).await?);
    let toolbox = Arc::new(Toolbox::build(
        tools(),
        &grant,
        agent,
        acr,
        Some(outlet),
        undo,
        config.sequencer.evaluator().as_ref(),
    )?);
    let names: Vec<String> = toolbox.specs().into_iter().map(|s| s.name).collect();
    let builds = toolbox.footprints().values().any(|f| {
        f.0.contains(&l3m_core::effects::EffectClass::Build)
            || f.0.contains(&l3m_core::effects::EffectClass::Run)
    });
    let images = if builds {
        crate::outlet::pinned_images(client).await
    } else {
        Vec::new()
    };
    let text = prompt::assemble(
        agent,
        &read_persona(acr),
        &grant.grant,
        &grant.account.loan(),
        &names.iter().map(String::as_str).collect::<Vec<_>>(),
        &images,
    );
    let mut session = Session::new(
        client.clone(),
        agent.clone(),
        forest.clone(),
        config.sequencer.clone(),
        models,
        toolbox,
        tools,
        tx.clone(),
        grant,
    );
    session.review = config.review.clone();
    for record in &read.records {
        session.observe(record);
    }
    session.log.tip = read.tip;
    if read.records.is_empty() {
        let signal = Signal::Prompt {
            text,
            continues: false,
        };
        session.signal(signal)?;
    } else {
        // A stalemate's card outlives the process: boot keeps its call waiting.
        let closed = owed::close_at_boot(&session.log.owed, RESTARTED);
        let was_live = !closed.is_empty();
        for body in closed {
            session.stage(body);
        }
        if session.log.fold.view().system != text {
            let _same = session.signal(Signal::Prompt {
                text,
                continues: true,
            });
        }
        if was_live {
            let id = format!("restart-{}", session.log.owed.next_seq());
            session.notice(
                id,
                format!("{RESTARTED}; what was open was closed; carry on with your turn"),
                Disposition::Show,
            );
        }
    }
    if !left.is_empty() {
        let id = format!("driven-{}", session.log.owed.next_seq());
        let names: Vec<String> = left.iter().map(ToString::to_string).collect();
        session.notice(
            id,
            format!(
                "{RESTARTED}; the driven children your programs' calls left were retired: {}",
                names.join(", ")
            ),
            Disposition::Show,
        );
    }
    let refused = toolbox_refusals(&session);
    if !refused.is_empty() {
        let id = format!("programs-{}", session.log.owed.next_seq());
        session.notice(id, refused, Disposition::Show);
    }
    session.budget_from_hub("the budget as the hub's account and this Log's spend give it");
    let mut initial = crate::inputs::start(
        client.clone(),
        agent.clone(),
        watch,
        tx.clone(),
        driven,
        lease,
        config.sequencer.lease_ttl(),
        tasks.clone(),
    )
    .await?;
    initial.extend(session.resume_cards().await?);
    crate::control::serve(client, forest, agent, tx, tasks.clone()).await?;
    serve_health(client, &session.meter, tasks.clone()).await?;
    let first = match session.pass(initial).await? {
        Next::Continue => None,
        Next::Stop(exit) => Some(exit),
    };
    stop_on_failure.disarm();
    Ok(Booted {
        session,
        rx,
        lease,
        client: client.clone(),
        agent: agent.clone(),
        tasks,
        first,
    })
}

impl Booted {
    /// Runs passes until the session ends, then stops its tasks and releases the lease.
    pub(crate) async fn run(self, shutdown: CancellationToken) -> Result<Exit, SequencerError> {
        let Booted {
            session,
            rx,
            lease,
            client,
            agent,
            tasks,
            first,
        } = self;
        let outcome = match first {
            Some(exit) => Ok(exit),
            None => {
                // The writer runs as a task of the runtime's pool rather than on the caller's
                // thread, so the worker whose task wakes it (a model reply, hubd's answer) can
                // usually run it next, without handing it to another thread.
                let writer = tokio::spawn(run_loop(session, rx, shutdown));
                let _abort = AbortOnDrop(writer.abort_handle());
                match writer.await {
                    Ok(outcome) => outcome,
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    // Only a runtime shutting down cancels it (the guard aborts it only once
                    // this future is gone).
                    Err(_) => Ok(Exit::Shutdown),
                }
            }
        };
        tasks.cancel();
        if !matches!(outcome, Ok(Exit::LeaseLost))
            && let Err(e) = client.release_lease(&agent, lease).await
        {
            tracing::warn!(%agent, error = %e, "could not release the lease");
        }
        outcome
    }
}

/// What the agent is told of its programs that did not load: one line per file, naming the
/// line and the rule, so it can fix them; empty when every program loaded.
fn toolbox_refusals(session: &Session) -> String {
    let refused = session.tools.refused_programs();
    if refused.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = refused.iter().map(ToString::to_string).collect();
    let hook = refused
        .iter()
        .any(|e| e.file == l3m_programs::hooks::HOOKS_FILE);
    let plugin = refused
        .iter()
        .any(|e| e.file.starts_with(l3m_programs::plugin::PLUGINS_DIR));
    format!(
        "{} of your programs{}{} did not load and are not among your tools{}:\n{}",
        refused.len(),
        if plugin { " or plugins" } else { "" },
        if hook { " or hooks" } else { "" },
        if hook {
            " (with no hook, every event gets the default disposition)"
        } else {
            ""
        },
        lines.join("\n")
    )
}

/// Aborts a task when dropped, so a caller that stops waiting on a run stops its writer too.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Answers this sequencer's health requests (`l3m.<hub>.sequencer.health`, every running
/// sequencer answering) from `meter` until `shutdown`; returns once the subscription is live.
async fn serve_health(
    client: &HubClient,
    meter: &Arc<crate::health::RunMeter>,
    shutdown: CancellationToken,
) -> Result<(), SequencerError> {
    let report = Arc::clone(meter);
    let answering = l3m_wire::health::bind(
        client.bus().as_ref(),
        client.subjects(),
        l3m_wire::subjects::Service::Sequencer,
        move || report.health(),
        shutdown,
    )
    .await
    .map_err(|source| SequencerError::Bus {
        what: "answering health".into(),
        source,
    })?;
    tokio::spawn(answering);
    Ok(())
}
