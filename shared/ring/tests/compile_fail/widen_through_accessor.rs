// The accessors lend a token's scope read-only: it cannot be widened through them, even by the
// holder of a `&mut` token.
use l3m_ring::path::RelPath;
use l3m_ring::tokens::{FilesToken, GitToken, NetToken};

fn widen_files(token: &mut FilesToken) {
    token.write_roots().insert(RelPath::root());
}

fn widen_net(token: &mut NetToken) {
    token.hosts().insert("evil.example".to_string());
}

fn widen_git(token: &mut GitToken) {
    token.write_prefixes().insert(l3m_core::grant::RefPrefix::parse("refs/").unwrap());
}

fn main() {}
