//! Running the `git` CLI for what gix cannot do (linked worktrees, indexing and making packs),
//! isolated from the machine: no system or global configuration, no hooks
//! (`core.hooksPath=/dev/null`), no prompt, and none of the caller's `GIT_*` repository
//! variables, so nothing outside the repository can run code or change behaviour here.
//!
//! hubd runs it on `hub.git`, a sequencer on the clones that hold its agents' ACRs: one runner,
//! so both isolate git the same way.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// The most standard error kept from one run, for error messages.
const STDERR_KEPT: u64 = 4096;

/// Why git could not be run or read: the arguments, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git {args}: {detail}")]
pub struct GitCliError {
    /// The git arguments, as text.
    pub args: String,
    /// Why it did not start or could not be read.
    pub detail: String,
}

/// What one run of git gave back.
#[derive(Debug)]
pub struct Ran {
    /// Whether git exited with status 0.
    pub success: bool,
    /// Its standard output, at most the limit asked for.
    pub stdout: Vec<u8>,
    /// Whether the output went past the limit (git was then killed).
    pub over: bool,
    /// The start of its standard error, trimmed.
    pub stderr: String,
}

/// Runs `git --git-dir <git_dir> <args>` with `env` added, `input` on its standard input,
/// keeping at most `limit` bytes of its output. A git that cannot start is an error; a git
/// that fails is a [`Ran`] whose `success` is false, for the caller to judge.
pub fn run(
    git_dir: &Path,
    args: &[&OsStr],
    env: &[(&str, &Path)],
    input: &[u8],
    limit: u64,
) -> Result<Ran, GitCliError> {
    let shown = || {
        args.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let failed = |detail: String| GitCliError {
        args: shown(),
        detail,
    };
    let mut child = Command::new("git")
        .args(["-c", "core.hooksPath=/dev/null"])
        .arg("--git-dir")
        .arg(git_dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .env_remove("GIT_OBJECT_DIRECTORY")
        .env_remove("GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .envs(env.iter().map(|(k, v)| (k, v.as_os_str())))
        .stdin(if input.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("could not run git: {e}")))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (stdout, over, stderr) = std::thread::scope(|scope| {
        // A git that stops reading early closes the pipe; what it said explains why.
        scope.spawn(move || stdin.map(|mut pipe| pipe.write_all(input)));
        let errors = scope.spawn(move || {
            let mut kept = Vec::new();
            if let Some(pipe) = stderr {
                let mut pipe = pipe;
                let _ = (&mut pipe).take(STDERR_KEPT).read_to_end(&mut kept);
                let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            }
            kept
        });
        let mut out = Vec::new();
        let read = match stdout {
            Some(pipe) => pipe.take(limit.saturating_add(1)).read_to_end(&mut out),
            None => Ok(0),
        };
        let over = out.len() as u64 > limit;
        if over {
            out.truncate(limit as usize);
            // It would block writing the rest; nobody wants it.
            let _ = child.kill();
        }
        let stderr = errors.join().unwrap_or_default();
        (read.map(|_| out), over, stderr)
    });
    let status = child
        .wait()
        .map_err(|e| failed(format!("waiting for git failed: {e}")))?;
    let stdout = stdout.map_err(|e| failed(format!("reading git's output failed: {e}")))?;
    Ok(Ran {
        success: status.success() && !over,
        stdout,
        over,
        stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
    })
}
