//! `hub init`: a new hub whose ledger already registers its human root, and its first
//! credentials.
//!
//! A hub's ledger must start with a `register-human` row ([`Ledger::replay`] refuses anything
//! else first), so creating the store and writing that row are one step here. Init also issues
//! the two credentials a single-host stack needs (rows of `refs/l3m/credentials`, private keys
//! in `HUB/.hubd/credentials/`, mode 0600): the human's, for the CLI, and a host credential for
//! the whole hub, for the local sequencers and their waker. A human issues every later one
//! through hubd (`l3m credential issue`) and may revoke these.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use l3m_core::credential::{CredentialRow, Registry, Scope};
use l3m_core::duty::Duty;
use l3m_core::grant::Grant;
use l3m_core::ledger::{Ledger, LedgerError, LedgerRow};
use l3m_core::names::{AgentName, HumanName, ServiceName};
use l3m_core::record_format::{self, LineError};
use l3m_core::refs;

use l3m_wire::credential::{HubIdentity, KeyFile, KeyFileError};

use crate::store::{Hub, HubOptions, StoreError, Tip};

/// How long the credentials init issues stay valid: ten years, so a hub's own human and host
/// are not locked out by the calendar; `l3m credential revoke` ends them sooner.
pub const INIT_VALIDITY_MS: u64 = 10 * 365 * 24 * 3600 * 1000;

/// The private key of `human`'s credential as init issued it, in the hub at `root`.
pub fn human_key_path(root: &Path, human: &HumanName) -> PathBuf {
    root.join(refs::paths::human_key(human))
}

/// hubd's identity key ([`HubIdentity`]) of `hub`: made with the hub, read by every hubd that
/// serves it, its public half in every credential init or a human issues.
pub fn identity(hub: &Hub) -> Result<HubIdentity, InitError> {
    let dir = hub.hubd_dir();
    std::fs::create_dir_all(&dir).map_err(|source| {
        InitError::KeyFile(KeyFileError::Io {
            action: "write",
            path: dir.clone(),
            source,
        })
    })?;
    Ok(HubIdentity::load_or_create(&dir.join("identity.key"))?)
}

/// The private key of the whole-hub host credential init issued, in the hub at `root`.
pub fn host_key_path(root: &Path) -> PathBuf {
    root.join(refs::paths::host_key())
}

/// Why a hub could not be initialised or its ledger read back.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The lease journal could not be read or rewritten.
    #[error(transparent)]
    LeaseJournal(crate::service::lease::journal::JournalError),
    /// A credential file could not be written or read.
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    /// A credentials row did not parse or does not apply.
    #[error("refs/l3m/credentials row {line}: {reason}")]
    CredentialRow {
        /// Its 0-based number.
        line: u64,
        /// Why.
        reason: String,
    },
    /// A ledger line did not parse.
    #[error("ledger line {line} does not parse: {source}")]
    LedgerLine {
        /// Its 0-based number.
        line: u64,
        /// Why.
        #[source]
        source: LineError,
    },
    /// The ledger does not replay.
    #[error("the ledger does not replay: {0}")]
    Ledger(#[from] LedgerError),
    /// A name init writes does not parse (a bug in a constant, named).
    #[error("{0}")]
    Name(#[from] l3m_core::names::NameError),
    /// The hub's settings file does not parse (it was changed outside hubd).
    #[error("{0}; fix refs/l3m/settings with git, or restore the previous commit")]
    Settings(#[from] l3m_core::settings::SettingsError),
}

/// Creates a hub at `root`, appends the ledger's first rows — `human` registered with `grant`
/// (the bound of every root agent that human spawns), and the postman service with the postman
/// axis alone — and issues the human's, the host's and the postman's credentials.
pub fn init_hub(
    root: impl AsRef<Path>,
    options: HubOptions,
    human: HumanName,
    grant: Grant,
    at_ms: u64,
) -> Result<Hub, InitError> {
    let hub = Hub::create(root.as_ref(), options)?;
    let row = LedgerRow::RegisterHuman {
        human: human.clone(),
        grant,
        at_ms,
    };
    let postman = ServiceName::parse(refs::paths::POSTMAN_SERVICE)?;
    let service = LedgerRow::RegisterService {
        service: postman.clone(),
        grant: Grant {
            postman: true,
            ..Grant::default()
        },
        at_ms,
    };
    let lines = [row, service]
        .iter()
        .enumerate()
        .map(|(i, row)| {
            record_format::to_line(row).map_err(|source| InitError::LedgerLine {
                line: i as u64,
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    hub.append(
        refs::LEDGER,
        Tip::Absent,
        &lines,
        &format!("register human:{human} and svc:{postman}"),
    )?;
    let root = hub.root().to_path_buf();
    let scope = Scope::Human {
        human: human.clone(),
    };
    issue_offline(
        &hub,
        scope,
        "the CLI",
        at_ms,
        &human_key_path(&root, &human),
    )?;
    let host = Scope::Host { subtree: None };
    issue_offline(
        &hub,
        host,
        "this host's sequencers",
        at_ms,
        &host_key_path(&root),
    )?;
    issue_offline(
        &hub,
        Scope::Postman { service: postman },
        "this hub's postman",
        at_ms,
        &root.join(refs::paths::postman_key()),
    )?;
    Ok(hub)
}

/// Reads the hub's ledger and replays it, re-running every gate; also returns every agent name
/// any row spawned (the ledger's fold keeps them, but lists only live ones).
pub fn load_ledger(hub: &Hub) -> Result<(Ledger, BTreeSet<AgentName>), InitError> {
    let len = hub.len(refs::LEDGER)?;
    let lines = hub.read_range(refs::LEDGER, 0, len)?;
    let rows = lines
        .iter()
        .zip(0u64..)
        .map(|(text, line)| {
            record_format::from_line::<LedgerRow>(text, line as usize + 1)
                .map_err(|source| InitError::LedgerLine { line, source })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let names = rows
        .iter()
        .filter_map(|row| match row {
            LedgerRow::Spawn { child, .. } => Some(child.clone()),
            _ => None,
        })
        .collect();
    Ok((Ledger::replay(&rows)?, names))
}

/// The credential init issued that opens `duty`'s sessions on this host: the human's own, else
/// the whole-hub host credential (for sequencers and their waker; a postman needs one issued
/// for it).
pub fn local_key(root: &Path, duty: &Duty) -> Result<KeyFile, InitError> {
    let path = match duty {
        Duty::Human { human } => human_key_path(root, human),
        Duty::Postman { .. } => root.join(refs::paths::postman_key()),
        _ => host_key_path(root),
    };
    Ok(KeyFile::read(&path)?)
}

/// Reads the credentials chain and folds it (an absent chain is an empty registry).
pub fn load_credentials(hub: &Hub) -> Result<Registry, InitError> {
    if hub.tip(refs::CREDENTIALS)? == Tip::Absent {
        return Ok(Registry::default());
    }
    let len = hub.len(refs::CREDENTIALS)?;
    let mut registry = Registry::default();
    for (text, line) in hub
        .read_range(refs::CREDENTIALS, 0, len)?
        .iter()
        .zip(0u64..)
    {
        let bad = |reason: String| InitError::CredentialRow { line, reason };
        let row: CredentialRow =
            record_format::from_line(text, line as usize + 1).map_err(|e| bad(e.to_string()))?;
        registry.apply(&row).map_err(|e| bad(e.to_string()))?;
    }
    Ok(registry)
}

/// Issues a credential for `scope` while no hubd serves `hub` (at init, or a test's fixture):
/// appends its row and writes its private key to `path`, pinning the hub's hubd (made now if
/// the hub has no identity yet). A running hubd issues through
/// `hubd.issue-credential` instead, so its registry sees the row.
pub fn issue_offline(
    hub: &Hub,
    scope: Scope,
    label: &str,
    at_ms: u64,
    path: &Path,
) -> Result<KeyFile, InitError> {
    let pin = identity(hub)?.public();
    let key = KeyFile::generate(KeyFile::random_id()?, scope)?.pinning(Some(pin));
    let row = CredentialRow::Issue {
        id: key.id.clone(),
        scope: key.scope.clone(),
        key: key.public_key(),
        // From now even if the hub's clock reading `at_ms` is older (a replayed test hub).
        expires_ms: at_ms.max(crate::now_ms()).saturating_add(INIT_VALIDITY_MS),
        by: "init".into(),
        label: label.to_owned(),
        at_ms,
    };
    let line =
        record_format::to_line(&row).map_err(|source| InitError::LedgerLine { line: 0, source })?;
    let tip = hub.tip(refs::CREDENTIALS)?;
    hub.append(
        refs::CREDENTIALS,
        tip,
        &[line],
        &format!("issue {} for the {} ({label})", key.id, key.scope),
    )?;
    key.write(path)?;
    Ok(key)
}
