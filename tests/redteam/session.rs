//! A whole session's ring as the sequencer builds it: tokens minted from a real `Grant`, the
//! effects bundle with a recording hub outlet, and the tool table built from the conferred axes.
#![allow(clippy::unwrap_used)] // a fixture that cannot be set up is a failed test

use std::collections::BTreeMap;
use std::sync::Arc;

use l3m_core::clock::FixedClock;
use l3m_core::grant::{Grant, RemoteName};
use l3m_core::names::AgentName;
use l3m_ring::effects::{Effects, HubOutlet};
use l3m_ring::tokens::mint_from_grant;
use l3m_ring::undo::MemoryUndo;
use l3m_tools::{ToolTable, builtin};

use crate::git_hub::GitHub;

pub use l3m_ring::test_support::outlet::Recorder;

/// The instant every stamp here reads.
const CLOCK: FixedClock = FixedClock(1_750_000_000_000);

/// The ring of agent `alice` over the fixture's ACR under `grant` (JSON, the grant's serde
/// form), with `origin` naming the fixture's `remote.git`.
pub struct Session {
    pub table: ToolTable,
    pub effects: Effects,
    pub outlet: Arc<Recorder>,
}

impl Session {
    pub fn new(hub: &GitHub, grant: serde_json::Value) -> Self {
        let grant: Grant = serde_json::from_value(grant).unwrap();
        let alice = AgentName::parse("alice").unwrap();
        let remotes =
            BTreeMap::from([(RemoteName::parse("origin").unwrap(), hub.remote_url.clone())]);
        let tokens = mint_from_grant(
            &grant,
            &alice,
            hub.acr.clone(),
            &remotes,
            l3m_ring::ambient_authority(),
        )
        .unwrap();
        let table = ToolTable::build(builtin(), &tokens.conferred()).unwrap();
        let journal = MemoryUndo::default();
        let outlet = Arc::new(Recorder::default());
        let effects = Effects::new(
            tokens,
            Arc::new(journal),
            Arc::new(CLOCK),
            Some(Arc::clone(&outlet) as Arc<dyn HubOutlet>),
        );
        Self {
            table,
            effects,
            outlet,
        }
    }

    pub fn offered(&self) -> Vec<String> {
        self.table.offered().map(|o| o.name.clone()).collect()
    }
}

/// Everything a refused git call must leave alone: every ref of the hub and both remotes, the
/// worktree's status as plain git sees it, and its files.
#[derive(Debug, PartialEq, Eq)]
pub struct GitWorld {
    refs: [String; 3],
    status: String,
    files: Vec<(String, Vec<u8>)>,
}

impl GitWorld {
    pub fn of(hub: &GitHub) -> Self {
        let mut files = Vec::new();
        walk(&hub.ws, &hub.ws, &mut files);
        files.sort();
        Self {
            refs: [
                hub.refs("hub.git"),
                hub.refs("remote.git"),
                hub.refs("other.git"),
            ],
            status: hub.git(&hub.ws, &["status", "--porcelain", "--branch"]),
            files,
        }
    }
}

fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            walk(root, &path, out);
        } else if meta.is_file() {
            out.push((rel, std::fs::read(&path).unwrap()));
        }
    }
}

/// A grant with files on `workspace`, git read and write on alice's branches, and push of them
/// to `origin`.
pub fn git_grant() -> serde_json::Value {
    serde_json::json!({
        "files": ["workspace"],
        "git-read": ["refs/heads/l3m/alice/"],
        "git-write": ["refs/heads/l3m/alice/"],
        "git-push": {"origin": ["refs/heads/l3m/alice/"]},
    })
}
