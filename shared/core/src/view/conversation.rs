//! The fold state: the view, where each of its elements came from, and what is pending.

use super::*;

/// Where the elements of one message came from.
#[derive(Debug, Clone, Default)]
pub(super) struct Origins {
    /// The seq each element came from: one per user part, one for an assistant message.
    pub(super) seqs: Vec<u64>,
    /// The largest seq in this message or any before it. It never decreases along the
    /// messages, so a compaction finds by binary search where its span starts to show.
    pub(super) peak: u64,
}

/// The fold state: the view, where each of its elements came from, and what is pending.
#[derive(Debug, Clone, Default)]
pub(super) struct Conversation {
    pub(super) view: View,
    /// Parallel to `view.messages`: where each message's elements came from.
    pub(super) origins: Vec<Origins>,
    /// Tool uses of the last assistant message that have no result yet, in its order.
    pub(super) awaiting: Vec<ToolUseId>,
    /// How many tool results lead the last message, when it is a user message.
    pub(super) leading_results: usize,
    /// Events journaled and not yet decided: their seq and narration.
    pub(super) undecided: HashMap<EventId, (u64, String)>,
    /// Whether a model call is open, so new text parts wait for its reply.
    pub(super) holding: bool,
    /// Text parts that arrived while the call was open, with their origins.
    pub(super) held: Vec<(u64, Part)>,
    /// The fuel left as the last budget change said, so the next is narrated only if it
    /// matters ([`narrate::budget_matters`]).
    pub(super) fuel: Option<Fuel>,
}

impl Conversation {
    pub(super) fn apply(&mut self, seq: u64, body: &RecordBody) {
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
                    .insert(id.clone(), (seq, narrate::event(seq, source, text)));
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
                if narrate::budget_matters(self.fuel.as_ref(), left) {
                    self.add_text(seq, narrate::budget(summary, left));
                }
                self.fuel = Some(*left);
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

    pub(super) fn push_reply(&mut self, seq: u64, text: &str, tool_uses: &[ToolUse]) {
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
    pub(super) fn add_text(&mut self, origin: u64, text: String) {
        if self.holding {
            self.held.push((origin, text_part(text)));
        } else {
            self.push_part(origin, text_part(text));
        }
    }

    /// The open call is over: what waited for it shows now.
    pub(super) fn release(&mut self) {
        self.holding = false;
        for (origin, part) in std::mem::take(&mut self.held) {
            self.push_part(origin, part);
        }
    }

    /// Shows the result of an awaited tool use; a result for anything else shows nothing.
    pub(super) fn resolve(&mut self, seq: u64, id: &ToolUseId, output: &str, is_error: bool) {
        if let Some(i) = self.awaiting.iter().position(|a| a == id) {
            let id = self.awaiting.remove(i);
            self.push_result(seq, id, output, is_error);
        }
    }

    /// Gives every tool use still waiting the same result.
    pub(super) fn close_awaiting(&mut self, seq: u64, output: &str) {
        for id in std::mem::take(&mut self.awaiting) {
            self.push_result(seq, id, output, true);
        }
    }

    /// Starts a new message.
    pub(super) fn open_message(&mut self, message: Message, seqs: Vec<u64>) {
        let before = self.origins.last().map_or(0, |o| o.peak);
        let peak = seqs.iter().copied().fold(before, u64::max);
        self.view.messages.push(message);
        self.origins.push(Origins { seqs, peak });
        self.leading_results = self.last_leading_results();
    }

    /// The user turn being built and its origins, if the last message is a user message.
    pub(super) fn last_user(&mut self) -> Option<(&mut Vec<Part>, &mut Origins)> {
        match (self.view.messages.last_mut(), self.origins.last_mut()) {
            (Some(Message::User { content }), Some(origins)) => Some((content, origins)),
            _ => None,
        }
    }

    /// Puts a result after the results already leading the user turn being built.
    pub(super) fn push_result(&mut self, seq: u64, id: ToolUseId, output: &str, is_error: bool) {
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
    pub(super) fn push_part(&mut self, origin: u64, part: Part) {
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

    pub(super) fn compact(&mut self, seq: u64, span: RangeInclusive<u64>, summary: &str) {
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
    pub(super) fn stretch(
        &self,
        span: &RangeInclusive<u64>,
    ) -> Option<((usize, usize), (usize, usize))> {
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
    pub(super) fn last_leading_results(&self) -> usize {
        match self.view.messages.last() {
            Some(Message::User { content }) => content
                .iter()
                .take_while(|p| matches!(p, Part::ToolResult { .. }))
                .count(),
            _ => 0,
        }
    }
}

pub(super) fn text_part(text: String) -> Part {
    Part::Text { text }
}
