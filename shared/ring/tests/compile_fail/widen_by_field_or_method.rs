// No method widens a token, and its fields, which hold the scope, are private.
use l3m_ring::path::RelPath;
use l3m_core::grant::SpawnLevel;
use l3m_ring::tokens::{FilesToken, NetToken, SpawnToken};

fn widen_files(token: &mut FilesToken) {
    token.write_roots.insert(RelPath::root());
    token.widen(&["."]);
}

fn widen_net(token: &mut NetToken) {
    token.hosts.insert("evil.example".to_string());
}

fn widen_spawn(token: &mut SpawnToken) {
    token.level = SpawnLevel::Persist;
}

fn main() {}
