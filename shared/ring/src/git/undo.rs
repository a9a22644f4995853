//! Branch moves put back: the git half of rewind.
//!
//! Rewind returns each branch to where the oldest move being undone found it. [`plan_restore`]
//! reads where each such branch stands now and decides ([`steps`], pure) whether that is safe: a
//! branch must stand where its *last* journaled move left it — a commit's, or an earlier
//! rewind's, since rewinds journal their moves too — or where that move found it (the move never
//! happened: a commit that lost its compare-and-swap, or a crash between journal and ref).
//! Anywhere else, someone else (a human, a merge) moved it, and the whole rewind stops before
//! changing anything. [`restore`] carries out a plan: each move is journaled first, then made
//! by compare-and-swap; then the index of each worktree whose checked-out branch moved is
//! rewritten from the branch's tree, so files, index and branch agree.

use std::collections::BTreeMap;

use gix::ObjectId;

use super::error::{GitError, gix};
use super::{head_of, move_branch, open, signature, tip};
use crate::path::RelPath;
use crate::tokens::GitToken;
use crate::undo::{RefMove, Undo, UndoEntry, UndoStore};

/// One branch move rewind makes: `branch` of the worktree's repository, from `from` to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefStep {
    /// The worktree whose repository holds the branch, relative to the ACR.
    pub worktree: RelPath,
    /// The branch's full ref name.
    pub branch: String,
    /// Where the branch is now (hex); `None`: it does not exist.
    pub from: Option<String>,
    /// Where it goes back to (hex); `None`: the undone moves created it, so it is deleted.
    pub to: Option<String>,
}

/// A branch, as the journal names it.
type Key = (RelPath, String);

fn key(moved: &RefMove) -> Key {
    (moved.worktree.clone(), moved.branch.clone())
}

/// Decides the moves that undo `undo` (oldest first), given every move the `journal` holds
/// (oldest first; `undo` is a subset) and where each branch stands `now`. Pure.
pub(super) fn steps(
    journal: &[&RefMove],
    undo: &[&RefMove],
    now: &BTreeMap<Key, Option<String>>,
) -> Result<Vec<RefStep>, GitError> {
    let mut out: Vec<RefStep> = Vec::new();
    for oldest in undo {
        let k = key(oldest);
        if out.iter().any(|s| (&s.worktree, &s.branch) == (&k.0, &k.1)) {
            continue;
        }
        let last = journal.iter().rev().find(|m| key(m) == k).unwrap_or(oldest);
        let cur = now.get(&k).cloned().flatten();
        if cur != last.new && cur != last.old {
            return Err(GitError::MovedSince {
                branch: k.1,
                expected: last.new.clone().unwrap_or_else(|| "nothing".into()),
                found: cur.unwrap_or_else(|| "nothing (it was deleted)".into()),
            });
        }
        out.push(RefStep {
            worktree: k.0,
            branch: k.1,
            from: cur,
            to: oldest.old.clone(),
        });
    }
    out.retain(|s| s.from != s.to);
    Ok(out)
}

/// The branch moves among `entries`, oldest first.
fn moves(entries: &[UndoEntry]) -> Vec<&RefMove> {
    entries
        .iter()
        .filter_map(|e| match &e.undo {
            Undo::Ref(moved) => Some(moved),
            Undo::Path { .. } => None,
        })
        .collect()
}

/// Plans undoing the branch moves among `undo` (entries of `journal`, oldest first), changing
/// nothing: each branch must be one the token may write, and stand where its last journaled
/// move left it (or where that move found it).
pub fn plan_restore(
    token: &GitToken,
    journal: &[UndoEntry],
    undo: &[UndoEntry],
) -> Result<Vec<RefStep>, GitError> {
    let (all, undo) = (moves(journal), moves(undo));
    let mut now = BTreeMap::new();
    for moved in &undo {
        if !token.may_write(&moved.branch) {
            return Err(GitError::BranchNotWritable {
                branch: moved.branch.clone(),
                prefixes: token
                    .write_prefixes()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            });
        }
        for id in moved.old.iter().chain(&moved.new) {
            parse_id(&moved.branch, id)?;
        }
        if let std::collections::btree_map::Entry::Vacant(slot) = now.entry(key(moved)) {
            let wt = open::open(token, moved.worktree.as_str())?;
            slot.insert(tip(&wt.repo, &moved.branch)?.map(|id| id.to_string()));
        }
    }
    steps(&all, &undo, &now)
}

/// Makes the moves `steps` plans (from [`plan_restore`]), each journaled in `into` first and
/// made by compare-and-swap against where the plan found the branch, at `time_ms` (the caller's
/// clock); then rewrites the index of each worktree whose checked-out branch moved from the
/// branch's tree.
pub fn restore(
    token: &GitToken,
    steps: &[RefStep],
    into: &dyn UndoStore,
    time_ms: u64,
) -> Result<(), GitError> {
    let signature = signature(token, time_ms);
    let mut touched: BTreeMap<RelPath, Vec<String>> = BTreeMap::new();
    for step in steps {
        let wt = open::open(token, step.worktree.as_str())?;
        let refused = |source| GitError::Journal {
            branch: step.branch.clone(),
            source,
        };
        let entry = UndoEntry {
            id: into.next_id().map_err(refused)?,
            undo: Undo::Ref(RefMove {
                worktree: step.worktree.clone(),
                branch: step.branch.clone(),
                old: step.from.clone(),
                new: step.to.clone(),
            }),
            at_ms: time_ms,
        };
        into.record(&entry).map_err(refused)?;
        move_back(&wt.repo, step, &signature)?;
        touched
            .entry(step.worktree.clone())
            .or_default()
            .push(step.branch.clone());
    }
    for (worktree, branches) in touched {
        let wt = open::open(token, worktree.as_str())?;
        let (head, commit) = head_of(&wt.repo)?;
        if head.is_some_and(|h| branches.contains(&h)) {
            reset_index(&wt.repo, commit)?;
        }
    }
    Ok(())
}

/// Moves one branch back; a branch that moved since the plan is named with where it is now.
fn move_back(
    repo: &gix::Repository,
    step: &RefStep,
    signature: &gix::actor::Signature,
) -> Result<(), GitError> {
    let id = |hex: &Option<String>| {
        hex.as_deref()
            .map(|h| parse_id(&step.branch, h))
            .transpose()
    };
    let (from, to) = (id(&step.from)?, id(&step.to)?);
    match move_branch(
        repo,
        &step.branch,
        from,
        to,
        signature,
        "l3m rewind: moved back",
    ) {
        Err(GitError::Moved { branch }) => Err(GitError::MovedSince {
            expected: step.from.clone().unwrap_or_else(|| "nothing".into()),
            found: tip(repo, &branch)?
                .map_or_else(|| "nothing (it was deleted)".into(), |id| id.to_string()),
            branch,
        }),
        other => other,
    }
}

/// Rewrites the worktree's index from `commit`'s tree (the empty tree when the branch is gone).
fn reset_index(repo: &gix::Repository, commit: Option<ObjectId>) -> Result<(), GitError> {
    let tree = match commit {
        Some(id) => repo
            .find_commit(id)
            .map_err(gix("read the restored commit"))?
            .tree_id()
            .map_err(gix("read the restored tree"))?
            .detach(),
        None => repo
            .write_object(gix::objs::Tree::empty())
            .map_err(gix("write the empty tree"))?
            .detach(),
    };
    let mut index = repo
        .index_from_tree(&tree)
        .map_err(gix("build the index"))?;
    index
        .write(Default::default(), Default::default())
        .map_err(gix("write the index"))
}

fn parse_id(branch: &str, id: &str) -> Result<ObjectId, GitError> {
    ObjectId::from_hex(id.as_bytes()).map_err(|_| GitError::BadId {
        branch: branch.to_owned(),
        id: id.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: &str = "refs/heads/l3m/a/_/work";

    fn mv(old: Option<&str>, new: Option<&str>) -> RefMove {
        RefMove {
            worktree: RelPath::parse("workspace").unwrap(),
            branch: W.into(),
            old: old.map(Into::into),
            new: new.map(Into::into),
        }
    }

    fn now(at: Option<&str>) -> BTreeMap<Key, Option<String>> {
        [(
            (RelPath::parse("workspace").unwrap(), W.to_owned()),
            at.map(Into::into),
        )]
        .into()
    }

    fn dest(steps: &[RefStep]) -> Vec<(Option<&str>, Option<&str>)> {
        steps
            .iter()
            .map(|s| (s.from.as_deref(), s.to.as_deref()))
            .collect()
    }

    #[test]
    fn the_branch_goes_straight_back_to_where_the_oldest_undone_move_found_it() {
        let (a, b) = (mv(Some("c0"), Some("c1")), mv(Some("c1"), Some("c2")));
        let got = steps(&[&a, &b], &[&a, &b], &now(Some("c2"))).unwrap();
        assert_eq!(dest(&got), [(Some("c2"), Some("c0"))]);
    }

    #[test]
    fn an_earlier_rewinds_move_is_where_the_branch_is_expected() {
        // c0→c1, c1→c2, then a rewind moved it back c2→c1; now undo everything.
        let (a, b, r) = (
            mv(Some("c0"), Some("c1")),
            mv(Some("c1"), Some("c2")),
            mv(Some("c2"), Some("c1")),
        );
        let got = steps(&[&a, &b, &r], &[&a, &b], &now(Some("c1"))).unwrap();
        assert_eq!(dest(&got), [(Some("c1"), Some("c0"))]);
        // Already where the undone moves found it: nothing to do.
        let got = steps(&[&a, &b, &r], &[&b], &now(Some("c1"))).unwrap();
        assert!(got.is_empty());
    }

    #[test]
    fn a_last_move_that_never_happened_is_accepted() {
        let (a, b) = (mv(Some("c0"), Some("c1")), mv(Some("c1"), Some("c2")));
        let got = steps(&[&a, &b], &[&a, &b], &now(Some("c1"))).unwrap();
        assert_eq!(dest(&got), [(Some("c1"), Some("c0"))]);
    }

    #[test]
    fn a_branch_moved_by_someone_else_stops_the_plan() {
        let a = mv(None, Some("c1"));
        let err = steps(&[&a], &[&a], &now(Some("cX"))).unwrap_err();
        assert!(
            matches!(&err, GitError::MovedSince { found, expected, .. } if found == "cX" && expected == "c1"),
            "{err}"
        );
        let (b, c) = (mv(Some("c1"), Some("c2")), mv(Some("c2"), Some("c3")));
        // At an older commit of the agent's own that no last move names: someone reset it.
        let err = steps(&[&a, &b, &c], &[&b, &c], &now(Some("c1"))).unwrap_err();
        assert!(matches!(err, GitError::MovedSince { .. }), "{err}");
    }

    #[test]
    fn undoing_a_created_branch_deletes_it() {
        let a = mv(None, Some("c1"));
        let got = steps(&[&a], &[&a], &now(Some("c1"))).unwrap();
        assert_eq!(dest(&got), [(Some("c1"), None)]);
    }
}
