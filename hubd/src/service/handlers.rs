//! One async handler per operation: run the blocking step, then queue what moved to be announced.

use std::sync::Arc;

use l3m_wire::hubd::authority::{GrantView, ReadGrant, Regrant, Regranted};
use l3m_wire::hubd::cards::{AppendCard, CardAppended, CardRange, ReadCards};
use l3m_wire::hubd::vigils::{
    ArmVigil, CancelVigil, ReadVigils, VigilArmed, VigilCancelled, VigilRange,
};

use super::state::vigils::Sweep;
use l3m_wire::hubd::credential::{
    CredentialIssued, CredentialRevoked, Credentials, IssueCredential, ListCredentials,
    RevokeCredential,
};
use l3m_wire::hubd::lease::{AcquireLease, LeaseHeld, LeaseReleased, ReleaseLease, RenewLease};
use l3m_wire::hubd::log::{AppendLog, LogAppended, LogRange, ReadLog};
use l3m_wire::hubd::mail::{
    AirmailDelivered, AirmailStaged, BouncesReturned, Cursor, CursorMoved, DeliverAirmail,
    InboxLines, LetterSent, MarkRead, MarkedRead, MoveCursor, ReadCursor, ReadInbox, ReadOutbox,
    ReturnBounces, SendLetter, StageAirmail,
};
use l3m_wire::hubd::pack::{FetchPack, PackChunk, PushPack, Pushed};
use l3m_wire::hubd::session::{Vouch, Vouched};
use l3m_wire::hubd::tree::{
    AgentTree, Collect, Collected, ListAgents, ListTree, Retire, Retired, Spawn, Spawned, TreePage,
};
use l3m_wire::hubd::undo::{AppendUndo, ReadUndo, UndoAppended, UndoRange};

use super::error::ServiceError;
use super::state::State;

/// Runs a blocking step of `state` (it reads or fsyncs `hub.git`).
///
/// On a multi-threaded runtime the step runs right here, the worker handing its other tasks
/// to the rest of the pool for the while (`block_in_place`): no hop to the blocking pool and
/// back on every request. A current-thread runtime cannot do that, so there it goes to the
/// blocking pool.
pub(super) async fn blocking<T, F>(state: &Arc<State>, step: F) -> Result<T, ServiceError>
where
    T: Send + 'static,
    F: FnOnce(&State) -> Result<T, ServiceError> + Send + 'static,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        return tokio::task::block_in_place(|| step(state));
    }
    let state = Arc::clone(state);
    tokio::task::spawn_blocking(move || step(&state))
        .await
        .map_err(|e| ServiceError::Internal(format!("a blocking step failed: {e}")))?
}

/// `hubd.issue-credential`.
pub async fn issue_credential(
    state: Arc<State>,
    req: IssueCredential,
) -> Result<CredentialIssued, ServiceError> {
    blocking(&state, move |s| s.issue_credential(req)).await
}

/// `hubd.revoke-credential`.
pub async fn revoke_credential(
    state: Arc<State>,
    req: RevokeCredential,
) -> Result<CredentialRevoked, ServiceError> {
    blocking(&state, move |s| {
        s.revoke_credential(&req.capability, &req.id)
    })
    .await
}

/// `hubd.vouch`.
pub async fn vouch(state: Arc<State>, req: Vouch) -> Result<Vouched, ServiceError> {
    state.vouch(req)
}

/// `hubd.spend-voucher`.
pub async fn spend_voucher(
    state: Arc<State>,
    req: l3m_wire::hubd::session::SpendVoucher,
) -> Result<l3m_wire::hubd::session::VoucherSpent, ServiceError> {
    state.spend_voucher(&req)
}

/// `hubd.vouch-build`.
pub async fn vouch_build(
    state: Arc<State>,
    req: l3m_wire::hubd::build_voucher::VouchBuild,
) -> Result<l3m_wire::hubd::build_voucher::BuildVouched, ServiceError> {
    state.vouch_build(req)
}

/// `hubd.list-credentials`.
pub async fn list_credentials(
    state: Arc<State>,
    req: ListCredentials,
) -> Result<Credentials, ServiceError> {
    state.list_credentials(&req)
}

/// `hubd.append-log`.
pub async fn append_log(state: Arc<State>, req: AppendLog) -> Result<LogAppended, ServiceError> {
    let (appended, moved) = blocking(&state, move |s| {
        s.append_log(
            &req.capability,
            &req.agent,
            req.expected_tip.as_deref(),
            &req.records,
        )
    })
    .await?;
    state.announce(&[moved]);
    Ok(appended)
}

/// `hubd.read-log`.
pub async fn read_log(state: Arc<State>, req: ReadLog) -> Result<LogRange, ServiceError> {
    blocking(&state, move |s| {
        s.read_log(&req.capability, &req.agent, req.from, req.to)
    })
    .await
}

/// `hubd.append-undo`.
pub async fn append_undo(state: Arc<State>, req: AppendUndo) -> Result<UndoAppended, ServiceError> {
    let (appended, moved) = blocking(&state, move |s| {
        s.append_undo(
            &req.capability,
            &req.agent,
            req.expected_tip.as_deref(),
            &req.lines,
        )
    })
    .await?;
    state.announce(&[moved]);
    Ok(appended)
}

/// `hubd.read-undo`.
pub async fn read_undo(state: Arc<State>, req: ReadUndo) -> Result<UndoRange, ServiceError> {
    blocking(&state, move |s| {
        s.read_undo(&req.capability, &req.agent, req.from, req.to)
    })
    .await
}

/// `hubd.append-card`.
pub async fn append_card(state: Arc<State>, req: AppendCard) -> Result<CardAppended, ServiceError> {
    let (appended, moved) = blocking(&state, move |s| {
        s.append_card(&req.capability, &req.agent, &req.line)
    })
    .await?;
    state.announce(&[moved]);
    Ok(appended)
}

/// `hubd.read-cards`.
pub async fn read_cards(state: Arc<State>, req: ReadCards) -> Result<CardRange, ServiceError> {
    blocking(&state, move |s| {
        s.read_cards(&req.capability, &req.agent, req.from, req.to)
    })
    .await
}

/// `hubd.arm-vigil`; a vigil whose fact may already be true is swept at once.
pub async fn arm_vigil(state: Arc<State>, req: ArmVigil) -> Result<VigilArmed, ServiceError> {
    let key = req.watch.key();
    let (armed, moved) = blocking(&state, move |s| {
        s.arm_vigil(&req.capability, &req.agent, req.watch, req.until_ms)
    })
    .await?;
    state.announce(&[moved]);
    if let Some(key) = key {
        state.poke_vigils(Sweep::Moved(vec![key]));
    }
    Ok(armed)
}

/// `hubd.cancel-vigil`.
pub async fn cancel_vigil(
    state: Arc<State>,
    req: CancelVigil,
) -> Result<VigilCancelled, ServiceError> {
    let (cancelled, moved) = blocking(&state, move |s| {
        s.cancel_vigil(&req.capability, &req.agent, &req.id)
    })
    .await?;
    state.announce(&[moved]);
    Ok(cancelled)
}

/// `hubd.read-vigils`.
pub async fn read_vigils(state: Arc<State>, req: ReadVigils) -> Result<VigilRange, ServiceError> {
    blocking(&state, move |s| {
        s.read_vigils(&req.capability, &req.agent, req.from, req.to)
    })
    .await
}

/// `hubd.deliver-airmail`.
pub async fn deliver_airmail(
    state: Arc<State>,
    req: DeliverAirmail,
) -> Result<AirmailDelivered, ServiceError> {
    let (delivered, moved) = blocking(&state, move |s| {
        s.deliver_airmail(&req.capability, &req.office, &req.letters)
    })
    .await?;
    state.announce(&moved);
    Ok(delivered)
}

/// `hubd.return-bounces`.
pub async fn return_bounces(
    state: Arc<State>,
    req: ReturnBounces,
) -> Result<BouncesReturned, ServiceError> {
    let (returned, moved) = blocking(&state, move |s| {
        s.return_bounces(&req.capability, &req.office, &req.bounces)
    })
    .await?;
    state.announce(&moved);
    Ok(returned)
}

/// `hubd.read-outbox`.
pub async fn read_outbox(state: Arc<State>, req: ReadOutbox) -> Result<InboxLines, ServiceError> {
    blocking(&state, move |s| {
        s.read_outbox(&req.capability, &req.agent, req.from)
    })
    .await
}

/// `hubd.read-cursor`.
pub async fn read_cursor(state: Arc<State>, req: ReadCursor) -> Result<Cursor, ServiceError> {
    blocking(&state, move |s| s.read_cursor(&req.capability, &req.office)).await
}

/// `hubd.move-cursor`.
pub async fn move_cursor(state: Arc<State>, req: MoveCursor) -> Result<CursorMoved, ServiceError> {
    blocking(&state, move |s| {
        s.move_cursor(
            &req.capability,
            &req.office,
            req.positions,
            req.expected.as_deref(),
        )
    })
    .await
}

/// `hubd.read-grant`.
pub async fn read_grant(state: Arc<State>, req: ReadGrant) -> Result<GrantView, ServiceError> {
    state.read_grant(&req.capability, &req.agent)
}

/// `hubd.spawn`.
pub async fn spawn(state: Arc<State>, req: Spawn) -> Result<Spawned, ServiceError> {
    let (spawned, moved) = blocking(&state, move |s| s.spawn(&req.capability, req.request)).await?;
    state.announce(&moved);
    Ok(spawned)
}

/// `hubd.retire`.
pub async fn retire(state: Arc<State>, req: Retire) -> Result<Retired, ServiceError> {
    let (retired, moved) = blocking(&state, move |s| s.retire(&req.capability, &req.agent)).await?;
    state.announce(&moved);
    Ok(retired)
}

/// `hubd.collect`.
pub async fn collect(state: Arc<State>, req: Collect) -> Result<Collected, ServiceError> {
    let (collected, moved) =
        blocking(&state, move |s| s.collect(&req.capability, &req.agent)).await?;
    state.announce(&moved);
    Ok(collected)
}

/// `hubd.list-tree`.
pub async fn list_tree(state: Arc<State>, req: ListTree) -> Result<TreePage, ServiceError> {
    state.list_tree(&req.capability, req.after.as_deref(), req.tail)
}

/// `hubd.list-agents`.
pub async fn list_agents(state: Arc<State>, req: ListAgents) -> Result<AgentTree, ServiceError> {
    state.list_agents(&req.capability, req.after.as_deref())
}

/// `hubd.send-letter`.
pub async fn send_letter(state: Arc<State>, req: SendLetter) -> Result<LetterSent, ServiceError> {
    let (sent, moved) = blocking(&state, move |s| {
        s.send_letter(
            &req.capability,
            &req.to,
            req.subject,
            req.body,
            req.in_reply_to.as_deref(),
        )
    })
    .await?;
    state.announce(&[moved]);
    Ok(sent)
}

/// `hubd.read-inbox`.
pub async fn read_inbox(state: Arc<State>, req: ReadInbox) -> Result<InboxLines, ServiceError> {
    blocking(&state, move |s| {
        s.read_inbox(&req.capability, &req.agent, req.from)
    })
    .await
}

/// `hubd.mark-read`.
pub async fn mark_read(state: Arc<State>, req: MarkRead) -> Result<MarkedRead, ServiceError> {
    let (marked, moved) =
        blocking(&state, move |s| s.mark_read(&req.capability, &req.letter)).await?;
    state.announce(&[moved]);
    Ok(marked)
}

/// `hubd.acquire-lease`.
pub async fn acquire_lease(
    state: Arc<State>,
    req: AcquireLease,
) -> Result<LeaseHeld, ServiceError> {
    state.acquire_lease(&req.capability, &req.agent, &req.holder, req.ttl_ms)
}

/// `hubd.renew-lease`.
pub async fn renew_lease(state: Arc<State>, req: RenewLease) -> Result<LeaseHeld, ServiceError> {
    state.renew_lease(&req.capability, &req.agent, req.token)
}

/// `hubd.release-lease`.
pub async fn release_lease(
    state: Arc<State>,
    req: ReleaseLease,
) -> Result<LeaseReleased, ServiceError> {
    state.release_lease(&req.capability, &req.agent, req.token)
}

/// `hubd.regrant`.
pub async fn regrant(state: Arc<State>, req: Regrant) -> Result<Regranted, ServiceError> {
    let (regranted, moved) = blocking(&state, move |s| {
        s.regrant(&req.capability, &req.agent, req.grant)
    })
    .await?;
    state.announce(&[moved]);
    Ok(regranted)
}

/// `hubd.stage-airmail`.
pub async fn stage_airmail(
    state: Arc<State>,
    req: StageAirmail,
) -> Result<AirmailStaged, ServiceError> {
    let (staged, moved) = blocking(&state, move |s| {
        s.stage_airmail(&req.capability, &req.to, req.subject, req.body)
    })
    .await?;
    state.announce(&[moved]);
    Ok(staged)
}

/// `hubd.fetch-pack`.
pub async fn fetch_pack(state: Arc<State>, req: FetchPack) -> Result<PackChunk, ServiceError> {
    blocking(&state, move |s| s.fetch_pack(&req)).await
}

/// `hubd.push-pack`.
pub async fn push_pack(state: Arc<State>, req: PushPack) -> Result<Pushed, ServiceError> {
    let (pushed, moved) = blocking(&state, move |s| s.push_pack(req)).await?;
    state.announce(&moved);
    Ok(pushed)
}
