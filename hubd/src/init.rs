//! `hub init`: a new hub whose ledger already registers its human root, and the hub secret.
//!
//! A hub's ledger must start with a `register-human` row ([`Ledger::replay`] refuses anything
//! else first), so creating the store and writing that row are one step here. The hub secret
//! (`HUB/.hubd/secret`, mode 0600, 32 random bytes as hex) is the bootstrap credential: whoever
//! can read it (the operator, the CLI, the supervisor) may open sessions.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use l3m_core::grant::Grant;
use l3m_core::ledger::{Ledger, LedgerError, LedgerRow};
use l3m_core::names::{AgentName, HumanName};
use l3m_core::refs;
use l3m_core::wire_format::{self, LineError};

use crate::session::random_hex;
use crate::store::{Hub, HubOptions, StoreError, Tip};

/// Where the secret lives, relative to the hub folder.
pub const SECRET_FILE: &str = ".hubd/secret";

/// Why a hub could not be initialised or its ledger read back.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The store refused.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The secret file could not be written or read.
    #[error("the hub secret {path} could not be {action}: {source}")]
    Secret {
        /// The file.
        path: PathBuf,
        /// `written` or `read`.
        action: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The secret file is readable by others than its owner.
    #[error("the hub secret {path} has mode {mode:o}; make it 0600 (chmod 600 {path})")]
    SecretExposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The OS random source failed.
    #[error("the OS random source failed: {0}")]
    Random(String),
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
    /// The hub's settings file does not parse (it was changed outside hubd).
    #[error("{0}; fix refs/l3m/settings with git, or restore the previous commit")]
    Settings(#[from] l3m_core::settings::SettingsError),
}

/// Creates a hub at `root`, writes its secret, and appends the ledger's first row registering
/// `human` with `grant`, the bound of every root agent that human spawns.
pub fn init_hub(
    root: impl AsRef<Path>,
    options: HubOptions,
    human: HumanName,
    grant: Grant,
    at_ms: u64,
) -> Result<Hub, InitError> {
    let hub = Hub::create(root.as_ref(), options)?;
    write_secret(hub.root())?;
    let row = LedgerRow::RegisterHuman {
        human: human.clone(),
        grant,
        at_ms,
    };
    let line =
        wire_format::to_line(&row).map_err(|source| InitError::LedgerLine { line: 0, source })?;
    hub.append(
        refs::LEDGER,
        Tip::Absent,
        &[line],
        &format!("register human:{human}"),
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
            wire_format::from_line::<LedgerRow>(text, line as usize + 1)
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

/// Reads the hub secret, refusing a file others may read.
pub fn read_secret(root: &Path) -> Result<String, InitError> {
    let path = root.join(SECRET_FILE);
    l3m_wire::secret::read(&path).map_err(|e| match e {
        l3m_wire::secret::SecretError::Read { path, source } => InitError::Secret {
            path,
            action: "read",
            source,
        },
        l3m_wire::secret::SecretError::Exposed { path, mode } => {
            InitError::SecretExposed { path, mode }
        }
    })
}

fn write_secret(root: &Path) -> Result<(), InitError> {
    let path = root.join(SECRET_FILE);
    let failed = |source| InitError::Secret {
        path: path.clone(),
        action: "written",
        source,
    };
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(failed)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(failed)?;
    }
    let secret = random_hex().map_err(|e| InitError::Random(e.to_string()))?;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(failed)?;
    file.write_all(secret.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)
}
