//! Growing and pruning the agent tree.
//!
//! # Format
//! - `hubd.spawn` `{ capability, request: SpawnRequest }` → `hubd.spawned`
//!   `{ child: str, grants_tip: str, work_branch: str, acr: str }`. The parent is the
//!   capability's entity: a human spawns roots, an agent's sequencer spawns its children.
//!   A refused spawn is `refused` naming the axis that widened.
//! - `hubd.retire` `{ capability, agent: str }` → `hubd.retired` `{ agents: [str] }`: the whole
//!   live subtree, deepest first, in the order it was retired.
//! - `hubd.collect` `{ capability, agent: str }` → `hubd.collected` `{ agent: str }`.
//! - `hubd.list-agents` `{ capability, after: str|nil }` → `hubd.agent-tree` `{ agents:
//!   [AgentState], next: str|nil }`, the agents the ledger knows after `after`, in name order,
//!   one page of them (at most `l3m_core::record_format::PAGE_LINES`, within `PAGE_BYTES`); `next`
//!   is where the next page starts; each `{ name, parent, life, holder: str|nil }` with
//!   `life` one of `running` (a sequencer holds its lease, named by `holder`), `asleep`,
//!   `retired`, `collected`.
//! - `hubd.list-tree` `{ capability, after: str|nil, tail: u64 }` → `hubd.tree-page` `{ agents:
//!   [AgentState], stuck: [{ agent, records: [Record] }], next: str|nil }`: a page of up to
//!   [`TREE_PAGE_AGENTS`] agents (within `PAGE_BYTES`) as `list-agents` gives them, and for each
//!   asleep one whose Log the caller may read, the part of its last `tail` records that says it
//!   is stuck ([`stuck_suffix`]). hubd keeps that part per Log tip, so a listing reads a Log
//!   only when it moved since the last one.

use l3m_core::grant::SpawnRequest;
use l3m_core::log::{Record, RecordBody};
use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Asks to start a child (or, for a human, a root agent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawn {
    /// The caller's session; its entity is the parent.
    pub capability: Capability,
    /// The child's name, grant, loan and persona.
    pub request: SpawnRequest,
}

impl Message for Spawn {
    const KIND: &'static str = "hubd.spawn";
}

/// A spawn admitted and written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Spawned {
    /// The child.
    pub child: String,
    /// The commit of the child's grants ref.
    pub grants_tip: String,
    /// The child's work branch.
    pub work_branch: String,
    /// The child's ACR directory, relative to the hub folder.
    pub acr: String,
}

impl Message for Spawned {
    const KIND: &'static str = "hubd.spawned";
}

/// Asks to retire an agent and its live subtree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retire {
    /// The caller's session: a human, or the sequencer of a strict ancestor.
    pub capability: Capability,
    /// The top of the subtree.
    pub agent: String,
}

impl Message for Retire {
    const KIND: &'static str = "hubd.retire";
}

/// A subtree retired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retired {
    /// The agents retired, deepest first.
    pub agents: Vec<String>,
}

impl Message for Retired {
    const KIND: &'static str = "hubd.retired";
}

/// Asks to collect a retired agent: its name becomes free again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collect {
    /// The caller's session: a human, or the sequencer of a strict ancestor.
    pub capability: Capability,
    /// The retired agent.
    pub agent: String,
}

impl Message for Collect {
    const KIND: &'static str = "hubd.collect";
}

/// An agent collected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Collected {
    /// The agent.
    pub agent: String,
}

impl Message for Collected {
    const KIND: &'static str = "hubd.collected";
}

/// Asks for the agent tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListAgents {
    /// The caller's session.
    pub capability: Capability,
    /// Where the page starts: the agents after this name (none: from the first).
    #[serde(default)]
    pub after: Option<String>,
}

impl Message for ListAgents {
    const KIND: &'static str = "hubd.list-agents";
}

/// Where an agent is in its life, computed from the ledger and the session leases (never
/// stored).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgentLife {
    /// Live, and a sequencer holds its lease.
    Running,
    /// Live, with no sequencer running it: a letter or a vigil wakes it.
    Asleep,
    /// Retired, its memory still kept.
    Retired,
    /// Collected: its name is free.
    Collected,
}

/// One agent of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentState {
    /// The agent.
    pub name: String,
    /// Who spawned it (`human:<name>` for a root).
    pub parent: String,
    /// Its life.
    pub life: AgentLife,
    /// Who holds its lease, when it is running.
    pub holder: Option<String>,
    /// Whether it was spawned driven (a program call's child): its parent's sequencer
    /// retires a live one at boot, since no call survives a restart.
    #[serde(default)]
    pub driven: bool,
}

/// The agent tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTree {
    /// The agents the ledger knows, in name order: one page of them.
    pub agents: Vec<AgentState>,
    /// Where the next page starts (ask again with `after` = this), or `None` after the last.
    #[serde(default)]
    pub next: Option<String>,
}

impl Message for AgentTree {
    const KIND: &'static str = "hubd.agent-tree";
}

/// How many agents one page of [`ListTree`] holds at most (fewer when their text would pass
/// `l3m_core::record_format::PAGE_BYTES`): a tree of 10,000 agents comes in three requests.
pub const TREE_PAGE_AGENTS: usize = 4096;

/// The longest failure text a [`StuckAgent`]'s records carry, in characters: more than what
/// `l3m tree` quotes, so the quote (and whether it is cut) is the same as from the whole Log.
pub const STUCK_ERROR_CHARS: usize = 1024;

/// Asks for one page of the agent tree with, for each asleep agent, the part of its Log's
/// tail that says it is stuck: what `l3m tree` shows, in one request per page however many
/// agents sleep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListTree {
    /// The caller's session.
    pub capability: Capability,
    /// Where the page starts: the agents after this name (none: from the first).
    #[serde(default)]
    pub after: Option<String>,
    /// How many of each asleep agent's last records are looked at (0: none, a plain listing).
    #[serde(default)]
    pub tail: u64,
}

impl Message for ListTree {
    const KIND: &'static str = "hubd.list-tree";
}

/// An asleep agent its Log says is stuck.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StuckAgent {
    /// The agent.
    pub agent: String,
    /// The part of its tail that says so ([`stuck_suffix`]).
    pub records: Vec<Record>,
}

/// One page of the agent tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TreePage {
    /// The agents the ledger knows, in name order: one page of them.
    pub agents: Vec<AgentState>,
    /// The asleep agents of this page the caller may read the Log of and whose tail says they
    /// are stuck, in name order.
    #[serde(default)]
    pub stuck: Vec<StuckAgent>,
    /// Where the next page starts (ask again with `after` = this), or `None` after the last.
    #[serde(default)]
    pub next: Option<String>,
}

impl Message for TreePage {
    const KIND: &'static str = "hubd.tree-page";
}

/// Records that close or account for a turn after what happened in it (as `l3m_core`'s stuck
/// fold reads them): a turn's end, an interruption, a budget change.
fn bookkeeping(body: &RecordBody) -> bool {
    matches!(
        body,
        RecordBody::TurnEnd | RecordBody::Interrupted { .. } | RecordBody::BudgetChange { .. }
    )
}

/// The part of a Log's `tail` that can say its agent is stuck: from the last record that is
/// not bookkeeping (the one that says what happened) to the end, when that record is a failed
/// call or spent fuel; `None` otherwise, since then nothing in the tail says so. The stuck fold
/// (`l3m tree`'s) reads only that last telling record, the last record, and the bookkeeping
/// between, so it answers the same from this part as from the whole tail; hubd answers
/// [`ListTree`] with it so `l3m tree` reads no Log. A failure's text is cut to
/// [`STUCK_ERROR_CHARS`], more than the fold quotes.
pub fn stuck_suffix(tail: &[Record]) -> Option<Vec<Record>> {
    let at = tail.iter().rposition(|r| !bookkeeping(&r.body))?;
    let mut suffix = tail[at..].to_vec();
    match &mut suffix[0].body {
        RecordBody::CallFailed { error, .. } => {
            if let Some((cut, _)) = error.char_indices().nth(STUCK_ERROR_CHARS) {
                error.truncate(cut);
            }
        }
        RecordBody::OutOfFuel { .. } => {}
        _ => return None,
    }
    Some(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::{CallId, FuelUnit};

    /// Every kind of record the stuck fold reads, and one it reads past.
    fn bodies() -> Vec<RecordBody> {
        let failed = |retryable| RecordBody::CallFailed {
            call: CallId::new("c1").unwrap_or_else(|e| panic!("{e}")),
            error: "400 bad".into(),
            retryable,
        };
        vec![
            failed(false),
            failed(true),
            RecordBody::OutOfFuel {
                unit: FuelUnit::Wakes,
            },
            RecordBody::TurnEnd,
            RecordBody::Interrupted {
                reason: "crash".into(),
                closed_call: None,
                closed_tools: vec![],
            },
            RecordBody::BudgetChange {
                left: Default::default(),
                summary: "a loan".into(),
            },
            RecordBody::AssistantReply {
                call: CallId::new("c2").unwrap_or_else(|e| panic!("{e}")),
                text: "done".into(),
                tool_uses: vec![],
                usage: Default::default(),
                stop_reason: "end_turn".into(),
            },
        ]
    }

    #[test]
    fn the_stuck_fold_says_the_same_from_the_suffix_as_from_the_whole_tail() {
        let kinds = bodies();
        let n = kinds.len();
        // Every tail of up to four records over those kinds.
        for len in 0..=4u32 {
            for code in 0..n.pow(len) {
                let tail: Vec<Record> = (0..len as usize)
                    .map(|i| Record {
                        seq: i as u64,
                        at_ms: 1,
                        body: kinds[(code / n.pow(i as u32)) % n].clone(),
                    })
                    .collect();
                let whole = l3m_core::stuck::stuck(&tail);
                let part = stuck_suffix(&tail);
                let from_part = part.as_deref().and_then(l3m_core::stuck::stuck);
                assert_eq!(from_part, whole, "{tail:?} -> {part:?}");
            }
        }
    }

    #[test]
    fn a_long_failure_is_cut_and_the_rest_of_the_tail_is_left_behind() {
        let long = "é".repeat(3 * STUCK_ERROR_CHARS);
        let record = |seq, body| Record {
            seq,
            at_ms: 1,
            body,
        };
        let tail = vec![
            record(0, RecordBody::TurnEnd),
            record(
                1,
                RecordBody::CallFailed {
                    call: CallId::new("c").unwrap_or_else(|e| panic!("{e}")),
                    error: long,
                    retryable: false,
                },
            ),
            record(2, RecordBody::TurnEnd),
        ];
        let part = stuck_suffix(&tail).unwrap_or_else(|| panic!("a failure says so"));
        assert_eq!(part.len(), 2);
        match &part[0].body {
            RecordBody::CallFailed { error, .. } => {
                assert_eq!(error.chars().count(), STUCK_ERROR_CHARS)
            }
            other => panic!("{other:?}"),
        }
    }
}
