//! [`HubClient`]: one session with a hubd, and a typed method for every operation it serves.
//!
//! Every caller of hubd (a sequencer, the CLI, the postman) would otherwise repeat the same
//! steps: open a session with its credential, keep the capability and the session key, put the
//! capability in each request and seal it, pick the subject, encode, wait, and tell a refusal
//! from a transport failure. The client does them
//! once. Records and inbox lines are decoded here, so a caller handles typed values; a line
//! that does not decode is a [`ClientError::BadReply`] naming it, never a panic.
//!
//! A session ends when hubd restarts. A call refused with `session-ended` (nothing was done
//! for it) opens a new session with the same credential and asks once more, so every holder of
//! a client, and every clone of it, carries on across a hubd restart without noticing.

mod pack;

pub use pack::Fetched;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use l3m_core::duty::Duty;
use l3m_core::grant::SpawnRequest;
use l3m_core::log::Record;
use l3m_core::mail::InboxEntry;
use l3m_core::names::AgentName;
use l3m_core::record_format;

use crate::bus::{Bus, MessageStream};
use crate::credential::{Ephemeral, KeyFile, SessionKey};
use crate::envelope::{Limits, Message};
use crate::error::WireError;
use crate::hubd::authority::{GrantView, ReadGrant, Regrant, Regranted};
use crate::hubd::blessing::{Bless, Blessed, BlessingView, ReadBlessing};
use crate::hubd::lease::{AcquireLease, LeaseHeld, LeaseReleased, ReleaseLease, RenewLease};
use crate::hubd::log::{AppendLog, LogAppended, ReadLog};
use crate::hubd::mail::{
    AirmailDelivered, BouncesReturned, Cursor, CursorMoved, DeliverAirmail, MoveCursor, ReadCursor,
    ReturnBounces, Returned,
};
use crate::hubd::mail::{
    AirmailStaged, LetterSent, MarkRead, MarkedRead, ReadInbox, SendLetter, StageAirmail,
};
use crate::hubd::session::{Capability, OpenSession, SessionOpened};
use crate::hubd::settings::{ReadSettings, SettingsUpdated, SettingsView, UpdateSettings};
use crate::hubd::tree::{
    AgentTree, Collect, Collected, ListAgents, Retire, Retired, Spawn, Spawned,
};
use crate::hubd::undo::{AppendUndo, ReadUndo, UndoAppended, UndoRange};
use crate::hubd::{InSession, Op};
use crate::reply::{ErrorCode, RemoteError};
use crate::subjects::{HubId, Subjects};

/// How long a call waits for hubd by default: long enough for a durable append on a slow
/// disk, short enough that a dead hubd is noticed.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a call to hubd did not return what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The bus failed: no hubd answered, the connection dropped, a reply did not open.
    #[error("no usable answer from hubd on {subject}: {source}")]
    Wire {
        /// The subject asked.
        subject: String,
        /// The cause.
        #[source]
        source: WireError,
    },
    /// hubd refused the request and said why.
    #[error("hubd refused {op}: {}", .error.message)]
    Refused {
        /// The operation.
        op: &'static str,
        /// hubd's typed answer.
        error: RemoteError,
    },
    /// hubd answered, but a line in the answer does not decode.
    #[error("hubd's answer to {op} holds a bad line {index}: {reason}")]
    BadReply {
        /// The operation.
        op: &'static str,
        /// Which line.
        index: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// hubd's answer holds a pack chunk that does not fit the pack asked for.
    #[error("hubd's answer to {op} holds a bad chunk at byte {offset}: {reason}")]
    BadChunk {
        /// The operation.
        op: &'static str,
        /// Where the chunk was asked for.
        offset: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// A pack to push is larger than hubd takes.
    #[error("the pack is {len} bytes, over the limit of {limit} bytes for one push")]
    PackTooLarge {
        /// Its length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// The session's fresh key could not be made.
    #[error("cannot open a session: {0}")]
    Credential(String),
    /// The answer to `open-session` is not signed by the hubd the credential pins: whoever
    /// answered is not this hub's hubd (or the credential is of another hub).
    #[error(
        "the answer to open-session is {0}; whoever answered is not the hubd this credential \
         was issued by"
    )]
    NotTheHub(&'static str),
    /// A record to append does not encode.
    #[error("record {seq} does not encode: {reason}")]
    BadRecord {
        /// Its seq.
        seq: u64,
        /// Why.
        reason: String,
    },
}

impl ClientError {
    /// hubd's error code, when hubd answered with a refusal.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused { error, .. } => Some(error.code),
            _ => None,
        }
    }

    /// Whether a compare-and-swap (or a lease) was lost to another writer.
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(ErrorCode::Conflict)
    }
}

/// A Log as read from hubd: its records from some seq on, its length, and its tip.
#[derive(Debug, Clone, PartialEq)]
pub struct LogRead {
    /// The records read, oldest first.
    pub records: Vec<Record>,
    /// The Log's whole length.
    pub len: u64,
    /// The tip the next append must expect.
    pub tip: Option<String>,
}

/// An inbox as read from hubd: its entries from some index on, and its length.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxRead {
    /// The entries read (letters and read marks), in stored order.
    pub entries: Vec<InboxEntry>,
    /// The index of the first entry read.
    pub from: u64,
    /// The inbox's whole length.
    pub len: u64,
}

/// One open session with a hubd.
#[derive(Debug, Clone)]
pub struct HubClient {
    bus: Arc<dyn Bus>,
    subjects: Subjects,
    credential: KeyFile,
    duty: Duty,
    session: Arc<Current>,
    timeout: Duration,
    limits: Limits,
}

/// The session every clone of a client uses now, and the lock that lets one of them at a time
/// replace it after hubd restarted.
#[derive(Debug)]
struct Current {
    keyed: std::sync::RwLock<Arc<Keyed>>,
    reopening: tokio::sync::Mutex<()>,
}

impl Current {
    fn new(keyed: Arc<Keyed>) -> Current {
        Current {
            keyed: std::sync::RwLock::new(keyed),
            reopening: tokio::sync::Mutex::new(()),
        }
    }

    fn get(&self) -> Arc<Keyed> {
        // A writer only swaps one `Arc` for another, so a poisoned lock still holds a session.
        Arc::clone(&self.keyed.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn set(&self, keyed: Arc<Keyed>) {
        *self.keyed.write().unwrap_or_else(PoisonError::into_inner) = keyed;
    }
}

/// One open session, shared by every clone of the client: its capability, its key, the next
/// request number, and the key hubd signs vouchers with.
#[derive(Debug)]
struct Keyed {
    capability: Capability,
    key: SessionKey,
    next: AtomicU64,
    voucher_key: [u8; 32],
}

impl HubClient {
    /// Opens a session for `duty` with the hub of `hub` on `bus`, proving possession of
    /// `credential`.
    pub async fn open(
        bus: Arc<dyn Bus>,
        hub: HubId,
        credential: &KeyFile,
        duty: Duty,
    ) -> Result<HubClient, ClientError> {
        let subjects = Subjects::new(hub);
        let (timeout, limits) = (DEFAULT_TIMEOUT, Limits::default());
        let session = handshake(&bus, &subjects, credential, &duty, timeout, &limits).await?;
        Ok(HubClient {
            bus,
            subjects,
            credential: credential.clone(),
            duty,
            session: Arc::new(Current::new(session)),
            timeout,
            limits,
        })
    }

    /// Replaces the session `ended` with a fresh one of the same credential and duty (hubd
    /// restarted), unless another clone of this client already did: then that one is used.
    async fn reopen(&self, ended: &Arc<Keyed>) -> Result<Arc<Keyed>, ClientError> {
        let _one_at_a_time = self.session.reopening.lock().await;
        let current = self.session.get();
        if !Arc::ptr_eq(&current, ended) {
            return Ok(current);
        }
        let fresh = handshake(
            &self.bus,
            &self.subjects,
            &self.credential,
            &self.duty,
            self.timeout,
            &self.limits,
        )
        .await?;
        tracing::info!(duty = %self.duty, "hubd ended the session (it restarted); opened a new one");
        self.session.set(Arc::clone(&fresh));
        Ok(fresh)
    }

    /// The same client with another per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> HubClient {
        self.timeout = timeout;
        self
    }

    /// The key the hubd of this session signs vouchers with.
    pub fn voucher_key(&self) -> [u8; 32] {
        self.session.get().voucher_key
    }

    /// hubd's voucher that this session may send exactly `request` to `agent`'s sequencer (or
    /// its host), with this session's proof that it is the requester: whoever else sees the
    /// voucher cannot present it, nor with other arguments.
    pub async fn vouch(
        &self,
        agent: &AgentName,
        request: &crate::control::ControlRequest,
    ) -> Result<crate::hubd::session::Vouched, ClientError> {
        let digest = request.digest().map_err(|source| ClientError::Wire {
            subject: Op::Vouch.subject(&self.subjects),
            source,
        })?;
        let mut vouched: crate::hubd::session::Vouched = self
            .call(
                Op::Vouch,
                crate::hubd::session::Vouch {
                    capability: self.cap(),
                    agent: agent.to_string(),
                    action: request.op().to_owned(),
                    digest,
                },
            )
            .await?;
        let statement = vouched.voucher.statement();
        vouched.proof = Some(self.session.get().key.holder_proof(&statement));
        Ok(vouched)
    }

    /// Asks hubd to spend `vouched`, presented to this session with a request whose digest is
    /// `digest`; hubd takes each voucher once, whichever process presents it.
    pub async fn spend_voucher(
        &self,
        vouched: &crate::hubd::session::Vouched,
        digest: [u8; 32],
    ) -> Result<crate::hubd::session::SpendOutcome, ClientError> {
        let spent: crate::hubd::session::VoucherSpent = self
            .call(
                Op::SpendVoucher,
                crate::hubd::session::SpendVoucher {
                    capability: self.cap(),
                    vouched: vouched.clone(),
                    digest,
                },
            )
            .await?;
        Ok(spent.outcome)
    }

    /// hubd's voucher that this session's agent may have `cover` (one build or one run) carried
    /// out by the builder or the runner; refused unless the agent's grant covers it.
    pub async fn vouch_build(
        &self,
        cover: l3m_core::build::Cover,
    ) -> Result<crate::hubd::build_voucher::BuildVouched, ClientError> {
        self.call(
            Op::VouchBuild,
            crate::hubd::build_voucher::VouchBuild {
                capability: self.cap(),
                cover,
            },
        )
        .await
    }

    /// The identity key of the hubd this client's credential pins, for a credential it issues
    /// to pin the same hubd.
    pub fn hub_key(&self) -> Option<l3m_core::credential::PublicKey> {
        self.credential.hub_key
    }

    /// The duty this session holds.
    pub fn duty(&self) -> &Duty {
        &self.duty
    }

    /// The hub's subjects.
    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// The bus the client talks over.
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    /// Sends `request` sealed in the current session; when hubd says the session ended, opens a
    /// new one and sends it once more (hubd did nothing for the first).
    async fn call<Req: Message + InSession, Resp: Message>(
        &self,
        op: Op,
        mut request: Req,
    ) -> Result<Resp, ClientError> {
        self.call_mut(op, &mut request).await
    }

    /// [`HubClient::call`] for a request the caller sends again (the chunks of a pack): the
    /// capability it carries is set to the session each send is sealed in.
    async fn call_mut<Req: Message + InSession, Resp: Message>(
        &self,
        op: Op,
        request: &mut Req,
    ) -> Result<Resp, ClientError> {
        let session = self.session.get();
        match self.call_in(&session, op, request).await {
            Err(e) if e.code() == Some(ErrorCode::SessionEnded) => {
                let fresh = self.reopen(&session).await?;
                self.call_in(&fresh, op, request).await
            }
            other => other,
        }
    }

    /// Sends `request` sealed in `session`, carrying that session's capability.
    async fn call_in<Req: Message + InSession, Resp: Message>(
        &self,
        session: &Keyed,
        op: Op,
        request: &mut Req,
    ) -> Result<Resp, ClientError> {
        *request.capability_mut() = session.capability.clone();
        let subject = op.subject(&self.subjects);
        let n = session.next.fetch_add(1, Ordering::Relaxed);
        let reply = crate::typed::call_sealed(
            self.bus.as_ref(),
            &subject,
            &*request,
            self.timeout,
            &self.limits,
            (&session.key, n, &session.capability.0),
            self.credential.hub_key.as_ref(),
        )
        .await
        .map_err(|source| ClientError::Wire {
            subject: subject.clone(),
            source,
        })?;
        reply.map_err(|error| ClientError::Refused {
            op: op.as_str(),
            error,
        })
    }

    /// The current session's capability, for a request about to be sent (the call sets it again
    /// to the session it seals with).
    fn cap(&self) -> Capability {
        self.session.get().capability.clone()
    }

    /// Appends `records` to `agent`'s Log if its tip is still `expected_tip`.
    pub async fn append_log(
        &self,
        agent: &AgentName,
        expected_tip: Option<&str>,
        records: &[Record],
    ) -> Result<LogAppended, ClientError> {
        let lines = records
            .iter()
            .map(|r| {
                r.to_line().map_err(|e| ClientError::BadRecord {
                    seq: r.seq,
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.call(
            Op::AppendLog,
            AppendLog {
                capability: self.cap(),
                agent: agent.to_string(),
                expected_tip: expected_tip.map(str::to_owned),
                records: lines,
            },
        )
        .await
    }

    /// Reads `agent`'s Log records `from..to` (`to` past the end reads to the end).
    pub async fn read_log(
        &self,
        agent: &AgentName,
        from: u64,
        to: u64,
    ) -> Result<LogRead, ClientError> {
        let op = Op::ReadLog;
        let range: crate::hubd::log::LogRange = self
            .call(
                op,
                ReadLog {
                    capability: self.cap(),
                    agent: agent.to_string(),
                    from,
                    to,
                },
            )
            .await?;
        let records = decode_lines(op, &range.records)?;
        Ok(LogRead {
            records,
            len: range.len,
            tip: range.tip,
        })
    }

    /// Reads `agent`'s whole Log from `from` on, page by page.
    pub async fn read_log_from(
        &self,
        agent: &AgentName,
        from: u64,
    ) -> Result<LogRead, ClientError> {
        self.read_log_range(agent, from, u64::MAX).await
    }

    /// Reads `agent`'s Log records `from..to` (`to` past the end reads to the end), page by
    /// page: hubd answers each read with as many records as fit one message
    /// (`l3m_core::record_format::PAGE_BYTES`), so any stored Log reads back whole.
    pub async fn read_log_range(
        &self,
        agent: &AgentName,
        from: u64,
        to: u64,
    ) -> Result<LogRead, ClientError> {
        // hubd cuts a page shorter by bytes.
        let ask = |at: u64| {
            at.saturating_add(l3m_core::record_format::PAGE_LINES)
                .min(to)
        };
        let mut read = self.read_log(agent, from, ask(from)).await?;
        loop {
            let next = from + read.records.len() as u64;
            if next >= read.len.min(to) {
                break;
            }
            let page = self.read_log(agent, next, ask(next)).await?;
            if page.records.is_empty() {
                break;
            }
            read.len = page.len;
            read.tip = page.tip;
            read.records.extend(page.records);
        }
        Ok(read)
    }

    /// Appends `lines` (see `l3m_ring::undo::lines`) to `agent`'s undo chain if it is at
    /// `expected_tip`: the sequencer's durable record of an edit, made before the edit.
    pub async fn append_undo(
        &self,
        agent: &AgentName,
        expected_tip: Option<&str>,
        lines: Vec<String>,
    ) -> Result<UndoAppended, ClientError> {
        self.call(
            Op::AppendUndo,
            AppendUndo {
                capability: self.cap(),
                agent: agent.to_string(),
                expected_tip: expected_tip.map(str::to_owned),
                lines,
            },
        )
        .await
    }

    /// Reads one page of `agent`'s undo chain from line `from` (up to `to`), with the chain's
    /// length and the tip it belongs to.
    pub async fn read_undo_page(
        &self,
        agent: &AgentName,
        from: u64,
        to: u64,
    ) -> Result<UndoRange, ClientError> {
        let request = ReadUndo {
            capability: self.cap(),
            agent: agent.to_string(),
            from,
            to,
        };
        self.call(Op::ReadUndo, request).await
    }

    /// Appends one card line to `agent`'s cards chain: a sequencer raises its own agent's
    /// card, a human answers one.
    pub async fn append_card(
        &self,
        agent: &AgentName,
        line: String,
    ) -> Result<crate::hubd::cards::CardAppended, ClientError> {
        let request = crate::hubd::cards::AppendCard {
            capability: self.cap(),
            agent: agent.to_string(),
            line,
        };
        self.call(Op::AppendCard, request).await
    }

    /// Reads `agent`'s whole cards chain, page by page.
    pub async fn read_cards(&self, agent: &AgentName) -> Result<Vec<String>, ClientError> {
        self.read_lines(|from, to| async move {
            let request = crate::hubd::cards::ReadCards {
                capability: self.cap(),
                agent: agent.to_string(),
                from,
                to,
            };
            let page: crate::hubd::cards::CardRange = self.call(Op::ReadCards, request).await?;
            Ok((page.lines, page.len))
        })
        .await
    }

    /// Every line of a chain read a page at a time by `page(from, to)`, which answers the
    /// page's lines and the chain's length.
    async fn read_lines<F, Fut>(&self, page: F) -> Result<Vec<String>, ClientError>
    where
        F: Fn(u64, u64) -> Fut,
        Fut: std::future::Future<Output = Result<(Vec<String>, u64), ClientError>>,
    {
        let mut lines = Vec::new();
        loop {
            let from = lines.len() as u64;
            let (more, len) = page(from, from.saturating_add(record_format::PAGE_LINES)).await?;
            if more.is_empty() {
                return Ok(lines);
            }
            lines.extend(more);
            if lines.len() as u64 >= len {
                return Ok(lines);
            }
        }
    }

    /// Arms a vigil on `agent`: the caller's own agent, or a descendant to pin it on.
    pub async fn arm_vigil(
        &self,
        agent: &AgentName,
        watch: l3m_core::vigil::Watch,
        until_ms: u64,
    ) -> Result<crate::hubd::vigils::VigilArmed, ClientError> {
        let request = crate::hubd::vigils::ArmVigil {
            capability: self.cap(),
            agent: agent.to_string(),
            watch,
            until_ms,
        };
        self.call(Op::ArmVigil, request).await
    }

    /// Cancels the armed vigil `id` on `agent`.
    pub async fn cancel_vigil(
        &self,
        agent: &AgentName,
        id: &str,
    ) -> Result<crate::hubd::vigils::VigilCancelled, ClientError> {
        let request = crate::hubd::vigils::CancelVigil {
            capability: self.cap(),
            agent: agent.to_string(),
            id: id.to_owned(),
        };
        self.call(Op::CancelVigil, request).await
    }

    /// Reads `agent`'s whole vigils chain, page by page.
    pub async fn read_vigils(&self, agent: &AgentName) -> Result<Vec<String>, ClientError> {
        self.read_lines(|from, to| async move {
            let request = crate::hubd::vigils::ReadVigils {
                capability: self.cap(),
                agent: agent.to_string(),
                from,
                to,
            };
            let page: crate::hubd::vigils::VigilRange = self.call(Op::ReadVigils, request).await?;
            Ok((page.lines, page.len))
        })
        .await
    }

    /// Reads `agent`'s whole undo chain, page by page, with the tip its length belongs to.
    pub async fn read_undo(&self, agent: &AgentName) -> Result<UndoRange, ClientError> {
        let page = |from: u64| {
            self.read_undo_page(agent, from, from.saturating_add(record_format::PAGE_LINES))
        };
        'again: for _ in 0..3 {
            let mut read = page(0).await?;
            while (read.lines.len() as u64) < read.len {
                let next = page(read.lines.len() as u64).await?;
                if next.tip != read.tip {
                    continue 'again;
                }
                if next.lines.is_empty() {
                    return Err(ClientError::BadReply {
                        op: Op::ReadUndo.as_str(),
                        index: read.lines.len(),
                        reason: format!("no lines, though the chain holds {}", read.len),
                    });
                }
                read.lines.extend(next.lines);
            }
            return Ok(read);
        }
        Err(ClientError::BadReply {
            op: Op::ReadUndo.as_str(),
            index: 0,
            reason: format!("{agent}'s undo chain moved during each of 3 reads; read it again"),
        })
    }

    /// Hands over `letters` (stored letter lines) that office `office` carried here: the
    /// postman's duty.
    pub async fn deliver_airmail(
        &self,
        office: &str,
        letters: Vec<String>,
    ) -> Result<AirmailDelivered, ClientError> {
        self.call(
            Op::DeliverAirmail,
            DeliverAirmail {
                capability: self.cap(),
                office: office.to_owned(),
                letters,
            },
        )
        .await
    }

    /// Returns letters `office` bounced to their senders' inboxes (the postman's duty).
    pub async fn return_bounces(
        &self,
        office: &str,
        bounces: Vec<Returned>,
    ) -> Result<BouncesReturned, ClientError> {
        let request = ReturnBounces {
            capability: self.cap(),
            office: office.to_owned(),
            bounces,
        };
        self.call(Op::ReturnBounces, request).await
    }

    /// How far this hub's outboxes were carried to `office` (the postman's duty).
    pub async fn read_cursor(&self, office: &str) -> Result<Cursor, ClientError> {
        let request = ReadCursor {
            capability: self.cap(),
            office: office.to_owned(),
        };
        self.call(Op::ReadCursor, request).await
    }

    /// Moves `office`'s cursor to `positions` if it is still at `expected` (the postman's duty).
    pub async fn move_cursor(
        &self,
        office: &str,
        positions: std::collections::BTreeMap<String, u64>,
        expected: Option<&str>,
    ) -> Result<CursorMoved, ClientError> {
        let request = MoveCursor {
            capability: self.cap(),
            office: office.to_owned(),
            positions,
            expected: expected.map(str::to_owned),
        };
        self.call(Op::MoveCursor, request).await
    }

    /// Reads `agent`'s grant and budget account.
    pub async fn read_grant(&self, agent: &AgentName) -> Result<GrantView, ClientError> {
        self.call(
            Op::ReadGrant,
            ReadGrant {
                capability: self.cap(),
                agent: agent.to_string(),
            },
        )
        .await
    }

    /// Reads the hub's settings file and the commit holding it.
    pub async fn read_settings(&self) -> Result<SettingsView, ClientError> {
        self.call(
            Op::ReadSettings,
            ReadSettings {
                capability: self.cap(),
            },
        )
        .await
    }

    /// Replaces the hub's settings file, if it is still at `expected_tip`; humans only.
    pub async fn update_settings(
        &self,
        text: &str,
        expected_tip: &str,
    ) -> Result<SettingsUpdated, ClientError> {
        self.call(
            Op::UpdateSettings,
            UpdateSettings {
                capability: self.cap(),
                text: text.to_owned(),
                expected_tip: expected_tip.to_owned(),
            },
        )
        .await
    }

    /// Pins `blessing` for `agent`'s runs of its target; humans only.
    pub async fn bless(
        &self,
        agent: &AgentName,
        blessing: l3m_core::build::Blessing,
    ) -> Result<Blessed, ClientError> {
        let request = Bless {
            capability: self.cap(),
            agent: agent.clone(),
            blessing,
        };
        self.call(Op::Bless, request).await
    }

    /// What is pinned for `agent`'s `target`, if anything.
    pub async fn read_blessing(
        &self,
        agent: &AgentName,
        target: &str,
    ) -> Result<BlessingView, ClientError> {
        let request = ReadBlessing {
            capability: self.cap(),
            agent: agent.clone(),
            target: target.to_owned(),
        };
        self.call(Op::ReadBlessing, request).await
    }

    /// Replaces `agent`'s grant; only its issuer may, and never wider than the issuer's own.
    pub async fn regrant(
        &self,
        agent: &AgentName,
        grant: l3m_core::grant::Grant,
    ) -> Result<Regranted, ClientError> {
        self.call(
            Op::Regrant,
            Regrant {
                capability: self.cap(),
                agent: agent.to_string(),
                grant,
            },
        )
        .await
    }

    /// Asks hubd to spawn a child of this session's entity.
    pub async fn spawn(&self, request: SpawnRequest) -> Result<Spawned, ClientError> {
        self.call(
            Op::Spawn,
            Spawn {
                capability: self.cap(),
                request,
            },
        )
        .await
    }

    /// Retires `agent` and its whole subtree, deepest first.
    pub async fn retire(&self, agent: &AgentName) -> Result<Retired, ClientError> {
        self.call(
            Op::Retire,
            Retire {
                capability: self.cap(),
                agent: agent.to_string(),
            },
        )
        .await
    }

    /// Collects a retired agent's memory.
    pub async fn collect(&self, agent: &AgentName) -> Result<Collected, ClientError> {
        self.call(
            Op::Collect,
            Collect {
                capability: self.cap(),
                agent: agent.to_string(),
            },
        )
        .await
    }

    /// Lists every agent the ledger knows, with its computed state, page by page.
    pub async fn list_agents(&self) -> Result<AgentTree, ClientError> {
        let mut tree = AgentTree {
            agents: Vec::new(),
            next: None,
        };
        let mut after = None;
        loop {
            let page: AgentTree = self
                .call(
                    Op::ListAgents,
                    ListAgents {
                        capability: self.cap(),
                        after: after.take(),
                    },
                )
                .await?;
            let progress = !page.agents.is_empty();
            tree.agents.extend(page.agents);
            match page.next {
                // A page that brings nothing would be asked for again forever: stop instead.
                Some(next) if progress => after = Some(next),
                _ => return Ok(tree),
            }
        }
    }

    /// Lists every agent the ledger knows with its computed state and, when `tail` > 0, the
    /// record that says each stuck asleep agent is stuck (from its last `tail` records): one
    /// `hubd.list-tree` request per page of up to `TREE_PAGE_AGENTS` agents.
    pub async fn list_tree(&self, tail: u64) -> Result<crate::hubd::tree::TreePage, ClientError> {
        use crate::hubd::tree::{ListTree, TreePage};
        let mut tree = TreePage {
            agents: Vec::new(),
            stuck: Vec::new(),
            next: None,
        };
        let mut after = None;
        loop {
            let request = ListTree {
                capability: self.cap(),
                after: after.take(),
                tail,
            };
            let page: TreePage = self.call(Op::ListTree, request).await?;
            let progress = !page.agents.is_empty();
            tree.agents.extend(page.agents);
            tree.stuck.extend(page.stuck);
            match page.next {
                // A page that brings nothing would be asked for again forever: stop instead.
                Some(next) if progress => after = Some(next),
                _ => return Ok(tree),
            }
        }
    }

    /// Sends a letter from this session's entity to `to` (an address).
    pub async fn send_letter(
        &self,
        to: &str,
        subject: Option<&str>,
        body: &str,
    ) -> Result<LetterSent, ClientError> {
        self.send(to, subject, body, None).await
    }

    /// Answers the letter `answered` (one in this agent's own inbox) with a letter to `to`; the
    /// recipient sees it as a reply, which no hook answers automatically.
    pub async fn reply(
        &self,
        to: &str,
        answered: &str,
        body: &str,
    ) -> Result<LetterSent, ClientError> {
        self.send(to, None, body, Some(answered)).await
    }

    async fn send(
        &self,
        to: &str,
        subject: Option<&str>,
        body: &str,
        in_reply_to: Option<&str>,
    ) -> Result<LetterSent, ClientError> {
        self.call(
            Op::SendLetter,
            SendLetter {
                capability: self.cap(),
                to: to.to_owned(),
                subject: subject.map(str::to_owned),
                body: body.to_owned(),
                in_reply_to: in_reply_to.map(str::to_owned),
            },
        )
        .await
    }

    /// Reads `agent`'s inbox entries from index `from` on, page by page: hubd answers each read
    /// with as many lines as fit one message, so an inbox of any stored size reads back whole.
    pub async fn read_inbox(&self, agent: &AgentName, from: u64) -> Result<InboxRead, ClientError> {
        self.read_mail(Op::ReadInbox, agent, from).await
    }

    /// Reads `agent`'s outbox (the airmail it staged) from line `from`, page by page: the
    /// postman's read.
    pub async fn read_outbox(
        &self,
        agent: &AgentName,
        from: u64,
    ) -> Result<InboxRead, ClientError> {
        self.read_mail(Op::ReadOutbox, agent, from).await
    }

    /// An inbox or outbox from line `from`, page by page.
    async fn read_mail(
        &self,
        op: Op,
        agent: &AgentName,
        from: u64,
    ) -> Result<InboxRead, ClientError> {
        let mut read = self.read_mail_page(op, agent, from).await?;
        loop {
            let next = read.from + read.entries.len() as u64;
            if next >= read.len {
                break;
            }
            let page = self.read_mail_page(op, agent, next).await?;
            if page.entries.is_empty() {
                break;
            }
            read.len = page.len;
            read.entries.extend(page.entries);
        }
        Ok(read)
    }

    /// One page of `agent`'s inbox or outbox (`op`) from index `from`.
    async fn read_mail_page(
        &self,
        op: Op,
        agent: &AgentName,
        from: u64,
    ) -> Result<InboxRead, ClientError> {
        let (capability, agent) = (self.cap(), agent.to_string());
        let lines: crate::hubd::mail::InboxLines = match op {
            Op::ReadOutbox => {
                let request = crate::hubd::mail::ReadOutbox {
                    capability,
                    agent,
                    from,
                };
                self.call(op, request).await?
            }
            _ => {
                let request = ReadInbox {
                    capability,
                    agent,
                    from,
                };
                self.call(op, request).await?
            }
        };
        let entries = lines
            .entries
            .iter()
            .enumerate()
            .map(|(i, line)| {
                InboxEntry::from_line(line, i + 1).map_err(|e| ClientError::BadReply {
                    op: op.as_str(),
                    index: i,
                    reason: e.to_string(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(InboxRead {
            entries,
            from: lines.from,
            len: lines.len,
        })
    }

    /// Stages a letter for another hub on this agent's own outbox (the airmail axis).
    pub async fn stage_airmail(
        &self,
        to: &str,
        subject: Option<&str>,
        body: &str,
    ) -> Result<AirmailStaged, ClientError> {
        self.call(
            Op::StageAirmail,
            StageAirmail {
                capability: self.cap(),
                to: to.to_owned(),
                subject: subject.map(str::to_owned),
                body: body.to_owned(),
            },
        )
        .await
    }

    /// Marks `letter` read in this session's own inbox.
    pub async fn mark_read(&self, letter: &str) -> Result<MarkedRead, ClientError> {
        self.call(
            Op::MarkRead,
            MarkRead {
                capability: self.cap(),
                letter: letter.to_owned(),
            },
        )
        .await
    }

    /// Takes `agent`'s session lease for `ttl`, naming the holder.
    pub async fn acquire_lease(
        &self,
        agent: &AgentName,
        holder: &str,
        ttl: Duration,
    ) -> Result<LeaseHeld, ClientError> {
        self.call(
            Op::AcquireLease,
            AcquireLease {
                capability: self.cap(),
                agent: agent.to_string(),
                holder: holder.to_owned(),
                ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            },
        )
        .await
    }

    /// Renews the lease `token` on `agent`; a conflict means it was lost and the holder must
    /// stop.
    pub async fn renew_lease(
        &self,
        agent: &AgentName,
        token: u64,
    ) -> Result<LeaseHeld, ClientError> {
        self.call(
            Op::RenewLease,
            RenewLease {
                capability: self.cap(),
                agent: agent.to_string(),
                token,
            },
        )
        .await
    }

    /// Gives up the lease `token` on `agent`.
    pub async fn release_lease(
        &self,
        agent: &AgentName,
        token: u64,
    ) -> Result<LeaseReleased, ClientError> {
        self.call(
            Op::ReleaseLease,
            ReleaseLease {
                capability: self.cap(),
                agent: agent.to_string(),
                token,
            },
        )
        .await
    }

    /// Subscribes to the announcements of every ref of `agent` (its Log, inbox, grants, …).
    /// Each message is a [`RefMoved`](crate::hubd::notify::RefMoved) envelope.
    pub async fn watch(&self, agent: &AgentName) -> Result<MessageStream, ClientError> {
        let subject = self.subjects.ref_changes_of(agent);
        self.bus
            .subscribe(&subject)
            .await
            .map_err(|source| ClientError::Wire { subject, source })
    }
}

/// Opens a session: signs what is asked with `credential` and a fresh key, and derives the
/// session key from hubd's answer.
async fn handshake(
    bus: &Arc<dyn Bus>,
    subjects: &Subjects,
    credential: &KeyFile,
    duty: &Duty,
    timeout: Duration,
    limits: &Limits,
) -> Result<Arc<Keyed>, ClientError> {
    let ephemeral = Ephemeral::generate().map_err(|e| ClientError::Credential(e.to_string()))?;
    let request = OpenSession {
        credential: credential.id.to_string(),
        duty: duty.clone(),
        client_key: ephemeral.public,
        signature: credential.sign_open(subjects.hub().as_str(), duty, &ephemeral.public),
    };
    let subject = Op::OpenSession.subject(subjects);
    let opened: SessionOpened =
        crate::typed::call(bus.as_ref(), &subject, &request, timeout, limits)
            .await
            .map_err(|source| ClientError::Wire { subject, source })?
            .map_err(|error| ClientError::Refused {
                op: Op::OpenSession.as_str(),
                error,
            })?;
    if let Some(pinned) = &credential.hub_key {
        let statement = opened.statement(subjects.hub().as_str(), &ephemeral.public);
        match &opened.signature {
            None => return Err(ClientError::NotTheHub("unsigned")),
            Some(signature) if !crate::credential::verify(pinned, &statement, signature) => {
                return Err(ClientError::NotTheHub("signed by another key"));
            }
            Some(_) => {}
        }
    }
    Ok(Arc::new(Keyed {
        capability: opened.capability,
        key: ephemeral.with_hub(&opened.hub_key),
        next: AtomicU64::new(0),
        voucher_key: opened.voucher_key,
    }))
}

fn decode_lines(op: Op, lines: &[String]) -> Result<Vec<Record>, ClientError> {
    lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            record_format::from_line::<Record>(line, i + 1).map_err(|e| ClientError::BadReply {
                op: op.as_str(),
                index: i,
                reason: e.to_string(),
            })
        })
        .collect()
}

impl HubClient {
    /// Publishes `persona` upstream from `source` (a human's session only).
    pub async fn publish_persona(
        &self,
        persona: &l3m_core::names::PersonaName,
        source: crate::hubd::persona::PersonaSource,
    ) -> Result<crate::hubd::persona::PersonaPublished, ClientError> {
        self.call(
            Op::PublishPersona,
            crate::hubd::persona::PublishPersona {
                capability: self.cap(),
                persona: persona.to_string(),
                source,
            },
        )
        .await
    }

    /// Brings upstream changes of the persona `agent` wears into its persona branch.
    pub async fn pull_persona(
        &self,
        agent: &AgentName,
    ) -> Result<crate::hubd::persona::PersonaPulled, ClientError> {
        self.call(
            Op::PullPersona,
            crate::hubd::persona::PullPersona {
                capability: self.cap(),
                agent: agent.to_string(),
            },
        )
        .await
    }
}

impl HubClient {
    /// Registers a credential (a human's session only): its id, scope, public key and expiry.
    pub async fn issue_credential(
        &self,
        credential: &KeyFile,
        expires_ms: u64,
        label: &str,
    ) -> Result<l3m_core::credential::Credential, ClientError> {
        let issued: crate::hubd::credential::CredentialIssued = self
            .call(
                Op::IssueCredential,
                crate::hubd::credential::IssueCredential {
                    capability: self.cap(),
                    id: credential.id.to_string(),
                    scope: credential.scope.clone(),
                    key: credential.public_key().to_string(),
                    expires_ms,
                    label: label.to_owned(),
                },
            )
            .await?;
        Ok(issued.credential)
    }

    /// Revokes credential `id` and ends its sessions (a human's session only).
    pub async fn revoke_credential(
        &self,
        id: &str,
    ) -> Result<crate::hubd::credential::CredentialRevoked, ClientError> {
        self.call(
            Op::RevokeCredential,
            crate::hubd::credential::RevokeCredential {
                capability: self.cap(),
                id: id.to_owned(),
            },
        )
        .await
    }

    /// The hub's credentials, page by page (a human's session only): the live ones, or with
    /// `all` the revoked and expired ones too.
    pub async fn list_credentials(
        &self,
        all: bool,
    ) -> Result<Vec<l3m_core::credential::Credential>, ClientError> {
        let mut credentials = Vec::new();
        let mut after = None;
        loop {
            let page: crate::hubd::credential::Credentials = self
                .call(
                    Op::ListCredentials,
                    crate::hubd::credential::ListCredentials {
                        capability: self.cap(),
                        after: after.take(),
                        all,
                    },
                )
                .await?;
            credentials.extend(page.credentials);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(credentials),
            }
        }
    }
}
