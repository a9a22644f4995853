// A token cannot be copied into a second scope, conjured from nothing, or read from bytes.
use l3m_ring::tokens::{FilesToken, NetToken, SpawnToken};

fn clone_it(token: &FilesToken) -> FilesToken {
    token.clone() // clones the reference: `FilesToken` is not `Clone`
}

fn conjure() -> SpawnToken {
    SpawnToken::default()
}

fn deserialize() -> NetToken {
    serde_json::from_str(r#"{"hosts":["evil.example"]}"#).unwrap()
}

fn main() {}
