//! Serving control (`l3m_wire::control`): the running sequencer's server, the host's server for
//! asleep agents, and the rewind both carry out.
//!
//! A running sequencer serves `Subjects::agent_request(Service::Sequencer, op, agent)` for
//! interrupt, rewind, forecast and status; the host of a subtree (`sequencer supervise`) serves
//! `Service::Host` subjects for a rewind or forecast of an agent no sequencer runs. A request is
//! taken only with hubd's voucher for its agent, op and arguments, presented by its requester
//! and spent by hubd once ([`crate::vouchers`]), on exactly that agent's subject. A running sequencer hands each request to the writer as an input, so it is
//! journaled in a pass like everything else, and answered once its records are appended.
//!
//! **Rewind** first forecasts ([`forecast`]): core's `aftermath` fold over the records after
//! `to` names the undo entries to restore and the effects no entry covers; the ring plans
//! restoring those entries (files, and branches by compare-and-swap) without changing anything.
//! A plan that does not hold (a branch someone else moved) refuses the rewind before anything is
//! journaled. Then it journals core's `rewind` (which closes what is open first), restores the
//! files and branches, and journals what it restored, and what it could not undo (a push, a
//! letter), as a dismissed harness notice. The host does the same for an asleep agent under its
//! lease ([`rewind_offline`]), in a sequencer session its own credential opens.
//!
//! (A fork is a spawn with `fork` set: hubd seeds the new Log itself.)
//!
//! # Layout
//! - `serve` (crate-private): the control server of a running sequencer.
//! - [`HostControl`], [`serve_host`]: the host's control server.
//! - [`forecast`], [`restore_after`], [`rewind_offline`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use l3m_core::aftermath::aftermath;
use l3m_core::duty::Duty;
use l3m_core::log::{Disposition, EffectNote, EventId, EventSource, Record, RecordBody};
use l3m_core::names::AgentName;
use l3m_core::owed::{self, Owed, Signal};
use l3m_ring::rewind::{self, Restore};
use l3m_ring::undo::EntryId;
use l3m_wire::client::HubClient;
use l3m_wire::control::{
    BranchBack, ControlReply, ControlRequest, Controlled, Forecast, OP_FORECAST, OP_INTERRUPT,
    OP_REWIND, OP_STATUS,
};
use l3m_wire::credential::KeyFile;
use l3m_wire::hubd::authority::GrantView;
use l3m_wire::reply::{ErrorCode, RemoteError};
use l3m_wire::subjects::{Operation, Service};
use l3m_wire::typed::{TypedRequest, TypedServer};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::acr::Acr;
use crate::toolbox::mint_tokens;
use crate::undo::HubUndo;
use crate::vouchers::Vouchers;
use crate::writer::Input;
use crate::{SequencerError, now_ms};

/// Serves the control ops of `agent` until `shutdown`, handing interrupts, rewinds and status
/// to the writer. A rewind whose restore would not hold ([`forecast`] fails) is refused before
/// it reaches the writer; a forecast is answered here, changing nothing.
pub(crate) async fn serve(
    client: &HubClient,
    forest: &Path,
    agent: &AgentName,
    tx: mpsc::UnboundedSender<Input>,
    shutdown: CancellationToken,
) -> Result<(), SequencerError> {
    let vouchers = Arc::new(Vouchers::new(client.clone()));
    for op in [OP_INTERRUPT, OP_REWIND, OP_FORECAST, OP_STATUS] {
        let op = Operation::parse(op)?;
        let subject = client
            .subjects()
            .agent_request(Service::Sequencer, &op, agent);
        let server = bind(client, &subject).await?;
        let tx = tx.clone();
        let (client, forest, agent) = (client.clone(), forest.to_path_buf(), agent.clone());
        let vouchers = Arc::clone(&vouchers);
        tokio::spawn(server.run(
            move |req: TypedRequest<Controlled>| {
                let tx = tx.clone();
                let (client, forest, agent) = (client.clone(), forest.clone(), agent.clone());
                let admitted = admit(&vouchers, &req, Service::Sequencer, &client);
                let vouchers = Arc::clone(&vouchers);
                async move {
                    let (named, req) = spend(&vouchers, admitted?).await?;
                    if named != agent {
                        return Err(RemoteError::new(
                            ErrorCode::Invalid,
                            format!("a request for {named} reached the sequencer of {agent}"),
                        ));
                    }
                    let refused = |e: SequencerError| ControlReply::Refused {
                        reason: e.to_string(),
                    };
                    match &req {
                        ControlRequest::Forecast { to } => {
                            return Ok(forecast_now(&client, &forest, &agent, *to)
                                .await
                                .map_or_else(refused, ControlReply::Forecast));
                        }
                        ControlRequest::Rewind { to, .. } => {
                            if let Err(e) = forecast_now(&client, &forest, &agent, *to).await {
                                return Ok(refused(e));
                            }
                        }
                        ControlRequest::Interrupt { .. } | ControlRequest::Status => {}
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

/// What the host of a subtree holds to act for its asleep agents: its own session (duty
/// `host`), the host credential that opens a sequencer session for one of them, and the hub
/// folder their ACRs live in.
#[derive(Clone)]
pub struct HostControl {
    /// The host's session.
    pub client: HubClient,
    /// The host credential.
    pub credential: KeyFile,
    /// Where this host keeps its agents' ACRs.
    pub forest: PathBuf,
    /// The agents it runs (`None`: the whole hub).
    pub subtree: Option<AgentName>,
}

impl std::fmt::Debug for HostControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostControl")
            .field("forest", &self.forest)
            .field("subtree", &self.subtree)
            .finish_non_exhaustive()
    }
}

/// Serves the host's control subjects until `shutdown`: a forecast, and a rewind of an asleep
/// agent of its subtree, done under the agent's lease in a sequencer session the host's own
/// credential opens — never in the asking human's name. An agent whose sequencer runs is
/// refused here (its lease is held) and answered on its own subject.
pub async fn serve_host(
    host: HostControl,
    shutdown: CancellationToken,
) -> Result<(), SequencerError> {
    let vouchers = Arc::new(Vouchers::new(host.client.clone()));
    // Agent-addressed ops only: `host.health` is the supervisor's own, answered beside this.
    let subject = host.client.subjects().agent_requests(Service::Host);
    let server = bind(&host.client, &subject).await?;
    tokio::spawn(server.run(
        move |req: TypedRequest<Controlled>| {
            let host = host.clone();
            let admitted = admit(&vouchers, &req, Service::Host, &host.client);
            let vouchers = Arc::clone(&vouchers);
            async move {
                let admitted = admitted?;
                if let Some(root) = &host.subtree
                    && !admitted.agent.is_within(root)
                {
                    return Err(RemoteError::new(
                        ErrorCode::Refused,
                        format!("{} is outside this host's subtree {root}", admitted.agent),
                    ));
                }
                let (agent, req) = spend(&vouchers, admitted).await?;
                let refused = |e: SequencerError| ControlReply::Refused {
                    reason: e.to_string(),
                };
                Ok(match req {
                    ControlRequest::Forecast { to } => {
                        forecast_now(&host.client, &host.forest, &agent, to)
                            .await
                            .map_or_else(refused, ControlReply::Forecast)
                    }
                    ControlRequest::Rewind { to, reason } => {
                        rewind_as_host(&host, &agent, to, &reason)
                            .await
                            .map_or_else(refused, |next_seq| ControlReply::Done { next_seq })
                    }
                    ControlRequest::Interrupt { .. } | ControlRequest::Status => {
                        ControlReply::Refused {
                            reason: format!(
                                "no sequencer runs {agent}, so there is nothing to {}",
                                req.op()
                            ),
                        }
                    }
                })
            }
        },
        shutdown,
    ));
    Ok(())
}

/// Binds a control server on `subject`.
async fn bind(
    client: &HubClient,
    subject: &str,
) -> Result<TypedServer<Controlled, ControlReply>, SequencerError> {
    TypedServer::bind(
        client.bus().as_ref(),
        subject,
        l3m_wire::typed::ServeOptions::default(),
    )
    .await
    .map_err(|source| SequencerError::Bus {
        what: format!("serving {subject}"),
        source,
    })
}

/// A control request that passed the local checks, its voucher not yet spent.
struct Admitted {
    agent: AgentName,
    request: ControlRequest,
    vouched: l3m_wire::hubd::session::Vouched,
    digest: [u8; 32],
}

/// Admits a control request as far as this process can alone: hubd's voucher, unforged,
/// unexpired, for the agent it names, the op and the arguments it carries, and sent on exactly
/// that agent's subject for the op.
fn admit(
    vouchers: &Vouchers,
    req: &TypedRequest<Controlled>,
    service: Service,
    client: &HubClient,
) -> Result<Admitted, RemoteError> {
    let vouched = &req.body.vouched;
    let op = req.body.request.op();
    let invalid = |message: String| RemoteError::new(ErrorCode::Invalid, message);
    let agent = AgentName::parse(&vouched.voucher.agent)
        .map_err(|e| invalid(format!("the voucher names no agent: {e}")))?;
    let operation = Operation::parse(op).map_err(|e| invalid(e.to_string()))?;
    let expected = client.subjects().agent_request(service, &operation, &agent);
    if req.subject != expected {
        return Err(invalid(format!(
            "a {op} request for {agent} belongs on {expected}, not {}",
            req.subject
        )));
    }
    let digest = vouchers
        .check(vouched, agent.as_str(), &req.body.request, now_ms())
        .map_err(|e| RemoteError::new(ErrorCode::Refused, e.to_string()))?;
    Ok(Admitted {
        agent,
        request: req.body.request.clone(),
        vouched: vouched.clone(),
        digest,
    })
}

/// Has hubd spend an admitted request's voucher; returns the agent and the request with who
/// asked (as hubd vouched) added to its reason.
async fn spend(
    vouchers: &Vouchers,
    admitted: Admitted,
) -> Result<(AgentName, ControlRequest), RemoteError> {
    vouchers
        .spend(&admitted.vouched, admitted.digest)
        .await
        .map_err(|e| RemoteError::new(ErrorCode::Refused, e.to_string()))?;
    let request = admitted.request.asked_by(&admitted.vouched.voucher.by);
    Ok((admitted.agent, request))
}

/// [`forecast`] against the agent's grant as hubd serves it now.
async fn forecast_now(
    client: &HubClient,
    forest: &Path,
    agent: &AgentName,
    to: u64,
) -> Result<Forecast, SequencerError> {
    let grant = client.read_grant(agent).await?;
    forecast(client, forest, agent, &grant, to).await
}

/// A host's rewind of an asleep agent: a sequencer session of its own credential, then
/// [`rewind_offline`]; returns the Log's next seq.
async fn rewind_as_host(
    host: &HostControl,
    agent: &AgentName,
    to: u64,
    reason: &str,
) -> Result<u64, SequencerError> {
    let writer = HubClient::open(
        Arc::clone(host.client.bus()),
        host.client.subjects().hub().clone(),
        &host.credential,
        Duty::Sequencer {
            agent: agent.clone(),
        },
    )
    .await?;
    rewind_offline(&writer, &host.forest, agent, to, reason).await?;
    Ok(writer.read_log(agent, 0, 0).await?.len)
}

/// The forecast of a rewind to `to`: the ring's restore (planned or done) and what the Log
/// says no rewind takes back.
fn forecast_of(to: u64, restore: Restore, not_undone: Vec<EffectNote>) -> Forecast {
    Forecast {
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

/// Forecasts a rewind of `agent` to record `to`, changing nothing: what the undo chain would
/// restore (planned by the ring against the files and branches as they are now) and what the
/// Log says no rewind takes back. Fails, naming the cause, when the restore would not hold.
pub async fn forecast(
    client: &HubClient,
    forest: &Path,
    agent: &AgentName,
    grant: &GrantView,
    to: u64,
) -> Result<Forecast, SequencerError> {
    let (after, undo) = aftermath_of(client, agent, to).await?;
    if undo.is_empty() {
        return Ok(forecast_of(to, Restore::default(), after));
    }
    let entries = crate::undo::entries(client, agent).await?;
    let tokens = mint_tokens(grant, agent, Acr::at(forest, agent).root())?;
    let restore = rewind::plan(&tokens, &entries, &undo)?;
    Ok(forecast_of(to, restore, after))
}

/// Restores the files and branches that tame tool results after record `to` changed, recording
/// the branch moves back into `into` (the agent's one undo chain), and says what it restored
/// and what it could not undo.
pub async fn restore_after(
    client: &HubClient,
    into: &Arc<HubUndo>,
    forest: &Path,
    agent: &AgentName,
    grant: &GrantView,
    to: u64,
) -> Result<String, SequencerError> {
    let (after, undo) = aftermath_of(client, agent, to).await?;
    let restore = if undo.is_empty() {
        Restore::default()
    } else {
        let entries = crate::undo::entries(client, agent).await?;
        let tokens = mint_tokens(grant, agent, Acr::at(forest, agent).root())?;
        let into = Arc::clone(into);
        // The ring's restore is blocking IO, and it records through the hub.
        tokio::task::spawn_blocking(move || {
            rewind::restore(&tokens, &entries, &undo, &*into, now_ms())
        })
        .await
        .map_err(|e| SequencerError::Tools(format!("the restore stopped: {e}")))??
    };
    // The branches the restore moved back go back in the hub too.
    Acr::at(forest, agent).sync(client).await?;
    Ok(forecast_of(to, restore, after).narrate(true))
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
    forest: &Path,
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
    let outcome = rewind_holding(client, forest, agent, to, reason).await;
    let released = client.release_lease(agent, lease).await;
    outcome?;
    released?;
    Ok(())
}

async fn rewind_holding(
    client: &HubClient,
    forest: &Path,
    agent: &AgentName,
    to: u64,
    reason: &str,
) -> Result<(), SequencerError> {
    let grant = client.read_grant(agent).await?;
    Acr::at(forest, agent).ready(client).await?;
    forecast(client, forest, agent, &grant, to).await?;
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
    let note = restore_after(client, &into, forest, agent, &grant, to).await?;
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
        // Through the boundary, as the writer's records: a human's reason is foreign text too.
        let record = crate::boundary::fit(record)
            .map_err(SequencerError::Unjournalable)?
            .into_record();
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
