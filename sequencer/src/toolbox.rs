//! The session's tools: the table the grant allows, the effects minted for it, and the undo
//! entries each call leaves, so its result can name what rewind would restore — and what it
//! would not (every class of the call's footprint that no undo entry covers).
//!
//! Tool calls run one at a time through [`Toolbox::run`] (on a blocking thread, so the pass
//! never waits for them): that is what lets the undo entries journaled during a call be
//! attributed to exactly that call.
//!
//! **Must never**: mint a token for an axis the grant does not confer; tokens are minted in one
//! place, [`mint_tokens`].
//!
//! # Layout
//! - [`mint_tokens`]: the one adapter from a grant to the ring's tokens.
//! - [`Toolbox`]: table + effects + the recording journal, and the agent's hook, loaded with
//!   its programs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use l3m_core::clock::SystemClock;
use l3m_core::effects::{EffectClass, Footprint, Reversibility, Tier};
use l3m_core::grant::{GrantError, RemoteName};
use l3m_core::log::{EffectNote, Refusal};
use l3m_core::names::AgentName;
use l3m_core::review::{split_justification, with_justification};
use l3m_programs::LoadError;
use l3m_programs::hooks::Hook;
use l3m_programs::host::Evaluator;
use l3m_ring::effects::{Effects, HubOutlet};
use l3m_ring::tokens::{self, Tokens};
use l3m_ring::undo::{EntryId, Undo, UndoEntry, UndoError, UndoStore};
use l3m_tools::{Dispatch, Tool, ToolTable};

use l3m_wire::hubd::authority::GrantView;

use crate::SequencerError;
use crate::model::ToolSpec;
use crate::undo::HubUndo;

/// Mints the session's tokens from its grant as hubd serves it. The one place a grant becomes
/// tokens.
///
/// Push remotes' URLs come with the grant (from the hub's settings); a grant naming a remote
/// the settings give no URL for fails to mint, naming the remote, rather than push anywhere.
pub fn mint_tokens(
    grant: &GrantView,
    agent: &AgentName,
    acr: &Path,
) -> Result<Tokens, SequencerError> {
    let remotes = grant
        .push_urls
        .iter()
        .map(|(name, url)| Ok((RemoteName::parse(name)?, url.clone())))
        .collect::<Result<BTreeMap<_, _>, GrantError>>()
        .map_err(|e| SequencerError::Tools(format!("hubd served a bad push remote: {e}")))?;
    tokens::mint_from_grant(
        &grant.grant,
        agent,
        acr.to_path_buf(),
        &remotes,
        l3m_ring::ambient_authority(),
    )
    .map_err(|e| SequencerError::Tools(format!("minting tokens: {e}")))
}

/// The undo chain as the file and git providers see it, noting each entry as it is recorded,
/// so a call's result can name its undo entries.
struct Recording {
    inner: Arc<HubUndo>,
    noted: Mutex<Vec<EffectNote>>,
}

impl UndoStore for Recording {
    fn next_id(&self) -> Result<EntryId, UndoError> {
        self.inner.next_id()
    }

    fn record(&self, entry: &UndoEntry) -> Result<(), UndoError> {
        self.inner.record(entry)?;
        if let Ok(mut noted) = self.noted.lock() {
            noted.push(EffectNote {
                class: match entry.undo {
                    Undo::Path { .. } => EffectClass::FsWrite,
                    Undo::Ref(_) => EffectClass::GitWrite,
                },
                target: entry.target().to_owned(),
                undo: Some(entry.id.to_string()),
            });
        }
        Ok(())
    }
}

/// What one tool call came to.
#[derive(Debug)]
pub enum Outcome {
    /// It ran (or failed); this is its result.
    Finished {
        /// What the model is shown.
        output: String,
        /// Whether it failed.
        is_error: bool,
        /// The undo entries it journaled, and what no entry covers.
        effects: Vec<EffectNote>,
        /// Which boundary refused it, when it was refused.
        refusal: Option<Refusal>,
    },
    /// It is wild and waits for review; nothing ran.
    NeedsReview {
        /// The card, as one line.
        card: String,
    },
}

/// The session's tool table and effects.
pub struct Toolbox {
    table: ToolTable,
    footprints: BTreeMap<String, Footprint>,
    effects: Effects,
    journal: Arc<Recording>,
    /// How mail and spawn tools reach hubd; kept so a rebuilt table keeps it.
    outlet: Option<Arc<dyn HubOutlet>>,
    /// One call at a time, so undo entries are attributed to the call that made them.
    turn: Mutex<()>,
    /// The agent's sealed programs that did not pass their checks, each naming its rule.
    refused_programs: Vec<LoadError>,
    /// The agent's admitted hook (`agent/hooks.star`), if it has one that passed its checks.
    hook: Option<Hook>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toolbox")
            .field("table", &self.table)
            .finish_non_exhaustive()
    }
}

impl Toolbox {
    /// Builds the table from `tools`, the agent's sealed programs and plugins (checked by
    /// `programs`, the evaluator, when there is one) and the grant's axes, and mints the effects; the tame
    /// providers record into `undo`, the agent's one undo chain.
    pub fn build(
        mut tools: Vec<Box<dyn Tool>>,
        grant: &GrantView,
        agent: &AgentName,
        acr: &Path,
        outlet: Option<Arc<dyn HubOutlet>>,
        undo: Arc<HubUndo>,
        programs: Option<&Evaluator>,
    ) -> Result<Toolbox, SequencerError> {
        let tokens = mint_tokens(grant, agent, acr)?;
        let (mut refused_programs, mut hook) = (Vec::new(), None);
        if let Some(evaluator) = programs {
            let loaded = l3m_programs::host::load(evaluator, acr, &tokens.conferred());
            tools.extend(
                loaded
                    .tools
                    .into_iter()
                    .map(|t| Box::new(t) as Box<dyn Tool>),
            );
            refused_programs = loaded.refused;
            match l3m_programs::hooks::load(evaluator, acr) {
                Some(Ok(admitted)) => hook = Some(admitted),
                Some(Err(refused)) => refused_programs.push(refused),
                None => {}
            }
        }
        let declared: BTreeMap<String, Footprint> = tools
            .iter()
            .map(|t| {
                let decl = t.decl();
                (decl.name, decl.footprint)
            })
            .collect();
        let table = ToolTable::build(tools, &tokens.conferred())
            .map_err(|e| SequencerError::Tools(e.to_string()))?;
        let footprints = table
            .offered()
            .filter_map(|o| Some((o.name.clone(), declared.get(&o.name)?.clone())))
            .collect();
        let journal = Arc::new(Recording {
            inner: undo,
            noted: Mutex::new(Vec::new()),
        });
        let undo: Arc<dyn UndoStore> = journal.clone();
        let effects = Effects::new(tokens, undo, Arc::new(SystemClock), outlet.clone());
        Ok(Toolbox {
            table,
            footprints,
            effects,
            journal,
            outlet,
            turn: Mutex::new(()),
            refused_programs,
            hook,
        })
    }

    /// The agent's programs (and hooks file) refused at this build, each naming its file, line
    /// and rule.
    pub fn refused_programs(&self) -> &[LoadError] {
        &self.refused_programs
    }

    /// The agent's admitted hook; `None`: events get the default disposition.
    pub fn hook(&self) -> Option<&Hook> {
        self.hook.as_ref()
    }

    /// The admitted programs offered, by name (without the prefix; `<plugin>-<name>` for a
    /// plugin's), with their tiers: what a hook may defer to (a tame one).
    pub fn programs(&self) -> BTreeMap<String, Tier> {
        (self.footprints.iter())
            .filter_map(|(n, footprint)| {
                let name = n.strip_prefix(l3m_programs::decl::TOOL_PREFIX)?;
                Some((name.to_owned(), footprint.tier()))
            })
            .collect()
    }

    /// The agent's undo chain, which a rebuilt table and a rewind share.
    pub fn undo(&self) -> Arc<HubUndo> {
        Arc::clone(&self.journal.inner)
    }

    /// The hub outlet the mail and spawn tools use.
    pub fn outlet(&self) -> Option<Arc<dyn HubOutlet>> {
        self.outlet.clone()
    }

    /// The tools as the model is shown them. A wild tool's input asks for the justification
    /// its review needs (core's `split_justification` removes it before the tool runs).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.table
            .offered()
            .map(|o| ToolSpec {
                name: o.name.clone(),
                description: o.description.clone(),
                input_schema: match o.tier {
                    Tier::Wild => with_justification(&o.input_schema),
                    Tier::Tame => o.input_schema.clone(),
                },
            })
            .collect()
    }

    /// What call `name` with `input` would change and where, as its tool describes it.
    pub fn effect(&self, name: &str, input: &serde_json::Value) -> Option<String> {
        self.table.effect(name, input)
    }

    /// The offered tools' footprints, for core's `plan`.
    pub fn footprints(&self) -> &BTreeMap<String, Footprint> {
        &self.footprints
    }

    /// A note for each class of `tool`'s footprint that no undo entry covers (a push, a letter, a
    /// wild call) and that the tool did not name itself in `noted`: a rewind must never pass over
    /// an effect it cannot take back in silence.
    fn unnamed_lasting(&self, tool: &str, noted: &[EffectNote]) -> Vec<EffectNote> {
        let Some(footprint) = self.footprints.get(tool) else {
            return Vec::new();
        };
        footprint
            .0
            .iter()
            .filter(|c| c.ceiling() > Reversibility::RoundTrip)
            .filter(|c| !noted.iter().any(|n| &n.class == *c))
            .map(|class| EffectNote {
                class: class.clone(),
                target: format!("by {tool}"),
                undo: None,
            })
            .collect()
    }

    /// Runs one call; its output is cut to `cap` bytes (the model's cap on one result).
    /// Blocking: call it from a blocking thread.
    pub fn run(&self, name: &str, input: serde_json::Value, cap: usize) -> Outcome {
        self.run_as(name, input, false, cap)
    }

    /// Runs a wild call whose review approved it (journaled before this is called), without
    /// its justification: in the same sandbox and under the same grant as any call.
    pub fn run_reviewed(&self, name: &str, input: serde_json::Value, cap: usize) -> Outcome {
        let input = split_justification(&input).map_or(input, |(_, rest)| rest);
        self.run_as(name, input, true, cap)
    }

    fn run_as(&self, name: &str, input: serde_json::Value, reviewed: bool, cap: usize) -> Outcome {
        let _turn = self
            .turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Ok(mut noted) = self.journal.noted.lock() {
            noted.clear();
        }
        // Where a reading tool began (its `from_byte`), so a cut's note counts from the start.
        let skipped = (input.get("from_byte").and_then(serde_json::Value::as_u64))
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        // A tool that panics fails its call, keeping the undo entries it journaled before.
        let dispatched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if reviewed {
                self.table.dispatch_reviewed(name, input, &self.effects)
            } else {
                self.table.dispatch(name, input, &self.effects)
            }
        }));
        let mut effects = self
            .journal
            .noted
            .lock()
            .map(|mut n| std::mem::take(&mut *n))
            .unwrap_or_default();
        let dispatched = match dispatched {
            Ok(dispatched) => dispatched,
            Err(panic) => {
                return Outcome::Finished {
                    output: format!("(l3m) {name} crashed: {}", panic_message(&*panic)),
                    is_error: true,
                    effects,
                    refusal: None,
                };
            }
        };
        match dispatched {
            Dispatch::Ran(Ok(out)) => {
                effects.extend(out.effects);
                effects.extend(self.unnamed_lasting(name, &effects));
                Outcome::Finished {
                    output: crate::boundary::fit_output(out.text, cap, name, skipped),
                    is_error: false,
                    effects,
                    refusal: None,
                }
            }
            Dispatch::Ran(Err(e)) => Outcome::Finished {
                output: crate::boundary::fit_output(e.to_string(), cap, name, 0),
                is_error: true,
                effects,
                refusal: e.refusal(),
            },
            Dispatch::Absent { name } => Outcome::Finished {
                output: format!("(l3m) no tool named {name:?} is offered to you"),
                is_error: true,
                effects,
                refusal: Some(Refusal::new("tool-table", None)),
            },
            Dispatch::NeedsReview(card) => Outcome::NeedsReview {
                card: format!("{} would {}", card.tool, card.effect.replace('\n', " ")),
            },
        }
    }
}

/// What a panic said, if it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("it panicked")
}
