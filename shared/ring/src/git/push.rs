//! Pushing one branch to one granted remote, through the `git` CLI (gix cannot push).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use l3m_core::grant::RefPrefix;

use super::error::{GitError, gix};
use super::open;
use crate::tokens::GitToken;

/// How long a push may take before it is killed.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(120);

/// Where `git` is looked for; nothing else is searched.
const GIT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The transports a push may use; `ext::` and `fd::`, which run commands, are never among them.
const PROTOCOLS: &str = "file:git:http:https:ssh";

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
    let mut child = Command::new("git")
        .env_clear()
        .env("PATH", GIT_PATH)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", PROTOCOLS)
        .env("LANG", "C")
        .args(["-c", "core.hooksPath=/dev/null", "--git-dir"])
        .arg(wt.repo.git_dir())
        .args(["push", "--porcelain", "--no-verify", "--"])
        .arg(target.url())
        .arg(&refspec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(name.as_str(), format!("not started: {e}"), String::new()))?;
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let out = std::thread::spawn(move || drain(stdout));
    let err = std::thread::spawn(move || drain(stderr));
    let deadline = Instant::now() + PUSH_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break Err(format!("killed after {} s", PUSH_TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => break Err(format!("not waited for: {e}")),
        }
    };
    let report = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    match status {
        Ok(s) if s.success() => Ok(Pushed {
            remote: name.to_string(),
            url: target.url().to_owned(),
            branch: full,
            commit: commit.to_string(),
            report: report.trim().to_owned(),
        }),
        Ok(s) => Err(failed(name.as_str(), s.to_string(), stderr)),
        Err(why) => Err(failed(name.as_str(), why, stderr)),
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

fn drain(pipe: Option<impl Read>) -> String {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

fn failed(remote: &str, status: String, stderr: String) -> GitError {
    GitError::Push {
        remote: remote.to_owned(),
        status,
        stderr: stderr.trim().to_owned(),
    }
}
