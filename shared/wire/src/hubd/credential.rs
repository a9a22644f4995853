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
//! - `hubd.list-credentials` `{ capability, after?: str, all?: bool }` → `hubd.credentials`
//!   `{ credentials: [Credential], next?: str }`: one page (at most [`CREDENTIALS_PAGE`]) of the
//!   credentials in id order after `after`, public keys only; revoked and expired ones only
//!   with `all`. `next`, when present, is the `after` of the next page. Humans only.
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

/// The most credentials one [`Credentials`] page holds.
pub const CREDENTIALS_PAGE: usize = 200;

/// Asks for one page of the hub's credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListCredentials {
    /// The caller's session.
    pub capability: Capability,
    /// The id the page starts after (`None`: from the first).
    #[serde(default)]
    pub after: Option<String>,
    /// Revoked and expired credentials too.
    #[serde(default)]
    pub all: bool,
}

impl Message for ListCredentials {
    const KIND: &'static str = "hubd.list-credentials";
}

/// One page of credentials, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// Public parts only.
    pub credentials: Vec<Credential>,
    /// Where the next page starts (its `after`); `None` on the last page.
    #[serde(default)]
    pub next: Option<String>,
}

impl Message for Credentials {
    const KIND: &'static str = "hubd.credentials";
}
