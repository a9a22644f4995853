// A token's constructor is `pub(crate)`: only `mint` and `narrow`, inside the ring, call it.
use std::collections::BTreeSet;

use l3m_core::grant::SpawnLevel;
use l3m_ring::tokens::{FilesToken, GitInput, GitToken, MailToken, NetToken, SpawnToken, WildToken};

fn forge(acr: cap_std::fs::Dir, me: l3m_core::names::AgentName, git: GitInput) {
    let _files = FilesToken::new(std::sync::Arc::new(acr), "/".into(), BTreeSet::new());
    let _net = NetToken::new(BTreeSet::from(["evil.example".to_string()]));
    let _git = GitToken::parse(&git, std::path::Path::new("/"), BTreeSet::new());
    let _mail = MailToken::new(me, BTreeSet::new());
    let _spawn = SpawnToken::new(SpawnLevel::Persist);
    let _wild = WildToken::new(BTreeSet::new());
}

fn main() {}
