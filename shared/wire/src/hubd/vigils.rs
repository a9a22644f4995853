//! Arming, cancelling and reading an agent's vigils (`refs/l3m/a/<agent>/_/vigils`).
//!
//! A vigil is a bounded watch on a hub fact (core's [`l3m_core::vigil`]). hubd checks each
//! request with [`admit_arm`](l3m_core::vigil::admit_arm) or
//! [`admit_cancel`](l3m_core::vigil::admit_cancel): the agent's own sequencer arms and cancels
//! its own, an ancestor's sequencer or a human pins one that only they may cancel. hubd alone
//! appends firings.
//!
//! # Format
//! - `hubd.arm-vigil` `{ capability, agent: str, watch: Watch, until_ms: u64 }` →
//!   `hubd.vigil-armed` `{ id: str, len: u64 }`; refused (`refused`) for a caller that may not,
//!   `invalid` for a watch the agent may not keep or a bound out of range.
//! - `hubd.cancel-vigil` `{ capability, agent: str, id: str }` → `hubd.vigil-cancelled`
//!   `{ len: u64 }`; a pinned vigil cancelled by its agent is `refused`.
//! - `hubd.read-vigils` `{ capability, agent: str, from: u64, to: u64 }` → `hubd.vigil-range`
//!   `{ lines: [str], from: u64, len: u64, tip: str|nil }`, one page like `hubd.read-log`; read
//!   by the agent's own sequencer, an ancestor's, its host, or a human.

use l3m_core::vigil::Watch;
use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Arms one vigil on an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmVigil {
    /// The caller's session.
    pub capability: Capability,
    /// Whose vigil: the caller's own agent, or a descendant to pin it on.
    pub agent: String,
    /// What it waits for.
    pub watch: Watch,
    /// When it lapses unfired (milliseconds since the epoch).
    pub until_ms: u64,
}

impl Message for ArmVigil {
    const KIND: &'static str = "hubd.arm-vigil";
}

/// A vigil armed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VigilArmed {
    /// Its id within the agent's chain.
    pub id: String,
    /// The chain's length after the append.
    pub len: u64,
}

impl Message for VigilArmed {
    const KIND: &'static str = "hubd.vigil-armed";
}

/// Cancels one armed vigil.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelVigil {
    /// The caller's session.
    pub capability: Capability,
    /// Whose vigil.
    pub agent: String,
    /// Which.
    pub id: String,
}

impl Message for CancelVigil {
    const KIND: &'static str = "hubd.cancel-vigil";
}

/// A vigil cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VigilCancelled {
    /// The chain's length after the append.
    pub len: u64,
}

impl Message for VigilCancelled {
    const KIND: &'static str = "hubd.vigil-cancelled";
}

/// Reads a range of an agent's vigils chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadVigils {
    /// The caller's session.
    pub capability: Capability,
    /// Whose vigils.
    pub agent: String,
    /// The first line wanted.
    pub from: u64,
    /// One past the last line wanted (cut to the chain's length).
    pub to: u64,
}

impl Message for ReadVigils {
    const KIND: &'static str = "hubd.read-vigils";
}

/// Lines of a vigils chain, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VigilRange {
    /// The lines, oldest first.
    pub lines: Vec<String>,
    /// The number of the first one.
    pub from: u64,
    /// The chain's whole length.
    pub len: u64,
    /// The commit that length belongs to.
    pub tip: Option<String>,
}

impl Message for VigilRange {
    const KIND: &'static str = "hubd.vigil-range";
}
