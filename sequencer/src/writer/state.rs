//! The writer's state beside its configuration: what the Log says, what runs, and one pass's
//! buffer.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use l3m_core::log::{CallId, EventId, ToolUseId};
use l3m_core::log_rule::Journaled;
use l3m_core::owed::Owed;
use l3m_core::view::ViewFold;
use l3m_wire::control::ControlReply;
use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use crate::model::ModelRequest;

/// The Log as the writer knows it: core's folds of every record so far, the tip the next append
/// expects, and what the next model request is built from.
#[derive(Default)]
pub(crate) struct LogState {
    pub(crate) owed: Owed,
    pub(crate) fold: ViewFold,
    /// Whether a turn ended in a failure with no reply since: the owed call then gets one
    /// attempt per wake (core's [`Retries`](l3m_core::stuck::Retries)).
    pub(crate) retries: l3m_core::stuck::Retries,
    pub(crate) tip: Option<String>,
    /// Bytes of records journaled since the last call started: what the next call is charged.
    /// A fresh boot charges the next call nothing for the records read back.
    pub(super) charge: l3m_core::owed::CallCharge,
    /// Grant commit last journaled.
    pub(super) grants_commit: Option<String>,
    /// Oversized replies since the model last replied in bounds: the first is told to the model
    /// (so it can answer in smaller steps), a repeat is not, and the agent waits for its next
    /// wake instead of spending call after call.
    pub(super) oversized_in_a_row: u32,
    /// The last request sent, kept so the next one copies only what changed since.
    pub(super) sent: Option<Arc<ModelRequest>>,
    /// Whether the next request is built whole: a record since the last one reshaped the view
    /// (rewind, compaction, epoch), or the tools offered changed.
    pub(super) reshaped: bool,
    /// The defers whose decision is journaled and whose completion is not (`defer`).
    pub(super) defers: l3m_core::owed::OpenDefers,
}

/// The activities running now, so an interrupt can stop them and a late result is known stale.
#[derive(Default)]
pub(super) struct Running {
    /// Model calls, by id.
    pub(super) calls: HashMap<CallId, AbortHandle>,
    /// Tool uses running on blocking threads.
    pub(super) running_tools: HashSet<ToolUseId>,
    /// Wild uses the reviewer was asked about (each round is asked once).
    pub(super) asked: HashSet<ToolUseId>,
    /// Stalemates whose card was raised (or is being raised).
    pub(super) raised: HashSet<ToolUseId>,
    /// Events handed to the hook whose proposals have not come back.
    pub(super) hooking: HashSet<EventId>,
    /// Deferred programs running, by their decision's seq.
    pub(super) deferred: BTreeSet<u64>,
}

/// One pass's buffer: records staged and not yet appended, and what waits for that append.
#[derive(Default)]
pub(super) struct PassBuffer {
    /// Records staged in this pass, not yet appended: each fitted by the boundary.
    pub(super) staged: Vec<Journaled>,
    /// A record the boundary refused this pass (the sequencer's own logic, never content).
    pub(super) refused: Option<l3m_core::log_rule::Refused>,
    /// Letters to mark read once their events are appended.
    pub(super) to_mark: Vec<String>,
    /// Control replies to send once this pass's records are appended.
    pub(super) replies: Vec<(oneshot::Sender<ControlReply>, ControlReply)>,
    /// Rewinds to restore files for once appended.
    pub(super) rewinds: Vec<u64>,
    /// What journaled hook decisions ask the harness to do once appended.
    pub(super) carry: Vec<Carry>,
}

/// A hook decision's effect, carried out after the decision is appended (so a crash before
/// the append reruns the hook and never doubles the effect; one after it loses a reply,
/// forward or retire, which the Log still shows was decided, and closes a defer as failed).
#[derive(Debug, Clone)]
pub(super) enum Carry {
    /// A reply to the letter `answered`, to its sender.
    Reply {
        /// The sender.
        to: l3m_core::names::Entity,
        /// The letter answered.
        answered: String,
        /// What the hook wrote.
        text: String,
    },
    /// The letter's text, forwarded.
    Forward {
        /// Where to.
        to: l3m_core::names::Entity,
        /// The letter as the agent saw it.
        text: String,
    },
    /// A child whose completion the event told, retired.
    Retire(l3m_core::names::AgentName),
    /// A program a hook deferred the event to, run as the harness's own call of it (its
    /// completion is journaled, so a crash after the append never runs it twice: `defer`).
    Defer(super::defer::DeferRun),
}
