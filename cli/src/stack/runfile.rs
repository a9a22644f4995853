//! The run file `HUB/.l3m-run/stack.toml`: where the running stack is, so every other command
//! finds it.
//!
//! # Format
//! ```toml
//! nats = "nats://127.0.0.1:40123"   # the URL every service and command connects to
//! hub_id = "local"
//! started_at_ms = 1764629342000
//! embedded = false                  # true: one `l3m up --embedded` process holds the services
//!
//! [[process]]
//! service = "nats-server"           # or "hubd", "sequencer", "l3m" (embedded)
//! pid = 4242
//! binary = "/usr/sbin/nats-server"  # checked against /proc/<pid>/cmdline before a signal
//! log = "/home/alice/.l3m/hub/.l3m-run/nats-server.log"
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// The run file's name inside the run folder.
pub const RUN_FILE: &str = "stack.toml";

/// One process of the stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StackProcess {
    /// Which service it is.
    pub service: String,
    /// Its pid.
    pub pid: u32,
    /// The binary it runs, so a recycled pid is recognised.
    pub binary: PathBuf,
    /// Where its output goes.
    pub log: PathBuf,
}

/// The running stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunFile {
    /// The NATS URL.
    pub nats: String,
    /// The hub id served.
    pub hub_id: String,
    /// When `l3m up` finished starting it.
    pub started_at_ms: u64,
    /// Whether the services run inside one `l3m up --embedded` process.
    #[serde(default)]
    pub embedded: bool,
    /// The processes, in start order.
    #[serde(default, rename = "process")]
    pub processes: Vec<StackProcess>,
}

impl RunFile {
    /// The run file of the hub at `root`.
    pub fn path(root: &Path) -> PathBuf {
        super::run_dir(root).join(RUN_FILE)
    }

    /// Reads the run file; `Ok(None)` when the stack was never started or was stopped.
    pub fn read(root: &Path) -> Result<Option<RunFile>, CliError> {
        let path = RunFile::path(root);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(CliError::io("read", path, e)),
        };
        toml::from_str(&text).map(Some).map_err(|e| {
            CliError::Runtime(format!(
                "the run file {} is damaged ({}): stop what it lists by hand, delete it, and run `l3m up`",
                path.display(),
                e.message()
            ))
        })
    }

    /// Writes the run file (to a temporary name first, then renamed, so a reader never sees
    /// half of it).
    pub fn write(&self, root: &Path) -> Result<(), CliError> {
        let path = RunFile::path(root);
        let text = toml::to_string(self)
            .map_err(|e| CliError::Runtime(format!("encoding the run file: {e}")))?;
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, text).map_err(|e| CliError::io("write", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| CliError::io("write", &path, e))
    }

    /// Removes the run file.
    pub fn remove(root: &Path) -> Result<(), CliError> {
        let path = RunFile::path(root);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(CliError::io("remove", path, e))
            }
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_file_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(super::super::run_dir(dir.path())).unwrap();
        let run = RunFile {
            nats: "nats://127.0.0.1:4".into(),
            hub_id: "local".into(),
            started_at_ms: 5,
            embedded: false,
            processes: vec![StackProcess {
                service: "hubd".into(),
                pid: 7,
                binary: "/bin/hubd".into(),
                log: "/tmp/hubd.log".into(),
            }],
        };
        run.write(dir.path()).unwrap();
        assert_eq!(RunFile::read(dir.path()).unwrap(), Some(run));
        RunFile::remove(dir.path()).unwrap();
        assert_eq!(RunFile::read(dir.path()).unwrap(), None);
    }
}
