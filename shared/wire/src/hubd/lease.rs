//! Session leases: the lock that makes one sequencer the only one running an agent.
//!
//! The Log's compare-and-swap already keeps two writers from interleaving; the lease keeps a
//! second sequencer from starting at all, and tells it who holds the agent. It is also what
//! makes an agent `running` rather than `asleep` in the agent tree.
//!
//! # Format
//! - `hubd.acquire-lease` `{ capability, agent: str, holder: str, ttl_ms: u64 }` →
//!   `hubd.lease-held` `{ agent: str, holder: str, token: u64, ttl_ms: u64 }`. Only the agent's
//!   own sequencer session may ask. A lease another holder keeps alive is a `conflict` whose
//!   message names the holder and how long it has left. `holder` is free text that says who
//!   the holder is (host and process id); `token` is a fencing number, larger for every lease
//!   hubd grants.
//! - `hubd.renew-lease` `{ capability, agent: str, token: u64 }` → `hubd.lease-held`. A lease
//!   that was taken over (or never granted) is a `conflict`: its holder must stop.
//! - `hubd.release-lease` `{ capability, agent: str, token: u64 }` → `hubd.lease-released`
//!   `{ agent: str }`. Releasing a lease already gone is not an error.
//!
//! Leases live in hubd's memory only: a restarted hubd holds none, and running sequencers take
//! theirs again at their next renewal.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Asks for the agent's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquireLease {
    /// The caller's session: the agent's sequencer.
    pub capability: Capability,
    /// The agent.
    pub agent: String,
    /// Who asks, for the message a loser reads (`host:pid`).
    pub holder: String,
    /// How long the lease lasts without renewal.
    pub ttl_ms: u64,
}

impl Message for AcquireLease {
    const KIND: &'static str = "hubd.acquire-lease";
}

/// A lease granted or renewed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHeld {
    /// The agent.
    pub agent: String,
    /// Its holder.
    pub holder: String,
    /// The fencing number of this lease.
    pub token: u64,
    /// How long it lasts from now without renewal.
    pub ttl_ms: u64,
}

impl Message for LeaseHeld {
    const KIND: &'static str = "hubd.lease-held";
}

/// Keeps a held lease alive for another `ttl_ms`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewLease {
    /// The caller's session.
    pub capability: Capability,
    /// The agent.
    pub agent: String,
    /// The lease's fencing number.
    pub token: u64,
}

impl Message for RenewLease {
    const KIND: &'static str = "hubd.renew-lease";
}

/// Gives a lease up, so another sequencer may start at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseLease {
    /// The caller's session.
    pub capability: Capability,
    /// The agent.
    pub agent: String,
    /// The lease's fencing number.
    pub token: u64,
}

impl Message for ReleaseLease {
    const KIND: &'static str = "hubd.release-lease";
}

/// A lease released (or already gone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseReleased {
    /// The agent.
    pub agent: String,
}

impl Message for LeaseReleased {
    const KIND: &'static str = "hubd.lease-released";
}
