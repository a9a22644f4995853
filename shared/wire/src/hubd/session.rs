//! Opening a session: a credential's signature buys a capability bound to one duty and one key.
//!
//! # Format
//! - `hubd.open-session` `{ credential: str, duty: Duty, client_key: bin 32, signature: bin 64 }`
//!   → `hubd.session-opened` `{ capability: str, duty: Duty, hub_key: bin 32 }`. `duty` is
//!   `l3m_core::duty::Duty` (a map tagged by `duty`). `signature` is the credential's Ed25519
//!   signature over [`crate::credential::open_statement`]; both keys are fresh X25519 keys, and
//!   the session key derives from them ([`crate::credential::Ephemeral::agree`]).
//! - A capability is 64 lowercase hex digits (32 random bytes) naming the session. It is not a
//!   secret: every later request must also carry a seal made with the session key, which never
//!   travels. Sessions live only in hubd's memory: every one ends when hubd restarts, and its
//!   holder opens a new one with its credential.

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

/// Asks hubd for a session, proving possession of a credential's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenSession {
    /// The credential's id.
    pub credential: String,
    /// The one duty the session is for.
    pub duty: Duty,
    /// The client's fresh X25519 public key.
    #[serde(with = "serde_bytes")]
    pub client_key: [u8; 32],
    /// The credential's signature over the open statement.
    #[serde(with = "serde_bytes")]
    pub signature: [u8; 64],
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
    /// hubd's fresh X25519 public key for this session.
    #[serde(with = "serde_bytes")]
    pub hub_key: [u8; 32],
}

impl Message for SessionOpened {
    const KIND: &'static str = "hubd.session-opened";
}
