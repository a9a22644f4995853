//! Reading and replacing the hub's settings (`settings.toml` on `refs/l3m/settings`).
//!
//! # Format
//! - `hubd.read-settings` `{ capability }` → `hubd.settings` `{ text: str, tip: str }`: the
//!   file as its human wrote it, and the commit holding it. Any session may read it: settings
//!   hold no secrets.
//! - `hubd.update-settings` `{ capability, text: str, expected_tip: str }` →
//!   `hubd.settings-updated` `{ tip: str, previous: str }`: replaces the whole file if the
//!   settings ref is still at `expected_tip`. Humans only (`refused` otherwise); a file that
//!   does not parse as settings is `invalid` naming what is wrong
//!   ([`l3m_core::settings::SettingsError`]); a moved ref is `conflict`.

use serde::{Deserialize, Serialize};

use super::session::Capability;
use crate::envelope::Message;

/// Asks for the hub's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadSettings {
    /// The caller's session.
    pub capability: Capability,
}

impl Message for ReadSettings {
    const KIND: &'static str = "hubd.read-settings";
}

/// The hub's settings file and where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsView {
    /// `settings.toml`, byte for byte.
    pub text: String,
    /// The commit of `refs/l3m/settings` holding it.
    pub tip: String,
}

impl Message for SettingsView {
    const KIND: &'static str = "hubd.settings";
}

/// Asks to replace the hub's settings file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateSettings {
    /// The caller's session: a human's.
    pub capability: Capability,
    /// The whole new `settings.toml`.
    pub text: String,
    /// The settings commit the new text was written against.
    pub expected_tip: String,
}

impl Message for UpdateSettings {
    const KIND: &'static str = "hubd.update-settings";
}

/// The settings replaced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsUpdated {
    /// The new settings commit.
    pub tip: String,
    /// The one it replaced.
    pub previous: String,
}

impl Message for SettingsUpdated {
    const KIND: &'static str = "hubd.settings-updated";
}
