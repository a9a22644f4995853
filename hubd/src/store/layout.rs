//! The hub folder on disk (DESIGN §3): creating it, recognising it, and cleaning up after a
//! writer that died.
//!
//! ```text
//! HUB/
//!   hub.git/              bare repository: all durable state
//!     hubd/lock           flock held by the one process that has the hub open
//!   forest/               ACRs, nested by agent name
//!   settings/             checkout of refs/l3m/settings (settings.toml)
//!   cache/                content-addressed blobs and artifacts
//! ```
//!
//! # `settings.toml`, schema 1
//! The settings ref's first commit holds [`INITIAL_SETTINGS`]:
//! - `schema`: the schema version, `1`.
//! - `offices`: the other hubs mail can reach (empty: none).
//! - `known_repos`: the repositories agents may claim (empty: none).

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use l3m_core::refs::paths::{CACHE_DIR, FOREST_DIR, HUB_GIT, SETTINGS_DIR};

use super::StoreError;
use super::barrier::sync_dir;

/// The file the settings ref holds, and its copy in `settings/`.
pub const SETTINGS_FILE: &str = "settings.toml";

/// The settings of a new hub: no offices, no known repositories.
pub const INITIAL_SETTINGS: &str = "\
# l3m hub settings, written by humans only (DESIGN §3).
schema = 1
# Other hubs that mail can reach.
offices = []
# Repositories that agents may claim.
known_repos = []
";

/// hubd's own folder inside `hub.git`.
const HUBD_DIR: &str = "hubd";
/// The namespaces whose ref locks a dead hubd may have left behind.
const OWN_REF_DIRS: [&str; 2] = ["refs/l3m", "refs/heads/l3m"];

/// The folders of a hub, relative to `HUB/`, that [`check`] requires.
const HUB_DIRS: [&str; 4] = [HUB_GIT, FOREST_DIR, SETTINGS_DIR, CACHE_DIR];

/// Makes `root` an empty directory to create a hub in, refusing anything already there.
pub(crate) fn claim_empty(root: &Path) -> Result<(), StoreError> {
    match fs::read_dir(root) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(StoreError::HubPathTaken {
                    path: root.to_path_buf(),
                });
            }
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            fs::create_dir_all(root).map_err(StoreError::io("create the hub folder", root))
        }
        Err(_) if root.exists() => Err(StoreError::HubPathTaken {
            path: root.to_path_buf(),
        }),
        Err(err) => Err(StoreError::io("read the hub folder", root)(err)),
    }
}

/// Creates the folders around `hub.git` and the settings checkout.
pub(crate) fn create_folders(root: &Path) -> Result<(), StoreError> {
    for dir in [FOREST_DIR, SETTINGS_DIR, CACHE_DIR] {
        let path = root.join(dir);
        fs::create_dir(&path).map_err(StoreError::io("create", &path))?;
    }
    let settings = root.join(SETTINGS_DIR).join(SETTINGS_FILE);
    fs::write(&settings, INITIAL_SETTINGS).map_err(StoreError::io("write", &settings))
}

/// Refuses a folder that lacks one of the hub's folders, naming the first one missing.
pub(crate) fn check(root: &Path) -> Result<(), StoreError> {
    if !root.is_dir() {
        return Err(StoreError::NotAHub {
            path: root.to_path_buf(),
            missing: "the folder itself".into(),
        });
    }
    match HUB_DIRS.iter().find(|dir| !root.join(dir).is_dir()) {
        Some(dir) => Err(StoreError::NotAHub {
            path: root.to_path_buf(),
            missing: format!("{dir}/"),
        }),
        None => Ok(()),
    }
}

/// hubd's own folder inside the bare repository `git_dir`.
pub(crate) fn hubd_dir(git_dir: &Path) -> std::path::PathBuf {
    git_dir.join(HUBD_DIR)
}

/// Takes the hub's process lock; held until the returned file is closed (or the process dies).
pub(crate) fn lock_hub(root: &Path, git_dir: &Path) -> Result<File, StoreError> {
    let dir = hubd_dir(git_dir);
    fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
    let lock = dir.join("lock");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(StoreError::io("open the hub lock", &lock))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError::HubBusy {
            path: root.to_path_buf(),
            lock,
        }),
        Err(errno) => Err(StoreError::io("lock the hub", lock)(errno.into())),
    }
}

/// Removes the `*.lock` files a killed writer left in hubd's ref namespaces.
///
/// Only safe while holding [`lock_hub`]: hubd is the only writer of these refs.
/// Forgets the linked worktrees earlier versions of hubd made for ACRs (`hub.git/worktrees/`):
/// an ACR is now a clone its sequencer keeps, and a sequencer adopts such a checkout's files at
/// its next boot, so git's administrative entries for them only slow git down and keep commits
/// reachable that the hub's branches no longer name.
pub(crate) fn forget_legacy_worktrees(git_dir: &Path) -> Result<(), StoreError> {
    let dir = git_dir.join("worktrees");
    match fs::remove_dir_all(&dir) {
        Ok(()) => {
            tracing::info!(dir = %dir.display(), "forgot the ACR worktrees of an earlier hubd; each sequencer adopts its checkout at boot");
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Io {
            op: "removing",
            path: dir,
            source,
        }),
    }
}

pub(crate) fn remove_stale_ref_locks(git_dir: &Path) -> Result<(), StoreError> {
    OWN_REF_DIRS
        .iter()
        .try_for_each(|dir| remove_locks_under(&git_dir.join(dir)))
}

fn remove_locks_under(dir: &Path) -> Result<(), StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(StoreError::io("list", dir)(err)),
    };
    for entry in entries {
        let entry = entry.map_err(StoreError::io("list", dir))?;
        let path = entry.path();
        let is_dir = entry
            .file_type()
            .map_err(StoreError::io("inspect", &path))?
            .is_dir();
        if is_dir {
            remove_locks_under(&path)?;
        } else if path.extension().is_some_and(|ext| ext == "lock") {
            fs::remove_file(&path).map_err(StoreError::io("remove a stale ref lock", &path))?;
        }
    }
    Ok(())
}

/// Fsyncs every file and directory under `root`, and `root`'s parent: a new hub is durable
/// as a whole before [`Hub::create`](super::Hub::create) returns.
pub(crate) fn sync_tree(root: &Path) -> Result<(), StoreError> {
    fn visit(path: &Path) -> Result<(), StoreError> {
        if path.is_dir() {
            let entries = fs::read_dir(path).map_err(StoreError::io("list", path))?;
            for entry in entries {
                visit(&entry.map_err(StoreError::io("list", path))?.path())?;
            }
            sync_dir(path)
        } else {
            File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(StoreError::io("fsync", path))
        }
    }
    visit(root)?;
    match root.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
        _ => Ok(()),
    }
}
