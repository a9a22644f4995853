//! Vigils: bounded watches on hub facts (DESIGN §9).
//!
//! An agent arms a vigil to be told when a fact comes true: one of its own (or a descendant's)
//! refs moved, a letter it sent was read, a descendant was retired, or a moment passed. A
//! parent, or a human, may *pin* one on an agent, which that agent cannot cancel. hubd keeps
//! them on the agent's `refs/l3m/a/<agent>/_/vigils` chain of [`VigilLine`]s, fires each at
//! most once, and every vigil lapses at its bound. A fired vigil reaches the agent as an event:
//! a running sequencer hears the chain move; an asleep agent is woken by its host's supervisor,
//! and only when it is asleep.
//!
//! This module is the pure part: who may arm or cancel which vigil ([`admit_arm`],
//! [`admit_cancel`]), what a chain folds to ([`armed`], [`fired`]), whether a vigil fires on
//! what hubd observed ([`fires`], [`fire`]), and the event it becomes ([`event`]).

use serde::{Deserialize, Serialize};

use crate::duty::Duty;
use crate::log::EventSource;
use crate::names::{AgentName, Entity};
use crate::refs::AgentRef;

/// The most vigils armed on one agent at once: each costs hubd a watch.
pub const MAX_ARMED: usize = 16;

/// The longest a vigil may stay armed: seven days. Every vigil lapses by then.
pub const MAX_SPAN_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// The longest vigil line accepted, in bytes.
pub const MAX_VIGIL_LINE: usize = 4 << 10;

/// The fact a vigil waits for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Watch {
    /// One of an agent's refs moves from where it was when the vigil was armed.
    RefMoved {
        /// Whose ref: the vigil's agent or one of its descendants.
        agent: AgentName,
        /// Which of its refs (never `vigils`, which firing itself moves).
        which: AgentRef,
        /// The ref's tip when armed, as hubd read it (a caller's value is replaced).
        #[serde(default)]
        from: Option<String>,
    },
    /// A letter the agent sent is marked read by its reader.
    LetterRead {
        /// The letter's id.
        letter: String,
        /// The agent it was sent to.
        reader: AgentName,
    },
    /// A descendant of the agent is retired.
    ChildDone {
        /// The descendant.
        child: AgentName,
    },
    /// The clock passes a moment (milliseconds since the epoch).
    Deadline {
        /// When.
        at_ms: u64,
    },
}

impl Watch {
    /// The agent ref whose moves may make this watch fire (a deadline has none: the clock does).
    pub fn key(&self) -> Option<(AgentRef, AgentName)> {
        match self {
            Watch::RefMoved { agent, which, .. } => Some((*which, agent.clone())),
            Watch::LetterRead { reader, .. } => Some((AgentRef::Inbox, reader.clone())),
            Watch::ChildDone { child } => Some((AgentRef::Grants, child.clone())),
            Watch::Deadline { .. } => None,
        }
    }

    /// One line for the agent and the human.
    pub fn describe(&self) -> String {
        match self {
            Watch::RefMoved { agent, which, .. } => format!("{agent}'s {which} ref moves"),
            Watch::LetterRead { letter, reader } => format!("{reader} reads letter {letter}"),
            Watch::ChildDone { child } => format!("{child} is retired"),
            Watch::Deadline { at_ms } => {
                format!("the clock reaches {}", crate::clock::rfc3339(*at_ms))
            }
        }
    }
}

/// One armed watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Vigil {
    /// Its id within the agent's chain (`v1`, `v2`, …), given by hubd.
    pub id: String,
    /// What it waits for.
    pub watch: Watch,
    /// Who armed it, as hubd knows the session (never the caller's claim).
    pub armed_by: Entity,
    /// Armed by someone other than the agent: only they, or a human, may cancel it.
    pub pinned: bool,
    /// When it lapses unfired (milliseconds since the epoch).
    pub until_ms: u64,
}

/// What came true when a vigil fired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fact {
    /// The watched ref moved; where it is now (`None`: deleted).
    Moved {
        /// Its tip now.
        tip: Option<String>,
    },
    /// The letter was read.
    Read,
    /// The descendant was retired.
    Done,
    /// The moment passed.
    Reached,
    /// The bound passed with nothing watched coming true.
    Lapsed,
}

/// One line of an agent's vigils chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "kebab-case", deny_unknown_fields)]
pub enum VigilLine {
    /// A vigil was armed.
    Armed {
        /// The vigil.
        vigil: Vigil,
    },
    /// A vigil was cancelled before it fired.
    Cancelled {
        /// The vigil.
        id: String,
        /// Who cancelled it.
        by: Entity,
    },
    /// A vigil fired: its fact came true, or it lapsed.
    Fired {
        /// The vigil.
        id: String,
        /// What came true.
        fact: Fact,
        /// When hubd saw it.
        at_ms: u64,
    },
}

/// Why hubd refuses to arm or cancel a vigil.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VigilError {
    /// Not one JSON vigil line within the limit.
    #[error("not a vigil line: {0}")]
    Malformed(String),
    /// The caller is neither the agent, an ancestor's sequencer, nor a human.
    #[error(
        "{duty} may not {action} a vigil on {agent}: only the agent, an ancestor or a human may"
    )]
    NotAllowed {
        /// Who asked.
        duty: String,
        /// Arm or cancel.
        action: &'static str,
        /// The agent.
        agent: AgentName,
    },
    /// A pinned vigil is cancelled only by whoever pinned it, or a human.
    #[error("vigil {id} was pinned by {pinned_by}; {duty} may not cancel it")]
    Pinned {
        /// The vigil.
        id: String,
        /// Who pinned it.
        pinned_by: Entity,
        /// Who asked.
        duty: String,
    },
    /// No such vigil is armed (never armed, fired, or cancelled).
    #[error("no vigil {id} is armed on {agent}")]
    NotArmed {
        /// The vigil.
        id: String,
        /// The agent.
        agent: AgentName,
    },
    /// The agent already has [`MAX_ARMED`] vigils armed.
    #[error("{agent} already has {MAX_ARMED} vigils armed; cancel one or let one fire first")]
    TooMany {
        /// The agent.
        agent: AgentName,
    },
    /// The watch is not one the agent may keep.
    #[error("cannot watch {watch}: {reason}")]
    BadWatch {
        /// The watch, described.
        watch: String,
        /// Why not.
        reason: String,
    },
    /// The bound is in the past or beyond [`MAX_SPAN_MS`] from now.
    #[error("a vigil's bound must be after now ({now_ms}) and at most 7 days away; got {until_ms}")]
    BadBound {
        /// The bound asked for.
        until_ms: u64,
        /// Now, as hubd reads its clock.
        now_ms: u64,
    },
}

/// Reads a stored vigil line.
pub fn parse_vigil_line(line: &str) -> Result<VigilLine, VigilError> {
    if line.len() > MAX_VIGIL_LINE || line.contains('\n') {
        return Err(VigilError::Malformed(format!(
            "a vigil line is one line of at most {MAX_VIGIL_LINE} bytes"
        )));
    }
    serde_json::from_str(line).map_err(|e| VigilError::Malformed(e.to_string()))
}

/// The vigils of a chain still armed, in the order armed.
pub fn armed(lines: &[VigilLine]) -> Vec<Vigil> {
    let ended = |id: &str| {
        lines.iter().any(|l| match l {
            VigilLine::Cancelled { id: c, .. } | VigilLine::Fired { id: c, .. } => c == id,
            VigilLine::Armed { .. } => false,
        })
    };
    lines
        .iter()
        .filter_map(|l| match l {
            VigilLine::Armed { vigil } if !ended(&vigil.id) => Some(vigil.clone()),
            _ => None,
        })
        .collect()
}

/// The vigils of a chain that fired, with what came true and when, in the order they fired.
pub fn fired(lines: &[VigilLine]) -> Vec<(Vigil, Fact, u64)> {
    lines
        .iter()
        .filter_map(|l| match l {
            VigilLine::Fired { id, fact, at_ms } => lines.iter().find_map(|a| match a {
                VigilLine::Armed { vigil } if vigil.id == *id => {
                    Some((vigil.clone(), fact.clone(), *at_ms))
                }
                _ => None,
            }),
            _ => None,
        })
        .collect()
}

/// Who `duty` is as an entity on a chain, if it may arm or cancel on `agent` at all: the
/// agent's own sequencer, an ancestor's sequencer, or a human.
fn caller(duty: &Duty, agent: &AgentName, action: &'static str) -> Result<Entity, VigilError> {
    match duty {
        Duty::Sequencer { agent: me } if agent.is_within(me) => Ok(Entity::Agent(me.clone())),
        Duty::Human { human } => Ok(Entity::Human(human.clone())),
        _ => Err(VigilError::NotAllowed {
            duty: duty.to_string(),
            action,
            agent: agent.clone(),
        }),
    }
}

/// hubd's gate for arming: whether `duty` may arm `watch` on `agent` until `until_ms`, given the
/// chain's `lines` and the clock; the line to append if so. A vigil armed by anyone but the
/// agent itself is pinned. What needs the hub's state (that the letter was sent by the agent,
/// the ref's tip) hubd checks and fills in itself.
pub fn admit_arm(
    duty: &Duty,
    agent: &AgentName,
    lines: &[VigilLine],
    watch: Watch,
    until_ms: u64,
    now_ms: u64,
) -> Result<VigilLine, VigilError> {
    let by = caller(duty, agent, "arm")?;
    if until_ms <= now_ms || until_ms - now_ms > MAX_SPAN_MS {
        return Err(VigilError::BadBound { until_ms, now_ms });
    }
    let bad = |reason: &str| VigilError::BadWatch {
        watch: watch.describe(),
        reason: reason.to_owned(),
    };
    match &watch {
        Watch::RefMoved {
            agent: of, which, ..
        } => {
            if !of.is_within(agent) {
                return Err(bad(
                    "an agent watches only its own refs and its descendants'",
                ));
            }
            if *which == AgentRef::Vigils {
                return Err(bad("a vigils chain moves when its vigils fire"));
            }
        }
        Watch::ChildDone { child } if !child.is_descendant_of(agent) => {
            return Err(bad("only a descendant's retirement can be watched"));
        }
        Watch::Deadline { at_ms } if *at_ms <= now_ms || *at_ms > until_ms => {
            return Err(bad(
                "the moment must be after now and no later than the bound",
            ));
        }
        Watch::LetterRead { letter, .. } if letter.is_empty() => {
            return Err(bad("a letter id is needed"));
        }
        _ => {}
    }
    if armed(lines).len() >= MAX_ARMED {
        return Err(VigilError::TooMany {
            agent: agent.clone(),
        });
    }
    let n = lines
        .iter()
        .filter(|l| matches!(l, VigilLine::Armed { .. }))
        .count();
    let pinned = by != Entity::Agent(agent.clone());
    Ok(VigilLine::Armed {
        vigil: Vigil {
            id: format!("v{}", n + 1),
            watch,
            armed_by: by,
            pinned,
            until_ms,
        },
    })
}

/// hubd's gate for cancelling: the vigil must be armed, and a pinned one is cancelled only by
/// whoever pinned it or a human (so an agent cannot shake off its parent's watch); the agent's
/// own vigils by the agent or a human.
pub fn admit_cancel(
    duty: &Duty,
    agent: &AgentName,
    lines: &[VigilLine],
    id: &str,
) -> Result<VigilLine, VigilError> {
    let by = caller(duty, agent, "cancel")?;
    let vigil = armed(lines)
        .into_iter()
        .find(|v| v.id == id)
        .ok_or_else(|| VigilError::NotArmed {
            id: id.to_owned(),
            agent: agent.clone(),
        })?;
    let human = matches!(by, Entity::Human(_));
    if !human && by != vigil.armed_by {
        return Err(if vigil.pinned {
            VigilError::Pinned {
                id: id.to_owned(),
                pinned_by: vigil.armed_by,
                duty: duty.to_string(),
            }
        } else {
            VigilError::NotAllowed {
                duty: duty.to_string(),
                action: "cancel",
                agent: agent.clone(),
            }
        });
    }
    Ok(VigilLine::Cancelled {
        id: id.to_owned(),
        by,
    })
}

/// What hubd read about a vigil's watch, to decide whether it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// The watched ref's tip now.
    Tip(Option<String>),
    /// Whether the letter is marked read by its reader.
    Read(bool),
    /// Whether the descendant is retired.
    Retired(bool),
    /// Nothing but the clock (a deadline).
    Clock,
}

/// Whether `vigil` fires on `observed` at `now_ms`, and with what fact: its own fact first, and
/// a lapse once its bound has passed. A vigil fires once; the caller ends it with the
/// [`VigilLine::Fired`] it appends.
pub fn fires(vigil: &Vigil, observed: &Observed, now_ms: u64) -> Option<Fact> {
    let fact = match (&vigil.watch, observed) {
        (Watch::RefMoved { from, .. }, Observed::Tip(tip)) if tip != from => {
            Some(Fact::Moved { tip: tip.clone() })
        }
        (Watch::LetterRead { .. }, Observed::Read(true)) => Some(Fact::Read),
        (Watch::ChildDone { .. }, Observed::Retired(true)) => Some(Fact::Done),
        (Watch::Deadline { at_ms }, _) if now_ms >= *at_ms => Some(Fact::Reached),
        _ => None,
    };
    fact.or_else(|| (now_ms >= vigil.until_ms).then_some(Fact::Lapsed))
}

/// The line that fires `id` with `fact` at `at_ms`, if the chain has it armed: a vigil fires
/// once, never after it was cancelled, and never one that was not armed.
pub fn fire(lines: &[VigilLine], id: &str, fact: Fact, at_ms: u64) -> Option<VigilLine> {
    armed(lines)
        .iter()
        .any(|v| v.id == id)
        .then(|| VigilLine::Fired {
            id: id.to_owned(),
            fact,
            at_ms,
        })
}

/// The Log event a fired vigil becomes: its id (one per vigil, so it is journaled once however
/// often the chain is read), its source (a descendant's retirement and a reached deadline as
/// those sources, so a hook sees them as such; anything else as the vigil), and its text.
pub fn event(vigil: &Vigil, fact: &Fact) -> (String, EventSource, String) {
    let source = match (&vigil.watch, fact) {
        (Watch::ChildDone { child }, Fact::Done) => EventSource::ChildDone {
            child: child.clone(),
        },
        (Watch::Deadline { .. }, Fact::Reached) => EventSource::Deadline,
        _ => EventSource::Vigil {
            vigil: vigil.id.clone(),
        },
    };
    let what = match fact {
        Fact::Moved { tip: Some(tip) } => {
            format!("it moved to {}", tip.chars().take(12).collect::<String>())
        }
        Fact::Moved { tip: None } => "it was deleted".to_owned(),
        Fact::Read => "it was read".to_owned(),
        Fact::Done => "it is done".to_owned(),
        Fact::Reached => "the moment came".to_owned(),
        Fact::Lapsed => "it lapsed at its bound with nothing seen".to_owned(),
    };
    let pinned = if vigil.pinned {
        format!(" (pinned by {})", vigil.armed_by)
    } else {
        String::new()
    };
    let text = format!(
        "vigil {}: watching whether {}{pinned}: {what}",
        vigil.id,
        vigil.watch.describe()
    );
    (format!("vigil-{}", vigil.id), source, text)
}

#[cfg(test)]
mod tests;
