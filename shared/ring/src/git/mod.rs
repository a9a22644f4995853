//! The git provider: status, diff, log, commit and push on the agent's worktrees, through gix.
//!
//! Every call names a worktree relative to the ACR (`workspace`) and takes the [`GitToken`]; it
//! refuses — with a [`GitError`] naming the boundary — unless:
//! - **worktree**: the path lies under one of the ACR's write roots, every directory on the way
//!   is a real directory (no symlink), and it is the top of a git worktree;
//! - **repository**: the worktree's git directories lie *outside* the ACR, so they are the
//!   harness's (the clone the sequencer keeps beside the ACR and pushes through hubd; an agent
//!   could write a `.git` directory of its own, with its own config, inside its roots; such a
//!   repository is never opened). Repositories are opened isolated: no system or
//!   global git config, no environment;
//! - **ref**: the worktree's checked-out branch lies under a readable prefix (status, diff,
//!   log) or a writable one (commit); a detached HEAD is refused;
//! - **remote and ref** (push): the remote is one the token lists, named exactly as granted
//!   (its name, or its URL byte for byte), and the branch lies under the prefixes granted for it.
//!
//! [`commit`] records the whole worktree (every file but `.git`; `.gitignore` is not consulted)
//! as a tree built here from gix object writes, commits it as the agent (`<agent>@l3m.invalid`)
//! at the time the caller passes (the Clock effect's), journals the branch's move in the undo
//! journal, moves the branch by compare-and-swap from the HEAD it read, and rewrites the index
//! from the new tree so `git status` is clean. [`plan_restore`] and [`restore`] move branches
//! back for rewind, each by compare-and-swap against where the journal says it was left.
//! [`push`] runs the `git` CLI (gix cannot push) with no shell, no hooks, no system or global
//! config, no terminal prompt, only the `file`, `git`, `http`, `https` and `ssh` transports, the
//! granted URL and a full `refs/heads/..:refs/heads/..` refspec, never forced.
//!
//! Limitations: the worktree path is checked for symlinks just before it is opened, so a
//! process racing the call could swap one in between; a push has a deadline
//! ([`PUSH_TIMEOUT`]) but no byte limit.

mod error;
mod open;
mod push;
mod tree;
mod undo;

use gix::ObjectId;
use gix::bstr::ByteSlice;
use gix::objs::tree::EntryKind;
use gix::refs::Target;
use gix::refs::transaction::{LogChange, PreviousValue, RefEdit, RefLog};

use crate::tokens::GitToken;
use crate::undo::{RefMove, Undo, UndoEntry, UndoStore};
pub use error::GitError;
use error::gix;
pub use push::{PUSH_TIMEOUT, Pushed, push};
pub use undo::{RefStep, plan_restore, restore};

/// How one path differs between HEAD and the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// In the worktree, not in HEAD.
    Added,
    /// In HEAD, not in the worktree.
    Deleted,
    /// In both, with different content.
    Modified,
    /// In both, with a different mode (file, executable, symlink).
    TypeChanged,
}

impl std::fmt::Display for ChangeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ChangeKind::Added => "added",
            ChangeKind::Deleted => "deleted",
            ChangeKind::Modified => "modified",
            ChangeKind::TypeChanged => "type changed",
        })
    }
}

/// One changed path of a worktree, against its HEAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The path, relative to the worktree (lossily UTF-8).
    pub path: String,
    /// How it changed.
    pub kind: ChangeKind,
}

/// A worktree's state against its HEAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The checked-out branch's full name.
    pub branch: String,
    /// The commit HEAD is at; `None` on an unborn branch.
    pub head: Option<String>,
    /// Every changed path, sorted.
    pub changes: Vec<Change>,
}

/// One changed file's text diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// The change.
    pub change: Change,
    /// A unified diff (`---`/`+++` headers, 3 lines of context); `None` when either side is not
    /// UTF-8 text.
    pub unified: Option<String>,
}

/// One commit of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    /// The commit id (hex).
    pub id: String,
    /// The message's first paragraph, as one line.
    pub summary: String,
    /// `name <email>`.
    pub author: String,
    /// The author time, in seconds since the Unix epoch.
    pub time_s: i64,
}

/// A commit made by [`commit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The new commit's id.
    pub id: String,
    /// The branch it was committed onto.
    pub branch: String,
    /// The paths it changed against the previous HEAD.
    pub changes: Vec<Change>,
}

/// The most commits [`log`] returns in one call.
pub const MAX_LOG: usize = 1000;

/// The worktree's changes against its HEAD.
pub fn status(token: &GitToken, worktree: &str) -> Result<Status, GitError> {
    let wt = open::open(token, worktree)?;
    let (branch, head) = readable_head(token, &wt)?;
    let old = tree::of_tree(&wt.repo, head_tree(&wt.repo, head)?)?;
    let new = tree::of_worktree(&wt.repo, &wt.root, false)?;
    Ok(Status {
        branch,
        head: head.map(|id| id.to_string()),
        changes: changes(&old, &new),
    })
}

/// The worktree's text diff against its HEAD, file by file.
pub fn diff(token: &GitToken, worktree: &str) -> Result<Vec<FileDiff>, GitError> {
    let wt = open::open(token, worktree)?;
    let (_, head) = readable_head(token, &wt)?;
    let old = tree::of_tree(&wt.repo, head_tree(&wt.repo, head)?)?;
    let new = tree::of_worktree(&wt.repo, &wt.root, false)?;
    changed(&old, &new)
        .into_iter()
        .map(|(key, change)| {
            let before = old.get(key).map(|l| blob(&wt.repo, l.id)).transpose()?;
            let after = new
                .get(key)
                .map(|l| on_disk(&wt, key, l.kind))
                .transpose()?;
            let unified = text_diff(&change.path, before.as_deref(), after.as_deref());
            Ok(FileDiff { change, unified })
        })
        .collect()
}

/// The `n` most recent commits of HEAD's first-parent line, newest first (at most [`MAX_LOG`]).
pub fn log(token: &GitToken, worktree: &str, n: usize) -> Result<Vec<CommitInfo>, GitError> {
    let wt = open::open(token, worktree)?;
    let (_, mut next) = readable_head(token, &wt)?;
    let mut out = Vec::new();
    while let Some(id) = next.filter(|_| out.len() < n.min(MAX_LOG)) {
        let commit = wt.repo.find_commit(id).map_err(gix("read a commit"))?;
        let decoded = commit.decode().map_err(gix("decode a commit"))?;
        let author = decoded.author().map_err(gix("decode an author"))?;
        out.push(CommitInfo {
            id: id.to_string(),
            summary: decoded.message_summary().to_str_lossy().into_owned(),
            author: format!("{} <{}>", author.name, author.email),
            time_s: author.time().map(|t| t.seconds).unwrap_or_default(),
        });
        next = decoded.parents().next();
    }
    Ok(out)
}

/// Commits every change in the worktree onto its checked-out branch, as the token's agent at
/// `time_ms` (milliseconds since the Unix epoch, from the Clock effect). The branch's move is
/// journaled in `journal`, durably, before the branch moves, so rewind can move it back.
pub fn commit(
    token: &GitToken,
    worktree: &str,
    message: &str,
    time_ms: u64,
    journal: &dyn UndoStore,
) -> Result<Committed, GitError> {
    let wt = open::open(token, worktree)?;
    let (branch, head) = head_of(&wt.repo)?;
    let branch = branch.ok_or_else(|| GitError::Detached {
        worktree: wt.name.clone(),
    })?;
    if !token.may_write(&branch) {
        return Err(GitError::BranchNotWritable {
            branch,
            prefixes: token
                .write_prefixes()
                .iter()
                .map(ToString::to_string)
                .collect(),
        });
    }
    let message = message.trim();
    if message.is_empty() {
        return Err(GitError::NothingToCommit {
            worktree: wt.name,
            reason: "the message is empty",
        });
    }
    let old_tree = head_tree(&wt.repo, head)?;
    let old = tree::of_tree(&wt.repo, old_tree)?;
    let new = tree::of_worktree(&wt.repo, &wt.root, true)?;
    let new_tree = tree::write(&wt.repo, &new)?;
    if old_tree == Some(new_tree) {
        return Err(GitError::NothingToCommit {
            worktree: wt.name,
            reason: "the worktree matches HEAD",
        });
    }
    let signature = signature(token, time_ms);
    let id = wt
        .repo
        .write_object(&gix::objs::Commit {
            tree: new_tree,
            parents: head.into_iter().collect(),
            author: signature.clone(),
            committer: signature.clone(),
            encoding: None,
            message: format!("{message}\n").into(),
            extra_headers: Vec::new(),
        })
        .map_err(gix("write the commit"))?
        .detach();
    journal_move(journal, &wt, &branch, head, id, time_ms)?;
    let summary = message.lines().next().unwrap_or_default();
    move_branch(
        &wt.repo,
        &branch,
        head,
        Some(id),
        &signature,
        &format!("commit: {summary}"),
    )?;
    let mut index = wt
        .repo
        .index_from_tree(&new_tree)
        .map_err(gix("build the index"))?;
    index
        .write(Default::default(), Default::default())
        .map_err(gix("write the index"))?;
    Ok(Committed {
        id: id.to_string(),
        branch,
        changes: changes(&old, &new),
    })
}

/// Journals, durably, that `branch` of `wt` is about to move from `old` to `new`.
fn journal_move(
    journal: &dyn UndoStore,
    wt: &open::Worktree,
    branch: &str,
    old: Option<ObjectId>,
    new: ObjectId,
    time_ms: u64,
) -> Result<(), GitError> {
    let refused = |source| GitError::Journal {
        branch: branch.to_owned(),
        source,
    };
    let entry = UndoEntry {
        id: journal.next_id().map_err(refused)?,
        undo: Undo::Ref(RefMove {
            worktree: wt.rel.clone(),
            branch: branch.to_owned(),
            old: old.map(|id| id.to_string()),
            new: Some(new.to_string()),
        }),
        at_ms: time_ms,
    };
    journal.record(&entry).map_err(refused)
}

/// The agent as author, committer and reflog identity, at `time_ms` (from the caller's clock).
fn signature(token: &GitToken, time_ms: u64) -> gix::actor::Signature {
    gix::actor::Signature {
        name: token.author().as_str().into(),
        email: format!("{}@l3m.invalid", token.author()).into(),
        time: gix::date::Time {
            seconds: i64::try_from(time_ms / 1000).unwrap_or(i64::MAX),
            offset: 0,
        },
    }
}

/// Moves `branch` by compare-and-swap from `expected` (`None`: it must not exist) to `new`
/// (`None`: delete it), with `reflog` as the reflog message, or reports that it moved.
fn move_branch(
    repo: &gix::Repository,
    branch: &str,
    expected: Option<ObjectId>,
    new: Option<ObjectId>,
    signature: &gix::actor::Signature,
    reflog: &str,
) -> Result<(), GitError> {
    let name = branch.try_into().map_err(gix("name the branch"))?;
    let expected_value = match expected {
        Some(id) => PreviousValue::MustExistAndMatch(Target::Object(id)),
        None => PreviousValue::MustNotExist,
    };
    let change = match new {
        Some(new) => gix::refs::transaction::Change::Update {
            log: LogChange {
                mode: RefLog::AndReference,
                force_create_reflog: false,
                message: reflog.into(),
            },
            expected: expected_value,
            new: Target::Object(new),
        },
        None => gix::refs::transaction::Change::Delete {
            expected: expected_value,
            log: RefLog::AndReference,
        },
    };
    let edit = RefEdit {
        change,
        name,
        deref: false,
    };
    let mut buf = gix::date::parse::TimeBuf::default();
    match repo.edit_references_as([edit], Some(signature.to_ref(&mut buf))) {
        Ok(_) => Ok(()),
        Err(err) if tip(repo, branch).ok() == Some(expected) => Err(gix("move the branch")(err)),
        Err(_) => Err(GitError::Moved {
            branch: branch.to_owned(),
        }),
    }
}

/// Where `branch` points now, if it exists.
fn tip(repo: &gix::Repository, branch: &str) -> Result<Option<ObjectId>, GitError> {
    let Some(mut found) = repo
        .try_find_reference(branch)
        .map_err(gix("find the branch"))?
    else {
        return Ok(None);
    };
    let id = found.peel_to_id().map_err(gix("resolve the branch"))?;
    Ok(Some(id.detach()))
}

/// HEAD's branch and commit, if that branch may be read: a worktree whose HEAD is detached or on
/// a branch outside the readable prefixes (say, one repointed at another agent's worktree) shows
/// nothing.
fn readable_head(
    token: &GitToken,
    wt: &open::Worktree,
) -> Result<(String, Option<ObjectId>), GitError> {
    let (branch, head) = head_of(&wt.repo)?;
    let Some(branch) = branch else {
        return Err(GitError::Detached {
            worktree: wt.name.clone(),
        });
    };
    if !token.may_read(&branch) {
        return Err(GitError::BranchNotReadable {
            branch,
            prefixes: token
                .read_prefixes()
                .iter()
                .map(ToString::to_string)
                .collect(),
        });
    }
    Ok((branch, head))
}

/// HEAD's branch (full name; `None` if detached) and commit (`None` if unborn).
fn head_of(repo: &gix::Repository) -> Result<(Option<String>, Option<ObjectId>), GitError> {
    let head = repo.head().map_err(gix("read HEAD"))?;
    let branch = head.referent_name().map(|n| n.as_bstr().to_string());
    Ok((branch, head.id().map(gix::Id::detach)))
}

/// The tree of commit `head`.
fn head_tree(repo: &gix::Repository, head: Option<ObjectId>) -> Result<Option<ObjectId>, GitError> {
    head.map(|id| {
        let commit = repo.find_commit(id).map_err(gix("read HEAD's commit"))?;
        commit
            .tree_id()
            .map(gix::Id::detach)
            .map_err(gix("read HEAD's tree"))
    })
    .transpose()
}

/// The paths that differ between `old` and `new`, sorted.
fn changes(old: &tree::Files, new: &tree::Files) -> Vec<Change> {
    changed(old, new).into_iter().map(|(_, c)| c).collect()
}

/// The paths that differ, sorted, each with its raw bytes.
fn changed<'a>(old: &'a tree::Files, new: &'a tree::Files) -> Vec<(&'a [u8], Change)> {
    let mut paths: Vec<&Vec<u8>> = old.keys().chain(new.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| {
            let kind = match (old.get(path), new.get(path)) {
                (None, Some(_)) => ChangeKind::Added,
                (Some(_), None) => ChangeKind::Deleted,
                (Some(a), Some(b)) if a.kind != b.kind => ChangeKind::TypeChanged,
                (Some(a), Some(b)) if a.id != b.id => ChangeKind::Modified,
                _ => return None,
            };
            let change = Change {
                path: path.to_str_lossy().into_owned(),
                kind,
            };
            Some((path.as_slice(), change))
        })
        .collect()
}

fn blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>, GitError> {
    repo.find_object(id)
        .map(|o| o.detach().data)
        .map_err(gix("read a blob"))
}

/// A worktree file's content as git would store it (a symlink's target for a link).
fn on_disk(wt: &open::Worktree, path: &[u8], kind: EntryKind) -> Result<Vec<u8>, GitError> {
    use std::os::unix::ffi::OsStrExt;
    let full = wt.root.join(std::ffi::OsStr::from_bytes(path));
    let io = |source| GitError::Io {
        path: path.to_str_lossy().into_owned(),
        source,
    };
    match kind {
        EntryKind::Link => std::fs::read_link(&full)
            .map(|t| t.as_os_str().as_bytes().to_vec())
            .map_err(io),
        _ => std::fs::read(&full).map_err(io),
    }
}

/// A side of a diff as text: empty if absent, `None` if not UTF-8.
fn as_text(side: Option<&[u8]>) -> Option<&str> {
    side.map_or(Some(""), |b| std::str::from_utf8(b).ok())
}

/// A unified diff of two texts, or `None` if either is not UTF-8.
fn text_diff(path: &str, before: Option<&[u8]>, after: Option<&[u8]>) -> Option<String> {
    let (old, new) = (as_text(before)?, as_text(after)?);
    let a = before.map_or("/dev/null".to_owned(), |_| format!("a/{path}"));
    let b = after.map_or("/dev/null".to_owned(), |_| format!("b/{path}"));
    Some(
        similar::TextDiff::from_lines(old, new)
            .unified_diff()
            .context_radius(3)
            .header(&a, &b)
            .to_string(),
    )
}
