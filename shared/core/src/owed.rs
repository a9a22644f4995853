//! What is owed now: the fold from a Log to the sequencer's duties, and the pure steps it takes.
//!
//! The sequencer is a thin shell around three functions over an [`Owed`] state:
//! 1. [`journal`] turns each signal from its queue into records consistent with the Log, or
//!    refuses it with a typed [`Stale`] reason (a reply for a call that is not open, a result
//!    for a tool never started) so that nothing inconsistent is ever journaled;
//! 2. [`plan`] says which records to journal now: admissions and starts of tools, the one owed
//!    model call, the end of the turn;
//! 3. [`close_open`] closes whatever is open. Boot and interrupt both call it, so booting after a
//!    crash closes exactly what an interrupt would (`boot_close_eq_interrupt_close`), and there
//!    is no separate resume procedure.
//!
//! Every record is appended (by compare-and-swap) before the activity it authorizes starts, so
//! [`Owed`] is also what a fresh process reads back: at most one call is open and it is the last
//! call started (`open_call_is_last_call`), and each tool use starts at most once (`start_once`).
//!
//! # The life of a tool use
//! A reply names it (*proposed*). [`plan`] admits it with `tool-call` if the tool table has it,
//! or answers it at once with an error `tool-result` (no such tool, an id already used). A tame
//! admitted use is started (`tool-started`) in the same plan; a wild one waits for `review`
//! rounds: `safe` lets it start, `unsafe` gets it an error result carrying the reason and the
//! alternative, `unclear` keeps it waiting. When the last use of a reply has its result, a model
//! call is owed.
//!
//! # When a model call is owed
//! After a user line, a shown event, or all tool results of a reply; never while a call is open,
//! a tool use is unresolved, or an event awaits its hook decision. A retryable failure owes the
//! call again (attempt + 1, up to the caller's limit, after which the turn ends). Fuel: the
//! `left` of the last `budget-change`, less one model call per call started since; with no model
//! calls or no bytes left the agent stops with `out-of-fuel`. Interrupts, rewinds, turn ends,
//! out-of-fuel and a new epoch end the turn: nothing more is owed until new input. A rewind and
//! a new epoch also drop what the old conversation was waiting for (unstarted tool uses,
//! undecided events), as the view does; running tools and an open call are activities in the
//! world and stay until closed (a journaled rewind closes them first).

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::budget::Fuel;
use crate::effects::{Footprint, Tier};
use crate::log::{
    CallId, Disposition, EffectNote, EventId, EventSource, FuelUnit, Record, RecordBody, ToolUse,
    ToolUseId, Usage, Verdict,
};
use crate::names::Entity;

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
    /// A wild use reviewed safe: it may start.
    Approved,
    /// A wild use reviewed unsafe: it gets an error result instead of running.
    Declined {
        /// The reviewer's reason.
        reason: String,
        /// The reviewer's alternative, if any.
        alternative: Option<String>,
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

/// An event journaled without a hook decision yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided {
    /// The event.
    pub id: EventId,
    /// Where it came from: what the hook decides by.
    pub source: EventSource,
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
            RecordBody::CallStarted { .. } => {
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

    /// What this Log has spent: one model call per `call-started`, and the bytes charged with
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

    /// New input: the model is owed a call, from a first attempt.
    fn input(&mut self) {
        self.live = true;
        self.wants_call = true;
        self.retry = None;
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
            RecordBody::Review { call, verdict, .. } => {
                if let Some(tool) = self.pending_mut(call)
                    && tool.stage == (Stage::Admitted { tier: Tier::Wild })
                {
                    match verdict {
                        Verdict::Safe => tool.stage = Stage::Approved,
                        Verdict::Unsafe {
                            reason,
                            alternative,
                        } => {
                            tool.stage = Stage::Declined {
                                reason: reason.clone(),
                                alternative: alternative.clone(),
                            }
                        }
                        Verdict::Unclear => {}
                    }
                }
            }
            RecordBody::ToolStarted { id } => {
                self.pending.retain(|t| t.id != *id);
                if !self.running.contains(id) {
                    self.running.push(id.clone());
                }
            }
            RecordBody::ToolResult { id, .. } => self.resolve(id),
            RecordBody::Event { id, source, .. } => {
                if !self.undecided.iter().any(|u| u.id == *id) {
                    self.undecided.push(Undecided {
                        id: id.clone(),
                        source: source.clone(),
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
            }
            RecordBody::Interrupted {
                closed_call,
                closed_tools,
                ..
            } => {
                if self.open.as_ref().map(|o| &o.id) == closed_call.as_ref() {
                    self.open = None;
                }
                self.pending.retain(|t| !closed_tools.contains(&t.id));
                self.running.retain(|r| !closed_tools.contains(r));
                self.end_turn();
            }
            RecordBody::TurnEnd | RecordBody::OutOfFuel { .. } => self.end_turn(),
            RecordBody::SystemPrompt { .. }
            | RecordBody::GrantChange { .. }
            | RecordBody::Compaction { .. } => {}
        }
    }
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

/// A signal refused: journaling it would make the Log inconsistent. Nothing is journaled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Stale {
    /// A reply or failure for a call that is not the open one (late, duplicated, or invented).
    #[error("call {call} is not open (open call: {open:?}); its reply or failure is dropped")]
    CallNotOpen {
        /// The call the signal names.
        call: CallId,
        /// The call that is open, if any.
        open: Option<CallId>,
    },
    /// A result for a tool use that was never started.
    #[error("tool use {id} was never started; its result is dropped")]
    ToolNotStarted {
        /// The tool use.
        id: ToolUseId,
    },
    /// A second result, or a result after an interrupt closed the use.
    #[error("tool use {id} already has its result (finished or closed by an interrupt)")]
    ToolAlreadyClosed {
        /// The tool use.
        id: ToolUseId,
    },
    /// An event whose id the Log already holds.
    #[error("event {id} was already journaled")]
    DuplicateEvent {
        /// The event.
        id: EventId,
    },
    /// A hook decision for an event that is not waiting for one.
    #[error("event {event} is not waiting for a decision (unknown, or already decided)")]
    EventNotUndecided {
        /// The event.
        event: EventId,
    },
    /// A verdict for a tool use that is not a wild call waiting for review.
    #[error("tool use {tool} is not a wild call waiting for review")]
    NotUnderReview {
        /// The tool use.
        tool: ToolUseId,
    },
    /// A compaction span that is empty or reaches past the Log.
    #[error("compaction span [{from}, {to}] is not within the Log's records 0..{next_seq}")]
    SpanOutOfLog {
        /// First record of the span.
        from: u64,
        /// Last record of the span.
        to: u64,
        /// The Log's next seq.
        next_seq: u64,
    },
    /// A rewind to a record the Log does not hold.
    #[error("rewind target {to} is not a record of the Log (next seq {next_seq})")]
    RewindOutOfLog {
        /// The target.
        to: u64,
        /// The Log's next seq.
        next_seq: u64,
    },
    /// The fresh call id given to [`plan`] was already used; give a new one.
    #[error("call id {call} was already used in this Log; plan needs a fresh one")]
    CallIdReused {
        /// The id.
        call: CallId,
    },
}

/// Something that happened outside the Log and asks to be journaled.
#[derive(Debug, Clone, PartialEq)]
pub enum Signal {
    /// A system prompt assembled (boot, `--continue`, a persona edit).
    Prompt {
        /// The prompt.
        text: String,
        /// Whether the conversation carries on under it.
        continues: bool,
    },
    /// Someone typed a line.
    UserLine {
        /// Who.
        from: Entity,
        /// What.
        text: String,
    },
    /// The model answered a call.
    ModelReply {
        /// The call answered.
        call: CallId,
        /// The reply's text.
        text: String,
        /// The tools it asks for.
        tool_uses: Vec<ToolUse>,
        /// Its token account.
        usage: Usage,
        /// The provider's stop reason.
        stop_reason: String,
    },
    /// A model call ended without a reply.
    ModelFailed {
        /// The call.
        call: CallId,
        /// What went wrong.
        error: String,
        /// Whether a retry may help.
        retryable: bool,
    },
    /// A tool activity finished.
    ToolFinished {
        /// The tool use.
        id: ToolUseId,
        /// Its output.
        output: String,
        /// Whether it failed.
        is_error: bool,
        /// What it changed.
        effects: Vec<EffectNote>,
    },
    /// An event arrived (a letter, a vigil, a child done, a deadline, a notice).
    Event {
        /// Its id.
        id: EventId,
        /// Its source.
        source: EventSource,
        /// Its one-line rendering.
        text: String,
    },
    /// The agent's hook (or the harness, with no hook) decided about an event.
    Decision {
        /// The event.
        event: EventId,
        /// The decision.
        disposition: Disposition,
    },
    /// A reviewer's verdict on one round for a wild tool use.
    Review {
        /// The tool use.
        tool: ToolUseId,
        /// The round.
        round: u32,
        /// The verdict.
        verdict: Verdict,
        /// Who reviewed.
        by: String,
    },
    /// The agent's grants ref moved.
    GrantChanged {
        /// A one-line account.
        summary: String,
        /// The commit now in force.
        grants_commit: String,
    },
    /// The agent's budget changed.
    BudgetChanged {
        /// Fuel left.
        left: Fuel,
        /// A one-line account.
        summary: String,
    },
    /// A summary of a span is ready.
    Compact {
        /// First record.
        from: u64,
        /// Last record.
        to: u64,
        /// The summary.
        summary: String,
    },
    /// Someone asked to rewind the conversation to just after record `to`.
    Rewind {
        /// The target.
        to: u64,
        /// Why.
        reason: String,
    },
    /// Someone interrupted the agent.
    Interrupt {
        /// Why.
        reason: String,
    },
}

/// The reason [`journal`] gives when a new epoch closes what the old one left open.
pub const NEW_EPOCH: &str = "a new conversation began";

/// Turns a signal into the records that journal it, or refuses it.
///
/// A reply that reuses a tool use id (within itself or from earlier in the Log) is journaled as
/// a retryable `call-failed`, so every tool use id in a Log is fresh. A rewind and a new epoch
/// first close what is open, as an interrupt would.
pub fn journal(state: &Owed, signal: Signal) -> Result<Vec<RecordBody>, Stale> {
    let now = &state.now;
    let next_seq = state.next_seq;
    let one = |body| Ok(vec![body]);
    match signal {
        Signal::Prompt { text, continues } => {
            let mut out = if continues {
                vec![]
            } else {
                close_open(state, NEW_EPOCH)
            };
            out.push(RecordBody::SystemPrompt { text, continues });
            Ok(out)
        }
        Signal::UserLine { from, text } => one(RecordBody::UserLine { from, text }),
        Signal::ModelReply {
            call,
            text,
            tool_uses,
            usage,
            stop_reason,
        } => {
            check_open(now, &call)?;
            let mut fresh = HashSet::new();
            let reused = tool_uses
                .iter()
                .find(|u| state.seen.tool_uses.contains(&u.id) || !fresh.insert(&u.id));
            match reused {
                Some(u) => one(RecordBody::CallFailed {
                    error: format!("the reply reused tool use id {}; ids must be fresh", u.id),
                    call,
                    retryable: true,
                }),
                None => one(RecordBody::AssistantReply {
                    call,
                    text,
                    tool_uses,
                    usage,
                    stop_reason,
                }),
            }
        }
        Signal::ModelFailed {
            call,
            error,
            retryable,
        } => {
            check_open(now, &call)?;
            one(RecordBody::CallFailed {
                call,
                error,
                retryable,
            })
        }
        Signal::ToolFinished {
            id,
            output,
            is_error,
            effects,
        } => {
            if now.running.contains(&id) {
                one(RecordBody::ToolResult {
                    id,
                    output,
                    is_error,
                    effects,
                })
            } else if state.seen.started.contains(&id) {
                Err(Stale::ToolAlreadyClosed { id })
            } else {
                Err(Stale::ToolNotStarted { id })
            }
        }
        Signal::Event { id, source, text } => {
            if state.seen.events.contains(&id) {
                return Err(Stale::DuplicateEvent { id });
            }
            one(RecordBody::Event { id, source, text })
        }
        Signal::Decision { event, disposition } => {
            if !now.undecided.iter().any(|u| u.id == event) {
                return Err(Stale::EventNotUndecided { event });
            }
            one(RecordBody::HookDecision { event, disposition })
        }
        Signal::Review {
            tool,
            round,
            verdict,
            by,
        } => {
            let waiting = now
                .pending
                .iter()
                .any(|t| t.id == tool && t.stage == (Stage::Admitted { tier: Tier::Wild }));
            if !waiting {
                return Err(Stale::NotUnderReview { tool });
            }
            one(RecordBody::Review {
                call: tool,
                round,
                verdict,
                by,
            })
        }
        Signal::GrantChanged {
            summary,
            grants_commit,
        } => one(RecordBody::GrantChange {
            summary,
            grants_commit,
        }),
        Signal::BudgetChanged { left, summary } => one(RecordBody::BudgetChange { left, summary }),
        Signal::Compact { from, to, summary } => {
            if from > to || to >= next_seq {
                return Err(Stale::SpanOutOfLog { from, to, next_seq });
            }
            one(RecordBody::Compaction { from, to, summary })
        }
        Signal::Rewind { to, reason } => {
            if to >= next_seq {
                return Err(Stale::RewindOutOfLog { to, next_seq });
            }
            let mut out = close_open(state, &reason);
            out.push(RecordBody::Rewind { to, reason });
            Ok(out)
        }
        Signal::Interrupt { reason } => Ok(close_open(state, &reason)),
    }
}

fn check_open(now: &Now, call: &CallId) -> Result<(), Stale> {
    match &now.open {
        Some(open) if open.id == *call => Ok(()),
        open => Err(Stale::CallNotOpen {
            call: call.clone(),
            open: open.as_ref().map(|o| o.id.clone()),
        }),
    }
}

/// Closes whatever is open: the open call, every tool use without a result, and the live turn.
/// Boot and interrupt both use it. Returns nothing when nothing is open.
pub fn close_open(state: &Owed, reason: &str) -> Vec<RecordBody> {
    let now = &state.now;
    if now.open.is_none() && !now.unresolved() && !now.live {
        return vec![];
    }
    let closed_tools = (now.running.iter().cloned())
        .chain(now.pending.iter().map(|t| t.id.clone()))
        .collect();
    vec![RecordBody::Interrupted {
        reason: reason.to_owned(),
        closed_call: now.open.as_ref().map(|o| o.id.clone()),
        closed_tools,
    }]
}

/// The tools offered to the model, by name, with their footprints.
pub trait ToolTable {
    /// The footprint of the tool called `name`, if the table has it.
    fn footprint(&self, name: &str) -> Option<&Footprint>;
}

impl ToolTable for BTreeMap<String, Footprint> {
    fn footprint(&self, name: &str) -> Option<&Footprint> {
        self.get(name)
    }
}

impl ToolTable for HashMap<String, Footprint> {
    fn footprint(&self, name: &str) -> Option<&Footprint> {
        self.get(name)
    }
}

/// What [`plan`] needs from the caller: a fresh call id (used only if a call is owed), where the
/// call goes, the retry limit, and the tool table.
#[derive(Clone, Copy)]
pub struct PlanInput<'a> {
    /// A call id never used in this Log.
    pub call: &'a CallId,
    /// The provider for the call.
    pub provider: &'a str,
    /// The model for the call.
    pub model: &'a str,
    /// Attempts allowed per owed call (at least 1); past it the turn ends.
    pub max_attempts: u32,
    /// The tool table.
    pub tools: &'a dyn ToolTable,
}

impl std::fmt::Debug for PlanInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlanInput")
            .field("call", self.call)
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("max_attempts", &self.max_attempts)
            .finish_non_exhaustive()
    }
}

/// The records to journal now, in order: admissions, refusals and starts of the latest reply's
/// tool uses; then the owed model call (or `out-of-fuel`, or `turn-end` once attempts run out);
/// or the owed `turn-end`. Journal them all, then start what they name.
pub fn plan(state: &Owed, input: &PlanInput<'_>) -> Result<Vec<RecordBody>, Stale> {
    let mut now = state.now.clone();
    let mut out = Vec::new();
    // Each record moves a tool use a stage on, opens the call, or ends the turn, so this stops.
    while let Some(body) = next_record(&now, &state.seen, input)? {
        now.apply(&body);
        out.push(body);
    }
    Ok(out)
}

fn next_record(now: &Now, seen: &Seen, input: &PlanInput<'_>) -> Result<Option<RecordBody>, Stale> {
    for tool in &now.pending {
        let id = tool.id.clone();
        let body = match &tool.stage {
            Stage::Proposed if seen.started.contains(&id) => refusal(
                id,
                format!(
                    "(l3m) tool use id {} was already used; this use was not run",
                    tool.id
                ),
            ),
            Stage::Proposed => match input.tools.footprint(&tool.name) {
                Some(footprint) => RecordBody::ToolCall {
                    id,
                    name: tool.name.clone(),
                    tier: footprint.tier(),
                    footprint: footprint.clone(),
                },
                None => refusal(
                    id,
                    format!("(l3m) no tool named {:?} is offered to you", tool.name),
                ),
            },
            Stage::Admitted { tier: Tier::Tame } | Stage::Approved => {
                RecordBody::ToolStarted { id }
            }
            Stage::Admitted { tier: Tier::Wild } => continue,
            Stage::Declined {
                reason,
                alternative,
            } => refusal(id, declined(reason, alternative.as_deref())),
        };
        return Ok(Some(body));
    }
    if now.call_owed() {
        if let Some(unit) = now.fuel_short() {
            return Ok(Some(RecordBody::OutOfFuel { unit }));
        }
        let attempt = now
            .retry
            .as_ref()
            .map_or(1, |r| r.attempt.saturating_add(1));
        if attempt > input.max_attempts {
            return Ok(Some(RecordBody::TurnEnd));
        }
        if seen.calls.contains(input.call) {
            return Err(Stale::CallIdReused {
                call: input.call.clone(),
            });
        }
        let fallback_of = now
            .retry
            .as_ref()
            .filter(|r| r.provider != input.provider || r.model != input.model)
            .map(|r| r.id.clone());
        return Ok(Some(RecordBody::CallStarted {
            call: input.call.clone(),
            provider: input.provider.to_owned(),
            model: input.model.to_owned(),
            attempt,
            fallback_of,
        }));
    }
    Ok(now.turn_end_owed().then_some(RecordBody::TurnEnd))
}

fn refusal(id: ToolUseId, output: String) -> RecordBody {
    RecordBody::ToolResult {
        id,
        output,
        is_error: true,
        effects: vec![],
    }
}

fn declined(reason: &str, alternative: Option<&str>) -> String {
    match alternative {
        Some(alt) => format!("(l3m) declined by review: {reason}; instead: {alt}"),
        None => format!("(l3m) declined by review: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::effects::EffectClass;
    use crate::log::Log;

    struct Session {
        log: Log,
        owed: Owed,
        tools: BTreeMap<String, Footprint>,
        calls: u32,
    }

    impl Session {
        fn new() -> Self {
            let mut s = Self {
                log: Log::new(),
                owed: Owed::default(),
                tools: BTreeMap::from([
                    ("read".to_owned(), Footprint::of([EffectClass::FsRead])),
                    ("sh".to_owned(), Footprint::of([EffectClass::Shell])),
                ]),
                calls: 0,
            };
            s.signal(Signal::Prompt {
                text: "p".into(),
                continues: false,
            })
            .unwrap();
            s
        }

        fn write(&mut self, bodies: Vec<RecordBody>) -> Vec<RecordBody> {
            for body in &bodies {
                let record = self.log.append(0, body.clone()).unwrap().clone();
                self.owed.apply(&record);
            }
            bodies
        }

        fn signal(&mut self, signal: Signal) -> Result<Vec<RecordBody>, Stale> {
            let bodies = journal(&self.owed, signal)?;
            Ok(self.write(bodies))
        }

        fn pass(&mut self) -> Vec<RecordBody> {
            self.calls += 1;
            let call = CallId::new(format!("c{}", self.calls)).unwrap();
            let input = PlanInput {
                call: &call,
                provider: "p",
                model: "m",
                max_attempts: 2,
                tools: &self.tools,
            };
            let bodies = plan(&self.owed, &input).unwrap();
            self.write(bodies)
        }

        fn open(&self) -> CallId {
            self.owed.open_call().unwrap().id.clone()
        }
    }

    fn line() -> Signal {
        Signal::UserLine {
            from: Entity::parse("human:alice").unwrap(),
            text: "go".into(),
        }
    }

    fn reply(call: CallId, tools: &[(&str, &str)]) -> Signal {
        Signal::ModelReply {
            call,
            text: String::new(),
            tool_uses: tools
                .iter()
                .map(|(id, name)| ToolUse {
                    id: ToolUseId::new(*id).unwrap(),
                    name: (*name).into(),
                    input: serde_json::Value::Null,
                })
                .collect(),
            usage: Usage::default(),
            stop_reason: "tool_use".into(),
        }
    }

    fn tid(s: &str) -> ToolUseId {
        ToolUseId::new(s).unwrap()
    }

    fn finished(id: &str) -> Signal {
        Signal::ToolFinished {
            id: tid(id),
            output: "ok".into(),
            is_error: false,
            effects: vec![],
        }
    }

    #[test]
    fn a_turn_admits_starts_reviews_and_ends() {
        let mut s = Session::new();
        s.signal(line()).unwrap();
        assert!(matches!(
            s.pass()[..],
            [RecordBody::CallStarted { attempt: 1, .. }]
        ));
        let call = s.open();
        s.signal(reply(call, &[("t1", "read"), ("t2", "sh"), ("t3", "nope")]))
            .unwrap();
        let kinds: Vec<_> = s.pass().iter().map(RecordBody::kind).collect();
        assert_eq!(
            kinds,
            ["tool-call", "tool-started", "tool-call", "tool-result"]
        );
        assert_eq!(s.owed.awaiting_review().collect::<Vec<_>>(), [&tid("t2")]);
        assert!(s.pass().is_empty());
        s.signal(Signal::Review {
            tool: tid("t2"),
            round: 1,
            verdict: Verdict::Unsafe {
                reason: "rm -rf".into(),
                alternative: Some("use the file tools".into()),
            },
            by: "svc:reviewer".into(),
        })
        .unwrap();
        assert!(matches!(
            &s.pass()[..],
            [RecordBody::ToolResult { is_error: true, output, .. }] if output.contains("instead: use the file tools")
        ));
        s.signal(finished("t1")).unwrap();
        assert_eq!(
            s.signal(finished("t1")),
            Err(Stale::ToolAlreadyClosed { id: tid("t1") })
        );
        assert_eq!(
            s.signal(finished("t9")),
            Err(Stale::ToolNotStarted { id: tid("t9") })
        );
        assert!(matches!(s.pass()[..], [RecordBody::CallStarted { .. }]));
        let call = s.open();
        s.signal(reply(call, &[])).unwrap();
        assert_eq!(s.pass(), vec![RecordBody::TurnEnd]);
        assert!(s.pass().is_empty());
    }

    #[test]
    fn stale_replies_reused_ids_retries_and_fallbacks() {
        let mut s = Session::new();
        s.signal(line()).unwrap();
        s.pass();
        let first = s.open();
        let stale = CallId::new("old").unwrap();
        assert_eq!(
            s.signal(reply(stale.clone(), &[])),
            Err(Stale::CallNotOpen {
                call: stale,
                open: Some(first.clone())
            })
        );
        s.signal(Signal::ModelFailed {
            call: first.clone(),
            error: "529".into(),
            retryable: true,
        })
        .unwrap();
        assert_eq!(s.owed.retrying().map(|r| &r.id), Some(&first));
        let started = s.pass();
        assert!(matches!(
            &started[..],
            [RecordBody::CallStarted {
                attempt: 2,
                fallback_of: None,
                ..
            }]
        ));
        let second = s.open();
        s.signal(reply(second, &[("t1", "read")])).unwrap();
        s.pass();
        s.signal(finished("t1")).unwrap();
        s.pass();
        let third = s.open();
        let failed = s.signal(reply(third, &[("t1", "read")])).unwrap();
        assert!(matches!(
            &failed[..],
            [RecordBody::CallFailed {
                retryable: true,
                ..
            }]
        ));
        // The limit is two attempts: the retry after this failure is attempt 2, then the turn ends.
        s.pass();
        let fourth = s.open();
        s.signal(Signal::ModelFailed {
            call: fourth,
            error: "529".into(),
            retryable: true,
        })
        .unwrap();
        assert_eq!(s.pass(), vec![RecordBody::TurnEnd]);
    }

    #[test]
    fn plan_refuses_a_reused_call_id_and_reports_a_fallback() {
        let mut s = Session::new();
        s.signal(line()).unwrap();
        s.pass();
        let first = s.open();
        s.signal(Signal::ModelFailed {
            call: first.clone(),
            error: "timeout".into(),
            retryable: true,
        })
        .unwrap();
        let input = PlanInput {
            call: &first,
            provider: "p",
            model: "m",
            max_attempts: 3,
            tools: &s.tools,
        };
        assert_eq!(
            plan(&s.owed, &input),
            Err(Stale::CallIdReused {
                call: first.clone()
            })
        );
        let fresh = CallId::new("fresh").unwrap();
        let other = PlanInput {
            call: &fresh,
            model: "other",
            ..input
        };
        assert!(matches!(
            &plan(&s.owed, &other).unwrap()[..],
            [RecordBody::CallStarted { fallback_of: Some(f), .. }] if *f == first
        ));
    }

    #[test]
    fn out_of_fuel_stops_the_agent() {
        let mut s = Session::new();
        s.signal(Signal::BudgetChanged {
            left: Fuel {
                model_calls: 1,
                bytes: 10,
                wakes: 0,
            },
            summary: "loan".into(),
        })
        .unwrap();
        s.signal(line()).unwrap();
        s.pass();
        let call = s.open();
        s.signal(reply(call, &[])).unwrap();
        s.pass();
        s.signal(line()).unwrap();
        assert_eq!(s.owed.fuel_short(), Some(FuelUnit::ModelCalls));
        assert_eq!(
            s.pass(),
            vec![RecordBody::OutOfFuel {
                unit: FuelUnit::ModelCalls
            }]
        );
        assert!(!s.owed.is_live());
    }

    #[test]
    fn events_wait_for_decisions_and_bad_signals_are_refused() {
        let mut s = Session::new();
        let e = EventId::new("e1").unwrap();
        let event = Signal::Event {
            id: e.clone(),
            source: EventSource::Notice,
            text: "hi".into(),
        };
        s.signal(event.clone()).unwrap();
        assert_eq!(
            s.signal(event),
            Err(Stale::DuplicateEvent { id: e.clone() })
        );
        assert!(s.pass().is_empty());
        let show = Signal::Decision {
            event: e.clone(),
            disposition: Disposition::Show,
        };
        s.signal(show.clone()).unwrap();
        assert_eq!(s.signal(show), Err(Stale::EventNotUndecided { event: e }));
        assert!(matches!(s.pass()[..], [RecordBody::CallStarted { .. }]));
        let next = s.owed.next_seq();
        assert_eq!(
            s.signal(Signal::Rewind {
                to: next,
                reason: String::new()
            }),
            Err(Stale::RewindOutOfLog {
                to: next,
                next_seq: next
            })
        );
        assert_eq!(
            s.signal(Signal::Compact {
                from: 2,
                to: 1,
                summary: String::new()
            }),
            Err(Stale::SpanOutOfLog {
                from: 2,
                to: 1,
                next_seq: next
            })
        );
        assert_eq!(
            s.signal(Signal::Review {
                tool: tid("t1"),
                round: 1,
                verdict: Verdict::Safe,
                by: String::new()
            }),
            Err(Stale::NotUnderReview { tool: tid("t1") })
        );
        let closed = s
            .signal(Signal::Rewind {
                to: 1,
                reason: "undo".into(),
            })
            .unwrap();
        assert_eq!(
            closed.iter().map(RecordBody::kind).collect::<Vec<_>>(),
            ["interrupted", "rewind"]
        );
        assert!(s.owed.open_call().is_none());
        assert!(close_open(&s.owed, "boot").is_empty());
    }
}
