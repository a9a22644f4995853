//! The ACR as a clone the sequencer keeps, against a real hubd on a real nats-server: commits
//! reach `hub.git` only through hubd's checked push, a rewind's move back too, a commit a
//! killed process left unpushed is pushed at the next boot, a second host's clone takes over
//! where the first left off, a tip that diverged is kept rather than lost, and the files of a
//! checkout an earlier hubd made are adopted as they are.

#![allow(clippy::unwrap_used)] // helpers drive a real hub; a step that cannot run is a failed test

mod common;

use std::path::Path;

use common::*;
use sequencer::acr::{Acr, Synced};

const WORK: &str = "refs/heads/l3m/demo/_/work";

/// Commits every file of the checkout `dir` with plain git, as the git provider's commit does
/// in the clone; returns the commit.
fn commit(dir: &Path, file: &str, text: &str) -> String {
    std::fs::write(dir.join(file), text).unwrap();
    git(dir, &["add", "-A"]);
    git(
        dir,
        &[
            "-c",
            "user.name=d",
            "-c",
            "user.email=d@l3m.invalid",
            "commit",
            "-q",
            "-m",
            file,
        ],
    );
    head(dir)
}

fn head(dir: &Path) -> String {
    git(dir, &["rev-parse", "HEAD"]).trim().to_owned()
}

/// Where `hub.git` has `refname`, read with plain git.
fn tip_of(hub: &TestHub, refname: &str) -> String {
    git(&hub.root().join("hub.git"), &["rev-parse", refname])
        .trim()
        .to_owned()
}

fn hub_tip(hub: &TestHub) -> String {
    tip_of(hub, WORK)
}

fn fsck(hub: &TestHub) {
    git(
        &hub.root().join("hub.git"),
        &["fsck", "--strict", "--no-dangling"],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commits_and_moves_back_reach_the_hub_only_through_hubd() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 5).await;
    let client = hub.sequencer_client("demo").await;
    let acr = Acr::at(&hub.forest(), &agent("demo"));
    let workspace = acr.root().join("workspace");
    let persona = acr.root().join("agent");

    // Checkouts of the clone: the work branch under the hub's name, the persona detached.
    let start = hub_tip(&hub);
    assert_eq!(git(&workspace, &["symbolic-ref", "HEAD"]).trim(), WORK);
    assert_eq!(head(&workspace), start);
    assert_eq!(head(&persona), tip_of(&hub, "refs/l3m/a/demo/_/persona"));
    assert!(acr.root().join(".l3m").is_dir());
    // Their repository lies outside the ACR, and hub.git has no checkout of its own.
    let common = git(&workspace, &["rev-parse", "--git-common-dir"]);
    assert!(
        !Path::new(common.trim()).starts_with(acr.root()),
        "{common}"
    );
    assert!(!hub.root().join("hub.git/worktrees").exists());

    // A commit stays in the clone until synced, then the hub has it.
    let first = commit(&workspace, "notes.md", "one\n");
    assert_eq!(hub_tip(&hub), start);
    assert_eq!(
        acr.sync(&client).await.unwrap(),
        Synced::Moved(start.clone(), first.clone())
    );
    assert_eq!(hub_tip(&hub), first);
    assert_eq!(acr.sync(&client).await.unwrap(), Synced::Already);
    fsck(&hub);

    // A move back (what a rewind's restore does to the branch) goes back in the hub too.
    git(&workspace, &["update-ref", WORK, &start]);
    acr.sync(&client).await.unwrap();
    assert_eq!(hub_tip(&hub), start);

    // Back and forward at once (a rewind, then a new commit): back to where they meet, then
    // forward.
    git(&workspace, &["reset", "-q", "--hard", &first]);
    acr.sync(&client).await.unwrap();
    git(&workspace, &["reset", "-q", "--hard", &start]);
    let other = commit(&workspace, "other.md", "two\n");
    acr.sync(&client).await.unwrap();
    assert_eq!(hub_tip(&hub), other);
    fsck(&hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_left_unpushed_is_pushed_at_the_next_boot_and_another_host_takes_over() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 5).await;
    let client = hub.sequencer_client("demo").await;
    let here = Acr::at(&hub.forest(), &agent("demo"));
    let workspace = here.root().join("workspace");
    // A process committed and was killed before it pushed.
    let left = commit(&workspace, "notes.md", "one\n");
    here.ready(&client).await.unwrap();
    assert_eq!(hub_tip(&hub), left, "the next boot pushed it");

    // Another host's forest: its clone starts from what the hub has, files and all.
    let elsewhere = tempfile::tempdir().unwrap();
    let there = Acr::at(elsewhere.path(), &agent("demo"));
    there.ready(&client).await.unwrap();
    let theirs = there.root().join("workspace");
    assert_eq!(head(&theirs), left);
    assert_eq!(read(&theirs.join("notes.md")).unwrap(), b"one\n");
    let next = commit(&theirs, "more.md", "two\n");
    there.sync(&client).await.unwrap();

    // The first host, behind, follows at its next boot, keeping its uncommitted file.
    std::fs::write(workspace.join("draft.md"), "draft\n").unwrap();
    here.ready(&client).await.unwrap();
    assert_eq!(head(&workspace), next);
    assert_eq!(read(&workspace.join("more.md")).unwrap(), b"two\n");
    assert_eq!(git(&workspace, &["status", "--porcelain"]), "?? draft.md\n");

    // A tip that left the hub's (a partitioned host's commit after another pushed) is kept
    // under refs/orphaned/, and the branch follows the hub.
    let stray = commit(&workspace, "stray.md", "stray\n");
    let last = commit(&theirs, "last.md", "three\n");
    there.sync(&client).await.unwrap();
    here.ready(&client).await.unwrap();
    assert_eq!(head(&workspace), last);
    let kept = git(
        &workspace,
        &["for-each-ref", "--format=%(objectname)", "refs/orphaned/"],
    );
    assert_eq!(kept.trim(), stray);
    assert_eq!(hub_tip(&hub), last);
    fsck(&hub);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_files_of_an_earlier_checkout_are_adopted_as_changes() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 5).await;
    let client = hub.sequencer_client("demo").await;
    let acr = Acr::at(&hub.forest(), &agent("demo"));
    let workspace = acr.root().join("workspace");
    // What an earlier hubd's worktree looked like after hubd forgot it: a `.git` file pointing
    // into hub.git, uncommitted files, and a repository the agent made itself.
    std::fs::remove_dir_all(acr.root()).unwrap();
    std::fs::create_dir_all(workspace.join("src/.git")).unwrap();
    std::fs::write(
        workspace.join(".git"),
        "gitdir: /hub/hub.git/worktrees/workspace\n",
    )
    .unwrap();
    std::fs::write(workspace.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(workspace.join("src/.git/config"), "[core]\n").unwrap();

    acr.ready(&client).await.unwrap();
    assert_eq!(head(&workspace), hub_tip(&hub));
    assert_eq!(
        read(&workspace.join("src/main.rs")).unwrap(),
        b"fn main() {}\n"
    );
    assert_eq!(git(&workspace, &["status", "--porcelain"]), "?? src/\n");
    assert!(!workspace.with_extension("adopting").exists());
    // Ready again: the checkout is recognized, not adopted a second time.
    let pointer = std::fs::metadata(workspace.join(".git"))
        .unwrap()
        .modified()
        .unwrap();
    acr.ready(&client).await.unwrap();
    assert_eq!(
        read(&workspace.join("src/main.rs")).unwrap(),
        b"fn main() {}\n"
    );
    let again = std::fs::metadata(workspace.join(".git"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(again, pointer, "a checkout of the clone was adopted again");
}

/// The workspace's `.git` file is the agent's to write: one pointing through `..` at another
/// agent's clone is never used, so the harness runs no git against that clone; the checkout
/// is adopted into its own clone instead and the other clone's branch stays where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_pointer_into_another_agents_clone_is_never_used() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 5).await;
    hub.spawn("other", 5).await;
    let client = hub.sequencer_client("demo").await;
    let acr = Acr::at(&hub.forest(), &agent("demo"));
    let workspace = acr.root().join("workspace");
    let theirs = Acr::at(&hub.forest(), &agent("other"));
    let their_workspace = theirs.root().join("workspace");
    let their_tip = head(&their_workspace);
    // The hub moves ahead of demo's clone (another host ran it), so the next boot would move
    // the checkout's branch: the moment a repointed `.git` would matter.
    let elsewhere = tempfile::tempdir().unwrap();
    let there = Acr::at(elsewhere.path(), &agent("demo"));
    there.ready(&client).await.unwrap();
    commit(&there.root().join("workspace"), "ahead.md", "ahead\n");
    there.sync(&client).await.unwrap();
    // demo repoints its workspace at other's clone, through its own clone's `worktrees/`.
    let own = std::fs::read_to_string(workspace.join(".git")).unwrap();
    let own = own.trim().trim_start_matches("gitdir: ");
    let sneaky = format!("gitdir: {own}/../../../../other/self.git/worktrees/workspace\n");
    assert!(Path::new(sneaky.trim().trim_start_matches("gitdir: ")).is_dir());
    std::fs::write(workspace.join(".git"), &sneaky).unwrap();

    acr.ready(&client).await.unwrap();
    assert_eq!(
        head(&their_workspace),
        their_tip,
        "other's clone was touched"
    );
    assert_eq!(git(&their_workspace, &["status", "--porcelain"]), "");
    assert_eq!(head(&workspace), hub_tip(&hub));
    let pointer = std::fs::read_to_string(workspace.join(".git")).unwrap();
    assert!(pointer.contains("demo/self.git/worktrees/"), "{pointer}");
}
