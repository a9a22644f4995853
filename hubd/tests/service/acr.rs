//! An agent's branches at spawn and its ACR at retire, through hubd over a real nats-server.
//! hubd makes no checkout: a sequencer keeps the ACR as a clone it fetches through hubd
//! (`sequencer/tests/acr.rs`), so a spawn touches no worktree and costs the same at any size.
#![allow(clippy::unwrap_used)]

use crate::common::*;
use l3m_wire::hubd::Op;
use l3m_wire::hubd::tree::{Retire, Retired};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_forks_the_branches_and_makes_no_checkout_and_retire_removes_the_hosts_acr() {
    let f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let bob = f.sequencer("bob").await;
    f.spawn(&bob, "bob/kid", root_grant()).await.unwrap();
    let hub = f.dir.path().join("HUB");

    // Both branches exist; the child's work starts where its parent's is.
    let work_tip = f.tip("refs/heads/l3m/bob/_/work").unwrap();
    assert_eq!(f.tip("refs/heads/l3m/bob/kid/_/work").unwrap(), work_tip);
    assert!(f.tip("refs/l3m/a/bob/_/persona").is_some());
    // No checkout anywhere: hub.git has no worktree and the forest is empty.
    assert!(!f.git_dir().join("worktrees").exists());
    assert!(!hub.join("forest/bob").exists());
    f.fsck();

    // What a sequencer on the hub's host kept goes at retire: the ACR and its repository.
    for dir in [
        "forest/bob/self/workspace",
        "forest/bob/self.git",
        "forest/bob/kid/self",
    ] {
        std::fs::create_dir_all(hub.join(dir)).unwrap();
        std::fs::write(hub.join(dir).join("f"), "x").unwrap();
    }
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
    for dir in [
        "forest/bob/self",
        "forest/bob/self.git",
        "forest/bob/kid/self",
    ] {
        assert!(!hub.join(dir).exists(), "{dir} is still there");
    }
    f.fsck();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_forgets_the_worktrees_an_earlier_hubd_made() {
    let mut f = Fixture::start().await;
    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    // An earlier hubd's worktree of hub.git for bob's workspace.
    let workspace = f.dir.path().join("HUB/forest/bob/self/workspace");
    let git_dir = f.git_dir();
    test_support::git_bare(
        &git_dir,
        &[
            "worktree",
            "add",
            "--quiet",
            workspace.to_str().unwrap(),
            "l3m/bob/_/work",
        ],
    );
    assert!(git_dir.join("worktrees").is_dir());
    f.hub.restart_hubd().await;
    assert!(!git_dir.join("worktrees").exists());
    // The checkout's files are the sequencer's to adopt; hubd leaves them.
    assert!(workspace.is_dir());
    f.fsck();
}
