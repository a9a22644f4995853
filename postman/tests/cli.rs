//! `postman identity` through the binary: it makes the identity once, in the hub folder only,
//! and prints the fingerprint peers pin.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn postman(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_postman"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn identity_is_made_once_in_a_hub_folder_and_its_fingerprint_printed() {
    let dir = tempfile::tempdir().unwrap();
    let hub = dir.path().join("north");
    let hub_arg = hub.to_str().unwrap();
    let refused = postman(&["identity", "--hub", hub_arg]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("not a hub folder"));
    std::fs::create_dir_all(hub.join("hub.git")).unwrap();
    let first = postman(&["identity", "--hub", hub_arg, "--json"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let again = postman(&["identity", "--hub", hub_arg, "--json"]);
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(first["fingerprint"], again["fingerprint"], "made once");
    let cert = std::fs::read(first["certificate"].as_str().unwrap()).unwrap();
    assert_eq!(
        postman::identity::Fingerprint::of(&cert).to_string(),
        first["fingerprint"].as_str().unwrap()
    );
}
