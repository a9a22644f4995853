//! Journaling a signal: the records that make an outside event part of the Log, or the typed
//! reason it would make the Log inconsistent; and closing whatever is open.

use super::*;

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
    /// A verdict for a tool use that is not a wild call waiting for this round: not wild, not
    /// waiting, a reviewer's round for a call at a stalemate (only a human answers there), a
    /// human's answer before the stalemate, or a round number out of turn.
    #[error("tool use {tool} is not waiting for review round {round} of {of}")]
    NotUnderReview {
        /// The tool use.
        tool: ToolUseId,
        /// The round the verdict was for.
        round: u32,
        /// The rounds allowed.
        of: u32,
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
        /// Which boundary refused it, when it is a refusal.
        refusal: Option<Refusal>,
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
    /// A reviewer's verdict on one round for a wild tool use, or a human's answer at its card
    /// (the round after the last).
    Review {
        /// The tool use.
        tool: ToolUseId,
        /// The round.
        round: u32,
        /// The rounds allowed before a stalemate.
        of: u32,
        /// The verdict.
        verdict: Verdict,
        /// Who reviewed.
        by: String,
        /// What the round cost.
        spent: ReviewSpent,
    },
    /// The reviewer could not be asked or gave no usable answer (it crashed, timed out,
    /// answered garbage): the call is not run, and the model is told why.
    ReviewFailed {
        /// The tool use.
        tool: ToolUseId,
        /// What went wrong.
        error: String,
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

/// `uses` with every id a provider could not take back, or that is not fresh, replaced by the
/// harness's own ([`ToolUseId::at`], from `call` and the use's position): an id that is not
/// wire-safe ([`ToolUseId::is_wire_safe`]: hostile, oversized, with odd characters, or
/// [`ToolUseId::unusable`]), or one already in `seen` or earlier in `uses`. Providers make the
/// ids, not the model, so the use keeps its call and runs; only its id changes, in the reply as
/// journaled, so its result pairs with it in every later request.
fn freshen(seen: &HashSet<ToolUseId>, call: &CallId, uses: Vec<ToolUse>) -> Vec<ToolUse> {
    let mut taken: HashSet<ToolUseId> = HashSet::new();
    // The ids kept as the provider gave them are taken first, so a fresh id never meets one.
    let kept: HashSet<ToolUseId> = uses
        .iter()
        .filter(|u| u.id.is_wire_safe() && !seen.contains(&u.id))
        .map(|u| u.id.clone())
        .collect();
    uses.into_iter()
        .enumerate()
        .map(|(position, mut u)| {
            if !u.id.is_wire_safe() || seen.contains(&u.id) || taken.contains(&u.id) {
                let mut n = 0;
                u.id = loop {
                    let id = ToolUseId::at(call, position, n);
                    if !seen.contains(&id) && !taken.contains(&id) && !kept.contains(&id) {
                        break id;
                    }
                    n += 1;
                };
            }
            taken.insert(u.id.clone());
            u
        })
        .collect()
}

/// The reason [`journal`] gives when a new epoch closes what the old one left open.
pub const NEW_EPOCH: &str = "a new conversation began";

/// Turns a signal into the records that journal it, or refuses it.
///
/// A tool use whose id no provider would take back, or that the reply reuses (within itself or
/// from earlier in the Log), is journaled under a fresh, wire-safe id the harness gives it
/// (`freshen`) and runs as any other: every tool use id in a Log is fresh and wire-safe, so
/// providers never see an id twice and results always pair with their uses. A rewind and a new
/// epoch first close what is open, as an interrupt would.
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
            let tool_uses = freshen(&state.seen.tool_uses, &call, tool_uses);
            one(RecordBody::AssistantReply {
                call,
                text,
                tool_uses,
                usage,
                stop_reason,
            })
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
            refusal,
        } => {
            if now.running.contains(&id) {
                one(RecordBody::ToolResult {
                    id,
                    output,
                    is_error,
                    effects,
                    refusal,
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
            of,
            verdict,
            by,
            spent,
        } => {
            let expected = state.review_round(&tool);
            let waiting = now.pending.iter().any(|t| {
                t.id == tool
                    && match t.stage {
                        Stage::Admitted { tier: Tier::Wild } => round == expected && round <= of,
                        Stage::Stalemate { .. } => round > of,
                        _ => false,
                    }
            });
            if !waiting {
                return Err(Stale::NotUnderReview { tool, round, of });
            }
            one(RecordBody::Review {
                call: tool,
                round,
                of,
                verdict,
                by,
                spent,
            })
        }
        Signal::ReviewFailed { tool, error } => {
            let waiting = now
                .pending
                .iter()
                .any(|t| t.id == tool && t.stage == (Stage::Admitted { tier: Tier::Wild }));
            if !waiting {
                let round = state.review_round(&tool);
                return Err(Stale::NotUnderReview {
                    tool,
                    round,
                    of: round,
                });
            }
            one(RecordBody::ToolResult {
                id: tool,
                output: format!(
                    "(l3m) not run: the review could not be done ({error}); nothing ran, and you may propose it again"
                ),
                is_error: true,
                effects: vec![],
                refusal: Some(Refusal::new("review", Some(crate::axis::Axis::Wild))),
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

/// Closes what a dead process left open, at boot: what [`close_open`] closes, except the wild
/// calls at a stalemate. Their cards outlive the process, so each keeps waiting for its human's
/// answer, and the turn stays live around it. With nothing else open it journals nothing;
/// without a stalemate it is exactly [`close_open`] (`boot_close_eq_interrupt_close`).
pub fn close_at_boot(state: &Owed, reason: &str) -> Vec<RecordBody> {
    let now = &state.now;
    if !now.pending.iter().any(PendingTool::at_stalemate) {
        return close_open(state, reason);
    }
    let closed_tools: Vec<ToolUseId> = (now.running.iter().cloned())
        .chain(
            (now.pending.iter())
                .filter(|t| !t.at_stalemate())
                .map(|t| t.id.clone()),
        )
        .collect();
    if now.open.is_none() && closed_tools.is_empty() {
        return vec![];
    }
    vec![RecordBody::Interrupted {
        reason: reason.to_owned(),
        closed_call: now.open.as_ref().map(|o| o.id.clone()),
        closed_tools,
    }]
}

/// The first records of a fork's Log: `prefix` (a source Log's records up to and including the
/// fork point) renumbered from 0, then whatever was open there closed, as an interrupt would
/// close it, so the fork's first turn continues that conversation with nothing left dangling.
pub fn fork_log(prefix: Vec<Record>, reason: &str, at_ms: u64) -> Vec<Record> {
    let mut records: Vec<Record> = (0u64..)
        .zip(prefix)
        .map(|(seq, r)| Record { seq, ..r })
        .collect();
    let owed = Owed::from_records(&records);
    for body in close_open(&owed, reason) {
        records.push(Record {
            seq: records.len() as u64,
            at_ms,
            body,
        });
    }
    records
}
