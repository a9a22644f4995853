//! The tool table: what the model is offered, and what happens to each call.
//!
//! Built once per session from the tools and the axes the agent's grant confers. Building
//! refuses any tool whose claim over-reaches its footprint ([`ToolDecl::check`]), and keeps only
//! the tools whose footprint's required axes the grant confers: the rest are not refused later,
//! they are *absent* — the model is never shown them, and a call naming one is answered as if
//! no such tool existed. Of the offered tools, a tame one runs with exactly its footprint's
//! effects; a wild one does not run on [`ToolTable::dispatch`]: its call becomes a [`Card`] and
//! waits for review, and only [`ToolTable::dispatch_reviewed`] runs it once approved.

use std::collections::{BTreeMap, BTreeSet};

use l3m_core::axis::Axis;
use l3m_core::effects::{EffectError, Footprint, Tier, ToolDecl};
use l3m_ring::effects::Effects;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::{Tool, ToolError, ToolOutput};

/// A tool as the model is shown it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offered {
    /// The name the model calls it by.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: Value,
    /// Computed from its footprint: a wild tool's calls are reviewed before they run.
    pub tier: Tier,
}

/// A wild call that did not run: what a reviewer (for now, a human) must decide on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// The tool called.
    pub tool: String,
    /// The input the model gave, unchanged.
    pub input: Value,
    /// The classes the call would use.
    pub footprint: Footprint,
    /// What the call would change and where ([`Tool::effect`]).
    pub effect: String,
}

/// What became of one call.
#[derive(Debug)]
pub enum Dispatch {
    /// No offered tool has this name; nothing ran. The model is told no such tool exists,
    /// whether the tool is unknown or merely not covered by the grant.
    Absent {
        /// The name called.
        name: String,
    },
    /// The tool is wild; nothing ran. The card waits for review.
    NeedsReview(Card),
    /// The tool is tame and ran; this is its result.
    Ran(Result<ToolOutput, ToolError>),
}

/// Why a tool table could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// A tool claims more reversibility than its footprint allows; the error names the class.
    #[error("tool table refused: {0}")]
    OverClaim(#[from] EffectError),
    /// Two tools share a name, so a call could not say which it meant.
    #[error("tool table refused: two tools are named `{name}`; tool names must be unique")]
    DuplicateName {
        /// The shared name.
        name: String,
    },
}

/// One offered tool with what the table computed about it.
struct Entry {
    tool: Box<dyn Tool>,
    footprint: Footprint,
    offered: Offered,
}

/// The session's tools: checked, filtered by the grant, and the one way calls reach them.
pub struct ToolTable {
    /// Offered tools by name.
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for ToolTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolTable")
            .field("offered", &self.entries.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ToolTable {
    /// Checks every tool's declaration (all of them, offered or not), then keeps those whose
    /// footprint's required axes lie within `conferred`.
    pub fn build(
        tools: Vec<Box<dyn Tool>>,
        conferred: &BTreeSet<Axis>,
    ) -> Result<Self, TableError> {
        let mut seen = BTreeSet::new();
        let mut entries = BTreeMap::new();
        for tool in tools {
            let decl = tool.decl();
            let tier = decl.check()?;
            let ToolDecl {
                name, footprint, ..
            } = decl;
            if !seen.insert(name.clone()) {
                return Err(TableError::DuplicateName { name });
            }
            if !footprint.required_axes().is_subset(conferred) {
                continue;
            }
            let offered = Offered {
                name: name.clone(),
                description: tool.description().to_owned(),
                input_schema: tool.input_schema(),
                tier,
            };
            entries.insert(
                name,
                Entry {
                    tool,
                    footprint,
                    offered,
                },
            );
        }
        Ok(Self { entries })
    }

    /// What the model is shown, by name.
    pub fn offered(&self) -> impl Iterator<Item = &Offered> {
        self.entries.values().map(|e| &e.offered)
    }

    /// Handles one call: absent if not offered, a card if wild, else runs it with exactly its
    /// footprint's effects granted from `fx`.
    pub fn dispatch(&self, name: &str, input: Value, fx: &Effects) -> Dispatch {
        let Some(entry) = self.entries.get(name) else {
            return Dispatch::Absent {
                name: name.to_owned(),
            };
        };
        match entry.offered.tier {
            Tier::Wild => Dispatch::NeedsReview(Card {
                tool: name.to_owned(),
                effect: entry.tool.effect(&input),
                input,
                footprint: entry.footprint.clone(),
            }),
            Tier::Tame => Self::run(entry, input, fx),
        }
    }

    /// Runs a call whose review approved it (the sequencer journals the approval first): a wild
    /// tool runs like a tame one, with exactly its footprint's effects granted from `fx` — the
    /// approval adds no authority, so the sandbox and the grant bound it whatever the reviewer
    /// said. A tame tool runs as [`ToolTable::dispatch`] runs it.
    pub fn dispatch_reviewed(&self, name: &str, input: Value, fx: &Effects) -> Dispatch {
        match self.entries.get(name) {
            Some(entry) => Self::run(entry, input, fx),
            None => Dispatch::Absent {
                name: name.to_owned(),
            },
        }
    }

    /// What an offered call would change and where ([`Tool::effect`]); `None` if not offered.
    pub fn effect(&self, name: &str, input: &Value) -> Option<String> {
        self.entries.get(name).map(|e| e.tool.effect(input))
    }

    fn run(entry: &Entry, input: Value, fx: &Effects) -> Dispatch {
        Dispatch::Ran(
            fx.for_footprint(&entry.footprint)
                .map_err(ToolError::from)
                .and_then(|granted| entry.tool.call(input, &granted)),
        )
    }
}
