//! Reading an agent's grant and budget, as the ledger holds them.
//!
//! # Format
//! - `hubd.read-grant` `{ capability, agent: str }` → `hubd.grant`
//!   `{ agent: str, grant: Grant, account: Account }` (`l3m_core::grant::Grant` and
//!   `l3m_core::budget::Account`, field names as in their TOML/JSON forms). Only a live agent
//!   has a grant; any other name is `not-found`.

use l3m_core::budget::Account;
use l3m_core::grant::Grant;
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
}

impl Message for GrantView {
    const KIND: &'static str = "hubd.grant";
}
