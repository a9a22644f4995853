//! One agent's ACR on disk, minted and journaled as a session's would be, so tool tests drive
//! the real ring provider; and a snapshot to prove what a call did (or did not) change.
// Each test crate uses a different part of the fixture; a fixture that cannot be set up is a
// failed test.
#![allow(dead_code, clippy::unwrap_used)]
// The test plays the harness: it lays the ACR out on disk, mints the tokens with ambient
// authority and takes snapshots — exactly what the sealing linter forbids a tool body.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::PathBuf;
use std::sync::Arc;

use l3m_core::clock::FixedClock;
use l3m_ring::ambient_authority;
use l3m_ring::effects::Effects;
use l3m_ring::test_support::files_hub::{Tree, snapshot};
use l3m_ring::tokens::{FilesToken, MintInput, Tokens, mint};
use l3m_ring::undo::{MemoryUndo, UndoEntry};
use l3m_tools::{Dispatch, ToolError, ToolOutput, ToolTable};
use serde_json::Value;

/// The instant the fixed clock reads.
pub const NOW_MS: u64 = 1_764_621_538_123;

/// A clock that always reads [`NOW_MS`].
pub const CLOCK: FixedClock = FixedClock(NOW_MS);

/// `self/` with `workspace/` and `agent/` (the write roots), `other-repo/` (readable, not
/// writable) and the harness's `.l3m/`.
pub struct Acr {
    _root: tempfile::TempDir,
    pub path: PathBuf,
    pub journal: Arc<MemoryUndo>,
}

impl Acr {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("self");
        for d in ["workspace/src", "agent", "other-repo", ".l3m"] {
            std::fs::create_dir_all(path.join(d)).unwrap();
        }
        for (file, text) in [
            ("workspace/README.md", "# readme\nhello world\n"),
            ("workspace/src/lib.rs", "fn main() {}\n// hello again\n"),
            ("agent/persona.md", "be kind\n"),
            ("other-repo/notes.txt", "hello from elsewhere\n"),
            (".l3m/grants.toml", "files = [\"workspace\"] # hello\n"),
        ] {
            std::fs::write(path.join(file), text).unwrap();
        }
        let journal = Arc::new(MemoryUndo::default());
        Self {
            _root: root,
            path,
            journal,
        }
    }

    fn tokens(&self, files: bool) -> Tokens {
        let input = MintInput {
            acr: self.path.clone(),
            files: files.then(|| vec!["workspace".into(), "agent".into()]),
            ..MintInput::default()
        };
        mint(&input, ambient_authority()).unwrap()
    }

    /// The session's effects, with or without the files axis conferred.
    pub fn effects(&self, files: bool) -> Effects {
        Effects::new(
            self.tokens(files),
            self.journal.clone(),
            Arc::new(CLOCK),
            None,
        )
    }

    /// A second files token over the same ACR, for the harness's own rewind.
    pub fn files_token(&self) -> FilesToken {
        self.tokens(true).files.unwrap()
    }

    pub fn entries(&self) -> Vec<UndoEntry> {
        self.journal.entries().unwrap()
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path.join(rel)).unwrap()
    }

    pub fn put(&self, rel: &str, bytes: &[u8]) {
        std::fs::write(self.path.join(rel), bytes).unwrap();
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path.join(rel).symlink_metadata().is_ok()
    }

    pub fn is_dir(&self, rel: &str) -> bool {
        self.path.join(rel).is_dir()
    }

    pub fn symlink(&self, target: &str, rel: &str) {
        std::os::unix::fs::symlink(target, self.path.join(rel)).unwrap();
    }

    /// Everything under the ACR: content, permission bits and links.
    pub fn snapshot(&self) -> Tree {
        snapshot(&self.path)
    }
}

/// Runs a call that must be offered and tame, returning its result.
pub fn run(
    table: &ToolTable,
    fx: &Effects,
    name: &str,
    input: Value,
) -> Result<ToolOutput, ToolError> {
    match table.dispatch(name, input, fx) {
        Dispatch::Ran(result) => result,
        other => panic!("`{name}` should have run, got {other:?}"),
    }
}
