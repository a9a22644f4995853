//! `hubd.read-settings` and `hubd.update-settings`, and what hubd serves out of the settings:
//! the URLs of the push remotes a grant names.
//!
//! The file is kept as its human wrote it; hubd refuses a replacement that does not parse
//! ([`Settings::parse`]) and keeps the parsed form in memory for [`push_urls`].

use std::collections::BTreeMap;
use std::sync::Arc;

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::grant::Grant;
use l3m_core::refs::SETTINGS;
use l3m_core::settings::Settings;
use l3m_wire::hubd::settings::{ReadSettings, SettingsUpdated, SettingsView, UpdateSettings};

use super::error::ServiceError;
use super::gate;
use super::handlers::blocking;
use super::state::State;
use crate::store::{Hub, SETTINGS_FILE, StoreError};

/// The settings file of `hub`, as text.
pub(super) fn read_text(hub: &Hub) -> Result<String, StoreError> {
    let bytes = hub.read_file(SETTINGS, SETTINGS_FILE)?;
    String::from_utf8(bytes).map_err(|e| StoreError::Io {
        op: "read settings.toml (it is not UTF-8) from",
        path: hub.git_dir(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}

/// The URL of each push remote `grant` names that `settings` gives.
pub(super) fn push_urls(settings: &Settings, grant: &Grant) -> BTreeMap<String, String> {
    grant
        .git_push
        .keys()
        .filter_map(|remote| {
            let url = settings.remote_url(remote.as_str())?;
            Some((remote.to_string(), url.to_owned()))
        })
        .collect()
}

fn read(state: &State, req: &ReadSettings) -> Result<SettingsView, ServiceError> {
    state.duty(&req.capability)?;
    let tip = gate::tip_hex(state.hub().tip(SETTINGS)?)
        .ok_or_else(|| ServiceError::Internal(format!("the hub has no {SETTINGS}")))?;
    Ok(SettingsView {
        text: read_text(state.hub())?,
        tip,
    })
}

fn update(state: &State, req: &UpdateSettings) -> Result<SettingsUpdated, ServiceError> {
    let duty = state.duty(&req.capability)?;
    may_write(&duty, SETTINGS, RefWrite::Set)?;
    let parsed = Settings::parse(&req.text).map_err(|e| ServiceError::Invalid(e.to_string()))?;
    let expected = gate::tip(Some(&req.expected_tip))?;
    let commit = state.hub().commit_files(
        SETTINGS,
        expected,
        &[(SETTINGS_FILE, req.text.as_bytes())],
        &format!("settings updated by {duty}"),
    )?;
    state.replace_settings(parsed);
    Ok(SettingsUpdated {
        tip: commit.to_string(),
        previous: req.expected_tip.clone(),
    })
}

/// `hubd.read-settings` (it reads from `hub.git`).
pub async fn read_settings(
    state: Arc<State>,
    req: ReadSettings,
) -> Result<SettingsView, ServiceError> {
    blocking(&state, move |s| read(s, &req)).await
}

/// `hubd.update-settings` (the store fsyncs).
pub async fn update_settings(
    state: Arc<State>,
    req: UpdateSettings,
) -> Result<SettingsUpdated, ServiceError> {
    blocking(&state, move |s| update(s, &req)).await
}
