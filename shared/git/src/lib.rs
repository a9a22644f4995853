//! `l3m-git`: the one way l3m runs the `git` CLI, for what gix cannot do (pushing, linked
//! worktrees, indexing and making packs) and for tests that check a hub with plain git.
//!
//! Every git l3m starts is isolated from the machine it runs on, by one rule, here:
//! - an empty environment but for a fixed search path ([`GIT_PATH`]) and `LANG=C`: none of the
//!   caller's `GIT_*` repository variables, no `HOME`, nothing an outer process set;
//! - no system or global configuration (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL=/dev/null`),
//!   no hooks (`core.hooksPath=/dev/null`), no prompt (`GIT_TERMINAL_PROMPT=0`);
//! - transports limited to [`PROTOCOLS`] (`ext::` and `fd::`, which run commands, never).
//!
//! So nothing outside the repository can run code or change behaviour in a git l3m runs, and
//! hubd, the sequencer, the ring and the tests cannot drift apart on it. [`run`] adds what a
//! service needs on top: input fed on stdin, output kept up to a limit (git killed past it),
//! an optional deadline, and a typed error.
//!
//! **Must never**: depend on another l3m crate (it sits below all of them), or read the caller's
//! environment into a git it starts.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Where `git` is looked for; nothing else is searched.
pub const GIT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The transports git may use; `ext::` and `fd::`, which run commands, are never among them.
pub const PROTOCOLS: &str = "file:git:http:https:ssh";

/// The most standard error kept from one run, for error messages.
const STDERR_KEPT: u64 = 4096;

/// How often a run with a deadline looks whether git has exited.
const POLL: Duration = Duration::from_millis(5);

/// A `git` command isolated from the machine (see the crate's rules), run in `dir`, with the
/// given extra environment. Add arguments and run it; for a bare repository pass
/// `--git-dir` first. Tests use it as it is; services go through [`run`].
pub fn command(dir: &Path) -> Command {
    let mut git = Command::new("git");
    git.env_clear()
        .env("PATH", GIT_PATH)
        .env("LANG", "C")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ALLOW_PROTOCOL", PROTOCOLS)
        .current_dir(dir)
        .args(["-c", "core.hooksPath=/dev/null"]);
    // Its own process group, so that stopping it stops what it started (a remote helper, an
    // alias's shell), which would otherwise hold its pipes open.
    std::os::unix::process::CommandExt::process_group(&mut git, 0);
    git
}

/// [`command`] on the repository at `git_dir` (`git --git-dir <git_dir> ...`).
pub fn repo_command(git_dir: &Path) -> Command {
    let mut git = command(Path::new("/"));
    git.arg("--git-dir").arg(git_dir);
    git
}

/// Kills `child` and everything in its process group.
fn kill(child: &mut Child) {
    let group = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(group) = group {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
}

/// Why git could not be run or read: the arguments, and what went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("git {args}: {detail}")]
pub struct GitCliError {
    /// The git arguments, as text.
    pub args: String,
    /// Why it did not start, could not be read, or was killed at its deadline.
    pub detail: String,
}

/// What one run of git gave back.
#[derive(Debug)]
pub struct Ran {
    /// Whether git exited with status 0 (and its output stayed within the limit).
    pub success: bool,
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output, at most the limit asked for.
    pub stdout: Vec<u8>,
    /// Whether the output went past the limit (git was then killed).
    pub over: bool,
    /// The start of its standard error, trimmed.
    pub stderr: String,
}

/// What one run is given besides its repository and arguments.
#[derive(Debug, Default, Clone, Copy)]
pub struct Bounds<'a> {
    /// Fed on git's standard input (nothing: stdin is `/dev/null`).
    pub input: &'a [u8],
    /// The most standard output kept; past it git is killed and [`Ran::over`] set.
    pub limit: u64,
    /// How long git may run before it is killed (and the run is an error); `None`: no limit.
    pub deadline: Option<Duration>,
}

/// Runs `git --git-dir <git_dir> <args>` isolated (see [`command`]), with `env` added, within
/// `bounds`. A git that cannot start, cannot be read or outlives its deadline is an error; a git
/// that fails is a [`Ran`] whose `success` is false, for the caller to judge.
pub fn run(
    git_dir: &Path,
    args: &[&OsStr],
    env: &[(&str, &Path)],
    bounds: Bounds<'_>,
) -> Result<Ran, GitCliError> {
    let failed = |detail: String| GitCliError {
        args: args
            .iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" "),
        detail,
    };
    let mut git = repo_command(git_dir);
    git.args(args)
        .envs(env.iter().map(|(k, v)| (k, v.as_os_str())))
        .stdin(if bounds.input.is_empty() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = git
        .spawn()
        .map_err(|e| failed(format!("could not run git: {e}")))?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let over = &AtomicBool::new(false);
    let (read, over, stderr, status) = std::thread::scope(|scope| {
        // A git that stops reading early closes the pipe; what it said explains why.
        scope.spawn(move || stdin.map(|mut pipe| pipe.write_all(bounds.input)));
        let errors = scope.spawn(move || {
            let mut kept = Vec::new();
            if let Some(mut pipe) = stderr {
                let _ = (&mut pipe).take(STDERR_KEPT).read_to_end(&mut kept);
                let _ = std::io::copy(&mut pipe, &mut std::io::sink());
            }
            kept
        });
        let output = scope.spawn(move || {
            let mut out = Vec::new();
            let read = match stdout {
                Some(pipe) => pipe
                    .take(bounds.limit.saturating_add(1))
                    .read_to_end(&mut out),
                None => Ok(0),
            };
            if out.len() as u64 > bounds.limit {
                out.truncate(usize::try_from(bounds.limit).unwrap_or(usize::MAX));
                over.store(true, Ordering::SeqCst);
            }
            read.map(|_| out)
        });
        let joined = |output: std::thread::ScopedJoinHandle<'_, std::io::Result<Vec<u8>>>| {
            output.join().unwrap_or_else(|_| Ok(Vec::new()))
        };
        let (read, status) = match bounds.deadline {
            None => {
                // The output is read to its end (or to the limit) before git is reaped.
                let read = joined(output);
                if over.load(Ordering::SeqCst) {
                    // It would block writing the rest; nobody wants it.
                    kill(&mut child);
                }
                let status = child
                    .wait()
                    .map_err(|e| format!("waiting for git failed: {e}"));
                (read, status)
            }
            Some(deadline) => {
                let status = wait_until(&mut child, deadline, over);
                (joined(output), status)
            }
        };
        let stderr = errors.join().unwrap_or_default();
        (read, over.load(Ordering::SeqCst), stderr, status)
    });
    let status = status.map_err(failed)?;
    let stdout = read.map_err(|e| failed(format!("reading git's output failed: {e}")))?;
    Ok(Ran {
        success: status.success() && !over,
        status,
        stdout,
        over,
        stderr: String::from_utf8_lossy(&stderr).trim().to_owned(),
    })
}

/// Waits for `child` until `deadline` has passed, killing it then (an error) or as soon as its
/// output went past the limit.
fn wait_until(
    child: &mut Child,
    deadline: Duration,
    over: &AtomicBool,
) -> Result<ExitStatus, String> {
    let until = Instant::now() + deadline;
    loop {
        let waited = child
            .try_wait()
            .map_err(|e| format!("waiting for git failed: {e}"))?;
        if let Some(status) = waited {
            return Ok(status);
        }
        if over.load(Ordering::SeqCst) {
            kill(child);
            return child
                .wait()
                .map_err(|e| format!("waiting for git failed: {e}"));
        }
        if Instant::now() >= until {
            kill(child);
            let _ = child.wait();
            return Err(format!("killed after {} s", deadline.as_secs()));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let status = command(dir.path())
            .args(["init", "--quiet", "--bare", "hub.git"])
            .status()
            .unwrap();
        assert!(status.success());
        let git_dir = dir.path().join("hub.git");
        (dir, git_dir)
    }

    fn os(args: &[&'static str]) -> Vec<&'static OsStr> {
        args.iter().map(|a| OsStr::new(*a)).collect()
    }

    /// The caller's environment never reaches git: a `GIT_DIR` or a global configuration set
    /// in this process changes nothing, and a hook in the repository does not run.
    #[test]
    fn a_run_is_isolated_from_the_callers_environment_and_the_repositorys_hooks() {
        let (dir, git_dir) = repo();
        let hook = git_dir.join("hooks/reference-transaction");
        std::fs::write(
            &hook,
            format!("#!/bin/sh\ntouch {}/ran\n", dir.path().display()),
        )
        .unwrap();
        std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let input = b"blob";
        let hashed = run(
            &git_dir,
            &os(&["hash-object", "-w", "--stdin"]),
            &[],
            Bounds {
                input,
                limit: 100,
                deadline: None,
            },
        )
        .unwrap();
        assert!(hashed.success, "{}", hashed.stderr);
        let oid = String::from_utf8(hashed.stdout).unwrap();
        let oid = oid.trim();
        let updated = run(
            &git_dir,
            &[
                OsStr::new("update-ref"),
                OsStr::new("refs/heads/x"),
                OsStr::new(oid),
            ],
            &[],
            Bounds::default(),
        )
        .unwrap();
        assert!(!updated.success, "a blob is no commit");
        let shown = command(dir.path())
            .env("GIT_DIR", "/nonexistent")
            .arg("--git-dir")
            .arg(&git_dir)
            .args(["cat-file", "-t", oid])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&shown.stdout).trim(), "blob");
        assert!(
            !dir.path().join("ran").exists(),
            "the repository's hook ran"
        );
    }

    /// Output past the limit is cut there and git is killed: the run is not a success.
    #[test]
    fn output_past_the_limit_is_cut_and_not_a_success() {
        let (_dir, git_dir) = repo();
        let ran = run(
            &git_dir,
            &os(&["hash-object", "--stdin-paths", "--literally"]),
            &[],
            Bounds {
                input: b"",
                limit: 0,
                deadline: None,
            },
        )
        .unwrap();
        assert!(
            ran.success && ran.stdout.is_empty(),
            "nothing asked, nothing over"
        );
        let ran = run(
            &git_dir,
            &os(&["version", "--build-options"]),
            &[],
            Bounds {
                input: b"",
                limit: 4,
                deadline: None,
            },
        )
        .unwrap();
        assert!(ran.over && !ran.success);
        assert_eq!(ran.stdout.len(), 4);
    }

    /// A git that outlives its deadline is killed, and the run is an error saying so.
    #[test]
    fn a_git_past_its_deadline_is_killed() {
        let (_dir, git_dir) = repo();
        let started = Instant::now();
        let err = run(
            &git_dir,
            &os(&["-c", "alias.slow=!sleep 30", "slow"]),
            &[],
            Bounds {
                input: b"",
                limit: 100,
                deadline: Some(Duration::from_millis(300)),
            },
        )
        .unwrap_err();
        assert!(err.detail.contains("killed after"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
