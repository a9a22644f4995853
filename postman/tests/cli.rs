//! The postman binary: `postman identity` makes the identity once, in the hub folder only, and
//! prints the fingerprint peers pin; two `postman serve` processes carry a letter between hubs.
#![allow(clippy::unwrap_used)]

mod common;

use common::{Pair, postman};

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

/// Two real `postman serve` processes carry a letter from an agent on north to bob on south.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_postman_processes_carry_a_letter_between_two_hubs() {
    let pair = Pair::start().await;
    let _north = pair.serve(true);
    let _south = pair.serve(false);
    let id = pair.stage("across hubs").await;
    let got = pair.wait_for(1, 30).await;
    assert_eq!(got.len(), 1, "the letter never arrived");
    assert_eq!(got[0].id.to_string(), id);
    assert_eq!(got[0].from.render(), "office:north agent:lead*");
    assert_eq!(got[0].body, "across hubs");
}
