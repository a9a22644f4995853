//! Rewind restores tame git actions with the files: after restoring the entries journaled since a
//! point, the worktree's files, its index and its branch are exactly as they were at that point,
//! and a branch someone else moved since stops the restore before anything changes.
#![allow(clippy::unwrap_used)] // the helpers drive a fixture; a step that cannot run is a failed test

use l3m_ring::test_support::git_hub;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use git_hub::{GitHub, WORK};
use l3m_ring::files;
use l3m_ring::git::{self, GitError};
use l3m_ring::rewind::{self, Restore, RestoreError};
use l3m_ring::undo::{EntryId, UndoEntry};
use proptest::prelude::*;

/// Everything a rewind must put back: the worktree's files, its index, its branch, its status.
#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    files: BTreeMap<String, Vec<u8>>,
    index: String,
    branch: Option<String>,
    status: String,
}

fn state(hub: &GitHub) -> State {
    let mut files = BTreeMap::new();
    walk(&hub.ws, &hub.ws, &mut files);
    State {
        files,
        index: hub.git(&hub.ws, &["ls-files", "-s"]),
        branch: hub.tip("hub.git", WORK),
        status: hub.git(&hub.ws, &["status", "--porcelain"]),
    }
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path.strip_prefix(root).unwrap().display().to_string();
        if rel == ".git" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.is_dir() {
            out.insert(format!("{rel}/"), Vec::new());
            walk(root, &path, out);
        } else if meta.is_symlink() {
            out.insert(
                rel,
                std::fs::read_link(&path)
                    .unwrap()
                    .display()
                    .to_string()
                    .into(),
            );
        } else {
            out.insert(rel, std::fs::read(&path).unwrap());
        }
    }
}

fn fsck(hub: &GitHub) {
    hub.git(
        &hub.root.join("hub.git"),
        &["fsck", "--strict", "--no-dangling"],
    );
}

/// One tame action a model might take.
#[derive(Debug, Clone)]
enum Action {
    Write(usize, u8),
    Remove(usize),
    Commit,
}

const NAMES: [&str; 3] = [
    "workspace/todo.md",
    "workspace/README.md",
    "workspace/src/main.rs",
];

/// An agent acting on the fixture: its actions' undo entries, in order, and its clock.
struct Agent {
    hub: GitHub,
    done: Vec<EntryId>,
    clock: u64,
}

impl Agent {
    fn new() -> Self {
        Self {
            hub: GitHub::new(),
            done: Vec::new(),
            clock: 1_750_000_000_000,
        }
    }

    fn entries(&self) -> Vec<UndoEntry> {
        self.hub.journal.entries().unwrap()
    }

    /// Does `action`; a refused one (nothing to commit, nothing to remove) changes nothing.
    fn act(&mut self, action: &Action) {
        let hub = &self.hub;
        let tokens = hub.tokens();
        let token = tokens.files.as_ref().unwrap();
        self.clock += 1000;
        let before = self.entries().len();
        let _refused_or_done = match action {
            Action::Write(i, b) => {
                files::write(token, NAMES[*i], &[b'a' + b % 26; 3], &hub.journal)
                    .map_err(|e| e.to_string())
            }
            Action::Remove(i) => {
                files::remove(token, NAMES[*i], &hub.journal).map_err(|e| e.to_string())
            }
            Action::Commit => {
                git::commit(&hub.token(), "workspace", "step", self.clock, &hub.journal)
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
        };
        let new = self.entries().split_off(before);
        self.done.extend(new.iter().map(|e| e.id));
    }

    /// Runs `actions`, returning the state before each and after the last, each with how many
    /// undo entries the actions had left by then.
    fn run(&mut self, actions: &[Action]) -> Vec<(State, usize)> {
        let mut points = vec![(state(&self.hub), self.done.len())];
        for a in actions {
            self.act(a);
            points.push((state(&self.hub), self.done.len()));
        }
        points
    }

    /// The entries to undo to return to a point: every action's after it.
    fn after(&self, point: usize) -> BTreeSet<EntryId> {
        self.done[point..].iter().copied().collect()
    }

    fn rewind(&self, point: usize) -> Result<Restore, RestoreError> {
        rewind::restore(
            &self.hub.tokens(),
            &self.entries(),
            &self.after(point),
            &self.hub.journal,
            self.clock,
        )
    }

    fn plan(&self, point: usize) -> Result<Restore, RestoreError> {
        rewind::plan(&self.hub.tokens(), &self.entries(), &self.after(point))
    }
}

#[test]
fn write_commit_edit_commit_rewinds_to_each_point() {
    let mut agent = Agent::new();
    let points = agent.run(&[
        Action::Write(0, 0),
        Action::Commit,
        Action::Write(0, 1),
        Action::Commit,
    ]);
    assert_ne!(
        points[2].0.branch, points[0].0.branch,
        "the first commit moved the branch"
    );
    for (k, (at_k, len)) in points.iter().enumerate().rev() {
        let done = agent.rewind(*len).unwrap();
        assert_eq!(&state(&agent.hub), at_k, "rewound to point {k}: {done:?}");
        fsck(&agent.hub);
    }
    assert_eq!(points[0].0.status, "", "the start was clean");
    assert_eq!(
        points[2].0.status, "",
        "after the first commit it was clean"
    );
    assert_eq!(
        points[4].0.status, "",
        "after the second commit it was clean"
    );
    // And forward again: a rewind to the end puts nothing back, from the first point's state.
    assert_eq!(agent.rewind(points[4].1).unwrap(), Restore::default());
}

#[test]
fn a_branch_a_human_moved_stops_the_rewind_with_nothing_changed() {
    let mut agent = Agent::new();
    agent.run(&[Action::Write(0, 0), Action::Commit, Action::Write(1, 2)]);
    let hub = &agent.hub;
    // A human commits on the agent's branch in the worktree.
    std::fs::write(hub.ws.join("human.txt"), "mine\n").unwrap();
    hub.git(&hub.ws, &["add", "human.txt"]);
    hub.git(
        &hub.ws,
        &[
            "-c",
            "user.name=h",
            "-c",
            "user.email=h@x",
            "commit",
            "-q",
            "-m",
            "human",
        ],
    );
    let before = state(hub);
    let err = agent.rewind(0).unwrap_err();
    assert!(
        matches!(&err, RestoreError::Git(GitError::MovedSince { branch, .. }) if branch == WORK),
        "{err}"
    );
    assert!(err.to_string().contains("git update-ref"), "{err}");
    assert_eq!(state(hub), before, "nothing was restored, files included");
    // The dry run says the same, also changing nothing.
    assert!(matches!(
        agent.plan(0),
        Err(RestoreError::Git(GitError::MovedSince { .. }))
    ));
    assert_eq!(state(hub), before);
}

#[test]
fn a_rewind_across_a_push_restores_the_local_branch_and_leaves_the_remote() {
    let mut agent = Agent::new();
    let points = agent.run(&[Action::Write(0, 0), Action::Commit]);
    let pushed = git::push(&agent.hub.token(), "workspace", "origin", WORK).unwrap();
    let planned = agent.plan(0).unwrap();
    let done = agent.rewind(0).unwrap();
    assert_eq!(
        planned, done,
        "the dry run forecasts exactly what the rewind does"
    );
    assert_eq!(state(&agent.hub), points[0].0);
    assert_eq!(done.refs.len(), 1);
    assert_eq!(
        (done.edits, done.paths.as_slice()),
        (1, &["workspace/todo.md".to_owned()][..])
    );
    assert_eq!(
        agent.hub.tip("remote.git", WORK),
        Some(pushed.commit),
        "a push is bounded, not undone"
    );
}

#[test]
fn a_plan_without_a_git_token_names_the_axis() {
    let mut agent = Agent::new();
    agent.run(&[Action::Write(0, 0), Action::Commit]);
    let mut tokens = agent.hub.tokens();
    tokens.git = None;
    let err = rewind::plan(&tokens, &agent.entries(), &agent.after(0)).unwrap_err();
    assert!(
        matches!(
            err,
            RestoreError::NoToken {
                axis: "git write",
                ..
            }
        ),
        "{err}"
    );
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => (0..NAMES.len(), any::<u8>()).prop_map(|(i, b)| Action::Write(i, b)),
        1 => (0..NAMES.len()).prop_map(Action::Remove),
        2 => Just(Action::Commit),
    ]
}

fn cases() -> u32 {
    std::env::var("L3M_REWIND_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Random tame file and git actions, a rewind to a random point, more actions, then a rewind
    /// to a random point of either run: the state is always the state at that point.
    #[test]
    fn restored_state_is_the_state_after_the_targets_prefix(
        first in proptest::collection::vec(action(), 1..8),
        second in proptest::collection::vec(action(), 0..6),
        k in any::<prop::sample::Index>(),
        j in any::<prop::sample::Index>(),
        into_second in any::<bool>(),
    ) {
        let mut agent = Agent::new();
        let a = agent.run(&first);
        let k = k.index(a.len());
        agent.rewind(a[k].1).unwrap();
        prop_assert_eq!(&state(&agent.hub), &a[k].0);
        let b = agent.run(&second);
        let (target, point) = if into_second {
            let j = j.index(b.len());
            (&b[j].0, b[j].1)
        } else {
            let j = j.index(k + 1);
            (&a[j].0, a[j].1)
        };
        agent.rewind(point).unwrap();
        prop_assert_eq!(&state(&agent.hub), target);
        fsck(&agent.hub);
    }
}
