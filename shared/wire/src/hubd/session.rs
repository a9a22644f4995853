//! Opening a session: a credential's signature buys a capability bound to one duty and one key.
//!
//! # Format
//! - `hubd.open-session` `{ credential: str, duty: Duty, client_key: bin 32, signature: bin 64 }`
//!   → `hubd.session-opened` `{ capability: str, duty: Duty, hub_key: bin 32 }`. `duty` is
//!   `l3m_core::duty::Duty` (a map tagged by `duty`). `signature` is the credential's Ed25519
//!   signature over [`crate::credential::open_statement`]; both keys are fresh X25519 keys, and
//!   the session key derives from them ([`crate::credential::Ephemeral::with_hub`]).
//! - `hubd.vouch` `{ capability, agent: str, action: str, digest: bin 32 }` → `hubd.vouched`
//!   `{ voucher: { agent, action, by, expires_ms, nonce, digest: bin 32 }, signature: bin 64,
//!   proof?: bin 32 }`: hubd's word, signed with `voucher_key`, that the caller (a human, or a
//!   strict ancestor's sequencer) may send `action` with exactly the arguments whose digest is
//!   `digest` ([`crate::control::ControlRequest::digest`]) to `agent`'s sequencer once within
//!   30 s. `refused` for anyone else. hubd answers without `proof`; the requester adds it
//!   ([`crate::credential::SessionKey::holder_proof`]), so only the holder of the requesting
//!   session's key can present the voucher.
//! - `hubd.spend-voucher` `{ capability, vouched, digest: bin 32 }` → `hubd.voucher-spent`
//!   `{ outcome: "taken" | "unknown" | "used" | "expired" | "other-arguments" |
//!   "not-the-requester" | "not-for-you" }`: the process a voucher was presented to (the
//!   agent's sequencer, or the host of its subtree) asks hubd to spend it for the request whose
//!   digest it computed. hubd takes each voucher once, across every process: a second
//!   presentation, anywhere, is `used`, and one from before hubd restarted is `unknown`.
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
    /// The Ed25519 key this hubd process signs vouchers with ([`Vouched`]).
    #[serde(with = "serde_bytes")]
    pub voucher_key: [u8; 32],
    /// hubd's identity key's signature over [`SessionOpened::statement`]; a client whose
    /// credential pins hubd ([`crate::credential::KeyFile::hub_key`]) refuses an answer without
    /// it or with another key's.
    #[serde(default, with = "serde_bytes", skip_serializing_if = "Option::is_none")]
    pub signature: Option<[u8; 64]>,
}

impl Message for SessionOpened {
    const KIND: &'static str = "hubd.session-opened";
}

impl SessionOpened {
    /// What hubd signs: the hub, the client's fresh key (so an answer is for this request
    /// only), and everything the answer says.
    pub fn statement(&self, hub: &str, client_key: &[u8; 32]) -> Vec<u8> {
        let duty = serde_json::to_string(&self.duty).unwrap_or_default();
        let mut statement = b"l3m session-opened v1\0".to_vec();
        for part in [
            hub.as_bytes(),
            self.capability.0.as_bytes(),
            duty.as_bytes(),
        ] {
            statement.extend_from_slice(part);
            statement.push(0);
        }
        statement.extend_from_slice(client_key);
        statement.extend_from_slice(&self.hub_key);
        statement.extend_from_slice(&self.voucher_key);
        statement
    }
}

/// Asks hubd to vouch that the caller may send `action` to `agent`'s sequencer: a human, or
/// the sequencer of one of its strict ancestors. A sequencer takes control requests only with
/// such a voucher, so a party that may merely publish on its subjects controls nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vouch {
    /// The caller's session.
    pub capability: Capability,
    /// The agent to be controlled.
    pub agent: String,
    /// The control op (`interrupt`, `rewind`, `status`).
    pub action: String,
    /// The digest of the whole request the voucher is for
    /// ([`crate::control::ControlRequest::digest`]).
    #[serde(with = "serde_bytes")]
    pub digest: [u8; 32],
}

impl Message for Vouch {
    const KIND: &'static str = "hubd.vouch";
}

/// What hubd vouches for: who may send which control op to which agent, until when, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Voucher {
    /// The agent.
    pub agent: String,
    /// The op.
    pub action: String,
    /// Who asked (the duty, as text), for the agent's records.
    pub by: String,
    /// Until when it is good (ms since the Unix epoch).
    pub expires_ms: u64,
    /// 16 random hex digits, under which hubd spends the voucher once.
    pub nonce: String,
    /// The digest of the request's whole body, arguments included.
    #[serde(with = "serde_bytes")]
    pub digest: [u8; 32],
}

impl Voucher {
    /// The bytes hubd signs.
    pub fn statement(&self) -> Vec<u8> {
        let mut statement = b"l3m voucher v2\0".to_vec();
        for part in [&self.agent, &self.action, &self.by, &self.nonce] {
            statement.extend_from_slice(part.as_bytes());
            statement.push(0);
        }
        statement.extend_from_slice(&self.expires_ms.to_le_bytes());
        statement.extend_from_slice(&self.digest);
        statement
    }
}

/// A voucher and hubd's signature over it, made with the key every session learns at open
/// ([`SessionOpened::voucher_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vouched {
    /// What is vouched for.
    pub voucher: Voucher,
    /// hubd's Ed25519 signature over [`Voucher::statement`].
    #[serde(with = "serde_bytes")]
    pub signature: [u8; 64],
    /// The requester's proof that it holds the session the voucher was asked in
    /// ([`crate::credential::SessionKey::holder_proof`]); added by the requester, checked by
    /// hubd when the voucher is spent.
    #[serde(default, with = "serde_bytes", skip_serializing_if = "Option::is_none")]
    pub proof: Option<[u8; 32]>,
}

impl Message for Vouched {
    const KIND: &'static str = "hubd.vouched";
}

impl Vouched {
    /// Whether hubd's key `voucher_key` signed this voucher.
    pub fn signed_by(&self, voucher_key: &[u8; 32]) -> bool {
        crate::credential::verify(
            &l3m_core::credential::PublicKey(*voucher_key),
            &self.voucher.statement(),
            &self.signature,
        )
    }
}

/// Asks hubd to spend a voucher presented to the caller (an agent's sequencer, or the host of
/// its subtree) for the request whose digest the caller computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendVoucher {
    /// The caller's session.
    pub capability: Capability,
    /// The voucher as presented, with the requester's proof.
    pub vouched: Vouched,
    /// The digest of the request it came with, as the caller computed it.
    #[serde(with = "serde_bytes")]
    pub digest: [u8; 32],
}

impl Message for SpendVoucher {
    const KIND: &'static str = "hubd.spend-voucher";
}

/// What became of a voucher presented for spending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "kebab-case")]
pub enum SpendOutcome {
    /// Spent now: the request may go ahead.
    #[error("taken")]
    Taken,
    /// hubd never issued it, or issued it before it restarted.
    #[error("hubd holds no such voucher (it may predate hubd's restart); ask for a fresh one")]
    Unknown,
    /// It was spent before, here or at another process.
    #[error("the voucher was used before; each is good for one request")]
    Used,
    /// Its time passed.
    #[error("the voucher expired; ask hubd for a fresh one")]
    Expired,
    /// The request it came with is not the one it was issued for.
    #[error("the voucher was issued for another request (other arguments)")]
    OtherArguments,
    /// The one presenting it does not hold the session that asked for it.
    #[error(
        "the voucher is presented without its requester's proof; only the session that asked for it may use it"
    )]
    NotTheRequester,
    /// The caller may not take requests for the voucher's agent.
    #[error("the voucher is for an agent this session does not run")]
    NotForYou,
}

/// hubd's answer to a [`SpendVoucher`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoucherSpent {
    /// What became of it.
    pub outcome: SpendOutcome,
}

impl Message for VoucherSpent {
    const KIND: &'static str = "hubd.voucher-spent";
}
