//! Pushing one branch to one granted remote, through the `git` CLI (gix cannot push), run
//! isolated as `l3m_git` runs every git: no caller's environment, no hooks, only the safe
//! transports.

use std::ffi::OsStr;
use std::time::Duration;

use l3m_git::Bounds;

use l3m_core::grant::RefPrefix;

use super::error::{GitError, gix};
use super::open;
use crate::tokens::GitToken;

/// How long a push may take before it is killed.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(120);

/// The most of git's porcelain report kept (a push of one branch reports a few lines).
const REPORT_BYTES: u64 = 64 * 1024;

/// A push made by [`push`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// The granted remote's name.
    pub remote: String,
    /// The URL pushed to (the granted one).
    pub url: String,
    /// The branch's full ref name, the same on both sides.
    pub branch: String,
    /// The commit pushed.
    pub commit: String,
    /// git's porcelain report.
    pub report: String,
}

/// Pushes `branch` (`refs/heads/..` or a short name) of the worktree's repository to `remote`
/// (a granted remote's name or its exact URL), if the token grants that branch there.
pub fn push(
    token: &GitToken,
    worktree: &str,
    remote: &str,
    branch: &str,
) -> Result<Pushed, GitError> {
    let (name, target) = token
        .push_target(remote)
        .ok_or_else(|| GitError::RemoteNotGranted {
            remote: remote.to_owned(),
            granted: token
                .push_targets()
                .iter()
                .map(|(n, t)| format!("{n} ({})", t.url()))
                .collect(),
        })?;
    let full = full_branch(branch)?;
    if !target.may_push(&full) {
        return Err(GitError::BranchNotPushable {
            branch: full,
            remote: name.to_string(),
            prefixes: target.prefixes().iter().map(ToString::to_string).collect(),
        });
    }
    let wt = open::open(token, worktree)?;
    let commit = wt
        .repo
        .find_reference(full.as_str())
        .map_err(gix("find the branch"))?
        .peel_to_id()
        .map_err(gix("resolve the branch"))?
        .detach();
    let refspec = format!("{full}:{full}");
    let args = [
        OsStr::new("push"),
        OsStr::new("--porcelain"),
        OsStr::new("--no-verify"),
        OsStr::new("--"),
        OsStr::new(target.url()),
        OsStr::new(&refspec),
    ];
    let bounds = Bounds {
        input: &[],
        limit: REPORT_BYTES,
        deadline: Some(PUSH_TIMEOUT),
    };
    let ran = l3m_git::run(wt.repo.git_dir(), &args, &[], bounds)
        .map_err(|e| failed(name.as_str(), e.detail, String::new()))?;
    match ran.success {
        true => Ok(Pushed {
            remote: name.to_string(),
            url: target.url().to_owned(),
            branch: full,
            commit: commit.to_string(),
            report: String::from_utf8_lossy(&ran.stdout).trim().to_owned(),
        }),
        false => Err(failed(name.as_str(), ran.status.to_string(), ran.stderr)),
    }
}

/// The full ref name of `branch`: as given if it starts with `refs/heads/`, else below it; a
/// valid ref name naming one ref (not a prefix).
fn full_branch(branch: &str) -> Result<String, GitError> {
    let full = if branch.starts_with("refs/heads/") {
        branch.to_owned()
    } else {
        format!("refs/heads/{branch}")
    };
    let bad = |reason: String| GitError::BadBranch {
        branch: branch.to_owned(),
        reason,
    };
    match RefPrefix::parse(&full) {
        Err(e) => Err(bad(e.to_string())),
        Ok(r) if r.is_prefix() || full == "refs/heads/" => Err(bad("it ends with `/`".into())),
        Ok(_) => Ok(full),
    }
}

fn failed(remote: &str, status: String, stderr: String) -> GitError {
    GitError::Push {
        remote: remote.to_owned(),
        status,
        stderr: stderr.trim().to_owned(),
    }
}
