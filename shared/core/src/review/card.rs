//! Cards: a stalemate put before a human, on the agent's `refs/l3m/a/<agent>/_/cards` chain.
//!
//! The chain holds [`CardLine`]s, one JSON object a line: a card is *raised* by the agent's own
//! sequencer when a wild call reaches a stalemate (showing the effect, the justification and
//! the reviewer's reason) and *answered* once, by a human. [`admit_card_line`] is hubd's gate:
//! the pure decision of who may append which line; [`waiting`] folds the chain into the cards
//! still waiting. The answer becomes the proposer's `review` record of the round after the last
//! (journaled by its sequencer), so the agent resumes from its Log like after any round.

use serde::{Deserialize, Serialize};

use super::Effect;
use crate::duty::Duty;
use crate::log::{ToolUseId, Verdict};
use crate::names::{AgentName, Entity};
use crate::owed::Owed;

/// The longest card line accepted, in bytes.
pub const MAX_CARD_LINE: usize = 64 << 10;

/// One line of an agent's cards chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CardLine {
    /// A stalemate waits for a human.
    Raised {
        /// The stalemated tool use: the card's id within the agent's chain.
        id: ToolUseId,
        /// The round the stalemate was reached at (the human's answer is the round after).
        round: u32,
        /// What the call would change and where.
        effect: Effect,
        /// Why the proposer says it is needed and safe.
        justification: String,
        /// The reviewer's last reason.
        reason: String,
    },
    /// A human's answer.
    Answered {
        /// The card answered.
        id: ToolUseId,
        /// Who answered; hubd writes the session's own human here, never the caller's claim.
        by: Entity,
        /// Whether the call may run.
        approve: bool,
        /// Why, as the human said.
        reason: String,
    },
}

impl CardLine {
    /// The card the line is about.
    pub fn id(&self) -> &ToolUseId {
        match self {
            CardLine::Raised { id, .. } | CardLine::Answered { id, .. } => id,
        }
    }

    /// A human's answer as the verdict of the round after the last.
    pub fn verdict(approve: bool, reason: &str) -> Verdict {
        if approve {
            Verdict::Safe
        } else {
            Verdict::Unsafe {
                reason: reason.to_owned(),
                alternative: None,
            }
        }
    }
}

/// A card line hubd refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CardError {
    /// Not one JSON card line within the limit.
    #[error("not a card line: {0}")]
    Malformed(String),
    /// Only the agent's own sequencer raises its cards.
    #[error("only {agent}'s own sequencer raises its cards; {duty} may not")]
    NotTheProposer {
        /// The agent.
        agent: AgentName,
        /// Who asked.
        duty: String,
    },
    /// Only a human answers a card: an agent (or any service) answering is refused.
    #[error("cards are answered by humans only; {duty} may not answer card {id}")]
    NotAHuman {
        /// The card.
        id: ToolUseId,
        /// Who asked.
        duty: String,
    },
    /// The card is not waiting: never raised, already answered, or raised twice.
    #[error("card {id} {state}")]
    NotWaiting {
        /// The card.
        id: ToolUseId,
        /// What it is instead.
        state: &'static str,
    },
}

/// Reads a stored card line.
pub fn parse_card_line(line: &str) -> Result<CardLine, CardError> {
    if line.len() > MAX_CARD_LINE || line.contains('\n') {
        return Err(CardError::Malformed(format!(
            "a card line is one line of at most {MAX_CARD_LINE} bytes"
        )));
    }
    serde_json::from_str(line).map_err(|e| CardError::Malformed(e.to_string()))
}

/// The cards of a chain still waiting for an answer, oldest first.
pub fn waiting(lines: &[CardLine]) -> Vec<&CardLine> {
    lines
        .iter()
        .filter(|l| matches!(l, CardLine::Raised { .. }))
        .filter(|raised| {
            !lines
                .iter()
                .any(|l| matches!(l, CardLine::Answered { id, .. } if id == raised.id()))
        })
        .collect()
}

/// The answers on a cards chain that a Log still waits for: each answered card whose call
/// `owed` holds at a stalemate. A booting sequencer journals them (an answer given while it was
/// down), and a host wakes an asleep agent that has one.
pub fn answers_awaited<'a>(lines: &'a [CardLine], owed: &Owed) -> Vec<&'a CardLine> {
    lines
        .iter()
        .filter(|l| matches!(l, CardLine::Answered { .. }))
        .filter(|l| owed.stalemates().any(|(id, _)| id == l.id()))
        .collect()
}

/// hubd's gate for appending `line` to `agent`'s cards chain, which holds `existing`, on behalf
/// of `duty`. Returns the line as stored: an answer's `by` is the session's own human.
pub fn admit_card_line(
    duty: &Duty,
    agent: &AgentName,
    existing: &[CardLine],
    line: CardLine,
) -> Result<CardLine, CardError> {
    let raised = |id: &ToolUseId| {
        existing
            .iter()
            .any(|l| matches!(l, CardLine::Raised { id: r, .. } if r == id))
    };
    let answered = |id: &ToolUseId| {
        existing
            .iter()
            .any(|l| matches!(l, CardLine::Answered { id: a, .. } if a == id))
    };
    match line {
        CardLine::Raised { .. } => {
            if !matches!(duty, Duty::Sequencer { agent: a } if a == agent) {
                return Err(CardError::NotTheProposer {
                    agent: agent.clone(),
                    duty: duty.to_string(),
                });
            }
            if raised(line.id()) {
                return Err(CardError::NotWaiting {
                    id: line.id().clone(),
                    state: "was already raised",
                });
            }
            Ok(line)
        }
        CardLine::Answered {
            id,
            approve,
            reason,
            ..
        } => {
            let Duty::Human { human } = duty else {
                return Err(CardError::NotAHuman {
                    id,
                    duty: duty.to_string(),
                });
            };
            if !raised(&id) {
                return Err(CardError::NotWaiting {
                    id,
                    state: "was never raised",
                });
            }
            if answered(&id) {
                return Err(CardError::NotWaiting {
                    id,
                    state: "was already answered",
                });
            }
            Ok(CardLine::Answered {
                id,
                by: Entity::Human(human.clone()),
                approve,
                reason,
            })
        }
    }
}
