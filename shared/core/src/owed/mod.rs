//! What is owed now: the fold from a Log to the sequencer's duties, and the pure steps it takes.
//!
//! The sequencer is a thin shell around three functions over an [`Owed`] state:
//! 1. [`journal`] turns each signal from its queue into records consistent with the Log, or
//!    refuses it with a typed [`Stale`] reason (a reply for a call that is not open, a result
//!    for a tool never started) so that nothing inconsistent is ever journaled;
//! 2. [`plan`] says which records to journal now: admissions and starts of tools, the one owed
//!    model call, the end of the turn;
//! 3. [`close_open`] closes whatever is open. Interrupt calls it, and boot calls
//!    [`close_at_boot`], which is the same but for a wild call at a stalemate: its card outlives
//!    the process, so it keeps waiting for its human (`boot_close_eq_interrupt_close`). There is
//!    no separate resume procedure.
//!
//! Every record is appended (by compare-and-swap) before the activity it authorizes starts, so
//! [`Owed`] is also what a fresh process reads back: at most one call is open and it is the last
//! call started (`open_call_is_last_call`), and each tool use starts at most once (`start_once`).
//!
//! # The life of a tool use
//! A reply names it (*proposed*). [`plan`] admits it with `tool-call` if the tool table has it,
//! or answers it at once with an error `tool-result` (no such tool, an id already used). A tame
//! admitted use is started (`tool-started`) in the same plan once no other use runs and every
//! earlier use of the reply has its result (one at a time, in the reply's order); a wild one
//! waits for `review` rounds: `safe` lets it start, `unsafe` gets it an error result carrying
//! the reason and the alternative, `unclear` keeps it waiting. When the last use of a reply has its result, a model
//! call is owed.
//!
//! A mistake the model can correct (arguments that are not a JSON object — a provider hands
//! arguments it could not parse on as the JSON string the model wrote —, an unknown tool, a
//! repeated id; the tool itself refuses arguments that break its schema) is answered with an
//! error result the model sees on its next call, up to [`MAX_CORRECTIONS`] per turn.
//!
//! # When a model call is owed
//! After a user line, a shown event, or all tool results of a reply; never while a call is open,
//! a tool use is unresolved, or an event awaits its hook decision. A retryable failure owes the
//! call again (attempt + 1, up to the caller's limit, after which the turn ends). Fuel: the
//! `left` of the last `budget-change`, less one model call per call started (or compaction
//! summarized) since; with no model
//! calls or no bytes left the agent stops with `out-of-fuel`. Interrupts, rewinds, turn ends,
//! out-of-fuel and a new epoch end the turn: nothing more is owed until new input. A rewind and
//! a new epoch also drop what the old conversation was waiting for (unstarted tool uses,
//! undecided events), as the view does; running tools and an open call are activities in the
//! world and stay until closed (a journaled rewind closes them first).
//!
//! # Layout
//! - this module: the fold ([`Owed`] and what it answers);
//! - `journal`: [`journal`], [`Stale`], [`Signal`], [`close_open`], [`close_at_boot`];
//! - `plan`: [`plan`], [`PlanInput`], [`Footprints`].

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::budget::Fuel;
use crate::effects::{Footprint, Tier};
use crate::log::{
    CallId, Disposition, EffectNote, EventId, EventSource, FuelUnit, Record, RecordBody, Refusal,
    ToolUse, ToolUseId, Usage, Verdict,
};
use crate::names::Entity;
use crate::review::{Conclusion, EarlierRound, Effect, ReviewSpent, conclude, split_justification};

/// The model call that is open, or the one whose retryable failure is owed a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenCall {
    /// Its id.
    pub id: CallId,
    /// The provider it went to.
    pub provider: String,
    /// The model asked.
    pub model: String,
    /// Its attempt number, from 1.
    pub attempt: u32,
}

/// How far an unstarted tool use has got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// Named in a reply; neither admitted nor refused yet.
    Proposed,
    /// Admitted with this tier: a tame use may start, a wild one waits for review.
    Admitted {
        /// The tier its footprint gives.
        tier: Tier,
    },
    /// A wild use reviewed safe (by the reviewer, or by a human at its card): it may start.
    Approved,
    /// A wild use the review did not approve (redirected, returned for another round, denied
    /// at its card): it gets an error result saying so instead of running.
    Answered(Conclusion),
    /// A wild use not approved at the last round: it waits for a human's answer at its card.
    Stalemate {
        /// The reviewer's last reason.
        reason: String,
    },
}

/// A tool use of the latest reply that has not started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingTool {
    /// The use's id.
    pub id: ToolUseId,
    /// The tool it names.
    pub name: String,
    /// How far it has got.
    pub stage: Stage,
}

impl PendingTool {
    /// Whether it waits at a stalemate for a human's answer at its card.
    pub fn at_stalemate(&self) -> bool {
        matches!(self.stage, Stage::Stalemate { .. })
    }
}

/// An event journaled without a hook decision yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided {
    /// The event.
    pub id: EventId,
    /// Where it came from: what the hook decides by.
    pub source: EventSource,
    /// Its one-line rendering, which the hook may read too.
    pub text: String,
}

/// What the Log says is open and owed. Fold it with [`Owed::apply`] or [`Owed::from_records`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Owed {
    next_seq: u64,
    now: Now,
    seen: Seen,
    /// What this Log has spent; a rewind gives none of it back.
    spent: Fuel,
    /// Whether the last record was a `call-started` (its `budget-change` follows it).
    after_call: bool,
}

/// The part of the state that changes turn by turn; small, so [`plan`] can work on a copy.
#[derive(Debug, Clone, Default, PartialEq)]
struct Now {
    open: Option<OpenCall>,
    last_call: Option<CallId>,
    retry: Option<OpenCall>,
    pending: Vec<PendingTool>,
    running: Vec<ToolUseId>,
    wants_call: bool,
    live: bool,
    undecided: Vec<Undecided>,
    fuel: Option<Fuel>,
    /// The latest reply's tool uses, whole (their inputs are what a started tool runs with).
    uses: Vec<ToolUse>,
    /// The earlier rounds of each wild use of the latest reply that continues a deliberation.
    earlier: HashMap<ToolUseId, Vec<EarlierRound>>,
    /// A deliberation returned to the model: proposing the same call again (same key) in the
    /// next reply continues it; anything else withdraws it.
    returned: Option<(String, Vec<EarlierRound>)>,
    /// Mistaken tool uses answered with an error this turn ([`is_mistake`]); past
    /// [`MAX_CORRECTIONS`] the turn ends instead of asking the model again.
    mistakes: u32,
}

/// Every id the Log has used, so none is used twice.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Seen {
    calls: HashSet<CallId>,
    tool_uses: HashSet<ToolUseId>,
    started: HashSet<ToolUseId>,
    events: HashSet<EventId>,
}

impl Owed {
    /// The state after `records`.
    pub fn from_records(records: &[Record]) -> Self {
        let mut owed = Self::default();
        for record in records {
            owed.apply(record);
        }
        owed
    }

    /// Folds in the next record.
    pub fn apply(&mut self, record: &Record) {
        match &record.body {
            // A compaction's summary is a model call too, and is charged as one.
            RecordBody::CallStarted { .. } | RecordBody::Compaction { .. } => {
                self.spent.model_calls = self.spent.model_calls.saturating_add(1);
            }
            RecordBody::BudgetChange { left, .. } if self.after_call => {
                if let Some(before) = self.now.fuel {
                    let charged = before.bytes.saturating_sub(left.bytes);
                    self.spent.bytes = self.spent.bytes.saturating_add(charged);
                }
            }
            _ => {}
        }
        self.after_call = matches!(record.body, RecordBody::CallStarted { .. });
        self.next_seq = record.seq.saturating_add(1);
        self.seen.note(&record.body);
        self.now.apply(&record.body);
    }

    /// Whether the Log ever journaled the event `id` (a rewind does not forget it), so an
    /// input already taken in is not taken again.
    pub fn has_event(&self, id: &EventId) -> bool {
        self.seen.events.contains(id)
    }

    /// The seq the next record will carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The model call that is open, if any.
    pub fn open_call(&self) -> Option<&OpenCall> {
        self.now.open.as_ref()
    }

    /// The last model call started.
    pub fn last_call(&self) -> Option<&CallId> {
        self.now.last_call.as_ref()
    }

    /// The call whose retryable failure is owed a retry, if any.
    pub fn retrying(&self) -> Option<&OpenCall> {
        self.now.retry.as_ref()
    }

    /// Tool uses of the latest reply that have not started, in the reply's order.
    pub fn pending(&self) -> &[PendingTool] {
        &self.now.pending
    }

    /// Wild tool uses waiting for a reviewer's verdict: the sequencer asks the reviewer.
    pub fn awaiting_review(&self) -> impl Iterator<Item = &ToolUseId> {
        self.now.pending.iter().filter_map(|t| match t.stage {
            Stage::Admitted { tier: Tier::Wild } => Some(&t.id),
            _ => None,
        })
    }

    /// The review round wild tool use `id` is in: 1, or one more than the rounds of the
    /// deliberation it continues.
    pub fn review_round(&self, id: &ToolUseId) -> u32 {
        let earlier = self.earlier_rounds(id).len();
        u32::try_from(earlier).map_or(u32::MAX, |n| n.saturating_add(1))
    }

    /// The rounds before this one of the deliberation wild tool use `id` continues.
    pub fn earlier_rounds(&self, id: &ToolUseId) -> &[EarlierRound] {
        self.now.earlier.get(id).map_or(&[], Vec::as_slice)
    }

    /// Wild tool uses at a stalemate, with the reviewer's last reason: each waits for a human's
    /// answer at its card.
    pub fn stalemates(&self) -> impl Iterator<Item = (&ToolUseId, &str)> {
        self.now.pending.iter().filter_map(|t| match &t.stage {
            Stage::Stalemate { reason } => Some((&t.id, reason.as_str())),
            _ => None,
        })
    }

    /// Whether the only open work waits on a wild call at a stalemate: the turn waits for a
    /// human's answer at its card and for nothing the sequencer does, so it may sleep; the
    /// answer wakes it (`boot` keeps such calls waiting: [`close_at_boot`]). Uses after the
    /// first unresolved one wait for it (they run in the reply's order), so a stalemate first
    /// holds them all.
    pub fn waits_only_on_cards(&self) -> bool {
        let now = &self.now;
        now.open.is_none()
            && now.running.is_empty()
            && now.undecided.is_empty()
            && now.pending.first().is_some_and(PendingTool::at_stalemate)
            && !now.pending.iter().any(|t| {
                matches!(
                    t.stage,
                    Stage::Proposed | Stage::Admitted { tier: Tier::Wild }
                )
            })
    }

    /// Tool uses started and not finished.
    pub fn running(&self) -> &[ToolUseId] {
        &self.now.running
    }

    /// Events journaled without a hook decision yet, with where each came from: the sequencer
    /// runs the hook on each. A rewind retracts them with the conversation.
    pub fn undecided_events(&self) -> &[Undecided] {
        &self.now.undecided
    }

    /// Whether a turn is under way (something came in and the turn has not ended).
    pub fn is_live(&self) -> bool {
        self.now.live
    }

    /// Whether a model call is owed now (before fuel and attempt limits, which [`plan`] applies).
    pub fn call_owed(&self) -> bool {
        self.now.call_owed()
    }

    /// Whether the turn is over and its `turn-end` is owed.
    pub fn turn_end_owed(&self) -> bool {
        self.now.turn_end_owed()
    }

    /// What this Log has spent: one model call per `call-started` and per `compaction` (its
    /// summary was a model call), and the bytes charged with
    /// it (the drop in bytes left from the budget change before to the one journaled with the
    /// call). Rewinds give nothing back: what was spent was spent.
    pub fn spent(&self) -> Fuel {
        self.spent
    }

    /// The fuel left as the Log says: the last `budget-change`, less the calls started since.
    /// `None` before any budget was journaled.
    pub fn fuel_left(&self) -> Option<Fuel> {
        self.now.fuel
    }

    /// Tool use `id` of the latest reply, whole; `None` once a rewind or a fresh prompt
    /// retracted that reply.
    pub fn tool_use(&self, id: &ToolUseId) -> Option<&ToolUse> {
        self.now.uses.iter().find(|u| u.id == *id)
    }

    /// The unit of fuel that would stop a model call now, if any.
    pub fn fuel_short(&self) -> Option<FuelUnit> {
        self.now.fuel_short()
    }
}

impl Now {
    fn unresolved(&self) -> bool {
        !self.pending.is_empty() || !self.running.is_empty()
    }

    fn call_owed(&self) -> bool {
        self.open.is_none() && self.wants_call && !self.unresolved() && self.undecided.is_empty()
    }

    fn turn_end_owed(&self) -> bool {
        self.live
            && self.open.is_none()
            && !self.wants_call
            && !self.unresolved()
            && self.undecided.is_empty()
    }

    fn fuel_short(&self) -> Option<FuelUnit> {
        let fuel = self.fuel?;
        if fuel.model_calls == 0 {
            Some(FuelUnit::ModelCalls)
        } else if fuel.bytes == 0 {
            Some(FuelUnit::Bytes)
        } else {
            None
        }
    }

    /// Nothing more is owed until new input.
    fn end_turn(&mut self) {
        self.live = false;
        self.wants_call = false;
        self.retry = None;
    }

    /// New input: the model is owed a call, from a first attempt, with its corrections anew.
    fn input(&mut self) {
        self.live = true;
        self.wants_call = true;
        self.retry = None;
        self.mistakes = 0;
    }

    fn resolve(&mut self, id: &ToolUseId) {
        let before = self.pending.len() + self.running.len();
        self.pending.retain(|t| t.id != *id);
        self.running.retain(|r| r != id);
        let resolved = self.pending.len() + self.running.len() < before;
        if resolved && !self.unresolved() && self.live {
            self.wants_call = true;
        }
    }

    /// Folds in one round's verdict for wild use `id`: a reviewer's round while it waits for
    /// review, a human's answer while it is at a stalemate.
    fn reviewed(&mut self, id: &ToolUseId, round: u32, of: u32, verdict: &Verdict) {
        let justification = (self.uses.iter())
            .find(|u| u.id == *id)
            .and_then(|u| split_justification(&u.input).ok())
            .map(|(text, _)| text)
            .unwrap_or_default();
        let key = (self.uses.iter())
            .find(|u| u.id == *id)
            .map(|u| Effect::key(&u.name, &u.input));
        let Some(tool) = self.pending.iter_mut().find(|t| t.id == *id) else {
            return;
        };
        let waiting = match tool.stage {
            Stage::Admitted { tier: Tier::Wild } => round <= of,
            Stage::Stalemate { .. } => round > of,
            _ => false,
        };
        if !waiting {
            return;
        }
        let conclusion = conclude(round, of, verdict);
        tool.stage = match conclusion {
            Conclusion::Approved => Stage::Approved,
            Conclusion::Stalemate { reason } => Stage::Stalemate { reason },
            other => Stage::Answered(other),
        };
        if let (Stage::Answered(Conclusion::Returned { .. }), Some(key)) = (&tool.stage, key) {
            let mut earlier = self.earlier.get(id).cloned().unwrap_or_default();
            earlier.push(EarlierRound {
                round,
                justification,
                verdict: verdict.clone(),
            });
            self.returned = Some((key, earlier));
        }
    }

    /// A wild use closed (a crash, an interrupt) while it waited for a later round keeps its
    /// deliberation: proposing the same call again resumes at that round, from the Log.
    fn keep_deliberation(&mut self, closed: &[ToolUseId]) {
        let waiting = self
            .pending
            .iter()
            .find(|t| closed.contains(&t.id) && t.stage == (Stage::Admitted { tier: Tier::Wild }));
        let Some(id) = waiting.map(|t| t.id.clone()) else {
            return;
        };
        let key = (self.uses.iter())
            .find(|u| u.id == id)
            .map(|u| Effect::key(&u.name, &u.input));
        if let (Some(key), Some(earlier)) = (key, self.earlier.get(&id).filter(|e| !e.is_empty())) {
            self.returned = Some((key, earlier.clone()));
        }
    }

    /// The arguments of tool use `id` of the latest reply.
    fn input_of(&self, id: &ToolUseId) -> Option<&serde_json::Value> {
        self.uses.iter().find(|u| u.id == *id).map(|u| &u.input)
    }

    fn pending_mut(&mut self, id: &ToolUseId) -> Option<&mut PendingTool> {
        self.pending.iter_mut().find(|t| t.id == *id)
    }

    fn apply(&mut self, body: &RecordBody) {
        match body {
            RecordBody::SystemPrompt {
                continues: false, ..
            } => {
                self.end_turn();
                self.pending.clear();
                self.uses.clear();
                self.undecided.clear();
                self.earlier.clear();
                self.returned = None;
            }
            RecordBody::UserLine { .. } => self.input(),
            RecordBody::CallStarted {
                call,
                provider,
                model,
                attempt,
                ..
            } => {
                self.open = Some(OpenCall {
                    id: call.clone(),
                    provider: provider.clone(),
                    model: model.clone(),
                    attempt: *attempt,
                });
                self.last_call = Some(call.clone());
                self.wants_call = false;
                self.retry = None;
                self.live = true;
                if let Some(fuel) = &mut self.fuel {
                    fuel.model_calls = fuel.model_calls.saturating_sub(1);
                }
            }
            RecordBody::AssistantReply {
                call, tool_uses, ..
            } => {
                if self.open.as_ref().is_some_and(|o| o.id == *call) {
                    self.open = None;
                }
                self.pending = tool_uses
                    .iter()
                    .map(|u| PendingTool {
                        id: u.id.clone(),
                        name: u.name.clone(),
                        stage: Stage::Proposed,
                    })
                    .collect();
                self.uses = tool_uses.clone();
                self.earlier.clear();
                if let Some((key, earlier)) = self.returned.take()
                    && let Some(again) =
                        (tool_uses.iter()).find(|u| Effect::key(&u.name, &u.input) == key)
                {
                    self.earlier.insert(again.id.clone(), earlier);
                }
            }
            RecordBody::CallFailed {
                call, retryable, ..
            } => {
                if self.open.as_ref().is_some_and(|o| o.id == *call) {
                    let failed = self.open.take();
                    if *retryable {
                        self.retry = failed;
                        self.wants_call = true;
                    }
                }
            }
            RecordBody::ToolCall { id, tier, .. } => {
                if let Some(tool) = self.pending_mut(id)
                    && tool.stage == Stage::Proposed
                {
                    tool.stage = Stage::Admitted { tier: *tier };
                }
            }
            RecordBody::Review {
                call,
                round,
                of,
                verdict,
                ..
            } => self.reviewed(call, *round, *of, verdict),
            RecordBody::ToolStarted { id } => {
                self.pending.retain(|t| t.id != *id);
                if !self.running.contains(id) {
                    self.running.push(id.clone());
                }
            }
            RecordBody::ToolResult { id, refusal, .. } => {
                if refusal.as_ref().is_some_and(is_mistake) {
                    self.mistakes = self.mistakes.saturating_add(1);
                }
                self.resolve(id);
            }
            RecordBody::Event { id, source, text } => {
                if !self.undecided.iter().any(|u| u.id == *id) {
                    self.undecided.push(Undecided {
                        id: id.clone(),
                        source: source.clone(),
                        text: text.clone(),
                    });
                }
            }
            RecordBody::HookDecision { event, disposition } => {
                if let Some(i) = self.undecided.iter().position(|u| u.id == *event) {
                    self.undecided.remove(i);
                    if *disposition == Disposition::Show {
                        self.input();
                    }
                }
            }
            RecordBody::BudgetChange { left, .. } => self.fuel = Some(*left),
            // The retracted conversation's unstarted tool uses and undecided events go with it
            // (a letter stays in the inbox; only its notice here is retracted).
            RecordBody::Rewind { .. } => {
                self.end_turn();
                self.pending.clear();
                self.uses.clear();
                self.undecided.clear();
                self.earlier.clear();
                self.returned = None;
            }
            RecordBody::Interrupted {
                closed_call,
                closed_tools,
                ..
            } => {
                if self.open.as_ref().map(|o| &o.id) == closed_call.as_ref() {
                    self.open = None;
                }
                self.keep_deliberation(closed_tools);
                self.pending.retain(|t| !closed_tools.contains(&t.id));
                self.running.retain(|r| !closed_tools.contains(r));
                // Only a boot leaves a stalemate open ([`close_at_boot`]): the turn goes on
                // around it, and its answer owes the model a call like any result.
                if !self.pending.iter().any(PendingTool::at_stalemate) {
                    self.end_turn();
                }
            }
            RecordBody::TurnEnd | RecordBody::OutOfFuel { .. } => self.end_turn(),
            RecordBody::Compaction { .. } => {
                if let Some(fuel) = &mut self.fuel {
                    fuel.model_calls = fuel.model_calls.saturating_sub(1);
                }
            }
            RecordBody::SystemPrompt { .. } | RecordBody::GrantChange { .. } => {}
        }
    }
}

/// How many mistaken tool uses ([`is_mistake`]) one turn may answer with an error and still ask
/// the model again, so it can correct them; past it the turn ends (a model that keeps
/// sending bad calls stops spending fuel).
pub const MAX_CORRECTIONS: u32 = 4;

/// The boundaries whose refusal is a mistake the model can correct by calling again: arguments
/// that are not a JSON object or break the tool's schema (`tool-arguments`), a tool not
/// offered (`tool-table`), a tool use id already used (`tool-use-id`).
pub const MISTAKE_BOUNDARIES: [&str; 3] = ["tool-arguments", "tool-table", "tool-use-id"];

/// Whether `refusal` answers a mistake the model can correct ([`MISTAKE_BOUNDARIES`]).
pub fn is_mistake(refusal: &Refusal) -> bool {
    MISTAKE_BOUNDARIES.contains(&refusal.boundary.as_str())
}

impl Seen {
    fn note(&mut self, body: &RecordBody) {
        match body {
            RecordBody::CallStarted { call, .. } => {
                self.calls.insert(call.clone());
            }
            RecordBody::AssistantReply { tool_uses, .. } => {
                self.tool_uses
                    .extend(tool_uses.iter().map(|u| u.id.clone()));
            }
            RecordBody::ToolStarted { id } => {
                self.started.insert(id.clone());
            }
            RecordBody::Event { id, .. } => {
                self.events.insert(id.clone());
            }
            _ => {}
        }
    }
}

mod charge;
mod defers;
mod journal;
mod plan;
#[cfg(test)]
mod tests;

pub use charge::CallCharge;
pub use defers::{OpenDefer, OpenDefers, completion_id, fold_defers};
pub use journal::{NEW_EPOCH, Signal, Stale, close_at_boot, close_open, fork_log, journal};
pub use plan::{Footprints, PlanInput, plan};
