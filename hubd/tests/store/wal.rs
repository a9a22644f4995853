//! The write-ahead log brings back what a crashed machine's disk lost.
//!
//! A power cut can leave `hub.git` as it was some writes ago (renames not yet committed by the
//! filesystem, objects not yet written back) while every acknowledged WAL frame is on disk.
//! These tests make exactly that state by hand — refs rolled back to a snapshot, later objects
//! deleted or torn — and open the hub again. Appends are acknowledged once in the WAL and
//! applied to `hub.git` just after; the last tests check that nothing reads past that gap.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::{assert_fsck_strict, git_bare};
use hubd::store::{CommitTime, Durability, Hub, HubOptions, StoreError, Tip, WalStop};

const LOG: &str = "refs/l3m/a/alice/_/log";
const INBOX: &str = "refs/l3m/a/alice/_/inbox";

fn logged() -> HubOptions {
    HubOptions {
        durability: Durability::Fsync,
        commit_time: CommitTime::Fixed(1_700_000_000),
    }
}

/// A temporary folder, the hub folder to create in it, and that hub's `hub.git`.
fn hub_folder() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("HUB");
    let git_dir = root.join("hub.git");
    (dir, root, git_dir)
}

/// Entry `i` of `chain` (distinct per chain, so no two chains share a commit).
fn entry(chain: &str, i: usize) -> String {
    format!(r#"{{"v":1,"chain":"{chain}","n":{i}}}"#)
}

/// Appends entries `from..to` to `chain`, one per commit.
fn append_range(hub: &Hub, chain: &str, from: usize, to: usize) {
    for i in from..to {
        let tip = hub.tip(chain).unwrap();
        hub.append(chain, tip, &[entry(chain, i)], &format!("entry {i}"))
            .unwrap();
    }
}

/// Every file under `dir`, relative to it, with its bytes.
fn files_under(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn visit(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(base, &path, out);
            } else {
                let bytes = fs::read(&path).unwrap();
                out.insert(path.strip_prefix(base).unwrap().to_path_buf(), bytes);
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(dir, dir, &mut out);
    out
}

/// What `hub.git` holds at one moment: its loose refs and the names of its loose objects.
struct Snapshot {
    refs: BTreeMap<PathBuf, Vec<u8>>,
    objects: BTreeSet<PathBuf>,
}

impl Snapshot {
    fn take(git_dir: &Path) -> Snapshot {
        Snapshot {
            refs: files_under(&git_dir.join("refs")),
            objects: files_under(&git_dir.join("objects")).into_keys().collect(),
        }
    }

    /// Puts `git_dir` back as the snapshot saw it, as a disk that lost the later writes would:
    /// refs at their old values (or gone), later objects gone — except `torn`, which keeps its
    /// name and loses its bytes.
    fn roll_back(&self, git_dir: &Path, torn: usize) -> usize {
        let refs_dir = git_dir.join("refs");
        for (path, _) in files_under(&refs_dir) {
            match self.refs.get(&path) {
                Some(old) => fs::write(refs_dir.join(&path), old).unwrap(),
                None => fs::remove_file(refs_dir.join(&path)).unwrap(),
            }
        }
        let objects_dir = git_dir.join("objects");
        let later: Vec<PathBuf> = files_under(&objects_dir)
            .into_keys()
            .filter(|path| !self.objects.contains(path))
            .collect();
        for (i, path) in later.iter().enumerate() {
            if i == torn {
                fs::write(objects_dir.join(path), b"").unwrap();
            } else {
                fs::remove_file(objects_dir.join(path)).unwrap();
            }
        }
        later.len()
    }
}

fn segments(git_dir: &Path) -> usize {
    fs::read_dir(git_dir.join("hubd/wal")).unwrap().count()
}

/// Waits (up to a minute: this is about a background thread, not speed) until the first
/// checkpoint has retired the replayed segments, leaving the one being written.
fn wait_for_one_segment(git_dir: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while segments(git_dir) != 1 {
        assert!(std::time::Instant::now() < deadline, "no checkpoint ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn entries(hub: &Hub, chain: &str) -> Vec<String> {
    hub.read_range(chain, 0, hub.len(chain).unwrap()).unwrap()
}

#[test]
fn acknowledged_writes_lost_by_the_disk_come_back_from_the_wal() {
    let (_dir, root, git_dir) = hub_folder();
    let hub = Hub::create(&root, logged()).unwrap();
    append_range(&hub, LOG, 0, 4);
    hub.settle();
    let before = Snapshot::take(&git_dir);
    append_range(&hub, LOG, 4, 10);
    append_range(&hub, INBOX, 0, 3);
    let doomed = hub.tip(LOG).unwrap();
    // A ref deleted after the snapshot must stay deleted after replay.
    append_range(&hub, "refs/l3m/a/bob/_/log", 0, 2);
    let Tip::At(bob) = hub.tip("refs/l3m/a/bob/_/log").unwrap() else {
        panic!("bob's log exists");
    };
    hub.delete_ref("refs/l3m/a/bob/_/log", bob).unwrap();
    drop(hub);

    let lost = before.roll_back(&git_dir, 0);
    assert_eq!(
        lost,
        3 * 11,
        "each later append's blob, tree and commit are gone"
    );
    assert_eq!(
        git_bare(&git_dir, &["rev-list", "--count", LOG]).trim(),
        "4",
        "the disk holds the log as the snapshot saw it"
    );

    let hub = Hub::open(&root, logged()).unwrap();
    let expected: Vec<String> = (0..10).map(|i| entry(LOG, i)).collect();
    assert_eq!(entries(&hub, LOG), expected);
    assert_eq!(
        entries(&hub, INBOX),
        (0..3).map(|i| entry(INBOX, i)).collect::<Vec<_>>()
    );
    assert_eq!(hub.tip(LOG).unwrap(), doomed);
    assert_eq!(
        hub.tip("refs/l3m/a/bob/_/log").unwrap(),
        Tip::Absent,
        "a delete is replayed too"
    );
    assert_fsck_strict(&git_dir);
    assert_eq!(
        git_bare(&git_dir, &["log", "--format=%s", LOG])
            .lines()
            .next(),
        Some("entry 9")
    );
    wait_for_one_segment(&git_dir);

    // The replayed hub keeps working, and a second open has nothing left to replay.
    append_range(&hub, LOG, 10, 12);
    drop(hub);
    let hub = Hub::open(&root, logged()).unwrap();
    assert_eq!(hub.len(LOG).unwrap(), 12);
    assert_fsck_strict(&git_dir);
}

#[test]
fn a_ref_torn_by_the_crash_is_walked_forward_from_the_wal() {
    let (_dir, root, git_dir) = hub_folder();
    let hub = Hub::create(&root, logged()).unwrap();
    append_range(&hub, LOG, 0, 5);
    let last = hub.tip(LOG).unwrap();
    drop(hub);

    // The ref's name survived and its bytes did not, as on a disk that keeps no order.
    fs::write(git_dir.join(LOG), b"").unwrap();
    let hub = Hub::open(&root, logged()).unwrap();
    assert_eq!(hub.tip(LOG).unwrap(), last);
    assert_eq!(
        entries(&hub, LOG),
        (0..5).map(|i| entry(LOG, i)).collect::<Vec<_>>()
    );
    assert_fsck_strict(&git_dir);
}

#[test]
fn replay_leaves_a_ref_that_moved_elsewhere_alone() {
    let (_dir, root, git_dir) = hub_folder();
    let hub = Hub::create(&root, logged()).unwrap();
    append_range(&hub, LOG, 0, 3);
    append_range(&hub, INBOX, 0, 1);
    let Tip::At(elsewhere) = hub.tip(INBOX).unwrap() else {
        panic!("the inbox exists");
    };
    drop(hub);

    // Someone points the log at a commit of another chain behind hubd's back; every frame of
    // the log expected another value, so none of them applies.
    git_bare(&git_dir, &["update-ref", LOG, &elsewhere.to_string()]);
    let hub = Hub::open(&root, logged()).unwrap();
    assert_eq!(hub.tip(LOG).unwrap(), Tip::At(elsewhere));
    assert_eq!(entries(&hub, LOG), [entry(INBOX, 0)]);
    assert_fsck_strict(&git_dir);
}

/// A hub with three appends to `LOG` acknowledged, then `hub.git` rolled back to before them,
/// so they live only in the WAL.
fn three_appends_only_in_the_wal() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let (dir, root, git_dir) = hub_folder();
    let hub = Hub::create(&root, logged()).unwrap();
    let before = Snapshot::take(&git_dir);
    append_range(&hub, LOG, 0, 3);
    drop(hub);
    before.roll_back(&git_dir, usize::MAX);
    (dir, root, git_dir)
}

/// The entries [`three_appends_only_in_the_wal`] appended.
fn three() -> Vec<String> {
    (0..3).map(|i| entry(LOG, i)).collect()
}

#[test]
fn a_barriers_hub_replays_a_wal_left_by_an_earlier_run() {
    let (_dir, root, git_dir) = three_appends_only_in_the_wal();

    let options = HubOptions {
        durability: Durability::Barriers,
        ..logged()
    };
    let hub = Hub::open(&root, options).unwrap();
    assert_eq!(entries(&hub, LOG), three());
    assert_eq!(
        segments(&git_dir),
        0,
        "a hub without a wal keeps no segments"
    );
    assert_fsck_strict(&git_dir);
}

/// A WAL an older build left under `hubd/journal` (its name before the rename) is replayed.
#[test]
fn a_wal_under_the_old_folder_name_is_replayed() {
    let (_dir, root, git_dir) = three_appends_only_in_the_wal();
    std::fs::rename(git_dir.join("hubd/wal"), git_dir.join("hubd/journal")).unwrap();

    let hub = Hub::open(&root, logged()).unwrap();
    assert_eq!(entries(&hub, LOG), three());
    assert!(!git_dir.join("hubd/journal").exists());
    assert_fsck_strict(&git_dir);
}

/// An append whose frame is in the WAL (and so acknowledged) but that cannot be applied to
/// `hub.git` must stop the WAL: a later write of the same ref would expect the old value,
/// and replay, which walks frames in order, would then apply the failed write and drop the
/// acknowledged one.
#[test]
fn a_logged_write_that_cannot_be_applied_stops_the_wal_until_replay() {
    // Learn the id of the commit that will fail, from a twin hub with the same clock.
    let (_twin_dir, twin_root, _) = hub_folder();
    let twin = Hub::create(&twin_root, logged()).unwrap();
    append_range(&twin, LOG, 0, 4);
    let Tip::At(doomed) = twin.tip(LOG).unwrap() else {
        panic!("the twin's log exists");
    };
    drop(twin);

    let (_dir, root, git_dir) = hub_folder();
    let hub = Hub::create(&root, logged()).unwrap();
    append_range(&hub, LOG, 0, 3);
    let before = hub.tip(LOG).unwrap();
    // The commit's fan-out folder becomes a file, so naming the commit fails after its frame
    // has been in the WAL.
    let fan_out = git_dir.join("objects").join(&doomed.to_string()[..2]);
    let aside = fan_out.with_extension("aside");
    fs::rename(&fan_out, &aside).unwrap();
    fs::write(&fan_out, b"").unwrap();

    let acknowledged = hub
        .append(LOG, before, &[entry(LOG, 3)], "entry 3")
        .unwrap();
    assert_eq!(acknowledged.commit, doomed, "durable once logged");
    // The applier fails to name the commit into a file.
    hub.settle();
    let refused = hub.append(INBOX, Tip::Absent, &[entry(INBOX, 0)], "entry 0");
    match refused {
        Err(StoreError::WalBroken { why, .. }) => assert_eq!(why, WalStop::Apply),
        other => panic!("a stopped wal takes no write, got {other:?}"),
    }
    let next = hub.append(LOG, acknowledged.tip(), &[entry(LOG, 4)], "entry 4");
    assert!(
        matches!(next, Err(StoreError::WalBroken { .. })),
        "nor the next append of the chain: {next:?}"
    );
    assert_eq!(
        hub.tip(LOG).unwrap(),
        acknowledged.tip(),
        "a refused write does not take the chain back behind what was acknowledged"
    );
    assert_eq!(
        git_bare(&git_dir, &["rev-list", "--count", LOG]).trim(),
        "3",
        "hub.git holds the chain as it was before the failed apply"
    );
    drop(hub);

    fs::remove_file(&fan_out).unwrap();
    fs::rename(&aside, &fan_out).unwrap();
    let hub = Hub::open(&root, logged()).unwrap();
    assert_eq!(
        hub.tip(LOG).unwrap(),
        Tip::At(doomed),
        "replay completes the logged write"
    );
    assert_eq!(
        entries(&hub, LOG),
        (0..4).map(|i| entry(LOG, i)).collect::<Vec<_>>()
    );
    assert_eq!(
        hub.tip(INBOX).unwrap(),
        Tip::Absent,
        "the refused write left nothing"
    );
    assert_fsck_strict(&git_dir);
    append_range(&hub, LOG, 4, 5);
    assert_eq!(hub.len(LOG).unwrap(), 5, "and the hub writes again");
}

/// Appends are acknowledged before `hub.git` holds them; closing the hub must not leave them
/// to the next open's replay.
#[test]
fn closing_the_hub_puts_every_acknowledged_append_into_hub_git() {
    let (_dir, root, git_dir) = hub_folder();
    let hub = Hub::create(&root, logged()).unwrap();
    append_range(&hub, LOG, 0, 20);
    append_range(&hub, INBOX, 0, 20);
    drop(hub);
    for chain in [LOG, INBOX] {
        assert_eq!(
            git_bare(&git_dir, &["rev-list", "--count", chain]).trim(),
            "20"
        );
    }
    assert_fsck_strict(&git_dir);
}

/// Every read through the hub waits for the appends acknowledged before it, even while the
/// applier is behind: a reader on another thread never sees an acknowledged entry missing.
#[test]
fn reads_through_the_hub_never_lag_an_acknowledged_append() {
    const APPENDS: usize = 50;
    let (_dir, root, _git_dir) = hub_folder();
    let hub = Arc::new(Hub::create(&root, logged()).unwrap());
    let acknowledged = Arc::new(AtomicUsize::new(0));
    let reader = {
        let (hub, acknowledged) = (Arc::clone(&hub), Arc::clone(&acknowledged));
        std::thread::spawn(move || {
            let mut reads = 0;
            loop {
                let at_least = acknowledged.load(Ordering::SeqCst);
                if at_least == APPENDS {
                    return reads;
                }
                if at_least == 0 {
                    std::thread::yield_now();
                    continue;
                }
                let read = entries(&hub, LOG);
                assert!(read.len() >= at_least, "a read lost an acknowledged entry");
                let expected: Vec<String> = (0..read.len()).map(|i| entry(LOG, i)).collect();
                assert_eq!(read, expected);
                reads += 1;
            }
        })
    };
    let mut tip = Tip::Absent;
    for i in 0..APPENDS {
        let summary = format!("entry {i}");
        tip = hub
            .append(LOG, tip, &[entry(LOG, i)], &summary)
            .unwrap()
            .tip();
        acknowledged.store(i + 1, Ordering::SeqCst);
    }
    assert!(
        reader.join().unwrap() > 0,
        "the reader read while appends went on"
    );
}
