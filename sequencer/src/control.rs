//! Control of a running sequencer (interrupt, rewind, status), rewind without one, and fork.
//!
//! A running sequencer serves `Subjects::agent_request(Service::Sequencer, op, agent)` for the
//! ops [`OP_INTERRUPT`], [`OP_REWIND`] and [`OP_STATUS`]. A request is taken only with hubd's
//! voucher for this agent and op ([`crate::vouchers`]); each is handed to the writer
//! as an input, so it is journaled in a pass like everything else, and answered once its
//! records are appended.
//!
//! **Rewind** first forecasts ([`forecast`]): core's `aftermath` fold over the records after
//! `to` names the undo entries to restore and the effects no entry covers; the ring plans
//! restoring those entries (files, and branches by compare-and-swap) without changing anything.
//! A plan that does not hold (a branch someone else moved) refuses the rewind before anything is
//! journaled. Then it journals core's `rewind` (which closes what is open first), restores the
//! files and branches, and journals what it restored, and what it could not undo (a push, a
//! letter), as a dismissed harness notice.
//!
//! **Fork** ([`fork`]): who may fork whom. The spawner is the entity of the `parent` client
//! (a human, or an agent's sequencer); the new agent must be its child (hubd's spawn gate
//! refuses any other name) under a grant no wider than the spawner's (the gate refuses a
//! widening, naming the axis) *and* no wider than the source's (checked here before spawning,
//! so a fork never gains authority over its source). Any session may read the source's Log
//! (hubd lets every duty read Logs). The new Log is seeded by a sequencer session of the new
//! agent, opened with the credential passed in (a host credential covering it).
//!
//! # Layout
//! - [`ControlRequest`], [`ControlReply`], [`Status`]: the wire messages.
//! - `serve` (crate-private): the control server of a running sequencer.
//! - [`Forecast`], [`forecast`], [`restore_after`], [`rewind_offline`], [`fork`].

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use l3m_core::aftermath::aftermath;
use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::log::{Disposition, EffectNote, EventId, EventSource, Record, RecordBody};
use l3m_core::names::AgentName;
use l3m_core::owed::{self, Owed, Signal};
use l3m_core::refs::paths;
use l3m_ring::rewind::{self, Restore};
use l3m_ring::undo::EntryId;
use l3m_wire::client::HubClient;
use l3m_wire::envelope::Message;
use l3m_wire::hubd::authority::GrantView;
use l3m_wire::hubd::session::Vouched;
use l3m_wire::reply::{ErrorCode, RemoteError};
use l3m_wire::subjects::{Operation, Service};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::toolbox::mint_tokens;
use crate::undo::HubUndo;
use crate::vouchers::Vouchers;
use crate::writer::Input;
use crate::{SequencerError, now_ms};

/// The op that interrupts the agent.
pub const OP_INTERRUPT: &str = "interrupt";
/// The op that rewinds the agent.
pub const OP_REWIND: &str = "rewind";
/// The op that reports the agent's state.
pub const OP_STATUS: &str = "status";

/// A request to a running sequencer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum ControlRequest {
    /// Close what is open and end the turn.
    Interrupt {
        /// Why (who asked).
        reason: String,
    },
    /// Return the conversation to just after record `to`, restoring files.
    Rewind {
        /// The record.
        to: u64,
        /// Why.
        reason: String,
    },
    /// Report the agent's state.
    Status,
}

/// A control request as sent: the request and hubd's voucher that the sender may make it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controlled {
    /// hubd's voucher for this agent and op.
    pub vouched: Vouched,
    /// The request.
    pub request: ControlRequest,
}

impl Message for Controlled {
    const KIND: &'static str = "sequencer.control";
}

/// A running sequencer's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ControlReply {
    /// Journaled; the Log's next seq is now `next_seq`.
    Done {
        /// The next seq.
        next_seq: u64,
    },
    /// Not journaled, and why (e.g. a rewind target past the Log).
    Refused {
        /// Why.
        reason: String,
    },
    /// The state.
    Status(Status),
}

impl Message for ControlReply {
    const KIND: &'static str = "sequencer.control-reply";
}

/// What a running sequencer reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The agent.
    pub agent: String,
    /// The Log's next seq.
    pub next_seq: u64,
    /// Whether a turn is under way.
    pub live: bool,
    /// The open model call, if any.
    pub open_call: Option<String>,
    /// Tool uses running.
    pub running_tools: Vec<String>,
    /// Fuel left per the Log.
    pub fuel: Option<Fuel>,
}

impl ControlRequest {
    /// The request with who asked (as hubd vouched for them) added to its reason, so the Log
    /// records the true sender, not only what the sender wrote.
    pub fn asked_by(self, by: &str) -> ControlRequest {
        match self {
            ControlRequest::Interrupt { reason } => ControlRequest::Interrupt {
                reason: format!("{reason} (asked by {by})"),
            },
            ControlRequest::Rewind { to, reason } => ControlRequest::Rewind {
                to,
                reason: format!("{reason} (asked by {by})"),
            },
            ControlRequest::Status => ControlRequest::Status,
        }
    }

    /// The control op this request is sent on.
    pub fn op(&self) -> &'static str {
        match self {
            ControlRequest::Interrupt { .. } => OP_INTERRUPT,
            ControlRequest::Rewind { .. } => OP_REWIND,
            ControlRequest::Status => OP_STATUS,
        }
    }
}

/// Asks the running sequencer of `agent` (reached over `client`'s bus) to carry out `request`,
/// with hubd's voucher that `client`'s session may.
/// No sequencer running is a wire error (no responders): the caller then acts offline.
pub async fn call(
    client: &HubClient,
    agent: &AgentName,
    request: &ControlRequest,
    timeout: std::time::Duration,
) -> Result<ControlReply, SequencerError> {
    let op = Operation::parse(request.op())?;
    let subject = client
        .subjects()
        .agent_request(Service::Sequencer, &op, agent);
    let vouched = client.vouch(agent, request.op()).await?;
    let reply = l3m_wire::typed::call(
        client.bus().as_ref(),
        &subject,
        &Controlled {
            vouched,
            request: request.clone(),
        },
        timeout,
        &l3m_wire::envelope::Limits::default(),
    )
    .await
    .map_err(|e| SequencerError::Control {
        agent: agent.to_string(),
        outcome: format!("did not answer: {e}"),
    })?;
    reply.map_err(|e| SequencerError::Control {
        agent: agent.to_string(),
        outcome: format!("refused: {}", e.message),
    })
}

/// Serves the control ops of `agent` until `shutdown`, handing each to the writer. A rewind
/// whose restore would not hold ([`forecast`] fails) is refused before it reaches the writer.
pub(crate) async fn serve(
    client: &HubClient,
    hub_root: &Path,
    agent: &AgentName,
    tx: mpsc::UnboundedSender<Input>,
    shutdown: CancellationToken,
) -> Result<(), SequencerError> {
    let bus = Arc::clone(client.bus());
    let vouchers = Arc::new(Vouchers::new(client.voucher_key()));
    for op in [OP_INTERRUPT, OP_REWIND, OP_STATUS] {
        let op = Operation::parse(op)?;
        let subject = client
            .subjects()
            .agent_request(Service::Sequencer, &op, agent);
        let server = l3m_wire::typed::TypedServer::<Controlled, ControlReply>::bind(
            bus.as_ref(),
            &subject,
            l3m_wire::typed::ServeOptions::default(),
        )
        .await
        .map_err(|source| SequencerError::Bus {
            what: format!("serving {subject}"),
            source,
        })?;
        let tx = tx.clone();
        let expected = op.as_str().to_owned();
        let (client, hub_root, agent) = (client.clone(), hub_root.to_path_buf(), agent.clone());
        let vouchers = Arc::clone(&vouchers);
        tokio::spawn(server.run(
            move |req: l3m_wire::typed::TypedRequest<Controlled>| {
                let tx = tx.clone();
                let expected = expected.clone();
                let (client, hub_root, agent) = (client.clone(), hub_root.clone(), agent.clone());
                let admitted =
                    vouchers.admit(&req.body.vouched, agent.as_str(), &expected, now_ms());
                let req = req.body.request.asked_by(&req.body.vouched.voucher.by);
                async move {
                    admitted.map_err(|e| RemoteError::new(ErrorCode::Refused, e.to_string()))?;
                    let named = match &req {
                        ControlRequest::Interrupt { .. } => OP_INTERRUPT,
                        ControlRequest::Rewind { .. } => OP_REWIND,
                        ControlRequest::Status => OP_STATUS,
                    };
                    if named != expected {
                        return Err(RemoteError::new(
                            ErrorCode::Invalid,
                            format!("a {named} request was sent to the {expected} subject"),
                        ));
                    }
                    if let ControlRequest::Rewind { to, .. } = &req {
                        let refused = |e: SequencerError| {
                            Ok(ControlReply::Refused {
                                reason: e.to_string(),
                            })
                        };
                        let grant = match client.read_grant(&agent).await {
                            Ok(grant) => grant,
                            Err(e) => return refused(e.into()),
                        };
                        if let Err(e) = forecast(&client, &hub_root, &agent, &grant, *to).await {
                            return refused(e);
                        }
                    }
                    let (reply, answer) = oneshot::channel();
                    tx.send(Input::Control(req, reply)).map_err(|_| {
                        RemoteError::new(ErrorCode::Internal, "the sequencer is stopping")
                    })?;
                    answer.await.map_err(|_| {
                        RemoteError::new(ErrorCode::Internal, "the sequencer stopped first")
                    })
                }
            },
            shutdown.clone(),
        ));
    }
    Ok(())
}

/// What a rewind to a record restores and what it cannot undo; [`forecast`] computes it with
/// nothing changed, [`restore_after`] the same while restoring.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Forecast {
    /// The record the rewind returns to.
    pub to: u64,
    /// How many file edits are undone.
    pub edits: usize,
    /// The paths they touched, sorted.
    pub paths: Vec<String>,
    /// The branches moved back.
    pub branches: Vec<BranchBack>,
    /// What a rewind does not take back (a push that left the host, a letter, a spawn).
    pub not_undone: Vec<EffectNote>,
}

/// One branch a rewind moves back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BranchBack {
    /// The branch's full ref name.
    pub branch: String,
    /// Where it is now.
    pub from: Option<String>,
    /// Where it goes back to (`None`: deleted, the undone commits created it).
    pub to: Option<String>,
}

impl Forecast {
    fn new(to: u64, restore: Restore, not_undone: Vec<EffectNote>) -> Self {
        Self {
            to,
            edits: restore.edits,
            paths: restore.paths,
            branches: restore
                .refs
                .into_iter()
                .map(|s| BranchBack {
                    branch: s.branch,
                    from: s.from,
                    to: s.to,
                })
                .collect(),
            not_undone,
        }
    }

    /// One line saying what is (or would be) restored and what is not undone, counted in words
    /// that agree with their numbers.
    pub fn narrate(&self, done: bool) -> String {
        let (restore, move_back) = if done {
            ("restored", "moved back")
        } else {
            ("would restore", "would move back")
        };
        let mut parts = Vec::new();
        if self.edits > 0 {
            parts.push(format!(
                "{restore} {} of {}",
                counted(self.edits, "file edit", "file edits"),
                self.paths.join(", ")
            ));
        }
        if !self.branches.is_empty() {
            let each: Vec<String> = self
                .branches
                .iter()
                .map(|b| match &b.to {
                    Some(id) => format!("{} to {}", b.branch, short(id)),
                    None => format!("{} (deleted: the undone commits created it)", b.branch),
                })
                .collect();
            parts.push(format!(
                "{move_back} {}: {}",
                counted(self.branches.len(), "branch", "branches"),
                each.join(", ")
            ));
        }
        if parts.is_empty() {
            parts.push("no file edits or commits to restore".into());
        }
        if !self.not_undone.is_empty() {
            let each: Vec<String> = self
                .not_undone
                .iter()
                .map(|n| format!("{} {}", n.class, n.target))
                .collect();
            parts.push(format!(
                "not undone ({} left this host or cannot be taken back): {}",
                if self.not_undone.len() == 1 {
                    "it"
                } else {
                    "they"
                },
                each.join("; ")
            ));
        }
        format!("rewind to {}: {}", self.to, parts.join("; "))
    }
}

/// `n` and the noun in the number `n` asks for.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A commit id as people quote it.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// Forecasts a rewind of `agent` to record `to`, changing nothing: what the undo chain would
/// restore (planned by the ring against the files and branches as they are now) and what the
/// Log says no rewind takes back. Fails, naming the cause, when the restore would not hold.
pub async fn forecast(
    client: &HubClient,
    hub_root: &Path,
    agent: &AgentName,
    grant: &GrantView,
    to: u64,
) -> Result<Forecast, SequencerError> {
    let (after, undo) = aftermath_of(client, agent, to).await?;
    if undo.is_empty() {
        return Ok(Forecast::new(to, Restore::default(), after));
    }
    let entries = crate::undo::entries(client, agent).await?;
    let tokens = mint_tokens(grant, agent, &hub_root.join(paths::acr(agent)))?;
    let restore = rewind::plan(&tokens, &entries, &undo)?;
    Ok(Forecast::new(to, restore, after))
}

/// Restores the files and branches that tame tool results after record `to` changed, recording
/// the branch moves back into `into` (the agent's one undo chain), and says what it restored
/// and what it could not undo.
pub async fn restore_after(
    client: &HubClient,
    into: &Arc<HubUndo>,
    hub_root: &Path,
    agent: &AgentName,
    grant: &GrantView,
    to: u64,
) -> Result<String, SequencerError> {
    let (after, undo) = aftermath_of(client, agent, to).await?;
    let restore = if undo.is_empty() {
        Restore::default()
    } else {
        let entries = crate::undo::entries(client, agent).await?;
        let tokens = mint_tokens(grant, agent, &hub_root.join(paths::acr(agent)))?;
        let into = Arc::clone(into);
        // The ring's restore is blocking IO, and it records through the hub.
        tokio::task::spawn_blocking(move || {
            rewind::restore(&tokens, &entries, &undo, &*into, now_ms())
        })
        .await
        .map_err(|e| SequencerError::Tools(format!("the restore stopped: {e}")))??
    };
    Ok(Forecast::new(to, restore, after).narrate(true))
}

/// The effects no entry covers after `to`, and the undo entries to restore.
async fn aftermath_of(
    client: &HubClient,
    agent: &AgentName,
    to: u64,
) -> Result<(Vec<EffectNote>, BTreeSet<EntryId>), SequencerError> {
    let read = client.read_log_from(agent, to.saturating_add(1)).await?;
    let after = aftermath(&read.records, to);
    // An id that does not parse is refused, never skipped: skipping it would leave an edit
    // unrestored while the narration said the rewind was whole.
    let undo = after
        .undo
        .iter()
        .map(|id| {
            id.parse()
                .map(EntryId)
                .map_err(|_| SequencerError::BadUndoId { id: id.clone(), to })
        })
        .collect::<Result<_, _>>()?;
    Ok((after.lasting, undo))
}

/// Rewinds an agent no sequencer is running: takes the lease, journals the rewind, restores
/// the files, journals what it restored, releases the lease.
pub async fn rewind_offline(
    client: &HubClient,
    hub_root: &Path,
    agent: &AgentName,
    to: u64,
    reason: &str,
) -> Result<(), SequencerError> {
    let lease = crate::boot::take_lease(
        client,
        agent,
        "rewind-offline",
        std::time::Duration::from_secs(15),
    )
    .await?;
    let outcome = rewind_holding(client, hub_root, agent, to, reason).await;
    let released = client.release_lease(agent, lease).await;
    outcome?;
    released?;
    Ok(())
}

async fn rewind_holding(
    client: &HubClient,
    hub_root: &Path,
    agent: &AgentName,
    to: u64,
    reason: &str,
) -> Result<(), SequencerError> {
    let grant = client.read_grant(agent).await?;
    forecast(client, hub_root, agent, &grant, to).await?;
    let read = client.read_log_from(agent, 0).await?;
    let owed = Owed::from_records(&read.records);
    let bodies = owed::journal(
        &owed,
        Signal::Rewind {
            to,
            reason: reason.to_owned(),
        },
    )?;
    let (owed, tip) = append_bodies(client, agent, owed, read.tip, bodies).await?;
    let into = Arc::new(HubUndo::open(client.clone(), agent.clone()).await?);
    let note = restore_after(client, &into, hub_root, agent, &grant, to).await?;
    let id = EventId::new(format!("note-{}", owed.next_seq()))?;
    let bodies = vec![
        RecordBody::Event {
            id: id.clone(),
            source: EventSource::Notice,
            text: note,
        },
        RecordBody::HookDecision {
            event: id,
            disposition: Disposition::Dismiss,
        },
    ];
    append_bodies(client, agent, owed, tip, bodies).await?;
    Ok(())
}

/// Appends `bodies` after `tip` by compare-and-swap, returning the folded state and new tip.
async fn append_bodies(
    client: &HubClient,
    agent: &AgentName,
    mut owed: Owed,
    tip: Option<String>,
    bodies: Vec<RecordBody>,
) -> Result<(Owed, Option<String>), SequencerError> {
    let mut records = Vec::new();
    for body in bodies {
        let record = Record {
            seq: owed.next_seq(),
            at_ms: now_ms(),
            body,
        };
        owed.apply(&record);
        records.push(record);
    }
    if records.is_empty() {
        return Ok((owed, tip));
    }
    match client.append_log(agent, tip.as_deref(), &records).await {
        Ok(appended) => Ok((owed, Some(appended.tip))),
        Err(e) if e.is_conflict() => Err(SequencerError::LostWriter {
            agent: agent.to_string(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// What a fork made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forked {
    /// The new agent.
    pub agent: AgentName,
    /// How many records its Log was seeded with.
    pub records: u64,
}

/// Forks `source` at record `at_seq` into a new child `new_name` of the `parent` client's
/// entity, under `grant` (no wider than the spawner's, checked by hubd, nor the source's,
/// checked here) with `loan`. See the module docs for who may fork whom.
pub async fn fork(
    parent: &HubClient,
    credential: &l3m_wire::credential::KeyFile,
    source: &AgentName,
    at_seq: u64,
    new_name: &AgentName,
    grant: Grant,
    loan: Fuel,
) -> Result<Forked, SequencerError> {
    let source_grant = parent.read_grant(source).await?.grant;
    grant
        .within(&source_grant)
        .map_err(|w| SequencerError::Launch {
            agent: new_name.to_string(),
            reason: format!("a fork may not be wider than its source: {w}"),
        })?;
    let prefix = parent
        .read_log_range(source, 0, at_seq.saturating_add(1))
        .await?;
    if (prefix.records.len() as u64) <= at_seq {
        return Err(SequencerError::NoSuchRecord {
            source_agent: source.to_string(),
            len: prefix.len,
            at: at_seq,
        });
    }
    parent
        .spawn(SpawnRequest {
            child: new_name.clone(),
            grant,
            loan,
            driven: false,
            persona: None,
        })
        .await?;
    let mut records: Vec<Record> = prefix
        .records
        .into_iter()
        .enumerate()
        .map(|(i, r)| Record { seq: i as u64, ..r })
        .collect();
    let owed = Owed::from_records(&records);
    let reason = format!("forked from {source} at record {at_seq}");
    for body in owed::close_open(&owed, &reason) {
        records.push(Record {
            seq: records.len() as u64,
            at_ms: now_ms(),
            body,
        });
    }
    let child = HubClient::open(
        Arc::clone(parent.bus()),
        parent.subjects().hub().clone(),
        credential,
        Duty::Sequencer {
            agent: new_name.clone(),
        },
    )
    .await?;
    child.append_log(new_name, None, &records).await?;
    Ok(Forked {
        agent: new_name.clone(),
        records: records.len() as u64,
    })
}
