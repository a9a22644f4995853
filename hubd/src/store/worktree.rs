//! Linked worktrees of `hub.git`: the ACR checkouts an agent works in.
//!
//! gix cannot create or remove linked worktrees, so these run the `git` CLI (isolated, see
//! `git_cli`). They write only `hub.git/worktrees/<name>/` (git's
//! administrative files for each worktree) and the checkout itself, never a ref or an object:
//! concurrent adds and prunes are safe because git locks a worktree while it is created.
//!
//! A checkout is either on a branch under `refs/heads/` (commits there move the branch) or
//! detached at a commit. A worktree's `HEAD` cannot name a ref outside `refs/heads/`: git lets
//! `symbolic-ref` set one, but `git fsck` then reports the worktree's `HEAD` as pointing to
//! "something strange", so such refs are checked out detached.

use std::ffi::OsString;
use std::path::Path;

use super::error::StoreError;
use super::git_cli;
use super::hub::Hub;

/// What a new worktree checks out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checkout<'a> {
    /// A branch: a full ref name under `refs/heads/`. Commits in the worktree move it.
    Branch(&'a str),
    /// A commit, detached: commits in the worktree move only its own `HEAD`.
    Detached(gix::ObjectId),
}

impl Hub {
    /// Adds a linked worktree of `hub.git` at `dir` (which must not exist, or be empty).
    pub fn add_worktree(&self, dir: &Path, checkout: Checkout<'_>) -> Result<(), StoreError> {
        let mut args: Vec<OsString> = vec!["worktree".into(), "add".into(), "--quiet".into()];
        match checkout {
            Checkout::Branch(refname) => {
                let branch =
                    refname
                        .strip_prefix("refs/heads/")
                        .ok_or_else(|| StoreError::BadRefName {
                            refname: refname.to_owned(),
                            reason: "a worktree's branch lives under refs/heads/".into(),
                        })?;
                args.push(dir.into());
                args.push(branch.into());
            }
            Checkout::Detached(commit) => {
                args.push("--detach".into());
                args.push(dir.into());
                args.push(commit.to_string().into());
            }
        }
        self.git_cli(&args)
    }

    /// Removes the linked worktree at `dir`, uncommitted changes and all. A `dir` that is not a
    /// worktree (a plain directory, or none) is removed as a directory.
    ///
    /// Whoever worked in `dir` may have broken its `.git` file; then git refuses to remove it,
    /// and the directory is removed anyway, so a retire cannot be blocked from inside the ACR.
    /// [`Hub::prune_worktrees`] then forgets git's entry for it.
    pub fn remove_worktree(&self, dir: &Path) -> Result<(), StoreError> {
        if dir.join(".git").is_file() {
            let args: [OsString; 5] = [
                "worktree".into(),
                "remove".into(),
                "--force".into(),
                "--force".into(),
                dir.into(),
            ];
            if let Err(error) = self.git_cli(&args) {
                tracing::warn!(dir = %dir.display(), %error, "git would not remove a worktree; removing its directory");
            }
        }
        match std::fs::remove_dir_all(dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(StoreError::Io {
                op: "removing",
                path: dir.to_path_buf(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Forgets worktrees whose directories are gone (after a crash mid-retire).
    pub fn prune_worktrees(&self) -> Result<(), StoreError> {
        self.git_cli(&["worktree".into(), "prune".into()])
    }

    fn git_cli(&self, args: &[OsString]) -> Result<(), StoreError> {
        // git reads `hub.git` itself: it must find every acknowledged write there.
        self.settle();
        let args: Vec<&std::ffi::OsStr> = args.iter().map(OsString::as_os_str).collect();
        let ran = git_cli::run(&self.git_dir(), &args, &[], &[], 1 << 16)?;
        if ran.success {
            return Ok(());
        }
        Err(StoreError::GitCli {
            args: args
                .iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" "),
            detail: ran.stderr,
        })
    }
}
