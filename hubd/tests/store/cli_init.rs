//! `hubd init` driven as a user would: the real binary, a real grant file, plain git to check.

// The helpers below are test code outside `#[test]` fns, where clippy's test allowance does not
// reach; a failed unwrap in them is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use hubd::init::load_ledger;
use hubd::store::{Hub, HubOptions};

const ROOT_GRANT: &str = include_str!("../../../deploy/root-grant.toml");

fn hubd(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hubd"))
        .args(args)
        .output()
        .unwrap()
}

fn init(hub: &Path, human: &str, grant: &Path) -> Output {
    hubd(&[
        "init",
        "--hub",
        hub.to_str().unwrap(),
        "--human",
        human,
        "--grant",
        grant.to_str().unwrap(),
    ])
}

/// A temporary folder holding the example root grant, and the hub folder to make in it.
fn folder_with_root_grant() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let grant = dir.path().join("root-grant.toml");
    std::fs::write(&grant, ROOT_GRANT).unwrap();
    let hub = dir.path().join("HUB");
    (dir, grant, hub)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn init_makes_a_hub_whose_ledger_replays_and_passes_fsck() {
    let (_dir, grant, hub) = folder_with_root_grant();

    let out = init(&hub, "alice", &grant);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("hubd serve --hub"));

    let opened = Hub::open(&hub, HubOptions::default()).unwrap();
    let (ledger, _) = load_ledger(&opened).unwrap();
    let alice = l3m_core::names::HumanName::parse("alice").unwrap();
    assert!(
        ledger.human_grant(&alice).is_some(),
        "the human root is registered"
    );
    drop(opened);

    let fsck = l3m_git::repo_command(&hub.join("hub.git"))
        .args(["fsck", "--strict"])
        .output()
        .unwrap();
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );

    let again = init(&hub, "alice", &grant);
    assert!(
        !again.status.success(),
        "a second init over a hub must fail"
    );
    assert!(stderr(&again).contains("hubd:"), "{}", stderr(&again));
}

#[test]
fn a_grant_whose_example_fails_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let grant = dir.path().join("bad.toml");
    let broken = ROOT_GRANT.replace(
        r#"{ net = "deb.debian.org" },"#,
        r#"{ net = "debian.org" },"#,
    );
    std::fs::write(&grant, broken).unwrap();
    let hub = dir.path().join("HUB");

    let out = init(&hub, "alice", &grant);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("example 0 of `allow`") && err.contains("debian.org"),
        "{err}"
    );
    assert!(
        !hub.exists(),
        "nothing may be written when the grant does not load"
    );
}

#[test]
fn bad_input_is_named_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("root-grant.toml");
    std::fs::write(&good, ROOT_GRANT).unwrap();
    let unknown_axis = dir.path().join("unknown.toml");
    std::fs::write(&unknown_axis, "[grant]\nteleport = true\n").unwrap();
    let hub = dir.path().join("HUB");

    let out = init(&hub, "Alice", &good);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("\"Alice\""), "{}", stderr(&out));

    let out = init(&hub, "alice", &unknown_axis);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("unknown.toml") && err.contains("teleport"),
        "{err}"
    );

    let out = init(&hub, "alice", &dir.path().join("missing.toml"));
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("cannot read the grant file"),
        "{}",
        stderr(&out)
    );
    assert!(!hub.exists());
}

#[test]
fn recover_replays_the_wal_and_leaves_it_empty() {
    let (dir, grant, hub) = folder_with_root_grant();
    assert!(init(&hub, "alice", &grant).status.success());
    // A hubd that stopped before its first checkpoint leaves what `init` wrote in the WAL.
    let wal = hub.join("hub.git/hubd/wal");
    assert!(std::fs::read_dir(&wal).unwrap().count() > 0);

    let out = hubd(&["recover", "--hub", hub.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("logged write(s)"), "{stdout}");
    assert!(
        !stdout.contains("replayed 0 "),
        "init's writes are replayed: {stdout}"
    );
    assert_eq!(std::fs::read_dir(&wal).unwrap().count(), 0);

    let again = hubd(&["recover", "--hub", hub.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("replayed 0 "));
    let missing = hubd(&[
        "recover",
        "--hub",
        dir.path().join("nope").to_str().unwrap(),
    ]);
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("nope"), "{}", stderr(&missing));
}
