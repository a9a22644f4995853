//! `l3m-core`: the pure domain model of l3m.
//!
//! Everything l3m decides is decided here, as pure functions over plain data: whether a name is
//! valid, which ref holds what, whether a spawn is admitted, what a budget allows, what the model
//! sees of a Log, what is owed next, whether a letter may be sent and how it renders, and which
//! tier a tool falls in. The services are imperative shells around these decisions.
//!
//! **Must never** touch the filesystem, network, clock, environment, randomness or tokio. Time,
//! ids and randomness come in as arguments, which is what lets every service, the CLI's embedded
//! mode and the tests compose these functions freely and replay them exactly.
//!
//! # Layout
//! - [`names`]: agent, human, service, persona and office names; the name tree is the agent tree.
//! - [`refs`]: every ref name and hub path, derived in one module.
//! - [`axis`]: the axes of a grant, named once.
//! - [`duty`]: which holder of a session capability may change which ref.
//! - [`credential`]: which process may open which sessions: credential rows and their fold.
//! - [`grant`]: grants, the spawn gate (`admit_spawn`), expansion and regrants.
//! - [`budget`]: fuel lent down the tree, spent, returned.
//! - [`build`]: build plans (stages, mounts, networks, limits) and the W^X gate over them.
//! - [`ledger`]: who exists and who is whose parent, as rows and their fold.
//! - [`log`]: the records of an agent's Log.
//! - [`log_rule`]: what hubd accepts as a Log record, defined once for hubd and the sequencer.
//! - [`hooks`]: which dispositions an event admits, and the default when a hook's is refused.
//! - [`view`]: the fold from a Log to what the model sees.
//! - [`vigil`]: bounded watches on hub facts: who may arm and cancel them, and when they fire.
//! - [`owed`]: the fold from a Log to what the sequencer owes next.
//! - [`aftermath`]: the fold from a Log to what a rewind takes back and what it cannot.
//! - [`stats`]: the folds behind `l3m stats`: calls, tokens, tools, and what the calls cost.
//! - [`story`]: one line per record, for `l3m log` and each commit of a Log's ref.
//! - [`wake`]: whether an asleep agent is owed a wake, and whether its Log need be read to say.
//! - [`stuck`]: whether an agent's last turn ended in a failure it cannot get past, and the fix.
//! - [`mail`]: addresses, letters, inboxes and read marks.
//! - [`effects`]: effect classes, reversibility ceilings, tiers.
//! - [`review`]: review as deliberation over wild calls: justification, verdicts, rounds, cards.
//! - [`sandbox`]: where bubblewrap is, the isolation every sandbox gets, the fix when it fails.
//! - [`json`]: JSON values as messages about bad input name them.
//! - [`string_form`](mod@string_form): the one string form of every validated text type.
//! - [`unprintable`]: the characters never shown or stored as themselves.
//!
//! # Example
//! ```
//! use l3m_core::names::AgentName;
//! use l3m_core::refs::{agent_ref, AgentRef};
//!
//! let worker = AgentName::parse("alice/main/worker")?;
//! assert_eq!(worker.parent().unwrap().as_str(), "alice/main");
//! assert_eq!(agent_ref(&worker, AgentRef::Log), "refs/l3m/a/alice/main/worker/_/log");
//! assert!(AgentName::parse("alice/Main").is_err());
//! # Ok::<(), l3m_core::names::NameError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod aftermath;
pub mod axis;
pub mod budget;
pub mod build;
pub mod clock;
pub mod credential;
pub mod duty;
pub mod effects;
pub mod grant;
pub mod hooks;
pub mod json;
pub mod ledger;
pub mod log;
pub mod log_rule;
pub mod mail;
pub mod names;
pub mod owed;
pub mod record_format;
pub mod refs;
pub mod review;
pub mod sandbox;
pub mod settings;
pub mod stats;
pub mod story;
pub mod string_form;
pub mod stuck;
pub mod unprintable;
pub mod view;
pub mod vigil;
pub mod wake;
