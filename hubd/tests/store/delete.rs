//! Deleting the last ref of a folder: git removes the emptied folders, and the durable delete
//! still succeeds (it fsyncs the nearest folder that is left).
#![allow(clippy::unwrap_used)]

use hubd::store::{Durability, Hub, HubOptions, Tip};

#[test]
fn deleting_the_only_refs_of_an_agent_folder_succeeds_durably() {
    let dir = tempfile::tempdir().unwrap();
    let options = HubOptions {
        durability: Durability::Fsync,
        ..HubOptions::default()
    };
    let hub = Hub::create(dir.path().join("HUB"), options).unwrap();
    let inbox = "refs/l3m/a/solo/_/inbox";
    let persona = "refs/l3m/a/solo/_/persona";
    let first = hub
        .append(inbox, Tip::Absent, &["{\"v\":1}".into()], "one")
        .unwrap();
    let commit = hub
        .commit_files(persona, Tip::Absent, &[("a.md", b"a")], "p")
        .unwrap();
    hub.delete_ref(persona, commit).unwrap();
    hub.delete_ref(inbox, first.commit).unwrap();
    assert_eq!(hub.tip(inbox).unwrap(), Tip::Absent);
    assert_eq!(hub.tip(persona).unwrap(), Tip::Absent);
}
