//! Reading an agent's grant and budget, as the ledger holds them.
//!
//! # Format
//! - `hubd.read-grant` `{ capability, agent: str }` → `hubd.grant`
//!   `{ agent: str, grant: Grant, account: Account }` (`l3m_core::grant::Grant` and
//!   `l3m_core::budget::Account`, field names as in their TOML/JSON forms). Only a live agent
//!   has a grant; any other name is `not-found`. Read by the agent's own sequencer, an
//!   ancestor's sequencer, or a human; anyone else is `refused`.
//! - `hubd.regrant` `{ capability, agent: str, grant: Grant }` → `hubd.regranted`
//!   `{ agent: str, grants_tip: str }`. Only the agent's issuer may ask: the human that spawned
//!   a root, or the parent's sequencer for a child. The new grant must lie within the issuer's
//!   (expanded by its own refs and mail), and every live child of the agent must still lie
//!   within the new one; otherwise `refused`, naming the axis. The budget is not changed here:
//!   a loan is set at spawn.

use l3m_core::budget::Account;
use l3m_core::grant::Grant;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Asks for a live agent's grant and account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadGrant {
    /// The caller's session.
    pub capability: Capability,
    /// Whose grant.
    pub agent: String,
}

impl Message for ReadGrant {
    const KIND: &'static str = "hubd.read-grant";
}

/// A live agent's grant and account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantView {
    /// The agent.
    pub agent: String,
    /// Its current grant.
    pub grant: Grant,
    /// Its budget: loan, spend, lent out, left.
    pub account: Account,
    /// The URL of each push remote the grant names, from the hub's settings; a remote the
    /// settings do not give is absent (and cannot be pushed to).
    #[serde(default)]
    pub push_urls: BTreeMap<String, String>,
}

impl Message for GrantView {
    const KIND: &'static str = "hubd.grant";
}

/// Replaces a live agent's grant, asked by its issuer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regrant {
    /// The issuer's session: the human that spawned a root, or the parent's sequencer.
    pub capability: Capability,
    /// Whose grant changes.
    pub agent: String,
    /// The new grant, whole.
    pub grant: Grant,
}

impl Message for Regrant {
    const KIND: &'static str = "hubd.regrant";
}

/// A regrant admitted and written: the ledger row and the grants ref.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Regranted {
    /// The agent.
    pub agent: String,
    /// The new commit of its grants ref.
    pub grants_tip: String,
}

impl Message for Regranted {
    const KIND: &'static str = "hubd.regranted";
}
