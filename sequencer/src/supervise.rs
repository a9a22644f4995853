//! Waking asleep agents that have unread mail, an answered card or a fired vigil.
//!
//! [`supervise`] watches every inbox's, cards chain's and vigils chain's moves
//! (`Subjects::ref_changes_of_kind`), checks every asleep agent of its subtree at start, and
//! every ten seconds checks those whose lease lapsed since (a lapse moves no ref, so a dead
//! host's agents are found this way) and those whose wake failed. For a live agent that is
//! asleep (no lease: `list_agents` says `asleep`) with a letter it has not marked read, a
//! human's answer at a card whose call its Log still holds at a stalemate, a vigil that fired
//! and its Log has not journaled (`wakes_iff_asleep`: a running agent hears it itself), or a
//! turn its Log
//! left under way (its sequencer died mid-turn, after marking its mail read, and the lease
//! lapsed), it asks its [`Launcher`] to start a sequencer, which boots as after any crash. A second launch for a running agent is harmless: the
//! lease refuses it. Each sweep also removes from the host's forest the clone of every
//! agent the list shows retired.
//!
//! # Layout
//! - [`Launcher`]: how a sequencer is started; [`ProcessLauncher`] (child processes, reaped)
//!   and [`TaskLauncher`] (a tokio task running [`run_agent`](crate::run_agent)).
//! - [`Supervisor`], [`supervise`]; it also serves the host's control subjects
//!   ([`serve_host`](crate::serve_host)).

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use l3m_core::duty::Duty;
use l3m_core::log::EventId;
use l3m_core::mail::Inbox;
use l3m_core::names::{AgentName, Entity};
use l3m_core::wake;

use crate::writer::Input;
use l3m_core::refs::AgentRef;
use l3m_core::review::card::{CardLine, parse_card_line};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::{AgentLife, AgentTree};
use tokio_util::sync::CancellationToken;

use crate::health::HostMeter;
use crate::{AgentRun, Config, HostControl, ProviderFactory, SequencerError};

/// Starts a sequencer for an agent.
pub trait Launcher: Send + Sync {
    /// Starts one for `agent`; returns once it is started (not finished).
    fn launch(&self, agent: &AgentName) -> BoxFuture<'_, Result<(), SequencerError>>;

    /// The processes this launcher's sequencers run in now: whose health answers are this
    /// host's agents' (the host's metrics show them, per agent).
    fn pids(&self) -> BTreeSet<u32>;
}

/// Launches `sequencer run ...` child processes and reaps them when they exit.
#[derive(Debug, Clone)]
pub struct ProcessLauncher {
    /// The sequencer binary.
    program: PathBuf,
    /// The arguments every run takes (`--hub`, `--hub-id`, `--nats`, ...); `run` and
    /// `--agent NAME` are added.
    args: Vec<String>,
    /// The children not yet reaped.
    children: Arc<Mutex<BTreeSet<u32>>>,
}

impl ProcessLauncher {
    /// Launches `program run ARGS --agent NAME` for each agent.
    pub fn new(program: PathBuf, args: Vec<String>) -> ProcessLauncher {
        ProcessLauncher {
            program,
            args,
            children: Arc::default(),
        }
    }

    fn children(&self) -> std::sync::MutexGuard<'_, BTreeSet<u32>> {
        self.children.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Launcher for ProcessLauncher {
    fn launch(&self, agent: &AgentName) -> BoxFuture<'_, Result<(), SequencerError>> {
        let agent = agent.clone();
        Box::pin(async move {
            let mut child = tokio::process::Command::new(&self.program)
                .arg("run")
                .args(&self.args)
                .arg("--agent")
                .arg(agent.as_str())
                .kill_on_drop(false)
                .spawn()
                .map_err(|e| SequencerError::Launch {
                    agent: agent.to_string(),
                    reason: format!("{}: {e}", self.program.display()),
                })?;
            let pid = child.id();
            self.children().extend(pid);
            let launcher = self.clone();
            tokio::spawn(async move {
                match child.wait().await {
                    Ok(status) => tracing::info!(%agent, %status, "sequencer exited"),
                    Err(e) => tracing::warn!(%agent, error = %e, "could not reap a sequencer"),
                }
                if let Some(pid) = pid {
                    launcher.children().remove(&pid);
                }
            });
            Ok(())
        })
    }

    fn pids(&self) -> BTreeSet<u32> {
        self.children().clone()
    }
}

/// Runs each agent's sequencer as a tokio task in this process (the CLI's embedded mode).
#[derive(Clone)]
pub struct TaskLauncher {
    /// The bus the runs' sessions use.
    pub bus: Arc<dyn l3m_wire::bus::Bus>,
    /// The hub's id.
    pub hub: l3m_wire::subjects::HubId,
    /// The host credential the runs' sessions are opened with.
    pub credential: l3m_wire::credential::KeyFile,
    /// Where this host keeps its agents' ACRs.
    pub forest: PathBuf,
    /// The configuration.
    pub config: Config,
    /// The provider factory.
    pub provider_factory: ProviderFactory,
    /// The holder name runs take the lease under.
    pub holder: String,
    /// Stops every run.
    pub shutdown: CancellationToken,
}

impl std::fmt::Debug for TaskLauncher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskLauncher")
            .field("forest", &self.forest)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

impl Launcher for TaskLauncher {
    fn launch(&self, agent: &AgentName) -> BoxFuture<'_, Result<(), SequencerError>> {
        let agent = agent.clone();
        Box::pin(async move {
            let client = HubClient::open(
                Arc::clone(&self.bus),
                self.hub.clone(),
                &self.credential,
                Duty::Sequencer {
                    agent: agent.clone(),
                },
            )
            .await?;
            let run = AgentRun {
                forest: self.forest.clone(),
                agent: agent.clone(),
                client,
                config: self.config.clone(),
                provider_factory: Arc::clone(&self.provider_factory),
                holder: self.holder.clone(),
            };
            let shutdown = self.shutdown.clone();
            tokio::spawn(async move {
                match crate::run_agent(run, shutdown).await {
                    Ok(exit) => tracing::info!(%agent, ?exit, "sequencer task ended"),
                    Err(e) => tracing::warn!(%agent, error = %e, "sequencer task failed"),
                }
            });
            Ok(())
        })
    }

    /// The runs are tasks of this process.
    fn pids(&self) -> BTreeSet<u32> {
        BTreeSet::from([std::process::id()])
    }
}

/// What [`supervise`] needs: what the host holds (its session lists agents and reads the
/// inboxes of its subtree; its credential rewinds an asleep one) and a launcher.
pub struct Supervisor {
    /// The host's session, credential, hub folder and subtree.
    pub host: HostControl,
    /// How sequencers are started.
    pub launcher: Arc<dyn Launcher>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor").finish_non_exhaustive()
    }
}

/// Wakes asleep agents with unread mail, and serves the host's control subjects (a rewind or
/// forecast of an asleep agent), until `shutdown`.
pub async fn supervise(sup: Supervisor, shutdown: CancellationToken) -> Result<(), SequencerError> {
    supervise_metered(sup, Arc::new(HostMeter::new()), shutdown).await
}

/// [`supervise`], counting on `meter` (which the process's metrics endpoint also reads).
pub async fn supervise_metered(
    sup: Supervisor,
    meter: Arc<HostMeter>,
    shutdown: CancellationToken,
) -> Result<(), SequencerError> {
    crate::serve_host(sup.host.clone(), shutdown.clone()).await?;
    let client = &sup.host.client;
    let report = Arc::clone(&meter);
    let (bus, subjects) = (Arc::clone(client.bus()), client.subjects().clone());
    let health_shutdown = shutdown.clone();
    tokio::spawn(async move {
        let served = l3m_wire::health::serve(
            bus.as_ref(),
            &subjects,
            l3m_wire::subjects::Service::Host,
            move || report.health(),
            health_shutdown,
        );
        if let Err(error) = served.await {
            tracing::warn!(%error, "the host's health is not served");
        }
    });
    tokio::spawn(gather_runs(
        client.clone(),
        Arc::clone(&sup.launcher),
        Arc::clone(&meter),
        shutdown.clone(),
    ));
    // A letter, a human's answer at a card and a fired vigil each wake an asleep agent.
    let mut streams = Vec::new();
    for kind in [AgentRef::Inbox, AgentRef::Cards, AgentRef::Vigils] {
        let subject = client.subjects().ref_changes_of_kind(kind);
        let stream = client.bus().subscribe(&subject).await.map_err(|source| {
            l3m_wire::client::ClientError::Wire {
                subject: subject.clone(),
                source,
            }
        })?;
        streams.push(stream);
    }
    let mut moves = futures_util::stream::select_all(streams);
    // The first tick is at once: the scan at start. Later ones find the agents whose lease
    // lapsed with nothing announced (their host died), so another host takes them over.
    let mut sweeps = tokio::time::interval(SWEEP_EVERY);
    sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut swept: Option<Swept> = None;
    // The agents announced since the last sweep: one may have been woken and died in between.
    let mut touched = HashSet::new();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            _ = sweeps.tick() => {
                swept = sweep(&sup, &meter, swept.take(), &touched).await;
                touched.clear();
            }
            m = moves.next() => match m {
                Some(message) => {
                    if let Some((_, agent)) = client.subjects().parse_ref_changed(&message.subject) {
                        // A failure is logged and counted; the next sweep checks it again.
                        let _checked = wake_if_owed(&sup, &meter, &agent, None).await;
                        touched.insert(agent.to_string());
                    }
                }
                None => return Ok(()),
            },
        }
    }
}

/// How often the supervisor asks its sequencers how they are, for its metrics.
const GATHER_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How long one gathering waits for the sequencers' answers.
const GATHER_WINDOW: std::time::Duration = std::time::Duration::from_millis(500);

/// Keeps `meter`'s view of this host's running sequencers fresh until `shutdown`: every
/// [`GATHER_EVERY`], the health answers of the sequencers of the hub, of those that run in
/// one of `launcher`'s processes on this host. A failed gathering keeps the last view, logged.
async fn gather_runs(
    client: HubClient,
    launcher: Arc<dyn Launcher>,
    meter: Arc<HostMeter>,
    shutdown: CancellationToken,
) {
    let (host, _) = l3m_wire::health::this_process();
    let mut ticks = tokio::time::interval(GATHER_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let gathered = l3m_wire::health::gather(
            client.bus().as_ref(),
            client.subjects(),
            l3m_wire::subjects::Service::Sequencer,
            GATHER_WINDOW,
        )
        .await;
        match gathered {
            Ok(answers) => {
                let pids = launcher.pids();
                meter.saw_runs(
                    (answers.into_iter())
                        .filter(|h| h.host == host && pids.contains(&h.pid))
                        .collect(),
                );
            }
            Err(error) => {
                tracing::warn!(%error, "could not ask this host's sequencers how they are")
            }
        }
    }
}

/// How often the supervisor looks at the agents' list, besides what announcements tell it: a
/// lease lapses with no ref moving, so a dead host's agents are found this way.
const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// What one sweep leaves the next: who held a lease then, and whose check or launch failed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Swept {
    held: HashSet<String>,
    failed: HashSet<String>,
}

/// The agents a sweep checks: every asleep one at the first sweep; later, only the asleep ones
/// whose lease may have lapsed since the last (held then, or announced since: woken, perhaps
/// dead) and those whose wake failed then. An agent asleep and quiet since the last sweep was
/// checked then, and nothing it is owed can have come unannounced.
fn sweep_candidates(
    tree: &AgentTree,
    last: Option<&Swept>,
    touched: &HashSet<String>,
) -> Vec<AgentName> {
    tree.agents
        .iter()
        .filter(|state| state.life == AgentLife::Asleep)
        .filter(|state| {
            last.is_none_or(|last| {
                last.held.contains(&state.name)
                    || last.failed.contains(&state.name)
                    || touched.contains(&state.name)
            })
        })
        .filter_map(|state| AgentName::parse(&state.name).ok())
        .collect()
}

/// Wakes the agents [`sweep_candidates`] names that are owed a wake, reading the agents' list
/// once; returns what the next sweep needs (the last one's again if the list could not be read,
/// with `touched` counted as failed so they are checked next time).
async fn sweep(
    sup: &Supervisor,
    meter: &HostMeter,
    last: Option<Swept>,
    touched: &HashSet<String>,
) -> Option<Swept> {
    let tree = match sup.host.client.list_agents().await {
        Ok(tree) => tree,
        Err(error) => {
            tracing::warn!(%error, "could not list the agents to sweep");
            meter.failed(&format!("listing agents: {error}"));
            return last.map(|mut last| {
                last.failed.extend(touched.iter().cloned());
                last
            });
        }
    };
    let mut swept = Swept {
        held: tree
            .agents
            .iter()
            .filter(|state| state.holder.is_some())
            .map(|state| state.name.clone())
            .collect(),
        failed: HashSet::new(),
    };
    for agent in sweep_candidates(&tree, last.as_ref(), touched) {
        if !wake_if_owed(sup, meter, &agent, Some(&tree)).await {
            swept.failed.insert(agent.to_string());
        }
    }
    for agent in retired(&tree) {
        match crate::acr::Acr::at(&sup.host.forest, &agent).forget() {
            Ok(true) => tracing::info!(%agent, "removed a retired agent's clone"),
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(%error, "could not remove a retired agent's clone");
                meter.failed(&error.to_string());
            }
        }
    }
    Some(swept)
}

/// The agents whose clone a host's forest no longer keeps: retired or collected, and not
/// spawned again under the same name. hubd lists the whole hub; an agent outside this host's
/// subtree has no clone here, so forgetting it finds nothing.
fn retired(tree: &AgentTree) -> Vec<AgentName> {
    let live: HashSet<&str> = tree
        .agents
        .iter()
        .filter(|state| matches!(state.life, AgentLife::Running | AgentLife::Asleep))
        .map(|state| state.name.as_str())
        .collect();
    tree.agents
        .iter()
        .filter(|state| matches!(state.life, AgentLife::Retired | AgentLife::Collected))
        .filter(|state| !live.contains(state.name.as_str()))
        .filter_map(|state| AgentName::parse(&state.name).ok())
        .collect()
}

/// Wakes `agent` if it is owed a wake; `tree` is the agents' list when the caller holds one.
/// Returns whether the check (and the launch, if owed) went through.
async fn wake_if_owed(
    sup: &Supervisor,
    meter: &HostMeter,
    agent: &AgentName,
    tree: Option<&AgentTree>,
) -> bool {
    // Another host runs what lies outside this one's subtree (hubd would refuse the reads).
    if let Some(subtree) = &sup.host.subtree
        && !agent.is_within(subtree)
    {
        return true;
    }
    let owed = match tree {
        Some(tree) => should_wake(&sup.host.client, agent, tree).await,
        None => match sup.host.client.list_agents().await {
            Ok(tree) => should_wake(&sup.host.client, agent, &tree).await,
            Err(e) => Err(e.into()),
        },
    };
    match owed {
        Ok(true) => match sup.launcher.launch(agent).await {
            Ok(()) => {
                meter.woke();
                true
            }
            Err(e) => {
                tracing::warn!(%agent, error = %e, "could not launch a sequencer");
                meter.failed(&format!("{agent}: {e}"));
                false
            }
        },
        Ok(false) => true,
        Err(e) => {
            tracing::warn!(%agent, error = %e, "could not check whether to wake");
            meter.failed(&format!("{agent}: {e}"));
            false
        }
    }
}

/// Whether `agent` is live, asleep, and has a letter it has not marked read, an answer at a
/// card its Log still waits for, a fired vigil its Log has not journaled, or a turn under way
/// that nothing runs. A letter from one of its driven children does not count: only a program
/// call waits for one, and no call outlives the process that ran it (`crate::drive`).
async fn should_wake(
    client: &HubClient,
    agent: &AgentName,
    tree: &AgentTree,
) -> Result<bool, SequencerError> {
    let asleep = tree
        .agents
        .iter()
        .any(|a| a.name == agent.as_str() && a.life == AgentLife::Asleep);
    if !asleep {
        return Ok(false);
    }
    let driven: HashSet<AgentName> = tree
        .agents
        .iter()
        .filter(|a| a.driven)
        .filter_map(|a| AgentName::parse(&a.name).ok())
        .filter(|child| child.parent().as_ref() == Some(agent))
        .collect();
    let me = Entity::Agent(agent.clone());
    let inbox: Inbox = client
        .read_inbox(agent, 0)
        .await?
        .entries
        .into_iter()
        .collect();
    // A receipt tells the sender its airmail was read; it asks nothing of the agent.
    if inbox
        .unread(&me)
        .any(|l| l.from.local_agent().is_none_or(|a| !driven.contains(a)))
    {
        return Ok(true);
    }
    let cards: Vec<CardLine> = (client.read_cards(agent).await?.iter())
        .filter_map(|l| parse_card_line(l).ok())
        .collect();
    let fired: Vec<EventId> = crate::inputs::fired_vigils(&client.read_vigils(agent).await?)
        .into_iter()
        .filter_map(|input| match input {
            Input::Event { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    // Most asleep agents ended their last turn, which the last record shows: the whole Log is
    // read, once, only when core says it may owe a wake.
    let len = client.read_log(agent, 0, 0).await?.len;
    let last = match len {
        0 => None,
        len => client.read_log(agent, len - 1, len).await?.records.pop(),
    };
    if !wake::log_may_owe(last.as_ref().map(|r| &r.body), &cards, &fired) {
        return Ok(false);
    }
    let log = client.read_log_range(agent, 0, len).await?;
    Ok(wake::owed_wake(&log.records, &cards, &fired).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_wire::hubd::tree::AgentState;

    fn state(name: &str, life: AgentLife, holder: Option<&str>) -> AgentState {
        AgentState {
            name: name.into(),
            parent: "human:alice".into(),
            life,
            holder: holder.map(str::to_owned),
            driven: false,
        }
    }

    fn names(agents: Vec<AgentName>) -> Vec<String> {
        agents.iter().map(ToString::to_string).collect()
    }

    fn set(names: &[&str]) -> HashSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_sweep_checks_everyone_asleep_first_then_only_lapses_announcements_and_failures() {
        let tree = AgentTree {
            agents: vec![
                state("lapsed", AgentLife::Asleep, None),
                state("quiet", AgentLife::Asleep, None),
                state("failed", AgentLife::Asleep, None),
                state("woken", AgentLife::Asleep, None),
                state("running", AgentLife::Running, Some("h:1")),
                state("gone", AgentLife::Retired, None),
            ],
            next: None,
        };
        assert_eq!(
            names(sweep_candidates(&tree, None, &HashSet::new())),
            ["lapsed", "quiet", "failed", "woken"]
        );
        let last = Swept {
            held: set(&["lapsed", "running"]),
            failed: set(&["failed"]),
        };
        assert_eq!(
            names(sweep_candidates(
                &tree,
                Some(&last),
                &set(&["woken", "running"])
            )),
            ["lapsed", "failed", "woken"]
        );
    }

    #[test]
    fn a_forest_forgets_the_retired_and_the_collected_but_not_a_name_spawned_again() {
        let tree = AgentTree {
            agents: vec![
                state("asleep", AgentLife::Asleep, None),
                state("running", AgentLife::Running, Some("h:1")),
                state("retired", AgentLife::Retired, None),
                state("collected", AgentLife::Collected, None),
                state("again", AgentLife::Collected, None),
                state("again", AgentLife::Asleep, None),
            ],
            next: None,
        };
        assert_eq!(names(retired(&tree)), ["retired", "collected"]);
    }
}
