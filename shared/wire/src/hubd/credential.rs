//! Issuing, listing and revoking credentials: humans decide which processes may open sessions.
//!
//! # Format
//! - `hubd.issue-credential` `{ capability, id: str, scope: Scope, key: str, expires_ms: u64,
//!   label: str }` → `hubd.credential-issued` `{ credential: Credential }`. The issuer made the
//!   key pair and keeps the private half; only the public key (64 hex digits) travels. A human
//!   credential may be issued only for a registered human. Humans only.
//! - `hubd.revoke-credential` `{ capability, id: str }` → `hubd.credential-revoked`
//!   `{ id: str, sessions: u64 }`: the credential opens nothing from now on and its open
//!   sessions end (`revoked` on their next request). Humans only.
//! - `hubd.list-credentials` `{ capability }` → `hubd.credentials` `{ credentials: [Credential] }`:
//!   every credential ever issued, public keys only. Humans only.
//!
//! `Scope` and `Credential` are `l3m_core::credential`'s; both sides are written to
//! `refs/l3m/credentials`, one JSON row per commit, so `git log` of that ref is the audit.

use l3m_core::credential::{Credential, Scope};
use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Registers a credential's public key under `id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueCredential {
    /// The caller's session.
    pub capability: Capability,
    /// The id, chosen at random by the issuer.
    pub id: String,
    /// What it may open.
    pub scope: Scope,
    /// Its Ed25519 public key, 64 hex digits.
    pub key: String,
    /// When it stops opening sessions (ms since the Unix epoch).
    pub expires_ms: u64,
    /// Where it is used, for the people reading the list.
    pub label: String,
}

impl Message for IssueCredential {
    const KIND: &'static str = "hubd.issue-credential";
}

/// A credential registered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialIssued {
    /// As hubd now knows it.
    pub credential: Credential,
}

impl Message for CredentialIssued {
    const KIND: &'static str = "hubd.credential-issued";
}

/// Revokes a credential and ends its sessions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeCredential {
    /// The caller's session.
    pub capability: Capability,
    /// Which.
    pub id: String,
}

impl Message for RevokeCredential {
    const KIND: &'static str = "hubd.revoke-credential";
}

/// A credential revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialRevoked {
    /// Which.
    pub id: String,
    /// How many open sessions it ended.
    pub sessions: u64,
}

impl Message for CredentialRevoked {
    const KIND: &'static str = "hubd.credential-revoked";
}

/// Asks for every credential of the hub.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCredentials {
    /// The caller's session.
    pub capability: Capability,
}

impl Message for ListCredentials {
    const KIND: &'static str = "hubd.list-credentials";
}

/// Every credential ever issued, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// Public parts only.
    pub credentials: Vec<Credential>,
}

impl Message for Credentials {
    const KIND: &'static str = "hubd.credentials";
}
