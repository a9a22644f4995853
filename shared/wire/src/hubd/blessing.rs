//! Pinning and reading blessings of build targets (`refs/l3m/blessings/<agent>/_/<target>`).
//!
//! # Format
//! - `hubd.bless` `{ capability, agent, blessing }` → `hubd.blessed` `{ tip: str }`: pins the
//!   blessing (the Makefile, the target, each input's blake3) for `agent`, replacing any
//!   earlier pin of that target. Humans only (`refused` otherwise, naming the rule); a target
//!   that is not a plain make target, or whose inputs are not repository-relative, is
//!   `invalid`.
//! - `hubd.read-blessing` `{ capability, agent, target }` → `hubd.blessing` `{ blessing:
//!   blessing | null, tip: str | null }`: what is pinned now, if anything. Any session may read
//!   it: a blessing holds hashes, no secrets.

use l3m_core::build::Blessing;
use l3m_core::names::AgentName;
use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Asks to pin a blessing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bless {
    /// The caller's session: a human's.
    pub capability: Capability,
    /// The agent whose runs of the target the blessing lets through.
    pub agent: AgentName,
    /// What is pinned.
    pub blessing: Blessing,
}

impl Message for Bless {
    const KIND: &'static str = "hubd.bless";
}

/// The blessing pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Blessed {
    /// The commit of the blessing's ref.
    pub tip: String,
}

impl Message for Blessed {
    const KIND: &'static str = "hubd.blessed";
}

/// Asks what is pinned for one target of one agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadBlessing {
    /// The caller's session.
    pub capability: Capability,
    /// The agent.
    pub agent: AgentName,
    /// The target.
    pub target: String,
}

impl Message for ReadBlessing {
    const KIND: &'static str = "hubd.read-blessing";
}

/// What is pinned, if anything.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlessingView {
    /// The pin.
    pub blessing: Option<Blessing>,
    /// The commit holding it.
    pub tip: Option<String>,
}

impl Message for BlessingView {
    const KIND: &'static str = "hubd.blessing";
}
