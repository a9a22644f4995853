//! Opening a session: the hub secret buys a capability bound to one entity and one duty.
//!
//! # Format
//! - `hubd.open-session` `{ secret: str, duty: Duty }` → `hubd.session-opened`
//!   `{ capability: str, duty: Duty }`. `duty` is `l3m_core::duty::Duty` (a map tagged by
//!   `duty`: `sequencer` with `agent`, `human` with `human`, `postman` with `service`).
//! - A capability is 64 lowercase hex digits (32 random bytes). It is kept only in hubd's
//!   memory: every session ends when hubd restarts, and its holder opens a new one.

use l3m_core::duty::Duty;
use serde::{Deserialize, Serialize};

use crate::envelope::Message;

/// A session capability: the unguessable token every later request carries.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Capability(pub String);

impl std::fmt::Debug for Capability {
    /// Never prints the token itself, so logs cannot leak a live capability.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Capability(..)")
    }
}

/// Asks hubd for a capability; only a holder of the hub secret (the operator) may ask.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenSession {
    /// The contents of the hub's secret file.
    pub secret: String,
    /// The one duty the session is for.
    pub duty: Duty,
}

impl std::fmt::Debug for OpenSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenSession")
            .field("duty", &self.duty)
            .finish_non_exhaustive()
    }
}

impl Message for OpenSession {
    const KIND: &'static str = "hubd.open-session";
}

/// A session opened: its capability and the duty it is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionOpened {
    /// The capability to put on every later request.
    pub capability: Capability,
    /// The duty it is good for.
    pub duty: Duty,
}

impl Message for SessionOpened {
    const KIND: &'static str = "hubd.session-opened";
}
