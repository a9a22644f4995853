//! Creating and opening hubs: the folder DESIGN §3 lays out, and clear refusals otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{assert_fsck_strict, git_bare, new_hub, relaxed};
use hubd::store::{Hub, INITIAL_SETTINGS, SETTINGS_FILE, StoreError, Tip};
use l3m_core::refs::SETTINGS;

#[test]
fn create_lays_out_the_hub_and_open_accepts_it() {
    let (dir, hub) = new_hub();
    let root = dir.path().join("HUB");
    for sub in ["hub.git", "forest", "settings", "cache"] {
        assert!(root.join(sub).is_dir(), "{sub}/ is missing");
    }
    assert_eq!(
        git_bare(&hub.git_dir(), &["rev-parse", "--is-bare-repository"]).trim(),
        "true"
    );
    assert_eq!(
        hub.read_file(SETTINGS, SETTINGS_FILE).unwrap(),
        INITIAL_SETTINGS.as_bytes()
    );
    assert_eq!(
        std::fs::read_to_string(root.join("settings").join(SETTINGS_FILE)).unwrap(),
        INITIAL_SETTINGS
    );
    assert_eq!(
        git_bare(
            &hub.git_dir(),
            &["show", &format!("{SETTINGS}:{SETTINGS_FILE}")]
        ),
        INITIAL_SETTINGS
    );
    let settings_tip = hub.tip(SETTINGS).unwrap();
    assert!(matches!(settings_tip, Tip::At(_)));
    assert_fsck_strict(&hub.git_dir());
    drop(hub);

    let reopened = Hub::open(&root, relaxed()).unwrap();
    assert_eq!(reopened.tip(SETTINGS).unwrap(), settings_tip);
}

#[test]
fn create_accepts_an_existing_empty_folder() {
    let dir = tempfile::tempdir().unwrap();
    Hub::create(dir.path(), relaxed()).unwrap();
    assert!(dir.path().join("hub.git").is_dir());
}

#[test]
fn create_refuses_a_non_empty_folder_and_leaves_it_alone() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"mine").unwrap();
    let err = Hub::create(dir.path(), relaxed()).unwrap_err();
    assert!(matches!(err, StoreError::HubPathTaken { ref path } if path == dir.path()));
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    let file = dir.path().join("notes.txt");
    assert!(matches!(
        Hub::create(&file, relaxed()),
        Err(StoreError::HubPathTaken { .. })
    ));
}

#[test]
fn open_names_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = |path: &std::path::Path| match Hub::open(path, relaxed()) {
        Err(StoreError::NotAHub { missing, .. }) => missing,
        other => panic!("expected NotAHub, got {other:?}"),
    };
    assert_eq!(missing(&dir.path().join("nowhere")), "the folder itself");
    assert_eq!(missing(dir.path()), "hub.git/");

    let root = dir.path().join("HUB");
    Hub::create(&root, relaxed()).unwrap();
    std::fs::remove_dir(root.join("cache")).unwrap();
    assert_eq!(missing(&root), "cache/");
    std::fs::create_dir(root.join("cache")).unwrap();

    std::fs::remove_file(root.join("hub.git/refs/l3m/settings")).unwrap();
    assert_eq!(missing(&root), "the ref refs/l3m/settings");
}

#[test]
fn open_refuses_a_hub_git_that_is_not_a_bare_repository() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("HUB");
    Hub::create(&root, relaxed()).unwrap();
    std::fs::remove_dir_all(root.join("hub.git")).unwrap();
    std::fs::create_dir(root.join("hub.git")).unwrap();
    match Hub::open(&root, relaxed()) {
        Err(StoreError::NotAHub { missing, .. }) => {
            assert!(missing.contains("hub.git"), "{missing}")
        }
        other => panic!("expected NotAHub, got {other:?}"),
    }
}

#[test]
fn a_hub_is_open_in_one_place_at_a_time() {
    let (dir, hub) = new_hub();
    let root = dir.path().join("HUB");
    assert!(matches!(
        Hub::open(&root, relaxed()),
        Err(StoreError::HubBusy { .. })
    ));
    drop(hub);
    Hub::open(&root, relaxed()).unwrap();
}

#[test]
fn open_removes_ref_locks_a_dead_writer_left() {
    let (dir, hub) = new_hub();
    let root = dir.path().join("HUB");
    let log = "refs/l3m/a/alice/_/log";
    let first = hub
        .append(log, Tip::Absent, &["{}".into()], "first")
        .unwrap();
    drop(hub);
    let lock = root.join("hub.git").join(format!("{log}.lock"));
    std::fs::write(&lock, b"0000000000000000000000000000000000000000\n").unwrap();

    let hub = Hub::open(&root, relaxed()).unwrap();
    assert!(!lock.exists());
    hub.append(log, first.tip(), &["{}".into()], "second")
        .unwrap();
}
