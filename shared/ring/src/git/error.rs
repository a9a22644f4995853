//! Why the git provider refused or failed a call; each refusal names the boundary that stopped it.

use l3m_core::axis::Axis;
use l3m_core::log::Refusal;

use crate::path::PathError;

/// A git call that did not happen (a refusal) or did not finish (a failure). Every refusal is
/// decided before any object, ref or remote is written.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The worktree path is not an ACR-relative path.
    #[error("refused by the path boundary: worktree `{worktree}`: {source}")]
    Path {
        /// The worktree as given.
        worktree: String,
        /// What is wrong with it.
        source: PathError,
    },
    /// The worktree boundary: a worktree must lie under one of the ACR's write roots.
    #[error(
        "refused by the worktree boundary: `{worktree}` is not under a write root (roots: {roots:?})"
    )]
    OutsideRoots {
        /// The worktree as given.
        worktree: String,
        /// The write roots.
        roots: Vec<String>,
    },
    /// The worktree boundary: the path, or a directory on the way to it, is a symlink or not a
    /// directory, so it could lead out of the ACR.
    #[error(
        "refused by the worktree boundary: `{worktree}` is not a real directory in the ACR: {reason}"
    )]
    NotRealDir {
        /// The worktree as given.
        worktree: String,
        /// What was found.
        reason: String,
    },
    /// The repository boundary: the worktree's git directory lies inside the ACR, where the agent
    /// could have written it (its config, hooks and object store are the harness's, never the agent's).
    #[error(
        "refused by the repository boundary: the git directory of `{worktree}` is `{git_dir}`, inside the ACR; \
         only checkouts of the harness's clone, outside the ACR, are opened"
    )]
    GitDirInsideAcr {
        /// The worktree as given.
        worktree: String,
        /// Where its git directory is.
        git_dir: String,
    },
    /// The worktree's HEAD is detached or names no branch, so a commit has nowhere to go.
    #[error(
        "refused by the ref boundary: `{worktree}` has a detached HEAD; git calls work only on a checked-out branch"
    )]
    Detached {
        /// The worktree.
        worktree: String,
    },
    /// The ref boundary: the branch to commit to lies under no writable prefix.
    #[error(
        "refused by the ref boundary: branch `{branch}` is not under a writable prefix (prefixes: {prefixes:?})"
    )]
    BranchNotWritable {
        /// The branch's full ref name.
        branch: String,
        /// The writable prefixes.
        prefixes: Vec<String>,
    },
    /// The ref boundary: the worktree's checked-out branch lies under no readable prefix, so
    /// neither its status, its diff nor its log may be shown.
    #[error(
        "refused by the ref boundary: branch `{branch}` is not under a readable prefix (prefixes: {prefixes:?})"
    )]
    BranchNotReadable {
        /// The branch's full ref name.
        branch: String,
        /// The readable prefixes.
        prefixes: Vec<String>,
    },
    /// The ref boundary: the branch to push lies under no prefix granted for that remote.
    #[error(
        "refused by the ref boundary: branch `{branch}` may not be pushed to `{remote}` (prefixes: {prefixes:?})"
    )]
    BranchNotPushable {
        /// The branch's full ref name.
        branch: String,
        /// The remote.
        remote: String,
        /// The prefixes granted for that remote.
        prefixes: Vec<String>,
    },
    /// The branch name is not a valid ref name.
    #[error("branch `{branch}` is not a valid branch name: {reason}")]
    BadBranch {
        /// The branch as given.
        branch: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The remote boundary: the remote is not one the token lists, by name or by exact URL.
    #[error(
        "refused by the remote boundary: `{remote}` is not a granted remote (granted: {granted:?}); \
         name one exactly as granted"
    )]
    RemoteNotGranted {
        /// The remote as given.
        remote: String,
        /// The granted remotes, with their URLs.
        granted: Vec<String>,
    },
    /// The message is empty, or the worktree is the same as its HEAD.
    #[error("nothing to commit in `{worktree}`: {reason}")]
    NothingToCommit {
        /// The worktree.
        worktree: String,
        /// Why.
        reason: &'static str,
    },
    /// The branch moved between reading HEAD and writing the commit (compare-and-swap lost).
    #[error("branch `{branch}` moved while committing; nothing was changed, try again")]
    Moved {
        /// The branch.
        branch: String,
    },
    /// Rewind found a branch somewhere the agent's last journaled move did not leave it: someone
    /// else (a human, a merge) moved it since. Nothing was restored.
    #[error(
        "rewind stopped before changing anything: branch `{branch}` is at {found}, but the agent last moved it to {expected}; \
         someone else moved it since. Move it back (`git update-ref {branch} {expected}`) to rewind across it, \
         or rewind to a record after the agent's last commit on it"
    )]
    MovedSince {
        /// The branch.
        branch: String,
        /// Where the journal says the agent left it.
        expected: String,
        /// Where it is now (`nothing` if deleted).
        found: String,
    },
    /// The undo chain refused the entry for a branch move, so the branch was not moved.
    #[error("branch `{branch}` was not moved: its undo entry could not be journaled: {source}")]
    Journal {
        /// The branch.
        branch: String,
        /// Why the journal refused.
        source: crate::undo::UndoError,
    },
    /// A journaled branch move names a commit that is not a hex object id.
    #[error("the undo chain's move of `{branch}` names `{id}`, which is not a commit id")]
    BadId {
        /// The branch.
        branch: String,
        /// The id as journaled.
        id: String,
    },
    /// Reading the worktree failed.
    #[error("reading `{path}` in the worktree failed: {source}")]
    Io {
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// A gix operation failed.
    #[error("git {op} failed: {detail}")]
    Git {
        /// What was being done.
        op: &'static str,
        /// gix's message.
        detail: String,
    },
    /// `git push` could not be started, or it failed.
    #[error("git push to `{remote}` failed ({status}): {stderr}")]
    Push {
        /// The remote.
        remote: String,
        /// The exit status, or why it did not run.
        status: String,
        /// What git printed on stderr (trimmed).
        stderr: String,
    },
}

/// A [`GitError::Git`] for `op`, keeping gix's message.
pub(crate) fn gix<E: std::fmt::Display>(op: &'static str) -> impl Fn(E) -> GitError {
    move |e| GitError::Git {
        op,
        detail: e.to_string(),
    }
}

impl GitError {
    /// The boundary that refused and the axis it guards, when this is a refusal (not a failure
    /// of git or a branch moved by someone else).
    pub fn refusal(&self) -> Option<Refusal> {
        let (boundary, axis) = match self {
            GitError::Path { .. } => ("path", Axis::Files),
            GitError::OutsideRoots { .. } | GitError::NotRealDir { .. } => {
                ("worktree", Axis::Files)
            }
            GitError::GitDirInsideAcr { .. } => ("repository", Axis::Files),
            GitError::Detached { .. } | GitError::BranchNotWritable { .. } => {
                ("ref", Axis::GitWrite)
            }
            GitError::BranchNotReadable { .. } => ("ref", Axis::GitRead),
            GitError::BranchNotPushable { .. } => ("ref", Axis::GitPush),
            GitError::RemoteNotGranted { .. } => ("remote", Axis::GitPush),
            _ => return None,
        };
        Some(Refusal::new(boundary, Some(axis)))
    }
}
