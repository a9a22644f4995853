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
//! - **Narration.** Grant changes, budget changes and shown events become neutral text parts of
//!   the next user turn, in record order, after that turn's tool results (providers want results
//!   first). An event is shown where its `hook-decision{show}` is journaled; an event with no
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

/// One record that changed the view, and the state it was applied on.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// Its position among the records.
    pos: usize,
    /// The node whose state it was applied on; `None` for the empty conversation. For a rewind,
    /// the state its target names, so the retracted span is off the path.
    parent: Option<usize>,
    /// Whether it starts an epoch, so nothing before it matters.
    epoch: bool,
}

/// The rewind structure of the records: which state each record leaves the conversation in.
#[derive(Debug, Clone, Default)]
struct Chain {
    /// Per record position: its seq, and the node whose state the conversation is in after it.
    after: Vec<(u64, Option<usize>)>,
    /// The records that change the view.
    nodes: Vec<Node>,
}

/// What pushing one record did to the chain.
enum Step {
    /// Nothing changed.
    Inert,
    /// The record is a new node, applied on the current state.
    Applied,
    /// The record is a rewind to a state other than the current one: refold that state, then
    /// apply it.
    Refold(Option<usize>),
}

impl Chain {
    fn head(&self) -> Option<usize> {
        self.after.last().and_then(|(_, head)| *head)
    }

    fn push(&mut self, record: &Record) -> Step {
        let pos = self.after.len();
        let head = self.head();
        let (parent, step) = match &record.body {
            RecordBody::Rewind { to, .. } => match self.position_of(*to, pos) {
                Some(target) => {
                    let base = self.after[target].1;
                    let step = if base == head {
                        Step::Applied
                    } else {
                        Step::Refold(base)
                    };
                    (base, step)
                }
                None => {
                    self.after.push((record.seq, head));
                    return Step::Inert;
                }
            },
            body if lowers_to_nothing(body) => {
                self.after.push((record.seq, head));
                return Step::Inert;
            }
            _ => (head, Step::Applied),
        };
        let node = self.nodes.len();
        self.nodes.push(Node {
            pos,
            parent,
            epoch: matches!(
                record.body,
                RecordBody::SystemPrompt {
                    continues: false,
                    ..
                }
            ),
        });
        self.after.push((record.seq, Some(node)));
        step
    }

    /// The position of the record with seq `seq`, if it comes before position `before`.
    fn position_of(&self, seq: u64, before: usize) -> Option<usize> {
        let pos = usize::try_from(seq).ok().filter(|p| *p < before)?;
        (self.after[pos].0 == seq).then_some(pos)
    }
}

/// The conversation in the state named by `head`: its nodes folded from their epoch's start.
fn replay<'a>(
    chain: &Chain,
    head: Option<usize>,
    record_of: impl Fn(usize) -> &'a Record,
) -> Conversation {
    let mut path = Vec::new();
    let mut cursor = head;
    while let Some(node) = cursor {
        path.push(node);
        if chain.nodes[node].epoch {
            break;
        }
        cursor = chain.nodes[node].parent;
    }
    let mut conversation = Conversation::default();
    for &node in path.iter().rev() {
        let record = record_of(node);
        conversation.apply(record.seq, &record.body);
    }
    conversation
}

/// Where the elements of one message came from.
#[derive(Debug, Clone, Default)]
struct Origins {
    /// The seq each element came from: one per user part, one for an assistant message.
    seqs: Vec<u64>,
    /// The largest seq in this message or any before it. It never decreases along the
    /// messages, so a compaction finds by binary search where its span starts to show.
    peak: u64,
}

/// The fold state: the view, where each of its elements came from, and what is pending.
#[derive(Debug, Clone, Default)]
struct Conversation {
    view: View,
    /// Parallel to `view.messages`: where each message's elements came from.
    origins: Vec<Origins>,
    /// Tool uses of the last assistant message that have no result yet, in its order.
    awaiting: Vec<ToolUseId>,
    /// How many tool results lead the last message, when it is a user message.
    leading_results: usize,
    /// Events journaled and not yet decided: their seq and narration.
    undecided: HashMap<EventId, (u64, String)>,
    /// Whether a model call is open, so new text parts wait for its reply.
    holding: bool,
    /// Text parts that arrived while the call was open, with their origins.
    held: Vec<(u64, Part)>,
}

impl Conversation {
    fn apply(&mut self, seq: u64, body: &RecordBody) {
        match body {
            RecordBody::SystemPrompt {
                text,
                continues: true,
            } => self.view.system.clone_from(text),
            RecordBody::SystemPrompt { text, .. } => {
                *self = Self::default();
                self.view.system.clone_from(text);
            }
            RecordBody::UserLine { text, .. } => self.add_text(seq, text.clone()),
            RecordBody::AssistantReply {
                text, tool_uses, ..
            } => self.push_reply(seq, text, tool_uses),
            RecordBody::ToolResult {
                id,
                output,
                is_error,
                ..
            } => self.resolve(seq, id, output, *is_error),
            RecordBody::Interrupted {
                reason,
                closed_tools,
                ..
            } => {
                let output = narrate::interrupted(reason);
                for id in closed_tools {
                    self.resolve(seq, id, &output, true);
                }
                self.release();
            }
            RecordBody::CallStarted { .. } => self.holding = true,
            RecordBody::CallFailed { .. } => self.release(),
            RecordBody::Event { id, source, text } => {
                self.undecided
                    .insert(id.clone(), (seq, narrate::event(source, text)));
            }
            RecordBody::HookDecision { event, disposition } => {
                if let Some((origin, text)) = self.undecided.remove(event)
                    && *disposition == Disposition::Show
                {
                    self.add_text(origin, text);
                }
            }
            RecordBody::GrantChange { summary, .. } => {
                self.add_text(seq, narrate::grants(summary));
            }
            RecordBody::BudgetChange { left, summary } => {
                self.add_text(seq, narrate::budget(summary, left));
            }
            RecordBody::Compaction { from, to, summary } => {
                self.compact(seq, *from..=*to, summary);
            }
            // Applied on the state its target names (the chain sees to that): nothing that
            // state waited for will come, so its waiting tool uses are closed and what it held
            // back shows.
            RecordBody::Rewind { .. } => {
                self.close_awaiting(seq, narrate::REWOUND);
                self.release();
            }
            // Bookkeeping never reaches here (the chain skips it); it shows nothing anyway.
            RecordBody::ToolCall { .. }
            | RecordBody::ToolStarted { .. }
            | RecordBody::Review { .. }
            | RecordBody::TurnEnd
            | RecordBody::OutOfFuel { .. } => {}
        }
    }

    fn push_reply(&mut self, seq: u64, text: &str, tool_uses: &[ToolUse]) {
        self.close_awaiting(seq, narrate::NO_RESULT);
        if !text.is_empty() || !tool_uses.is_empty() {
            self.awaiting = tool_uses.iter().map(|u| u.id.clone()).collect();
            let message = Message::Assistant {
                text: text.to_owned(),
                tool_uses: tool_uses.to_vec(),
            };
            self.open_message(message, vec![seq]);
        }
        self.release();
    }

    /// Adds a text part to the next user turn, or holds it while a call is open.
    fn add_text(&mut self, origin: u64, text: String) {
        if self.holding {
            self.held.push((origin, text_part(text)));
        } else {
            self.push_part(origin, text_part(text));
        }
    }

    /// The open call is over: what waited for it shows now.
    fn release(&mut self) {
        self.holding = false;
        for (origin, part) in std::mem::take(&mut self.held) {
            self.push_part(origin, part);
        }
    }

    /// Shows the result of an awaited tool use; a result for anything else shows nothing.
    fn resolve(&mut self, seq: u64, id: &ToolUseId, output: &str, is_error: bool) {
        if let Some(i) = self.awaiting.iter().position(|a| a == id) {
            let id = self.awaiting.remove(i);
            self.push_result(seq, id, output, is_error);
        }
    }

    /// Gives every tool use still waiting the same result.
    fn close_awaiting(&mut self, seq: u64, output: &str) {
        for id in std::mem::take(&mut self.awaiting) {
            self.push_result(seq, id, output, true);
        }
    }

    /// Starts a new message.
    fn open_message(&mut self, message: Message, seqs: Vec<u64>) {
        let before = self.origins.last().map_or(0, |o| o.peak);
        let peak = seqs.iter().copied().fold(before, u64::max);
        self.view.messages.push(message);
        self.origins.push(Origins { seqs, peak });
        self.leading_results = self.last_leading_results();
    }

    /// The user turn being built and its origins, if the last message is a user message.
    fn last_user(&mut self) -> Option<(&mut Vec<Part>, &mut Origins)> {
        match (self.view.messages.last_mut(), self.origins.last_mut()) {
            (Some(Message::User { content }), Some(origins)) => Some((content, origins)),
            _ => None,
        }
    }

    /// Puts a result after the results already leading the user turn being built.
    fn push_result(&mut self, seq: u64, id: ToolUseId, output: &str, is_error: bool) {
        let part = Part::ToolResult {
            id,
            output: output.to_owned(),
            is_error,
        };
        let at = self.leading_results;
        if let Some((content, origins)) = self.last_user() {
            content.insert(at, part);
            origins.seqs.insert(at, seq);
            origins.peak = origins.peak.max(seq);
            self.leading_results += 1;
        } else {
            self.open_message(
                Message::User {
                    content: vec![part],
                },
                vec![seq],
            );
        }
    }

    /// Appends a part at the end of the user turn being built, starting one if needed.
    fn push_part(&mut self, origin: u64, part: Part) {
        if matches!(&part, Part::Text { text } if text.is_empty()) {
            return;
        }
        if let Some((content, origins)) = self.last_user() {
            content.push(part);
            origins.seqs.push(origin);
            origins.peak = origins.peak.max(origin);
        } else {
            self.open_message(
                Message::User {
                    content: vec![part],
                },
                vec![origin],
            );
        }
    }

    fn compact(&mut self, seq: u64, span: RangeInclusive<u64>, summary: &str) {
        let Some((from, to)) = self.stretch(&span) else {
            return;
        };
        let inside = |at: (usize, usize)| from <= at && at <= to;
        let last_assistant = self
            .view
            .messages
            .iter()
            .rposition(|m| matches!(m, Message::Assistant { .. }));
        if last_assistant.is_some_and(|i| inside((i, 0))) {
            self.awaiting.clear();
        }
        let messages = self.view.messages.split_off(from.0);
        let origins = self.origins.split_off(from.0);
        let mut summary = Some(text_part(narrate::summary(summary)));
        for (i, (message, origins)) in (from.0..).zip(messages.into_iter().zip(origins)) {
            match message {
                Message::Assistant { .. } if inside((i, 0)) => {
                    if let Some(part) = summary.take() {
                        self.push_part(seq, part);
                    }
                }
                Message::Assistant { .. } => self.open_message(message, origins.seqs),
                Message::User { content } => {
                    for (j, (part, origin)) in content.into_iter().zip(origins.seqs).enumerate() {
                        if !inside((i, j)) {
                            self.push_part(origin, part);
                        } else if let Some(part) = summary.take() {
                            self.push_part(seq, part);
                        }
                    }
                }
            }
        }
        self.leading_results = self.last_leading_results();
    }

    /// The stretch of the view a compaction of `span` replaces, as (message, part) positions:
    /// from the first element that came from the span to the last, widened so that a tool use
    /// and its results go together. `None` when nothing from the span shows.
    fn stretch(&self, span: &RangeInclusive<u64>) -> Option<((usize, usize), (usize, usize))> {
        // No message before the first whose peak reaches the span holds anything from it.
        let first_message = self.origins.partition_point(|o| o.peak < *span.start());
        let mut touched = self
            .origins
            .iter()
            .enumerate()
            .skip(first_message)
            .flat_map(|(i, o)| o.seqs.iter().enumerate().map(move |(j, s)| ((i, j), s)))
            .filter(|(_, s)| span.contains(s))
            .map(|(at, _)| at);
        let mut from = touched.next()?;
        let mut to = touched.next_back().unwrap_or(from);
        let results_of = |i: usize| match self.view.messages.get(i) {
            Some(Message::User { content }) => content
                .iter()
                .take_while(|p| matches!(p, Part::ToolResult { .. }))
                .count(),
            _ => 0,
        };
        // A result's tool use is in the assistant message just before its user message.
        if from.1 < results_of(from.0) && from.0 > 0 {
            from = (from.0 - 1, 0);
        }
        let end_message = &self.view.messages[to.0];
        if matches!(end_message, Message::Assistant { .. }) {
            if results_of(to.0 + 1) > 0 {
                to = (to.0 + 1, results_of(to.0 + 1) - 1);
            }
        } else if to.1 < results_of(to.0) {
            to.1 = results_of(to.0) - 1;
        }
        Some((from, to))
    }

    /// How many tool results lead the last message, if it is a user message.
    fn last_leading_results(&self) -> usize {
        match self.view.messages.last() {
            Some(Message::User { content }) => content
                .iter()
                .take_while(|p| matches!(p, Part::ToolResult { .. }))
                .count(),
            _ => 0,
        }
    }
}

fn text_part(text: String) -> Part {
    Part::Text { text }
}

/// The harness's neutral wording for what it tells the model.
mod narrate {
    use super::{EventSource, Fuel};

    pub const NO_RESULT: &str = "(l3m) no result was recorded for this tool use";
    pub const REWOUND: &str =
        "(l3m) the conversation was rewound to before this tool use finished; it was not run again";

    pub fn interrupted(reason: &str) -> String {
        format!("(l3m) interrupted before this tool use finished: {reason}")
    }

    pub fn event(source: &EventSource, text: &str) -> String {
        match source {
            EventSource::Letter { letter_id, from } => {
                format!("(l3m) letter {letter_id} from {from}: {text}")
            }
            EventSource::Vigil { vigil } => format!("(l3m) vigil {vigil} fired: {text}"),
            EventSource::ChildDone { child } => format!("(l3m) child {child} is done: {text}"),
            EventSource::ProgramDone { program } => {
                format!("(l3m) program {program} finished: {text}")
            }
            EventSource::Deadline => format!("(l3m) deadline reached: {text}"),
            EventSource::Notice => format!("(l3m) notice: {text}"),
        }
    }

    pub fn grants(summary: &str) -> String {
        format!("(l3m) your grants changed: {summary}")
    }

    pub fn budget(summary: &str, left: &Fuel) -> String {
        format!("(l3m) your budget changed: {summary} (left: {left})")
    }

    pub fn summary(summary: &str) -> String {
        format!("(l3m) summary of earlier conversation: {summary}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{CallId, EventId, Usage};
    use crate::names::Entity;

    fn records(bodies: Vec<RecordBody>) -> Vec<Record> {
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| Record {
                seq: i as u64,
                at_ms: 0,
                body,
            })
            .collect()
    }

    fn prompt(text: &str, continues: bool) -> RecordBody {
        RecordBody::SystemPrompt {
            text: text.into(),
            continues,
        }
    }

    fn line(text: &str) -> RecordBody {
        RecordBody::UserLine {
            from: Entity::parse("human:alice").unwrap(),
            text: text.into(),
        }
    }

    fn reply(text: &str, tools: &[&str]) -> RecordBody {
        RecordBody::AssistantReply {
            call: CallId::new("c").unwrap(),
            text: text.into(),
            tool_uses: tools
                .iter()
                .map(|t| ToolUse {
                    id: ToolUseId::new(*t).unwrap(),
                    name: "read".into(),
                    input: serde_json::Value::Null,
                })
                .collect(),
            usage: Usage::default(),
            stop_reason: "end_turn".into(),
        }
    }

    fn result(id: &str, output: &str) -> RecordBody {
        RecordBody::ToolResult {
            id: ToolUseId::new(id).unwrap(),
            output: output.into(),
            is_error: false,
            effects: vec![],
        }
    }

    fn text(t: &str) -> Part {
        Part::Text { text: t.into() }
    }

    fn res(id: &str, output: &str, is_error: bool) -> Part {
        Part::ToolResult {
            id: ToolUseId::new(id).unwrap(),
            output: output.into(),
            is_error,
        }
    }

    fn user(parts: Vec<Part>) -> Message {
        Message::User { content: parts }
    }

    fn fold_both(recs: &[Record]) -> View {
        let mut fold = ViewFold::new();
        for r in recs {
            fold.advance(r);
        }
        let full = view(recs);
        assert_eq!(fold.view(), &full);
        full
    }

    #[test]
    fn results_come_first_and_narration_travels_with_the_next_user_turn() {
        let recs = records(vec![
            prompt("p", false),
            line("go"),
            reply("reading", &["t1"]),
            RecordBody::GrantChange {
                summary: "net narrowed".into(),
                grants_commit: "c".into(),
            },
            result("t1", "body"),
        ]);
        let v = fold_both(&recs);
        assert_eq!(v.system, "p");
        assert_eq!(v.messages.len(), 3);
        assert_eq!(
            v.messages[2],
            user(vec![
                res("t1", "body", false),
                text("(l3m) your grants changed: net narrowed")
            ])
        );
    }

    #[test]
    fn an_event_shows_where_its_show_decision_is_and_not_otherwise() {
        let event = |id: &str| RecordBody::Event {
            id: EventId::new(id).unwrap(),
            source: EventSource::Deadline,
            text: id.into(),
        };
        let decide = |id: &str, disposition| RecordBody::HookDecision {
            event: EventId::new(id).unwrap(),
            disposition,
        };
        let recs = records(vec![
            prompt("p", false),
            event("e1"),
            event("e2"),
            event("e3"),
            decide("e2", Disposition::Dismiss),
            decide("e1", Disposition::Show),
            decide("e1", Disposition::Show),
        ]);
        let v = fold_both(&recs);
        assert_eq!(
            v.messages,
            vec![user(vec![text("(l3m) deadline reached: e1")])]
        );
    }

    #[test]
    fn interrupt_closes_waiting_uses_and_stale_results_show_nothing() {
        let recs = records(vec![
            prompt("p", false),
            line("go"),
            reply("", &["t1", "t2"]),
            result("t2", "two"),
            RecordBody::Interrupted {
                reason: "esc".into(),
                closed_call: None,
                closed_tools: vec![ToolUseId::new("t1").unwrap()],
            },
            result("t1", "late"),
            result("zz", "unknown"),
        ]);
        let v = fold_both(&recs);
        assert_eq!(
            v.messages[2],
            user(vec![
                res("t2", "two", false),
                res(
                    "t1",
                    "(l3m) interrupted before this tool use finished: esc",
                    true
                ),
            ])
        );
    }

    #[test]
    fn a_reply_closes_uses_still_waiting_and_empty_replies_are_dropped() {
        let recs = records(vec![
            prompt("p", false),
            reply("a", &["t1"]),
            reply("", &[]),
            reply("b", &[]),
        ]);
        let v = fold_both(&recs);
        assert_eq!(v.messages.len(), 3);
        assert_eq!(
            v.messages[1],
            user(vec![res("t1", narrate::NO_RESULT, true)])
        );
    }

    #[test]
    fn rewind_into_a_retracted_span_restores_that_point() {
        let recs = records(vec![
            prompt("p", false),
            line("a"),
            line("b"),
            RecordBody::Rewind {
                to: 1,
                reason: String::new(),
            },
            line("c"),
            RecordBody::Rewind {
                to: 2,
                reason: String::new(),
            },
        ]);
        assert_eq!(
            fold_both(&recs[..5]).messages,
            vec![user(vec![text("a"), text("c")])]
        );
        assert_eq!(fold_both(&recs), view(&recs[..3]));
    }

    #[test]
    fn a_rewind_settles_what_its_target_waited_for() {
        let recs = records(vec![
            prompt("p", false),
            line("go"),
            reply("", &["t1"]),
            result("t1", "r"),
            RecordBody::Rewind {
                to: 2,
                reason: String::new(),
            },
            line("again"),
        ]);
        let rewound = fold_both(&recs[..5]);
        assert_eq!(rewound.messages[..2], view(&recs[..3]).messages[..]);
        assert_eq!(
            rewound.messages[2],
            user(vec![res("t1", narrate::REWOUND, true)])
        );
        assert_eq!(
            fold_both(&recs).messages[2],
            user(vec![res("t1", narrate::REWOUND, true), text("again")])
        );
    }

    #[test]
    fn what_arrives_while_the_model_answers_shows_after_its_reply() {
        let started = || RecordBody::CallStarted {
            call: CallId::new("c").unwrap(),
            provider: "p".into(),
            model: "m".into(),
            attempt: 1,
            fallback_of: None,
        };
        let recs = records(vec![
            prompt("p", false),
            line("first"),
            started(),
            line("second"),
            reply("answer", &[]),
            started(),
            line("third"),
            RecordBody::CallFailed {
                call: CallId::new("c").unwrap(),
                error: "529".into(),
                retryable: true,
            },
        ]);
        assert_eq!(fold_both(&recs[..4]), view(&recs[..2]));
        let v = fold_both(&recs);
        assert_eq!(
            v.messages,
            vec![
                user(vec![text("first")]),
                Message::Assistant {
                    text: "answer".into(),
                    tool_uses: vec![]
                },
                user(vec![text("second"), text("third")]),
            ]
        );
    }

    #[test]
    fn epochs_cut_and_continue_keeps() {
        let recs = records(vec![
            prompt("p1", false),
            line("old"),
            prompt("p2", true),
            line("kept"),
            prompt("p3", false),
            line("new"),
        ]);
        assert_eq!(
            fold_both(&recs[..4]).messages,
            vec![user(vec![text("old"), text("kept")])]
        );
        let v = fold_both(&recs);
        assert_eq!(v.system, "p3");
        assert_eq!(v.messages, vec![user(vec![text("new")])]);
    }

    #[test]
    fn compaction_takes_pairs_together_and_keeps_order() {
        let recs = records(vec![
            prompt("p", false),
            line("one"),
            reply("a", &["t1"]),
            result("t1", "r"),
            line("two"),
            reply("b", &[]),
            line("three"),
            RecordBody::Compaction {
                from: 3,
                to: 4,
                summary: "S".into(),
            },
        ]);
        let v = fold_both(&recs);
        assert_eq!(
            v.messages,
            vec![
                user(vec![
                    text("one"),
                    text("(l3m) summary of earlier conversation: S")
                ]),
                Message::Assistant {
                    text: "b".into(),
                    tool_uses: vec![]
                },
                user(vec![text("three")]),
            ]
        );
        let nothing_visible = records(vec![
            prompt("p", false),
            line("x"),
            RecordBody::TurnEnd,
            RecordBody::Compaction {
                from: 2,
                to: 2,
                summary: "S".into(),
            },
        ]);
        assert_eq!(fold_both(&nothing_visible), view(&nothing_visible[..2]));
    }
}
