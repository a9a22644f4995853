//! Git: commits and pushes the grant does not cover, tried through the full tool path.

use l3m_ring::git::GitError;
use l3m_tools::{Dispatch, ToolError};
use serde_json::json;

use crate::git_hub::GitHub;
use crate::session::{GitWorld, Session, git_grant};

/// Runs `tool` with `input` and returns the git provider's refusal.
fn git_refusal(session: &Session, tool: &str, input: serde_json::Value) -> GitError {
    match session.table.dispatch(tool, input, &session.effects) {
        Dispatch::Ran(Err(ToolError::Git(err))) => err,
        other => panic!("expected a git refusal from {tool}, got {other:?}"),
    }
}

#[test]
fn ref_boundary_refuses_a_commit_to_a_branch_outside_the_writable_prefixes() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    hub.git(&hub.ws, &["switch", "-q", "-c", "feature"]);
    std::fs::write(hub.ws.join("README.md"), "# sneaky\n").unwrap();
    let before = GitWorld::of(&hub);
    let err = git_refusal(&session, "git_commit", json!({"message": "sneak"}));
    assert!(
        matches!(&err, GitError::BranchNotWritable { branch, prefixes }
            if branch == "refs/heads/feature" && prefixes == &["refs/heads/l3m/alice/"]),
        "{err}"
    );
    assert_eq!(GitWorld::of(&hub), before);
}

#[test]
fn ref_boundary_refuses_a_commit_on_a_detached_head() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    hub.git(&hub.ws, &["switch", "-q", "--detach", "main"]);
    std::fs::write(hub.ws.join("x"), "x").unwrap();
    let before = GitWorld::of(&hub);
    let err = git_refusal(&session, "git_commit", json!({"message": "x"}));
    assert!(matches!(err, GitError::Detached { .. }), "{err}");
    assert_eq!(GitWorld::of(&hub), before);
}

#[test]
fn remote_boundary_refuses_a_push_to_an_unlisted_remote() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    let before = GitWorld::of(&hub);
    for remote in ["other", hub.other_url.as_str(), "upstream"] {
        let err = git_refusal(
            &session,
            "git_push",
            json!({"remote": remote, "branch": "l3m/alice/_/work"}),
        );
        assert!(
            matches!(&err, GitError::RemoteNotGranted { remote: r, .. } if r == remote),
            "{err}"
        );
    }
    assert_eq!(GitWorld::of(&hub), before);
}

#[test]
fn remote_boundary_matches_the_granted_url_exactly_so_url_tricks_reach_nothing() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    let before = GitWorld::of(&hub);
    let root = hub.root.display().to_string();
    let tricks = [
        format!("file://{root}/remote.git/../other.git"),
        format!("file://{root}/./other.git"),
        format!("{}/", hub.remote_url),
        format!("{} ", hub.remote_url),
        hub.remote_url.to_uppercase(),
        hub.remote_url.replacen("file://", "", 1),
        format!("file://{root}/other.git#{}", hub.remote_url),
        format!("ext::sh -c touch% {root}/pwned"),
        "--upload-pack=touch /tmp/pwned".to_owned(),
    ];
    for trick in &tricks {
        let err = git_refusal(
            &session,
            "git_push",
            json!({"remote": trick, "branch": "l3m/alice/_/work"}),
        );
        assert!(
            matches!(err, GitError::RemoteNotGranted { .. }),
            "{trick}: {err}"
        );
    }
    assert_eq!(GitWorld::of(&hub), before);
    assert!(!hub.root.join("pwned").exists());
}

#[test]
fn ref_boundary_refuses_pushing_a_branch_outside_the_prefixes_granted_for_the_remote() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    let before = GitWorld::of(&hub);
    for branch in [
        "main",
        "refs/heads/main",
        "refs/heads/l3m/bob/_/work",
        "l3m/alice",
        "refs/tags/v1",
    ] {
        let err = git_refusal(
            &session,
            "git_push",
            json!({"remote": "origin", "branch": branch}),
        );
        assert!(
            matches!(err, GitError::BranchNotPushable { .. }),
            "{branch}: {err}"
        );
    }
    for bad in [
        "l3m/alice/_/work:refs/heads/main",
        "+l3m/alice/_/work",
        "l3m/alice/",
        "",
    ] {
        let err = git_refusal(
            &session,
            "git_push",
            json!({"remote": "origin", "branch": bad}),
        );
        assert!(
            matches!(
                err,
                GitError::BadBranch { .. } | GitError::BranchNotPushable { .. }
            ),
            "{bad}: {err}"
        );
    }
    assert_eq!(GitWorld::of(&hub), before);
}

#[test]
fn repository_boundary_refuses_a_worktree_repointed_at_a_repository_the_agent_wrote() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    // The agent makes a repository of its own inside its roots, with a hook that would run on
    // commit, and repoints the worktree's `.git` file at it.
    hub.git(&hub.ws, &["init", "-q", "own"]);
    let own = hub.ws.join("own/.git");
    let marker = hub.root.join("hook-ran");
    std::fs::write(
        own.join("hooks/post-commit"),
        format!("#!/bin/sh\ntouch {}\n", marker.display()),
    )
    .unwrap();
    std::fs::write(hub.ws.join(".git"), format!("gitdir: {}\n", own.display())).unwrap();
    let refs = [hub.refs("hub.git"), hub.refs("remote.git")];
    let err = git_refusal(&session, "git_commit", json!({"message": "x"}));
    assert!(matches!(err, GitError::GitDirInsideAcr { .. }), "{err}");
    let err = git_refusal(
        &session,
        "git_push",
        json!({"remote": "origin", "branch": "l3m/alice/_/work"}),
    );
    assert!(matches!(err, GitError::GitDirInsideAcr { .. }), "{err}");
    assert_eq!([hub.refs("hub.git"), hub.refs("remote.git")], refs);
    assert!(!marker.exists());
}

#[test]
fn worktree_boundary_refuses_a_symlink_to_another_agents_worktree() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    // Another agent's worktree of the same hub, outside alice's ACR.
    let theirs = hub.root.join("bob-ws");
    hub.git(
        &hub.root.join("hub.git"),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "l3m/bob/_/work",
            theirs.to_str().unwrap(),
            "main",
        ],
    );
    std::os::unix::fs::symlink(&theirs, hub.ws.join("bob")).unwrap();
    let err = git_refusal(&session, "git_status", json!({"worktree": "workspace/bob"}));
    assert!(matches!(err, GitError::NotRealDir { .. }), "{err}");
}

#[test]
fn ref_boundary_refuses_reading_a_worktree_repointed_at_another_agents_branch() {
    let hub = GitHub::new();
    let session = Session::new(&hub, git_grant());
    // Bob's worktree of the same hub, with a commit alice may not read.
    let theirs = hub.root.join("bob-ws");
    hub.git(
        &hub.root.join("hub.git"),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "l3m/bob/_/work",
            theirs.to_str().unwrap(),
            "main",
        ],
    );
    std::fs::write(theirs.join("secret.md"), "bob's secret\n").unwrap();
    hub.git(&theirs, &["add", "secret.md"]);
    hub.git(
        &theirs,
        &[
            "-c",
            "user.name=bob",
            "-c",
            "user.email=bob@l3m.invalid",
            "commit",
            "-q",
            "-m",
            "secret",
        ],
    );
    let bob_tip = hub.tip("hub.git", "refs/heads/l3m/bob/_/work");
    // Alice repoints her worktree's `.git` at bob's worktree git directory (outside the ACR).
    let bobs_gitdir = hub.git(&theirs, &["rev-parse", "--absolute-git-dir"]);
    std::fs::write(
        hub.ws.join(".git"),
        format!("gitdir: {}\n", bobs_gitdir.trim()),
    )
    .unwrap();
    for tool in ["git_status", "git_diff", "git_log"] {
        let err = git_refusal(&session, tool, json!({}));
        assert!(
            matches!(&err, GitError::BranchNotReadable { branch, .. } if branch == "refs/heads/l3m/bob/_/work"),
            "{tool}: {err}"
        );
    }
    let err = git_refusal(&session, "git_commit", json!({"message": "x"}));
    assert!(matches!(err, GitError::BranchNotWritable { .. }), "{err}");
    assert_eq!(hub.tip("hub.git", "refs/heads/l3m/bob/_/work"), bob_tip);
}
