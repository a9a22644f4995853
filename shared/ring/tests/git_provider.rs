//! The git provider on a real worktree of a bare hub repository: status, diff, log, commit and
//! push do what they say, and the result is a repository plain git accepts.

use l3m_ring::test_support::git_hub;

use git_hub::{GitHub, WORK};
use l3m_ring::git::{self, ChangeKind, GitError};

#[test]
fn status_lists_each_kind_of_change_against_head() {
    let hub = GitHub::new();
    let t = hub.token();
    let clean = git::status(&t, "workspace").unwrap();
    assert_eq!(clean.branch, WORK);
    assert!(clean.head.is_some() && clean.changes.is_empty());

    std::fs::write(hub.ws.join("README.md"), "# changed\n").unwrap();
    std::fs::write(hub.ws.join("new.txt"), "new\n").unwrap();
    std::fs::remove_file(hub.ws.join("src/main.rs")).unwrap();
    std::fs::remove_file(hub.ws.join("run.sh")).unwrap();
    std::os::unix::fs::symlink("README.md", hub.ws.join("run.sh")).unwrap();
    let got: Vec<(String, ChangeKind)> = git::status(&t, "workspace")
        .unwrap()
        .changes
        .into_iter()
        .map(|c| (c.path, c.kind))
        .collect();
    assert_eq!(
        got,
        [
            ("README.md".into(), ChangeKind::Modified),
            ("new.txt".into(), ChangeKind::Added),
            ("run.sh".into(), ChangeKind::TypeChanged),
            ("src/main.rs".into(), ChangeKind::Deleted),
        ]
    );
}

#[test]
fn diff_is_a_unified_text_diff_against_head() {
    let hub = GitHub::new();
    std::fs::write(hub.ws.join("README.md"), "# project\nmore\n").unwrap();
    std::fs::write(hub.ws.join("blob.bin"), [0xff, 0xfe, 0]).unwrap();
    let diffs = git::diff(&hub.token(), "workspace").unwrap();
    assert_eq!(diffs.len(), 2);
    assert_eq!(diffs[0].change.path, "README.md");
    let text = diffs[0].unified.as_deref().unwrap();
    assert!(
        text.contains("--- a/README.md") && text.contains("+++ b/README.md"),
        "{text}"
    );
    assert!(text.contains(" # project\n+more\n"), "{text}");
    assert_eq!(diffs[1].change.path, "blob.bin");
    assert_eq!(diffs[1].change.kind, ChangeKind::Added);
    assert_eq!(diffs[1].unified, None);
}

#[test]
fn commit_records_the_worktree_as_the_agent_and_leaves_git_clean() {
    let hub = GitHub::new();
    let t = hub.token();
    let before = hub.tip("hub.git", WORK).unwrap();
    std::fs::write(hub.ws.join("README.md"), "# changed\n").unwrap();
    std::fs::create_dir(hub.ws.join("docs")).unwrap();
    std::fs::write(hub.ws.join("docs/a.md"), "a\n").unwrap();
    std::fs::remove_file(hub.ws.join("src/main.rs")).unwrap();

    let done = git::commit(
        &t,
        "workspace",
        "Change the readme\n\nand more",
        1_750_000_000_123,
        &hub.journal,
    )
    .unwrap();
    assert_eq!(done.branch, WORK);
    assert_eq!(done.changes.len(), 3);
    assert_eq!(hub.tip("hub.git", WORK).as_deref(), Some(done.id.as_str()));
    assert_eq!(
        hub.git(
            &hub.ws,
            &["log", "-1", "--format=%an <%ae>|%cn <%ce>|%at|%P|%s"]
        )
        .trim(),
        format!(
            "alice <alice@l3m.invalid>|alice <alice@l3m.invalid>|1750000000|{before}|Change the readme"
        )
    );
    assert_eq!(hub.git(&hub.ws, &["status", "--porcelain"]), "");
    hub.git(
        &hub.root.join("hub.git"),
        &["fsck", "--strict", "--no-dangling"],
    );
    assert_eq!(
        hub.git(&hub.ws, &["ls-tree", "-r", "--name-only", "HEAD"]),
        "README.md\ndocs/a.md\nrun.sh\n"
    );
    assert!(
        hub.git(&hub.ws, &["ls-tree", "HEAD", "run.sh"])
            .starts_with("100755")
    );
    assert!(git::status(&t, "workspace").unwrap().changes.is_empty());
    assert!(matches!(
        git::commit(&t, "workspace", "again", 0, &hub.journal),
        Err(GitError::NothingToCommit { .. })
    ));
}

#[test]
fn log_lists_recent_commits_newest_first() {
    let hub = GitHub::new();
    let t = hub.token();
    std::fs::write(hub.ws.join("a"), "1").unwrap();
    let first = git::commit(&t, "workspace", "one", 1_000, &hub.journal).unwrap();
    std::fs::write(hub.ws.join("a"), "2").unwrap();
    let second = git::commit(&t, "workspace", "two", 2_000, &hub.journal).unwrap();
    let log = git::log(&t, "workspace", 2).unwrap();
    let got: Vec<(&str, &str)> = log
        .iter()
        .map(|c| (c.id.as_str(), c.summary.as_str()))
        .collect();
    assert_eq!(
        got,
        [(second.id.as_str(), "two"), (first.id.as_str(), "one")]
    );
    assert_eq!(log[0].author, "alice <alice@l3m.invalid>");
    assert_eq!(log[0].time_s, 2);
    let all = git::log(&t, "workspace", 10).unwrap();
    assert_eq!(all.len(), 3);
    assert_eq!(all[2].summary, "seed");
}

#[test]
fn push_sends_the_branch_to_the_granted_url() {
    let hub = GitHub::new();
    let t = hub.token();
    std::fs::write(hub.ws.join("a"), "1").unwrap();
    let done = git::commit(&t, "workspace", "one", 1_000, &hub.journal).unwrap();
    let pushed = git::push(&t, "workspace", "origin", "l3m/alice/_/work").unwrap();
    assert_eq!(pushed.branch, WORK);
    assert_eq!(pushed.commit, done.id);
    assert_eq!(pushed.url, hub.remote_url);
    assert_eq!(
        hub.tip("remote.git", WORK).as_deref(),
        Some(done.id.as_str())
    );
    // The exact URL names the same remote.
    std::fs::write(hub.ws.join("a"), "2").unwrap();
    let again = git::commit(&t, "workspace", "two", 2_000, &hub.journal).unwrap();
    git::push(&t, "workspace", &hub.remote_url, WORK).unwrap();
    assert_eq!(
        hub.tip("remote.git", WORK).as_deref(),
        Some(again.id.as_str())
    );
}

#[test]
fn a_repository_the_agent_made_inside_its_roots_is_never_opened() {
    let hub = GitHub::new();
    let own = hub.ws.join("mine");
    std::fs::create_dir(&own).unwrap();
    hub.git(&own, &["init", "-q"]);
    assert!(matches!(
        git::status(&hub.token(), "workspace/mine"),
        Err(GitError::GitDirInsideAcr { .. })
    ));
}

#[test]
fn worktrees_outside_the_roots_or_behind_a_symlink_are_refused() {
    let hub = GitHub::new();
    let t = hub.token();
    for outside in [".l3m", "agent", "../acr/workspace", "/abs"] {
        assert!(
            matches!(
                git::status(&t, outside),
                Err(GitError::OutsideRoots { .. } | GitError::Path { .. })
            ),
            "{outside}"
        );
    }
    std::os::unix::fs::symlink(&hub.ws, hub.ws.join("loop")).unwrap();
    assert!(matches!(
        git::status(&t, "workspace/loop"),
        Err(GitError::NotRealDir { .. })
    ));
    // A directory inside a worktree is not a worktree: gix finds no repository there.
    assert!(matches!(
        git::status(&t, "workspace/src"),
        Err(GitError::Git { op: "open", .. })
    ));
}
