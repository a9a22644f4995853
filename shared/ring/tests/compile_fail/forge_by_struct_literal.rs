// A token cannot be written as a struct literal outside the ring: its fields are private.
use std::collections::BTreeSet;

use l3m_core::grant::SpawnLevel;
use l3m_ring::tokens::{FilesToken, GitToken, MailToken, NetToken, SpawnToken, WildToken};

fn forge(acr: cap_std::fs::Dir, me: l3m_core::names::AgentName) {
    let _files = FilesToken {
        acr: std::sync::Arc::new(acr),
        acr_path: "/".into(),
        write_roots: BTreeSet::new(),
    };
    let _net = NetToken { hosts: BTreeSet::new() };
    let _git = GitToken {
        author: me.clone(),
        read_prefixes: BTreeSet::new(),
        write_prefixes: BTreeSet::new(),
        push: std::collections::BTreeMap::new(),
        acr: "/".into(),
        worktree_roots: BTreeSet::new(),
    };
    let _mail = MailToken { agent: me, covers: BTreeSet::new() };
    let _spawn = SpawnToken { level: SpawnLevel::Persist };
    let _wild = WildToken { classes: BTreeSet::new() };
}

fn main() {}
