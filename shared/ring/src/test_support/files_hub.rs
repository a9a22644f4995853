//! A hub folder on disk for provider tests: one agent's ACR, a sibling's, and a directory
//! outside the hub, with snapshots to prove what a call did (or did not) change.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::tokens::{FilesToken, MintInput, mint};
use crate::undo::MemoryUndo;
use crate::{ambient_authority, undo::UndoStore};

/// `HUB/forest/alice/main/self` (ours), `HUB/forest/alice/other/self` (a sibling), and an
/// `outside/` directory beside the hub holding a secret.
pub struct Hub {
    /// Keeps the whole tree alive.
    _root: tempfile::TempDir,
    pub acr: PathBuf,
    pub sibling: PathBuf,
    pub outside: PathBuf,
    pub token: FilesToken,
    pub journal: MemoryUndo,
}

pub const SECRET: &[u8] = b"outside secret\n";

impl Hub {
    pub fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let forest = root.path().join("hub/forest/alice");
        let acr = forest.join("main/self");
        let sibling = forest.join("other/self");
        let outside = root.path().join("outside");
        for d in [
            acr.join("workspace/src"),
            acr.join("agent"),
            acr.join(".l3m"),
            sibling.join("workspace"),
            outside.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(acr.join("workspace/README.md"), b"# readme\n").unwrap();
        std::fs::write(acr.join("workspace/src/lib.rs"), b"fn main() {}\n").unwrap();
        std::fs::write(acr.join("agent/persona.md"), b"be kind\n").unwrap();
        std::fs::write(acr.join(".l3m/grants.toml"), b"files = [\"workspace\"]\n").unwrap();
        std::fs::write(sibling.join("workspace/theirs.txt"), b"sibling's\n").unwrap();
        std::fs::write(outside.join("secret"), SECRET).unwrap();
        let input = MintInput {
            acr: acr.clone(),
            files: Some(vec!["workspace".into(), "agent".into()]),
            ..MintInput::default()
        };
        let token = mint(&input, ambient_authority()).unwrap().files.unwrap();
        let journal = MemoryUndo::default();
        Self {
            _root: root,
            acr,
            sibling,
            outside,
            token,
            journal,
        }
    }

    pub fn ws(&self, rel: &str) -> PathBuf {
        self.acr.join("workspace").join(rel)
    }

    /// Everything outside our write roots that a refused call must leave alone.
    pub fn world(&self) -> World {
        World {
            outside: snapshot(&self.outside),
            sibling: snapshot(&self.sibling),
            harness: snapshot(&self.acr.join(".l3m")),
        }
    }

    /// Everything beyond the ACR: what even a call that succeeds must never reach.
    pub fn beyond(&self) -> (Tree, Tree) {
        (snapshot(&self.outside), snapshot(&self.sibling))
    }

    pub fn journal_len(&self) -> usize {
        self.journal.entries().unwrap().len()
    }

    pub fn journal(&self) -> &dyn UndoStore {
        &self.journal
    }
}

/// The parts of the world a refused call must not touch.
#[derive(Debug, PartialEq, Eq)]
pub struct World {
    pub outside: Tree,
    pub sibling: Tree,
    pub harness: Tree,
}

/// What is at a path, as precisely as a test needs to tell two trees apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    File { bytes: Vec<u8>, mode: u32 },
    Dir { mode: u32 },
    Symlink { target: PathBuf },
    Special { mode: u32, rdev: u64 },
}

pub type Tree = BTreeMap<String, Node>;

/// Every path under `root` (not following links), with content and permission bits.
pub fn snapshot(root: &Path) -> Tree {
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut Tree) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let node = if meta.file_type().is_symlink() {
            Node::Symlink {
                target: std::fs::read_link(&path).unwrap(),
            }
        } else if meta.is_dir() {
            walk(root, &path, out);
            Node::Dir { mode }
        } else if meta.is_file() {
            Node::File {
                bytes: std::fs::read(&path).unwrap(),
                mode,
            }
        } else {
            Node::Special {
                mode: meta.mode(),
                rdev: meta.rdev(),
            }
        };
        out.insert(rel, node);
    }
}
