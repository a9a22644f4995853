//! The records of an agent's Log: one typed record per fact of its sessions.
//!
//! A Log is append-only. Its first record is the system prompt assembled at boot; after that come
//! user lines, model calls and their replies, tool admissions, starts and results, events and what
//! the hooks decided about them, grant and budget changes, reviews, rewinds, compactions,
//! interrupts and turn ends. Each record carries its `seq` (contiguous from 0 within one Log) and
//! the caller's clock reading `at_ms`; the body says which fact it is.
//!
//! Records are stored as versioned JSON lines (see [`crate::record_format`]), the body flattened
//! beside `seq` and `at_ms` and tagged by `kind`:
//! `{"v":1,"seq":3,"at_ms":1700000000000,"kind":"user-line","from":"human:alice","text":"hi"}`.
//!
//! What this module checks is what one record, or the order of records, can show on its own: seq
//! contiguity, a first record that is a system prompt, a rewind or compaction that points into the
//! past, a tool admission whose tier matches its footprint, a reply that does not repeat a tool
//! use id, ids that are non-empty single tokens. Whether a record is consistent with what is
//! open (a reply for a call that is not open, a result for a tool never started) is decided before
//! journaling by [`crate::owed::journal`]; the folds in [`crate::view`] and [`crate::owed`] stay
//! total over any records.

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::axis::Axis;
use crate::budget::Fuel;
use crate::effects::{EffectClass, Footprint, Tier};
use crate::names::{AgentName, Entity};
use crate::record_format::{self, LineError};
use crate::review::ReviewSpent;

fn one_round() -> u32 {
    1
}

/// Longest id accepted, in bytes. Provider ids are a few dozen bytes; the bound keeps a hostile
/// model from filling the Log with one id.
pub const MAX_ID_LEN: usize = 256;

macro_rules! record_id {
    ($(#[$doc:meta])* $ty:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $ty(String);

        impl $ty {
            /// Admits an id: non-empty, at most [`MAX_ID_LEN`] bytes, no whitespace or control
            /// characters.
            pub fn new(id: impl Into<String>) -> Result<Self, LogError> {
                let id = id.into();
                check_id($what, &id)?;
                Ok(Self(id))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// [`Self::new`] for text already borrowed, as the string form expects.
            fn parse(id: &str) -> Result<Self, LogError> {
                Self::new(id)
            }
        }

        crate::string_form!($ty, LogError, display);
    };
}

record_id!(
    /// Names one model call; chosen by the sequencer before the call is sent, so a retry with
    /// the same id is idempotent at the provider.
    CallId,
    "call id"
);
record_id!(
    /// Names one tool use, as the model's reply named it; pairs the use with its result.
    ToolUseId,
    "tool use id"
);
/// The most bytes of a tool use id that every provider takes back in the next request (OpenAI
/// refuses a `tool_calls[].id` longer than 40).
pub const MAX_WIRE_ID_LEN: usize = 40;

impl ToolUseId {
    /// Whether every provider takes this id back as it is: 1 to [`MAX_WIRE_ID_LEN`] ASCII
    /// letters, digits, `_` or `-` (Anthropic's pattern for `tool_use.id`, OpenAI's length).
    /// The journal gives a use whose id is not a fresh one ([`ToolUseId::at`]).
    pub fn is_wire_safe(&self) -> bool {
        self.0.len() <= MAX_WIRE_ID_LEN
            && (self.0.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    /// The id the harness gives the tool use at `position` of `call`'s reply when the
    /// provider's own is unusable, hostile or already used: `<call>-u<position>` (the call id's
    /// wire-safe characters, at most 24 of them), or `<call>-u<position>-<n>` for the `n`-th
    /// try. Wire-safe, and unique in a Log as call ids are.
    pub fn at(call: &CallId, position: usize, n: u32) -> ToolUseId {
        let call: String = (call.as_str().chars())
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .take(24)
            .collect();
        let call = if call.is_empty() { "l3m".into() } else { call };
        match n {
            0 => ToolUseId(format!("{call}-u{position}")),
            n => ToolUseId(format!("{call}-u{position}-{n}")),
        }
    }

    /// The id a provider's decoder gives a tool use whose own id cannot be one (empty, over
    /// [`MAX_ID_LEN`], holding whitespace or a control character), instead of failing the
    /// whole reply: never wire-safe, so the journal gives the use a fresh one.
    pub fn unusable() -> ToolUseId {
        ToolUseId("l3m:unusable-id".into())
    }
}

record_id!(
    /// Names one event (a letter, a vigil firing, ...), so its hook decision can point at it.
    EventId,
    "event id"
);

fn check_id(what: &'static str, id: &str) -> Result<(), LogError> {
    let reason = if id.is_empty() {
        "it is empty"
    } else if id.len() > MAX_ID_LEN {
        "it is longer than 256 bytes"
    } else if id.chars().any(|c| c.is_whitespace() || c.is_control()) {
        "it contains whitespace or a control character"
    } else {
        return Ok(());
    };
    Err(LogError::BadId {
        what,
        id: id.chars().take(80).collect(),
        reason,
    })
}

/// One fact of a session, numbered and timestamped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the Log, contiguous from 0. Rewinds and compactions name records by it.
    pub seq: u64,
    /// The caller's clock when the record was journaled, in milliseconds since the Unix epoch.
    /// Not checked for monotonicity: clocks differ between boots and hosts.
    pub at_ms: u64,
    /// Which fact this is.
    #[serde(flatten)]
    pub body: RecordBody,
}

#[cfg(test)]
impl Record {
    /// A record at `seq` stamped at time zero: the one fixture core's tests build records with.
    pub(crate) fn fixture(seq: u64, body: RecordBody) -> Self {
        Self {
            seq,
            at_ms: 0,
            body,
        }
    }
}

/// A tool use as the model proposed it in a reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUse {
    /// The model's id for this use; its result carries the same id.
    pub id: ToolUseId,
    /// The tool the model asked for, as offered to it.
    pub name: String,
    /// The arguments, as the model wrote them.
    pub input: serde_json::Value,
}

/// The provider's account of the tokens one reply cost. Kept as data; the view never shows it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed at the full rate.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
}

/// A tool result that is a refusal, as data: the boundary that refused and the grant axis it
/// refused on, so the demo, `l3m stats` and tests read fields instead of matching text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refusal {
    /// The refusing boundary, in the word its message names (`write-root`, `host`, `spawn`,
    /// `hub` for hubd's own gate, …).
    pub boundary: String,
    /// The grant axis the refusal is about, when it is about one (a widening spawn names the
    /// axis it widens; the net boundary, `net`).
    pub axis: Option<Axis>,
}

impl Refusal {
    /// A refusal by `boundary` on `axis`.
    pub fn new(boundary: &str, axis: Option<Axis>) -> Self {
        Refusal {
            boundary: boundary.to_owned(),
            axis,
        }
    }
}

/// One effect a finished tool reports, so rewind can find what to restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectNote {
    /// The class through which the effect went.
    pub class: EffectClass,
    /// What it touched: a path, a ref, a host, an inbox.
    pub target: String,
    /// The undo entry that restores it, when the class is undoable.
    pub undo: Option<String>,
}

/// Where an event came from. Each source carries what names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EventSource {
    /// A letter arrived in the agent's inbox.
    Letter {
        /// The letter's id in the inbox.
        letter_id: String,
        /// Its sender, as the host stamped it.
        from: Entity,
        /// The letter it answers, when it is a reply: a hook may never answer a reply
        /// automatically (`hooks::admit`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        in_reply_to: Option<String>,
    },
    /// A vigil the agent (or its parent) set has fired.
    Vigil {
        /// The vigil's name.
        vigil: String,
    },
    /// A child finished.
    ChildDone {
        /// The child.
        child: AgentName,
    },
    /// A sealed program a hook deferred work to has finished (DESIGN §6: with no hook, such a
    /// completion is closed rather than shown, and it may never defer again).
    ProgramDone {
        /// The program's name.
        program: String,
    },
    /// A deadline passed.
    Deadline,
    /// A notice from the harness itself (a persona update upstream, a lease about to lapse).
    Notice,
}

/// What a hook (or, with no hook, the harness) decided to do with an event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Disposition {
    /// Show the event to the model, as narration with the next user turn.
    Show,
    /// Handled; mark it read and show nothing.
    Dismiss,
    /// Leave it unread and show nothing.
    Ignore,
    /// Answer it automatically with a letter.
    Reply {
        /// The body of the reply.
        text: String,
    },
    /// Forward it to another entity.
    Forward {
        /// The recipient.
        to: Entity,
    },
    /// Hand the work to a sealed program.
    Defer {
        /// The program's name.
        program: String,
    },
    /// Retire the child the event is about.
    RetireChild {
        /// The child.
        child: AgentName,
    },
    /// Close it: nothing more will be done about it.
    Close,
}

impl Disposition {
    /// The harness's disposition when the agent has no admitted hook (the paper, §2.3): ordinary
    /// events are shown; a deferred program's completion is closed, so it cannot loop.
    pub fn without_hook(source: &EventSource) -> Disposition {
        match source {
            EventSource::ProgramDone { .. } => Disposition::Close,
            _ => Disposition::Show,
        }
    }
}

/// A reviewer's verdict on one round of deliberation over a wild tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Verdict {
    /// The call may run.
    Safe,
    /// The call may not run; the model is told why and what it could do instead.
    Unsafe {
        /// Why it is refused.
        reason: String,
        /// A safer way to reach the same end, if the reviewer sees one.
        alternative: Option<String>,
    },
    /// No decision yet: another round (or a human card) follows.
    Unclear {
        /// What the reviewer could not tell, or asks the proposer (shown to the model).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// The unit of fuel that ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FuelUnit {
    /// No model calls left.
    ModelCalls,
    /// No bytes left.
    Bytes,
    /// No wakes left.
    Wakes,
}

impl fmt::Display for FuelUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ModelCalls => "model-calls",
            Self::Bytes => "bytes",
            Self::Wakes => "wakes",
        })
    }
}

/// Which fact a record states. Every kind DESIGN §5 names has a typed variant, so no reader
/// ever recognises a record by its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum RecordBody {
    /// The system prompt. The Log's first record. Without `continues` it starts a new epoch: a
    /// fresh conversation in the same Log, and the view shows only the current epoch. With
    /// `continues` (`--continue`, a persona edit) it replaces the prompt and keeps the
    /// conversation.
    SystemPrompt {
        /// The assembled prompt.
        text: String,
        /// Whether the conversation so far carries on under the new prompt.
        #[serde(default)]
        continues: bool,
    },
    /// A line someone typed to the agent.
    UserLine {
        /// Who typed it.
        from: Entity,
        /// What they typed.
        text: String,
    },
    /// A model call, journaled before it is sent.
    CallStarted {
        /// The call's id.
        call: CallId,
        /// The provider it goes to.
        provider: String,
        /// The model asked.
        model: String,
        /// 1 for a first try; one more for each retry after a retryable failure.
        attempt: u32,
        /// The failed call this one replaces with another provider or model, if any.
        fallback_of: Option<CallId>,
    },
    /// The model's answer to a call.
    AssistantReply {
        /// The call answered.
        call: CallId,
        /// The reply's text.
        text: String,
        /// The tools the model asks to use, in its order.
        tool_uses: Vec<ToolUse>,
        /// What it cost.
        usage: Usage,
        /// The provider's stop reason, in the provider's words (`end_turn`, `tool_use`, ...).
        stop_reason: String,
    },
    /// A model call that ended without a reply.
    CallFailed {
        /// The call.
        call: CallId,
        /// What went wrong.
        error: String,
        /// Whether trying again may help (a timeout, a 529) or not (a 400).
        retryable: bool,
    },
    /// The harness admits a tool use: the tool is in the table, with this footprint and tier.
    /// A use the harness refuses (no such tool, an id already used) gets no `tool-call`; it gets
    /// a `tool-result` with `is_error` straight away, so it is still paired in the view.
    ToolCall {
        /// The tool use admitted.
        id: ToolUseId,
        /// The tool's name.
        name: String,
        /// Its tier, computed from `footprint` (checked on decode); a wild call is reviewed
        /// before it starts.
        tier: Tier,
        /// The effect classes its body uses.
        footprint: Footprint,
    },
    /// A tool activity is about to start. Journaled before it starts, so it starts once.
    ToolStarted {
        /// The tool use.
        id: ToolUseId,
    },
    /// A tool use's result: from the finished activity, or the harness's refusal.
    ToolResult {
        /// The tool use.
        id: ToolUseId,
        /// What the model is shown.
        output: String,
        /// Whether the use failed or was refused.
        is_error: bool,
        /// What it changed in the world, for rewind.
        effects: Vec<EffectNote>,
        /// Which boundary refused it and on which axis, when it is a refusal.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refusal: Option<Refusal>,
    },
    /// Something arrived for the agent from outside its conversation.
    Event {
        /// The event's id.
        id: EventId,
        /// Where it came from.
        source: EventSource,
        /// Its one-line rendering.
        text: String,
    },
    /// What the agent's hook decided about an event. A replay reads this instead of running
    /// the hook again.
    HookDecision {
        /// The event decided.
        event: EventId,
        /// The decision.
        disposition: Disposition,
    },
    /// The agent's grants changed.
    GrantChange {
        /// A one-line account of the change, for the model.
        summary: String,
        /// The grants ref commit now in force.
        grants_commit: String,
    },
    /// The agent's budget changed (a loan, a top-up, spend the sequencer accounted).
    BudgetChange {
        /// Fuel left after the change.
        left: Fuel,
        /// A one-line account of the change, for the model.
        summary: String,
    },
    /// One round of review of a wild tool call.
    Review {
        /// The tool use under review.
        call: ToolUseId,
        /// The round, from 1; the round after `of` is a human's answer at a card.
        round: u32,
        /// The rounds allowed before a stalemate, as configured when this round was asked
        /// (records written before the bound was journaled read as 1).
        #[serde(default = "one_round")]
        of: u32,
        /// The reviewer's verdict.
        verdict: Verdict,
        /// Who reviewed (a reviewer service or a human).
        by: String,
        /// What the round cost: the reviewer's model calls and the time it took.
        #[serde(default)]
        spent: ReviewSpent,
    },
    /// A boundary: the conversation resumes as it was just after record `to`.
    Rewind {
        /// The record whose aftermath the conversation returns to; before this record.
        to: u64,
        /// Why (who asked, to undo what).
        reason: String,
    },
    /// The span `[from, to]` stands in the view as `summary`.
    Compaction {
        /// First record summarized.
        from: u64,
        /// Last record summarized; before this record.
        to: u64,
        /// The summary the model sees instead.
        summary: String,
    },
    /// What was open was closed: by an interrupt, or at boot after a process died.
    Interrupted {
        /// Why.
        reason: String,
        /// The model call that was open, now closed without a reply.
        closed_call: Option<CallId>,
        /// The tool uses that had no result, now closed with an "interrupted" result.
        closed_tools: Vec<ToolUseId>,
    },
    /// The agent finished its turn and waits for what comes next.
    TurnEnd,
    /// The agent stopped because a unit of fuel ran out.
    OutOfFuel {
        /// The unit that ran out.
        unit: FuelUnit,
    },
}

impl RecordBody {
    /// The record's `kind`, as stored.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SystemPrompt { .. } => "system-prompt",
            Self::UserLine { .. } => "user-line",
            Self::CallStarted { .. } => "call-started",
            Self::AssistantReply { .. } => "assistant-reply",
            Self::CallFailed { .. } => "call-failed",
            Self::ToolCall { .. } => "tool-call",
            Self::ToolStarted { .. } => "tool-started",
            Self::ToolResult { .. } => "tool-result",
            Self::Event { .. } => "event",
            Self::HookDecision { .. } => "hook-decision",
            Self::GrantChange { .. } => "grant-change",
            Self::BudgetChange { .. } => "budget-change",
            Self::Review { .. } => "review",
            Self::Rewind { .. } => "rewind",
            Self::Compaction { .. } => "compaction",
            Self::Interrupted { .. } => "interrupted",
            Self::TurnEnd => "turn-end",
            Self::OutOfFuel { .. } => "out-of-fuel",
        }
    }

    /// Checks what the body can show on its own, given the seq it would be stored at.
    pub fn check(&self, seq: u64) -> Result<(), LogError> {
        match self {
            Self::Rewind { to, .. } if *to >= seq => Err(LogError::RewindNotBack { seq, to: *to }),
            Self::Compaction { from, to, .. } if from > to || *to >= seq => {
                Err(LogError::CompactionSpan {
                    seq,
                    from: *from,
                    to: *to,
                })
            }
            Self::ToolCall {
                id,
                tier,
                footprint,
                ..
            } if *tier != footprint.tier() => Err(LogError::TierMismatch {
                seq,
                id: id.clone(),
                recorded: *tier,
                computed: footprint.tier(),
            }),
            Self::AssistantReply { tool_uses, .. } => {
                let mut seen = HashSet::new();
                match tool_uses.iter().find(|u| !seen.insert(&u.id)) {
                    Some(dup) => Err(LogError::DuplicateToolUse {
                        seq,
                        id: dup.id.clone(),
                    }),
                    None => Ok(()),
                }
            }
            _ => Ok(()),
        }
    }
}

impl Record {
    /// Renders the record as one versioned JSON line.
    pub fn to_line(&self) -> Result<String, LogError> {
        Ok(record_format::to_line(self)?)
    }
}

/// A Log record that cannot be stored or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// A stored line is not a record (bad JSON, unknown kind, bad id, unknown version).
    #[error(transparent)]
    Line(#[from] LineError),
    /// A record's seq is not the next one.
    #[error("record has seq {found} but the Log expects {expected}; records are contiguous from 0")]
    OutOfOrder {
        /// The seq the Log expects.
        expected: u64,
        /// The seq the record carries.
        found: u64,
    },
    /// The first record is not a system prompt.
    #[error("a Log starts with its system-prompt record, not a {found} record")]
    FirstNotPrompt {
        /// The kind found first.
        found: &'static str,
    },
    /// A rewind that does not point back.
    #[error("rewind at seq {seq} targets seq {to}; a rewind must target an earlier record")]
    RewindNotBack {
        /// The rewind's own seq.
        seq: u64,
        /// Its target.
        to: u64,
    },
    /// A compaction whose span is empty or reaches past itself.
    #[error("compaction at seq {seq} spans [{from}, {to}]; it needs from <= to < {seq}")]
    CompactionSpan {
        /// The compaction's own seq.
        seq: u64,
        /// First record of the span.
        from: u64,
        /// Last record of the span.
        to: u64,
    },
    /// A tool admission whose tier does not follow from its footprint.
    #[error(
        "tool-call {id} at seq {seq} records tier {recorded} but its footprint is {computed}; \
         tiers are computed, never labelled"
    )]
    TierMismatch {
        /// The record's seq.
        seq: u64,
        /// The tool use.
        id: ToolUseId,
        /// The tier written.
        recorded: Tier,
        /// The tier the footprint gives.
        computed: Tier,
    },
    /// A reply that names one tool use id twice.
    #[error("assistant-reply at seq {seq} uses tool use id {id} twice")]
    DuplicateToolUse {
        /// The record's seq.
        seq: u64,
        /// The repeated id.
        id: ToolUseId,
    },
    /// An id that is not a non-empty single token.
    #[error("{what} {id:?} is not valid: {reason}")]
    BadId {
        /// Which kind of id.
        what: &'static str,
        /// The id (its first 80 characters).
        id: String,
        /// The rule it broke.
        reason: &'static str,
    },
}

/// An agent's Log: records in seq order, each checked as it is added.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Log {
    records: Vec<Record>,
}

impl Log {
    /// An empty Log, awaiting its system prompt.
    pub fn new() -> Self {
        Self::default()
    }

    /// The seq the next record must carry.
    pub fn next_seq(&self) -> u64 {
        self.records.len() as u64
    }

    /// The records, in seq order.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Adds a record after checking its seq and body.
    pub fn push(&mut self, record: Record) -> Result<(), LogError> {
        let expected = self.next_seq();
        if record.seq != expected {
            return Err(LogError::OutOfOrder {
                expected,
                found: record.seq,
            });
        }
        if expected == 0 && !matches!(record.body, RecordBody::SystemPrompt { .. }) {
            return Err(LogError::FirstNotPrompt {
                found: record.body.kind(),
            });
        }
        record.body.check(record.seq)?;
        self.records.push(record);
        Ok(())
    }

    /// Adds `body` as the next record, stamped `at_ms`, and returns it.
    pub fn append(&mut self, at_ms: u64, body: RecordBody) -> Result<&Record, LogError> {
        let seq = self.next_seq();
        self.push(Record { seq, at_ms, body })?;
        Ok(&self.records[self.records.len() - 1])
    }

    /// Reads a Log stored as JSON lines, checking every record as [`Log::push`] does.
    pub fn decode(blob: &str) -> Result<Self, LogError> {
        let mut log = Self::new();
        for record in record_format::from_lines::<Record>(blob)? {
            log.push(record)?;
        }
        Ok(log)
    }

    /// Renders the Log as JSON lines, one record per line.
    pub fn encode(&self) -> Result<String, LogError> {
        Ok(record_format::to_lines(&self.records)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt() -> RecordBody {
        RecordBody::SystemPrompt {
            text: "be brief".into(),
            continues: false,
        }
    }

    fn id(s: &str) -> ToolUseId {
        ToolUseId::new(s).unwrap()
    }

    #[test]
    fn round_trips_every_kind_as_json_lines() {
        let call = CallId::new("c1").unwrap();
        let bodies = vec![
            prompt(),
            RecordBody::UserLine {
                from: Entity::parse("human:alice").unwrap(),
                text: "hello\nthere".into(),
            },
            RecordBody::CallStarted {
                call: call.clone(),
                provider: "anthropic".into(),
                model: "m".into(),
                attempt: 1,
                fallback_of: None,
            },
            RecordBody::AssistantReply {
                call: call.clone(),
                text: "ok".into(),
                tool_uses: vec![ToolUse {
                    id: id("t1"),
                    name: "read".into(),
                    input: serde_json::json!({"path": "a", "n": 3}),
                }],
                usage: Usage {
                    input_tokens: 10,
                    ..Usage::default()
                },
                stop_reason: "tool_use".into(),
            },
            RecordBody::ToolCall {
                id: id("t1"),
                name: "read".into(),
                tier: Tier::Tame,
                footprint: Footprint::of([EffectClass::FsRead]),
            },
            RecordBody::ToolStarted { id: id("t1") },
            RecordBody::ToolResult {
                id: id("t1"),
                output: "text".into(),
                is_error: false,
                effects: vec![EffectNote {
                    class: EffectClass::FsWrite,
                    target: "a".into(),
                    undo: Some("u1".into()),
                }],
                refusal: None,
            },
            RecordBody::CallFailed {
                call,
                error: "529".into(),
                retryable: true,
            },
            RecordBody::Event {
                id: EventId::new("e1").unwrap(),
                source: EventSource::Letter {
                    letter_id: "l1".into(),
                    from: Entity::parse("alice/main").unwrap(),
                    in_reply_to: Some("l0".into()),
                },
                text: "a letter".into(),
            },
            RecordBody::HookDecision {
                event: EventId::new("e1").unwrap(),
                disposition: Disposition::RetireChild {
                    child: AgentName::parse("alice/main/w").unwrap(),
                },
            },
            RecordBody::GrantChange {
                summary: "net narrowed".into(),
                grants_commit: "abc".into(),
            },
            RecordBody::BudgetChange {
                left: Fuel::ZERO,
                summary: "spent".into(),
            },
            RecordBody::Review {
                call: id("t1"),
                round: 1,
                of: 2,
                verdict: Verdict::Unsafe {
                    reason: "r".into(),
                    alternative: None,
                },
                by: "svc:reviewer".into(),
                spent: ReviewSpent::default(),
            },
            RecordBody::Rewind {
                to: 1,
                reason: "undo".into(),
            },
            RecordBody::Compaction {
                from: 1,
                to: 2,
                summary: "s".into(),
            },
            RecordBody::Interrupted {
                reason: "esc".into(),
                closed_call: None,
                closed_tools: vec![id("t1")],
            },
            RecordBody::TurnEnd,
            RecordBody::OutOfFuel {
                unit: FuelUnit::ModelCalls,
            },
        ];
        let mut log = Log::new();
        for (i, body) in bodies.into_iter().enumerate() {
            log.append(i as u64 * 10, body).unwrap();
        }
        let blob = log.encode().unwrap();
        assert_eq!(blob.lines().count(), log.records().len());
        assert!(blob.contains(r#""kind":"turn-end""#));
        assert_eq!(Log::decode(&blob).unwrap(), log);
    }

    #[test]
    fn refuses_out_of_order_and_a_first_record_that_is_not_the_prompt() {
        let mut log = Log::new();
        let err = log.append(0, RecordBody::TurnEnd).unwrap_err();
        assert_eq!(err, LogError::FirstNotPrompt { found: "turn-end" });
        log.append(0, prompt()).unwrap();
        let err = log
            .push(Record {
                seq: 5,
                at_ms: 0,
                body: RecordBody::TurnEnd,
            })
            .unwrap_err();
        assert_eq!(
            err,
            LogError::OutOfOrder {
                expected: 1,
                found: 5
            }
        );
    }

    #[test]
    fn refuses_rewinds_and_compactions_that_do_not_point_back() {
        let mut log = Log::new();
        log.append(0, prompt()).unwrap();
        let rewind = RecordBody::Rewind {
            to: 1,
            reason: String::new(),
        };
        assert_eq!(
            log.append(0, rewind).unwrap_err(),
            LogError::RewindNotBack { seq: 1, to: 1 }
        );
        for (from, to) in [(0, 1), (1, 0)] {
            let body = RecordBody::Compaction {
                from,
                to,
                summary: String::new(),
            };
            assert_eq!(
                log.append(0, body).unwrap_err(),
                LogError::CompactionSpan { seq: 1, from, to }
            );
        }
        assert_eq!(log.next_seq(), 1);
    }

    #[test]
    fn refuses_a_labelled_tier_and_a_repeated_tool_use() {
        let mut log = Log::new();
        log.append(0, prompt()).unwrap();
        let err = log
            .append(
                0,
                RecordBody::ToolCall {
                    id: id("t"),
                    name: "sh".into(),
                    tier: Tier::Tame,
                    footprint: Footprint::of([EffectClass::Shell]),
                },
            )
            .unwrap_err();
        assert!(matches!(
            err,
            LogError::TierMismatch {
                recorded: Tier::Tame,
                computed: Tier::Wild,
                ..
            }
        ));
        let uses = ["t", "t"].map(|t| ToolUse {
            id: id(t),
            name: "read".into(),
            input: serde_json::Value::Null,
        });
        let err = log
            .append(
                0,
                RecordBody::AssistantReply {
                    call: CallId::new("c").unwrap(),
                    text: String::new(),
                    tool_uses: uses.to_vec(),
                    usage: Usage::default(),
                    stop_reason: "tool_use".into(),
                },
            )
            .unwrap_err();
        assert_eq!(
            err,
            LogError::DuplicateToolUse {
                seq: 1,
                id: id("t")
            }
        );
    }

    #[test]
    fn refuses_bad_ids_and_bad_lines_on_decode() {
        assert!(matches!(
            CallId::new(""),
            Err(LogError::BadId {
                reason: "it is empty",
                ..
            })
        ));
        assert!(ToolUseId::new("a b").is_err());
        assert!(EventId::new("x".repeat(MAX_ID_LEN + 1)).is_err());
        let line = r#"{"v":1,"seq":0,"at_ms":0,"kind":"tool-started","id":""}"#;
        assert!(matches!(
            Log::decode(line),
            Err(LogError::Line(LineError::Malformed { line: 1, .. }))
        ));
        let unknown = r#"{"v":1,"seq":0,"at_ms":0,"kind":"teleport"}"#;
        assert!(matches!(Log::decode(unknown), Err(LogError::Line(_))));
        let gap = format!(
            "{}\n{}\n",
            r#"{"v":1,"seq":0,"at_ms":0,"kind":"system-prompt","text":"p"}"#,
            r#"{"v":1,"seq":2,"at_ms":0,"kind":"turn-end"}"#
        );
        assert_eq!(
            Log::decode(&gap).unwrap_err(),
            LogError::OutOfOrder {
                expected: 1,
                found: 2
            }
        );
    }

    #[test]
    fn without_a_hook_events_show_and_program_completions_close() {
        assert_eq!(
            Disposition::without_hook(&EventSource::Deadline),
            Disposition::Show
        );
        let done = EventSource::ProgramDone {
            program: "p".into(),
        };
        assert_eq!(Disposition::without_hook(&done), Disposition::Close);
    }
}
