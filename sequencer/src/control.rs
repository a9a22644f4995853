//! Control of a running sequencer (interrupt, rewind, status), rewind without one, and fork.
//!
//! A running sequencer serves `Subjects::agent_request(Service::Sequencer, op, agent)` for the
//! ops [`OP_INTERRUPT`], [`OP_REWIND`] and [`OP_STATUS`]; each request is handed to the writer
//! as an input, so it is journaled in a pass like everything else, and answered once its
//! records are appended.
//!
//! **Rewind** journals core's `rewind` (which closes what is open first), then restores from
//! the undo journal, newest first, the files that tame tool results after record `to` changed
//! (their `EffectNote.undo` ids), and journals what it restored as a dismissed harness notice.
//!
//! **Fork** ([`fork`]): who may fork whom. The spawner is the entity of the `parent` client
//! (a human, or an agent's sequencer); the new agent must be its child (hubd's spawn gate
//! refuses any other name) under a grant no wider than the spawner's (the gate refuses a
//! widening, naming the axis) *and* no wider than the source's (checked here before spawning,
//! so a fork never gains authority over its source). Any session may read the source's Log
//! (hubd lets every duty read Logs). The new Log is seeded by a sequencer session of the new
//! agent, opened with the hub secret.
//!
//! # Layout
//! - [`ControlRequest`], [`ControlReply`], [`Status`]: the wire messages.
//! - `serve` (crate-private): the control server of a running sequencer.
//! - [`restore_after`], [`rewind_offline`], [`fork`].

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::log::{Disposition, EventId, EventSource, Record, RecordBody};
use l3m_core::names::AgentName;
use l3m_core::owed::{self, Owed, Signal};
use l3m_ring::journal::LocalJournal;
use l3m_wire::client::HubClient;
use l3m_wire::envelope::Message;
use l3m_wire::hubd::authority::GrantView;
use l3m_wire::reply::{ErrorCode, RemoteError};
use l3m_wire::subjects::{Operation, Service};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::session::Input;
use crate::toolbox::mint_tokens;
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

impl Message for ControlRequest {
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
    /// The control op this request is sent on.
    pub fn op(&self) -> &'static str {
        match self {
            ControlRequest::Interrupt { .. } => OP_INTERRUPT,
            ControlRequest::Rewind { .. } => OP_REWIND,
            ControlRequest::Status => OP_STATUS,
        }
    }
}

/// Asks the running sequencer of `agent` (reached over `client`'s bus) to carry out `request`.
/// No sequencer running is a wire error (no responders): the caller then acts offline.
pub async fn call(
    client: &HubClient,
    agent: &AgentName,
    request: &ControlRequest,
    timeout: std::time::Duration,
) -> Result<ControlReply, SequencerError> {
    let op = Operation::parse(request.op()).map_err(|e| SequencerError::Record(e.to_string()))?;
    let subject = client
        .subjects()
        .agent_request(Service::Sequencer, &op, agent);
    let reply = l3m_wire::typed::call(
        client.bus().as_ref(),
        &subject,
        request,
        timeout,
        &l3m_wire::envelope::Limits::default(),
    )
    .await
    .map_err(|e| SequencerError::Record(format!("no answer from {agent}'s sequencer: {e}")))?;
    reply.map_err(|e| SequencerError::Record(format!("{agent}'s sequencer refused: {}", e.message)))
}

/// Serves the control ops of `agent` until `shutdown`, handing each to the writer.
pub(crate) async fn serve(
    client: &HubClient,
    agent: &AgentName,
    tx: mpsc::UnboundedSender<Input>,
    shutdown: CancellationToken,
) -> Result<(), SequencerError> {
    let bus = Arc::clone(client.bus());
    for op in [OP_INTERRUPT, OP_REWIND, OP_STATUS] {
        let op = Operation::parse(op).map_err(|e| SequencerError::Record(e.to_string()))?;
        let subject = client
            .subjects()
            .agent_request(Service::Sequencer, &op, agent);
        let server = l3m_wire::typed::TypedServer::<ControlRequest, ControlReply>::bind(
            bus.as_ref(),
            &subject,
            l3m_wire::typed::ServeOptions::default(),
        )
        .await
        .map_err(|e| SequencerError::Record(format!("serving {subject}: {e}")))?;
        let tx = tx.clone();
        let expected = op.as_str().to_owned();
        tokio::spawn(server.run(
            move |req: l3m_wire::typed::TypedRequest<ControlRequest>| {
                let tx = tx.clone();
                let expected = expected.clone();
                async move {
                    let named = match &req.body {
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
                    let (reply, answer) = oneshot::channel();
                    tx.send(Input::Control(req.body, reply)).map_err(|_| {
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

/// Restores, newest first, the files changed by tame tool results after record `to`, and
/// says what it restored.
pub async fn restore_after(
    client: &HubClient,
    hub_root: &Path,
    agent: &AgentName,
    grant: &GrantView,
    to: u64,
) -> Result<String, SequencerError> {
    let after = client.read_log_from(agent, to.saturating_add(1)).await?;
    let ids: BTreeSet<u64> = after
        .records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult { effects, .. } => Some(effects),
            _ => None,
        })
        .flatten()
        .filter_map(|e| e.undo.as_deref()?.parse().ok())
        .collect();
    if ids.is_empty() {
        return Ok(format!("rewind to {to}: no file edits to restore"));
    }
    let acr = hub_root.join(l3m_core::refs::paths::acr(agent));
    let tools = |e: String| SequencerError::Tools(e);
    let journal = LocalJournal::open(&acr, l3m_ring::ambient_authority())
        .map_err(|e| tools(e.to_string()))?;
    let entries: Vec<_> = journal
        .entries()
        .map_err(|e| tools(e.to_string()))?
        .into_iter()
        .filter(|e| ids.contains(&e.id.0))
        .collect();
    let tokens = mint_tokens(grant, agent, &acr)?;
    let token = tokens
        .files
        .ok_or_else(|| tools("the grant confers no files axis to restore with".into()))?;
    l3m_ring::files::restore(&token, &entries).map_err(|e| tools(e.to_string()))?;
    let paths: BTreeSet<String> = entries.iter().map(|e| e.path.to_string()).collect();
    Ok(format!(
        "rewind to {to}: restored {} edits of {}",
        entries.len(),
        paths.into_iter().collect::<Vec<_>>().join(", ")
    ))
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
    let read = client.read_log_from(agent, 0).await?;
    let owed = Owed::from_records(&read.records);
    let bodies = owed::journal(
        &owed,
        Signal::Rewind {
            to,
            reason: reason.to_owned(),
        },
    )
    .map_err(|e| SequencerError::Record(e.to_string()))?;
    let (owed, tip) = append_bodies(client, agent, owed, read.tip, bodies).await?;
    let grant = client.read_grant(agent).await?;
    let note = restore_after(client, hub_root, agent, &grant, to).await?;
    let id = EventId::new(format!("note-{}", owed.next_seq()))
        .map_err(|e| SequencerError::Record(e.to_string()))?;
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
    secret: &str,
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
    let prefix = parent.read_log(source, 0, at_seq.saturating_add(1)).await?;
    if (prefix.records.len() as u64) <= at_seq {
        return Err(SequencerError::Record(format!(
            "{source}'s Log has {} records; there is no record {at_seq} to fork at",
            prefix.len
        )));
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
        secret,
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
