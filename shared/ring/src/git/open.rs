//! Opening a worktree: the checks that decide which repository a git call may touch.

use std::path::{Path, PathBuf};

use super::error::{GitError, gix};
use crate::path::RelPath;
use crate::tokens::GitToken;

/// An opened worktree that passed every check in [`open`].
pub(crate) struct Worktree {
    /// The repository, opened isolated (no system or global config, no environment).
    pub(crate) repo: gix::Repository,
    /// The worktree's real path on disk.
    pub(crate) root: PathBuf,
    /// The worktree as the caller named it (ACR-relative), for messages.
    pub(crate) name: String,
    /// The worktree as a checked ACR-relative path, for the undo chain.
    pub(crate) rel: RelPath,
}

/// Opens the worktree at `worktree` (ACR-relative) if it lies under a write root, is reached
/// through real directories only, is the top of a git worktree, and its git directories lie
/// outside the ACR (so they are the harness's clone, never written by the agent).
pub(crate) fn open(token: &GitToken, worktree: &str) -> Result<Worktree, GitError> {
    let rel = RelPath::parse(worktree).map_err(|source| GitError::Path {
        worktree: worktree.to_owned(),
        source,
    })?;
    let under_root = token
        .worktree_roots()
        .iter()
        .any(|root| rel.is_within(root));
    if rel.is_harness() || !under_root {
        return Err(GitError::OutsideRoots {
            worktree: worktree.to_owned(),
            roots: token
                .worktree_roots()
                .iter()
                .map(ToString::to_string)
                .collect(),
        });
    }
    let not_real = |reason: String| GitError::NotRealDir {
        worktree: worktree.to_owned(),
        reason,
    };
    let mut path = token.acr_path().to_path_buf();
    for component in rel.components() {
        path.push(component);
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|e| not_real(format!("`{component}`: {e}")))?;
        if meta.file_type().is_symlink() {
            return Err(not_real(format!("`{component}` is a symlink")));
        }
        if !meta.is_dir() {
            return Err(not_real(format!("`{component}` is not a directory")));
        }
    }
    let acr = real(token.acr_path()).map_err(&not_real)?;
    let root = real(&path).map_err(&not_real)?;
    if root != acr.join(rel.as_str()) {
        return Err(not_real(format!(
            "it resolves to `{}`, not to its place in the ACR",
            root.display()
        )));
    }
    let repo = gix::open_opts(&root, gix::open::Options::isolated()).map_err(gix("open"))?;
    let top = repo.workdir().map(real).transpose().map_err(&not_real)?;
    if top.as_deref() != Some(root.as_path()) {
        return Err(not_real(
            "it is not the top directory of a git worktree".into(),
        ));
    }
    for dir in [repo.git_dir(), repo.common_dir()] {
        let dir = real(dir).map_err(&not_real)?;
        if dir.starts_with(&acr) {
            return Err(GitError::GitDirInsideAcr {
                worktree: worktree.to_owned(),
                git_dir: dir.display().to_string(),
            });
        }
    }
    Ok(Worktree {
        repo,
        root,
        name: worktree.to_owned(),
        rel,
    })
}

fn real(path: &Path) -> Result<PathBuf, String> {
    std::fs::canonicalize(path).map_err(|e| format!("`{}`: {e}", path.display()))
}
