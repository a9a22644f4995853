//! Chains and plain refs against real git: round trips, what git sees, and refused input.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::{assert_fsck_strict, disk_state, entries, git_bare, new_hub, relaxed};
use hubd::store::{Hub, RECORDS_FILE, StoreError, Tip};
use l3m_core::refs::{LEDGER, SETTINGS};

const LOG: &str = "refs/l3m/a/alice/main/_/log";
const GRANTS: &str = "refs/l3m/a/alice/main/_/grants";

/// Appends `batches` (sizes) to `refname`, returning every entry in order.
fn fill(hub: &Hub, refname: &str, batches: &[usize]) -> Vec<String> {
    let mut all = Vec::new();
    let mut tip = hub.tip(refname).unwrap();
    for (b, size) in batches.iter().enumerate() {
        let batch = entries(&format!("b{b}"), *size);
        let appended = hub
            .append(refname, tip, &batch, &format!("batch {b}: {size} entries"))
            .unwrap();
        assert_eq!(appended.first_seq, all.len() as u64);
        all.extend(batch);
        assert_eq!(appended.len, all.len() as u64);
        tip = appended.tip();
    }
    all
}

#[test]
fn append_then_read_range_round_trips() {
    let (_dir, hub) = new_hub();
    let all = fill(&hub, LOG, &[1, 3, 2, 5, 1]);
    assert_eq!(hub.len(LOG).unwrap(), 12);
    for from in 0..=all.len() {
        for to in from..=all.len() {
            assert_eq!(
                hub.read_range(LOG, from as u64, to as u64).unwrap(),
                all[from..to],
                "range {from}..{to}"
            );
        }
    }
}

#[test]
fn index_rebuilt_at_reopen_equals_the_live_index() {
    let (dir, hub) = new_hub();
    fill(&hub, LOG, &[2, 1, 4]);
    fill(&hub, LEDGER, &[1, 1]);
    fill(&hub, "refs/l3m/a/bob/_/inbox", &[3]);
    hub.commit_files(
        GRANTS,
        Tip::Absent,
        &[("grant.toml", b"files = []\n")],
        "grant",
    )
    .unwrap();
    let live = hub.index_snapshot();
    assert_eq!(live.len(), 3, "{live:?}");
    drop(hub);

    let reopened = Hub::open(dir.path().join("HUB"), relaxed()).unwrap();
    assert_eq!(reopened.index_snapshot(), live);
    assert_eq!(reopened.len(LOG).unwrap(), 7);
    assert_eq!(
        reopened.read_range(LOG, 2, 4).unwrap(),
        [entries("b1", 1)[0].clone(), entries("b2", 4)[0].clone()]
    );
}

#[test]
fn git_fsck_strict_passes_and_git_log_reads_one_line_per_append() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[1, 16, 2]);
    hub.commit_files(
        GRANTS,
        Tip::Absent,
        &[("a/grant.toml", b"x = 1\n"), ("b", b"")],
        "grant",
    )
    .unwrap();
    assert_fsck_strict(&hub.git_dir());
    let log = git_bare(&hub.git_dir(), &["log", "--format=%s", LOG]);
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            "batch 2: 2 entries",
            "batch 1: 16 entries",
            "batch 0: 1 entries"
        ]
    );
    let oneline = git_bare(&hub.git_dir(), &["log", "--oneline", LOG]);
    assert_eq!(oneline.lines().count(), 3, "{oneline}");
    let identity = git_bare(
        &hub.git_dir(),
        &["log", "-1", "--format=%an <%ae> %cn <%ce>", LOG],
    );
    assert_eq!(
        identity.trim(),
        "l3m hubd <hubd@l3m.invalid> l3m hubd <hubd@l3m.invalid>"
    );
}

#[test]
fn a_stream_of_appends_frees_no_inode_and_git_reads_every_object() {
    use std::os::unix::fs::MetadataExt as _;
    let (_dir, hub) = new_hub();
    let ref_path = hub.git_dir().join(LOG);
    // Each value the ref had, held open: a freed one would show no link left.
    let mut replaced = Vec::new();
    for b in 0..40 {
        let tip = hub.tip(LOG).unwrap();
        if tip != Tip::Absent {
            replaced.push(std::fs::File::open(&ref_path).unwrap());
        }
        hub.append(LOG, tip, &entries(&format!("b{b}"), 1), "one")
            .unwrap();
    }
    for (i, file) in replaced.iter().enumerate() {
        assert_eq!(
            file.metadata().unwrap().nlink(),
            1,
            "the inode of value {i} is still named (recycled into an object or kept)"
        );
    }
    let recycle = std::fs::read_dir(hub.git_dir().join("hubd/recycle")).unwrap();
    assert!(
        recycle.count() <= 1,
        "recycled inodes are used up by objects"
    );
    assert!(!hub.git_dir().join(format!("{LOG}.lock")).exists());
    assert_fsck_strict(&hub.git_dir());
    assert_eq!(
        git_bare(&hub.git_dir(), &["rev-list", "--count", LOG]).trim(),
        "40"
    );
}

#[test]
fn a_chain_commit_holds_only_its_new_entries() {
    let (_dir, hub) = new_hub();
    let all = fill(&hub, LOG, &[2, 3]);
    let git_dir = hub.git_dir();
    let tree = git_bare(&git_dir, &["ls-tree", LOG]);
    let lines: Vec<&str> = tree.lines().collect();
    assert_eq!(lines.len(), 1, "{tree}");
    assert!(lines[0].starts_with("100644 blob "), "{tree}");
    assert!(lines[0].ends_with(&format!("\t{RECORDS_FILE}")), "{tree}");
    let newest = git_bare(&git_dir, &["show", &format!("{LOG}:{RECORDS_FILE}")]);
    assert_eq!(
        newest,
        all[2..]
            .iter()
            .map(|e| format!("{e}\n"))
            .collect::<String>()
    );
    let oldest = git_bare(&git_dir, &["show", &format!("{LOG}~1:{RECORDS_FILE}")]);
    assert_eq!(
        oldest,
        all[..2]
            .iter()
            .map(|e| format!("{e}\n"))
            .collect::<String>()
    );
    let parents = git_bare(
        &git_dir,
        &["rev-list", "--parents", "-n1", &format!("{LOG}~1")],
    );
    assert_eq!(
        parents.split_whitespace().count(),
        1,
        "the first commit has no parent"
    );
}

#[test]
fn plain_refs_commit_files_set_and_delete_by_cas() {
    let (_dir, hub) = new_hub();
    let first = hub
        .commit_files(
            GRANTS,
            Tip::Absent,
            &[("grant.toml", b"one\n"), ("vigils/a.toml", b"v\n")],
            "grant one",
        )
        .unwrap();
    assert_eq!(hub.tip(GRANTS).unwrap(), Tip::At(first));
    assert_eq!(hub.read_file(GRANTS, "vigils/a.toml").unwrap(), b"v\n");
    let second = hub
        .commit_files(
            GRANTS,
            Tip::At(first),
            &[("grant.toml", b"two\n")],
            "grant two",
        )
        .unwrap();
    assert_eq!(hub.read_file(GRANTS, "grant.toml").unwrap(), b"two\n");
    assert!(matches!(
        hub.read_file(GRANTS, "vigils/a.toml"),
        Err(StoreError::UnknownFile { .. })
    ));
    assert_eq!(
        git_bare(&hub.git_dir(), &["rev-parse", &format!("{GRANTS}^")]).trim(),
        first.to_string()
    );

    let work = "refs/heads/l3m/alice/main/_/work";
    hub.set_ref(work, Tip::Absent, first).unwrap();
    assert_eq!(hub.tip(work).unwrap(), Tip::At(first));
    hub.set_ref(work, Tip::At(first), second).unwrap();
    match hub.set_ref(work, Tip::At(first), first) {
        Err(StoreError::Stale { actual, .. }) => assert_eq!(actual, Tip::At(second)),
        other => panic!("expected Stale, got {other:?}"),
    }
    match hub.delete_ref(work, first) {
        Err(StoreError::Stale { actual, .. }) => assert_eq!(actual, Tip::At(second)),
        other => panic!("expected Stale, got {other:?}"),
    }
    hub.delete_ref(work, second).unwrap();
    assert_eq!(hub.tip(work).unwrap(), Tip::Absent);
    assert_fsck_strict(&hub.git_dir());
}

#[test]
fn deleting_a_chain_forgets_its_index() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[2]);
    let Tip::At(tip) = hub.tip(LOG).unwrap() else {
        panic!("no tip")
    };
    hub.delete_ref(LOG, tip).unwrap();
    assert_eq!(hub.tip(LOG).unwrap(), Tip::Absent);
    assert!(matches!(hub.len(LOG), Err(StoreError::UnknownRef { .. })));
    let again = hub
        .append(LOG, Tip::Absent, &["{}".into()], "again")
        .unwrap();
    assert_eq!((again.first_seq, again.len), (0, 1));
}

#[test]
fn a_chain_moved_behind_the_stores_back_is_reindexed_on_stale() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[1]);
    let stale_tip = hub.tip(LOG).unwrap();
    // Another writer appends with git itself.
    let git_dir = hub.git_dir();
    let blob = git_command_stdin(
        &git_dir,
        &["hash-object", "-w", "--stdin"],
        "{\"by\":\"git\"}\n",
    );
    let tree = git_command_stdin(
        &git_dir,
        &["mktree"],
        &format!("100644 blob {blob}\t{RECORDS_FILE}\n"),
    );
    let parent = stale_tip.to_string();
    let commit = git_command_stdin(
        &git_dir,
        &["commit-tree", &tree, "-p", &parent, "-m", "by git"],
        "",
    );
    git_bare(&git_dir, &["update-ref", LOG, &commit, &parent]);

    match hub.append(LOG, stale_tip, &["{}".into()], "late") {
        Err(StoreError::Stale { actual, .. }) => assert_eq!(actual.to_string(), commit),
        other => panic!("expected Stale, got {other:?}"),
    }
    assert_eq!(hub.len(LOG).unwrap(), 2);
    assert_eq!(hub.read_range(LOG, 1, 2).unwrap(), [r#"{"by":"git"}"#]);
}

#[test]
fn a_chain_rewritten_behind_the_stores_back_is_indexed_from_scratch() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[2, 2]);
    let other = "refs/l3m/a/bob/_/log";
    fill(&hub, other, &[1]);
    let stale_tip = hub.tip(LOG).unwrap();
    let Tip::At(other_tip) = hub.tip(other).unwrap() else {
        panic!("no tip")
    };
    git_bare(&hub.git_dir(), &["update-ref", LOG, &other_tip.to_string()]);

    match hub.append(LOG, stale_tip, &["{}".into()], "late") {
        Err(StoreError::Stale { actual, .. }) => assert_eq!(actual, Tip::At(other_tip)),
        other => panic!("expected Stale, got {other:?}"),
    }
    assert_eq!(hub.len(LOG).unwrap(), 1);
    assert_eq!(hub.read_range(LOG, 0, 1).unwrap(), entries("b0", 1));
}

#[test]
fn identical_durable_appends_share_their_blob_and_tree() {
    let dir = tempfile::tempdir().unwrap();
    let options = hubd::store::HubOptions::default();
    let hub = Hub::create(dir.path().join("HUB"), options).unwrap();
    let same = entries("same", 2);
    let first = hub.append(LOG, Tip::Absent, &same, "once").unwrap();
    let second = hub.append(LOG, first.tip(), &same, "twice").unwrap();
    assert_ne!(first.commit, second.commit);
    // Plain git reads hub.git around the open hub: it must first hold what was acknowledged.
    hub.settle();
    let git_dir = hub.git_dir();
    let tree = |rev: &str| git_bare(&git_dir, &["rev-parse", &format!("{rev}^{{tree}}")]);
    assert_eq!(
        tree(&first.commit.to_string()),
        tree(&second.commit.to_string())
    );
    assert_eq!(
        hub.read_range(LOG, 0, 4).unwrap(),
        [same.clone(), same].concat()
    );
    assert_fsck_strict(&git_dir);
}

#[test]
fn a_ref_locked_by_another_writer_is_refused_until_released() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[1]);
    let tip = hub.tip(LOG).unwrap();
    let git_dir = hub.git_dir();
    let lock = git_dir.join(format!("{LOG}.lock"));
    std::fs::write(&lock, b"held by git\n").unwrap();
    let before = disk_state(&git_dir);
    match hub.append(LOG, tip, &["{}".into()], "while locked") {
        Err(StoreError::RefLocked { lock: reported, .. }) => assert_eq!(reported, lock),
        other => panic!("expected RefLocked, got {other:?}"),
    }
    assert_eq!(
        disk_state(&git_dir),
        before,
        "a refused write changed the disk"
    );
    assert_eq!(
        std::fs::read(&lock).unwrap(),
        b"held by git\n",
        "the other writer's lock is kept"
    );
    std::fs::remove_file(&lock).unwrap();
    hub.append(LOG, tip, &["{}".into()], "after release")
        .unwrap();
    assert_eq!(hub.len(LOG).unwrap(), 2);
}

/// git on `git_dir` with `stdin` fed, its output trimmed.
fn git_command_stdin(git_dir: &std::path::Path, args: &[&str], stdin: &str) -> String {
    let dir = git_dir.display().to_string();
    let all = [&["--git-dir", dir.as_str()][..], args].concat();
    crate::common::git_with_input(git_dir, &all, stdin)
        .trim()
        .to_owned()
}

#[test]
fn bad_input_is_refused_with_typed_errors_and_nothing_written() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[1]);
    let tip = hub.tip(LOG).unwrap();
    let git_dir = hub.git_dir();
    let before = disk_state(&git_dir);

    let refused = [
        hub.append(LOG, tip, &["{\"a\":\n1}".into()], "newline in entry"),
        hub.append(LOG, tip, &["{}".into(), "not json".into()], "not json"),
        hub.append(LOG, tip, &[], "no entries"),
        hub.append(LOG, tip, &["{}".into()], "two\nlines"),
        hub.append(LOG, tip, &["{}".into()], ""),
        hub.append(
            "refs/heads/main",
            Tip::Absent,
            &["{}".into()],
            "outside the layout",
        ),
        hub.append(
            "refs/l3m/a/alice/_/diary",
            Tip::Absent,
            &["{}".into()],
            "unknown agent ref",
        ),
        hub.append(
            "refs/l3m/a/alice/_/log.lock",
            Tip::Absent,
            &["{}".into()],
            "lock name",
        ),
        hub.append(GRANTS, Tip::Absent, &["{}".into()], "plain ref"),
        hub.append(LOG, Tip::Absent, &["{}".into()], "stale tip"),
    ];
    let kinds: Vec<&str> = refused
        .iter()
        .map(|r| match r {
            Err(StoreError::EntryNotOneLine { index: 0, .. }) => "entry-newline",
            Err(StoreError::EntryNotJson { index: 1, .. }) => "entry-json",
            Err(StoreError::NoEntries { .. }) => "no-entries",
            Err(StoreError::SummaryNotOneLine { .. }) => "summary",
            Err(StoreError::BadRefName { .. }) => "refname",
            Err(StoreError::WrongRefKind { .. }) => "kind",
            Err(StoreError::Stale { actual, .. }) if *actual == tip => "stale",
            other => panic!("unexpected outcome {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "entry-newline",
            "entry-json",
            "no-entries",
            "summary",
            "summary",
            "refname",
            "refname",
            "refname",
            "kind",
            "stale"
        ]
    );

    assert!(matches!(
        hub.commit_files(GRANTS, Tip::Absent, &[("../escape", b"")], "bad path"),
        Err(StoreError::BadFilePath { .. })
    ));
    assert!(matches!(
        hub.commit_files(LOG, tip, &[("a", b"")], "chain"),
        Err(StoreError::WrongRefKind { .. })
    ));
    assert!(matches!(
        hub.commit_files(SETTINGS, Tip::Absent, &[("a", b"")], "stale settings"),
        Err(StoreError::Stale { .. })
    ));
    let missing = gix::ObjectId::from_hex(b"1234567890123456789012345678901234567890").unwrap();
    assert!(matches!(
        hub.set_ref("refs/heads/l3m/alice/_/work", Tip::Absent, missing),
        Err(StoreError::MissingObject { .. })
    ));
    assert!(matches!(
        hub.delete_ref(GRANTS, missing),
        Err(StoreError::Stale {
            actual: Tip::Absent,
            ..
        })
    ));
    assert_eq!(
        disk_state(&git_dir),
        before,
        "a refused write changed the disk"
    );
}

#[test]
fn reading_unknown_refs_and_ranges_gives_typed_errors() {
    let (_dir, hub) = new_hub();
    fill(&hub, LOG, &[3]);
    let other = "refs/l3m/a/bob/_/log";
    assert!(matches!(hub.len(other), Err(StoreError::UnknownRef { .. })));
    assert!(matches!(
        hub.read_range(other, 0, 0),
        Err(StoreError::UnknownRef { .. })
    ));
    assert_eq!(hub.tip(other).unwrap(), Tip::Absent);
    assert!(matches!(
        hub.read_range(LOG, 2, 4),
        Err(StoreError::RangeOutOfBounds {
            from: 2,
            to: 4,
            len: 3,
            ..
        })
    ));
    assert!(matches!(
        hub.read_range(LOG, 2, 1),
        Err(StoreError::RangeOutOfBounds { .. })
    ));
    assert!(matches!(
        hub.read_range("refs/nope", 0, 1),
        Err(StoreError::BadRefName { .. })
    ));
    assert!(matches!(
        hub.len(GRANTS),
        Err(StoreError::WrongRefKind { .. })
    ));
    assert!(matches!(
        hub.read_file(GRANTS, "x"),
        Err(StoreError::UnknownRef { .. })
    ));
    assert!(matches!(
        hub.read_file(SETTINGS, "nope.toml"),
        Err(StoreError::UnknownFile { .. })
    ));
}

#[test]
fn a_hand_edited_chain_is_reported_by_commit_at_open() {
    let (dir, hub) = new_hub();
    fill(&hub, LOG, &[1]);
    let git_dir = hub.git_dir();
    drop(hub);
    let tree = git_command_stdin(&git_dir, &["mktree"], "");
    let commit = git_command_stdin(
        &git_dir,
        &["commit-tree", &tree, "-p", LOG, "-m", "empty tree"],
        "",
    );
    git_bare(&git_dir, &["update-ref", LOG, &commit]);
    match Hub::open(dir.path().join("HUB"), relaxed()) {
        Err(StoreError::MalformedChain {
            refname,
            commit: at,
            problem,
        }) => {
            assert_eq!(refname, LOG);
            assert_eq!(at.to_string(), commit);
            assert!(problem.contains(RECORDS_FILE), "{problem}");
        }
        other => panic!("expected MalformedChain, got {other:?}"),
    }
}
