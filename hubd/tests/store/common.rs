//! Helpers shared by the store's integration tests: temp hubs, the git CLI, disk snapshots.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use hubd::store::{CommitTime, Durability, Hub, HubOptions};

/// Options for a test hub: no fsync, a fixed clock.
pub fn relaxed() -> HubOptions {
    HubOptions {
        durability: Durability::Relaxed,
        commit_time: CommitTime::Fixed(1_700_000_000),
    }
}

/// A new hub in a fresh temp dir; keep the `TempDir` alive as long as the hub.
pub fn new_hub() -> (tempfile::TempDir, Hub) {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::create(dir.path().join("HUB"), relaxed()).unwrap();
    (dir, hub)
}

pub use hubd::test_support::{git_bare, git_with_input};

/// `git fsck --strict` must pass and report no error or warning lines.
pub fn assert_fsck_strict(git_dir: &Path) {
    let dir = git_dir.display().to_string();
    let out = hubd::test_support::git_command(
        git_dir,
        &["--git-dir", &dir, "fsck", "--strict", "--no-dangling"],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "git fsck --strict failed:\n{stderr}");
    for line in stderr.lines() {
        assert!(
            !line.starts_with("error") && !line.starts_with("warning") && !line.contains("bad"),
            "git fsck --strict complained: {line}\n{stderr}"
        );
    }
}

/// Every ref and every object file of the hub: two snapshots are equal iff nothing was written.
pub fn disk_state(git_dir: &Path) -> (String, BTreeSet<PathBuf>) {
    let refs = git_bare(
        git_dir,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );
    let mut files = BTreeSet::new();
    collect_files(&git_dir.join("objects"), &mut files);
    collect_files(&git_dir.join("refs"), &mut files);
    (refs, files)
}

fn collect_files(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.insert(path);
        }
    }
}

/// `n` distinct JSON entries tagged `tag`.
pub fn entries(tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"v":1,"tag":"{tag}","i":{i}}}"#))
        .collect()
}
