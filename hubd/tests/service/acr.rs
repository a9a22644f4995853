//! ACRs as git worktrees of hub.git: made at spawn, removed at retire, through hubd over a real
//! nats-server.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::common::*;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::tree::{Retire, Retired};

/// Runs git in `dir` (or on the hub's git dir with `--git-dir` among `args`), trimmed.
fn git(dir: &Path, args: &[&str]) -> String {
    test_support::git(dir, args).trim().to_owned()
}

fn worktrees(f: &Fixture) -> String {
    let git_dir = f.git_dir();
    git(
        f.dir.path(),
        &[
            "--git-dir",
            git_dir.to_str().unwrap(),
            "worktree",
            "list",
            "--porcelain",
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_makes_worktrees_on_the_work_and_persona_branches_and_retire_removes_them() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    let hub = f.dir.path().join("HUB");
    let workspace = hub.join("forest/bob/self/workspace");
    let persona = hub.join("forest/bob/self/agent");

    // workspace/ is on the work branch, clean, at the branch's first commit.
    assert_eq!(git(&workspace, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&workspace, &["symbolic-ref", "HEAD"]),
        "refs/heads/l3m/bob/_/work"
    );
    let work_tip = f.tip("refs/heads/l3m/bob/_/work").unwrap();
    assert_eq!(git(&workspace, &["rev-parse", "HEAD"]), work_tip);
    // agent/ is detached at the persona branch's tip, which exists even with no persona worn.
    assert_eq!(git(&persona, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&persona, &["rev-parse", "HEAD"]),
        f.tip("refs/l3m/a/bob/_/persona").unwrap()
    );
    // .l3m/ is a plain directory, not a checkout.
    let harness = hub.join("forest/bob/self/.l3m");
    assert!(harness.is_dir() && !harness.join(".git").exists());
    // The child's workspace starts where its parent's work is.
    let kid = hub.join("forest/bob/kid/self/workspace");
    assert_eq!(git(&kid, &["rev-parse", "HEAD"]), work_tip);
    assert_eq!(
        git(&kid, &["symbolic-ref", "HEAD"]),
        "refs/heads/l3m/bob/kid/_/work"
    );
    let listed = worktrees(&f);
    for dir in [&workspace, &persona, &kid] {
        assert!(listed.contains(dir.to_str().unwrap()), "{listed}");
    }
    f.fsck();

    // A commit in the workspace moves the agent's work branch in hub.git.
    std::fs::write(workspace.join("notes.md"), "first notes\n").unwrap();
    git(&workspace, &["add", "notes.md"]);
    git(
        &workspace,
        &[
            "-c",
            "user.name=bob",
            "-c",
            "user.email=bob@l3m.invalid",
            "commit",
            "-q",
            "-m",
            "notes",
        ],
    );
    assert_ne!(f.tip("refs/heads/l3m/bob/_/work").unwrap(), work_tip);
    f.fsck();

    let retired: Retired = f
        .call(
            Op::Retire,
            &Retire {
                capability: human,
                agent: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(retired.agents, ["bob/kid", "bob"]);
    for dir in [&workspace, &persona, &kid] {
        assert!(!dir.exists(), "{} is still there", dir.display());
    }
    assert!(!hub.join("forest/bob/self").exists());
    let listed = worktrees(&f);
    assert!(!listed.contains("forest"), "{listed}");
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_worktree_cannot_block_a_retire() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let acr = f.dir.path().join("HUB/forest/bob/self");
    // What worked in the ACR points its workspace somewhere else and leaves a stray file.
    std::fs::write(acr.join("workspace/.git"), "gitdir: /nowhere\n").unwrap();
    std::fs::write(acr.join("agent/stray.txt"), "uncommitted\n").unwrap();
    let retired: Retired = f
        .call(
            Op::Retire,
            &Retire {
                capability: human,
                agent: "bob".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(retired.agents, ["bob"]);
    assert!(!acr.exists());
    let listed = worktrees(&f);
    assert!(!listed.contains("forest"), "{listed}");
    f.fsck();
}
