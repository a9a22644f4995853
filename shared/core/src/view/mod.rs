//! The view: what the model sees of a Log, as a pure fold over its records.
//!
//! A turn never edits a conversation; it appends records, and the conversation is recomputed
//! from them. Replay, `--continue`, rewind and fork are this same fold over different prefixes:
//! the view at seq `t` is `view(&records[..=t])`. A per-provider dialect renders the [`View`] on
//! the wire; nothing here knows a provider.
//!
//! # Rules
//! - **Epochs.** A `system-prompt` without `continues` starts a fresh conversation: the view
//!   shows only what follows it. With `continues` it only replaces the system text.
//! - **Rewinds are retracted.** Every seq names a state: the conversation just after that
//!   record. `rewind{to}` returns to the state named by `to`, and later records apply on top.
//!   This composes with nested rewinds, and rewinding *into* a span an earlier rewind retracted
//!   is well defined: the state named by a seq never changes, so such a rewind restores the
//!   conversation exactly as it was just after that record, retracted span and all (a redo).
//!   The rewind then settles that state, since nothing it was waiting for will come: its tool
//!   uses still without a result get a "rewound" result, and parts it held back for an open call
//!   show. So the view after `rewind{to: t}` is the view after `t` followed by `rewind{to: t}`.
//!   A rewind whose target names no earlier record of the slice lowers to nothing (a checked
//!   [`Log`](crate::log::Log) never holds one).
//! - **Compaction.** `compaction{from, to}` replaces one unbroken stretch of the current view by
//!   one text part holding the summary: from the first element that came from a record in
//!   `[from, to]` to the last one, widened so that a tool use and its results go together. In a
//!   view shown in record order that stretch is exactly what the span showed. Where the view
//!   shows something out of record order (a line that came while the model was answering, shown
//!   after the reply; an event shown when its decision came), what lies inside the stretch goes
//!   too, so the summary always stands for one stretch and the view keeps its shape (a view
//!   that ended with a user turn still does). A span with nothing visible adds nothing. The
//!   summary's own origin is the compaction record, so a later compaction can swallow it.
//! - **Narration.** Grant changes, budget changes that matter and shown events become neutral
//!   text parts of the next user turn, in record order, after that turn's tool results
//!   (providers want results first). A budget change matters when fuel was raised (a regrant, a
//!   new loan) or what is left is low or gone ([`budget_matters`]); the charge of an ordinary
//!   call is never narrated, so a session that never runs low reads no budget line. A letter
//!   is shown by a short stable id, `L` and its event's seq ([`letter_short_id`]), never by
//!   its 64-character id. An event is shown where its `hook-decision{show}` is journaled; an event with no
//!   decision yet is not shown. With no hook the sequencer journals the harness's own decision
//!   ([`Disposition::without_hook`](crate::log::Disposition::without_hook)), so every shown event
//!   has a decision a replay can read.
//! - **What arrives while the model is answering waits for its answer.** Between `call-started`
//!   and the call's reply, new text parts (lines, narration) are held back and shown after the
//!   reply, so the model never sees, before its own reply, a line it had not yet read, and the
//!   next call's view ends with that line. A `call-failed` or `interrupted` shows what was held
//!   in place (the retry reads it). Held parts are not visible, so a compaction leaves them be.
//! - **Bookkeeping lowers to nothing**: tool-call, tool-started, review, turn-end, out-of-fuel,
//!   token usage, stop reasons ([`lowers_to_nothing`]). `call-started`, `call-failed` and
//!   `interrupted` show nothing of their own; they only decide when held parts show and close
//!   tool uses, as above and below.
//! - **Pairing.** A tool result is shown only for a tool use of the last assistant message that
//!   has none yet. `interrupted` gives each tool use it closes a result saying so. A tool use
//!   still waiting when the next reply arrives gets a "no result was recorded" result; one left
//!   waiting by a rewind gets a "rewound" result. So the model never sees a tool use without
//!   exactly one result after it.
//! - Consecutive user parts merge into one user message; empty texts and empty replies are
//!   dropped (providers refuse them).
//!
//! # Layout
//! - this module: [`View`], [`view`], [`ViewFold`];
//! - `chain`: which state each record leaves the conversation in (rewinds, epochs);
//! - `conversation`: the fold state and how each record lowers into it;
//! - `economy`: what a view costs ([`TokenEstimate`], [`Window`]) and which oldest span a
//!   compaction summarizes ([`ViewFold::oldest_span`], [`summary_request`]);
//! - `narrate`: the harness's wording for what it tells the model.

use std::collections::HashMap;
use std::ops::RangeInclusive;

use serde::{Deserialize, Serialize};

use crate::budget::Fuel;
use crate::log::{Disposition, EventId, EventSource, Record, RecordBody, ToolUse, ToolUseId};

/// The conversation as the model sees it, before any provider's dialect renders it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct View {
    /// The system prompt in force.
    pub system: String,
    /// The turns, oldest first.
    pub messages: Vec<Message>,
}

/// One provider-neutral turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "kebab-case")]
pub enum Message {
    /// What reaches the model from its side of the table: lines, results, narration.
    User {
        /// The parts, tool results first.
        content: Vec<Part>,
    },
    /// What the model said.
    Assistant {
        /// Its text.
        text: String,
        /// The tools it asked to use.
        tool_uses: Vec<ToolUse>,
    },
}

/// One part of a user turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Part {
    /// Text: a user line, a summary, or the harness's narration.
    Text {
        /// The text.
        text: String,
    },
    /// The result of a tool use of the assistant message just before.
    ToolResult {
        /// The tool use answered.
        id: ToolUseId,
        /// What the model is shown.
        output: String,
        /// Whether the use failed, was refused or was interrupted.
        is_error: bool,
    },
}

/// Whether a record never changes the view, whatever precedes or follows it: the harness's
/// bookkeeping.
pub fn lowers_to_nothing(body: &RecordBody) -> bool {
    matches!(
        body,
        RecordBody::ToolCall { .. }
            | RecordBody::ToolStarted { .. }
            | RecordBody::Review { .. }
            | RecordBody::TurnEnd
            | RecordBody::OutOfFuel { .. }
    )
}

/// The view after all of `records` (a Log's records, from seq 0).
///
/// Computed without replaying retracted spans: the rewind chain is resolved first, then only the
/// records the final state is made of are folded.
pub fn view(records: &[Record]) -> View {
    let mut chain = Chain::default();
    for record in records {
        chain.push(record);
    }
    replay(&chain, chain.head(), |node| &records[chain.nodes[node].pos]).view
}

/// The view, kept up to date one record at a time, for the sequencer's passes.
///
/// Advancing over records gives exactly [`view`] of them. An ordinary record costs O(1)
/// amortized (plus its own size, which is kept for later rewinds); a rewind that changes the
/// state refolds the records the target state is made of, back to its epoch's start.
#[derive(Debug, Clone, Default)]
pub struct ViewFold {
    chain: Chain,
    /// The records that change the view, by node index, kept for rewinds.
    kept: Vec<Record>,
    now: Conversation,
}

impl ViewFold {
    /// A fold that has seen no records.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in the next record.
    pub fn advance(&mut self, record: &Record) {
        match self.chain.push(record) {
            Step::Inert => return,
            Step::Applied => {}
            Step::Refold(base) => {
                let kept = &self.kept;
                self.now = replay(&self.chain, base, |node| &kept[node]);
            }
        }
        self.kept.push(record.clone());
        self.now.apply(record.seq, &record.body);
    }

    /// The view after the records folded so far.
    pub fn view(&self) -> &View {
        &self.now.view
    }

    /// The view, by value.
    pub fn into_view(self) -> View {
        self.now.view
    }
}

mod chain;
mod conversation;
mod economy;
mod fit;
mod narrate;
#[cfg(test)]
mod tests;

use chain::{Chain, Step, replay};
use conversation::Conversation;
pub use economy::{
    MAX_BYTES_PER_TOKEN, OldestSpan, TokenEstimate, UNCALIBRATED_BYTES_PER_TOKEN, Window,
    message_bytes, summary_request, view_bytes,
};
pub use fit::{STUB_BYTES, fit_view, floor_bytes};
pub use narrate::{LOW_BYTES, LOW_CALLS, budget_matters, letter_short_id};
