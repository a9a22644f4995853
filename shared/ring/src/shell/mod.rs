//! The sandboxed shell: a wild class that runs one listed program under bubblewrap.
//!
//! [`run`] refuses — with a [`ShellError`] naming the boundary — before any process starts,
//! unless: the [`WildToken`] allows `shell`; the program is *named* (never a path) and on
//! [`PROGRAMS`], and is found as a file in `/usr/bin` or `/bin` ([`PROGRAM_DIRS`]), whose
//! absolute path is what runs; the cwd and every write root are real directories the
//! [`FilesToken`] can read (no `..`, not `.l3m/`, no symlink on the way, checked by the files
//! provider); and bubblewrap ([`BWRAP`]) can build its sandbox here (probed on every call).
//!
//! Inside the sandbox (the `sandbox` module): every namespace is unshared, so there is no network; no
//! capabilities (the harness may be root); the ACR is read-only at [`ACR_MOUNT`], each write
//! root is bound read-write over its place, `.l3m/` is covered by an empty read-only tmpfs,
//! `/tmp` is private, the environment is empty but `PATH`, `HOME` and `LANG`.
//!
//! The list is of programs a tool may *start*; `sh` on it can start any program under `/usr`,
//! so the sandbox, not the list, bounds what a script can do. At the deadline, or once stdout
//! or stderr passes `max_output`, the sandbox's process group is killed; bubblewrap's PID
//! namespace takes every process inside down with it.
//!
//! Limitations: the write roots and ACR are checked for symlinks just before bubblewrap binds
//! them by path, so a process racing the call with write access to a root's parent could swap
//! one in between. The probe costs one extra sandbox start per call.

mod error;
mod sandbox;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use l3m_core::effects::EffectClass;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::files;
use crate::path::{HARNESS_DIR, RelPath};
use crate::tokens::{FilesToken, WildToken};

pub use error::ShellError;

/// The programs a run may start, by name. Read-and-filter tools, plus `sh` for pipelines.
pub const PROGRAMS: &[&str] = &[
    "awk", "cat", "cut", "diff", "echo", "false", "find", "grep", "head", "ls", "sed", "sh",
    "sort", "tail", "tr", "true", "uniq", "wc",
];

/// Where listed programs are looked for, in order; nothing else is searched.
pub const PROGRAM_DIRS: &[&str] = &["/usr/bin", "/bin"];

/// The one sandbox there is: bubblewrap, at its system path (never looked up on `PATH`).
pub use l3m_core::sandbox::BWRAP;

/// Where the ACR appears inside the sandbox; the cwd is below it.
pub const ACR_MOUNT: &str = "/acr";

/// The `PATH` inside the sandbox.
const PATH: &str = "/usr/bin:/bin";

/// How long the sandbox probe, and the wait after a kill, may take.
const GRACE: Duration = Duration::from_secs(10);

/// The fix named when the sandbox cannot be built.
const SANDBOX_FIX: &str = l3m_core::sandbox::BWRAP_FIX;

/// One run, as a tool asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRequest {
    /// A name from [`PROGRAMS`].
    pub program: String,
    /// Its arguments, passed as they are (no shell parses them unless the program is `sh`).
    pub args: Vec<String>,
    /// The working directory, relative to the ACR (`.` is the ACR itself).
    pub cwd: String,
    /// Bytes written to the program's standard input, which is then closed.
    pub stdin: Vec<u8>,
    /// How long the run may take before it is killed.
    pub timeout: Duration,
    /// The most bytes kept of stdout, and of stderr; past it the run is killed.
    pub max_output: usize,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOutcome {
    /// The exit code; `None` if it was killed by a signal.
    pub status: Option<i32>,
    /// Standard output, at most `max_output` bytes.
    pub stdout: Vec<u8>,
    /// Standard error, at most `max_output` bytes.
    pub stderr: Vec<u8>,
    /// Whether output passed `max_output` and the run was killed for it.
    pub truncated: bool,
    /// Whether the run was killed at its deadline.
    pub timed_out: bool,
}

/// Runs `request` in the sandbox, if `wild` allows `shell`, writing only under `files`'s roots.
pub async fn run(
    wild: &WildToken,
    files: &FilesToken,
    request: &ShellRequest,
) -> Result<ShellOutcome, ShellError> {
    if !wild.allows(&EffectClass::Shell) {
        return Err(ShellError::NotGranted {
            held: wild.classes().iter().map(|c| c.to_string()).collect(),
        });
    }
    let program = resolve(&request.program)?;
    let cwd = real_dir(files, &request.cwd).map_err(|source| ShellError::Cwd {
        cwd: request.cwd.clone(),
        source,
    })?;
    for root in files.write_roots() {
        real_dir(files, root.as_str()).map_err(|source| ShellError::WriteRoot {
            root: root.to_string(),
            source,
        })?;
    }
    probe(Path::new(BWRAP)).await?;
    let view = sandbox::View {
        acr: files.acr_path(),
        // Looked up on the host: the files provider never shows `.l3m/`, by design.
        has_harness: std::fs::symlink_metadata(files.acr_path().join(HARNESS_DIR)).is_ok(),
        write_roots: files.write_roots().iter().collect(),
        cwd: &cwd,
    };
    let mut child = Command::new(BWRAP)
        .args(sandbox::command(&view, &program, &request.args))
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| ShellError::Process { source })?;
    supervise(&mut child, request).await
}

/// The absolute path of a listed program.
fn resolve(program: &str) -> Result<PathBuf, ShellError> {
    if program.contains('/') {
        return Err(ShellError::ProgramIsPath {
            program: program.into(),
            listed: PROGRAMS.to_vec(),
        });
    }
    if !PROGRAMS.contains(&program) {
        return Err(ShellError::ProgramNotListed {
            program: program.into(),
            listed: PROGRAMS.to_vec(),
        });
    }
    PROGRAM_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(program))
        .find(|path| path.is_file())
        .ok_or_else(|| ShellError::ProgramMissing {
            program: program.into(),
            searched: PROGRAM_DIRS.to_vec(),
        })
}

/// `path` parsed, if the files provider can list it as a real directory.
fn real_dir(files: &FilesToken, path: &str) -> Result<RelPath, files::FilesError> {
    files::list(files, path)?;
    Ok(RelPath::parse(path)?)
}

/// Starts an empty sandbox with the bubblewrap at `bwrap` (always [`BWRAP`] outside tests), so
/// a machine without working bubblewrap refuses with the fix instead of reporting the program
/// as failed.
async fn probe(bwrap: &Path) -> Result<(), ShellError> {
    let unavailable = |reason: String| ShellError::SandboxUnavailable {
        reason,
        fix: SANDBOX_FIX,
    };
    if !bwrap.is_file() {
        return Err(unavailable(format!("{} does not exist", bwrap.display())));
    }
    let mut args = sandbox::isolation();
    args.extend(["--", "/usr/bin/true"].map(Into::into));
    let trial = Command::new(bwrap)
        .args(args)
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(GRACE, trial).await {
        Err(_) => Err(unavailable(format!(
            "an empty sandbox did not start within {GRACE:?}"
        ))),
        Ok(Err(e)) => Err(unavailable(format!(
            "cannot start {}: {e}",
            bwrap.display()
        ))),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(unavailable(format!(
            "an empty sandbox failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// Feeds stdin, collects bounded output, and kills the sandbox's process group at the
/// deadline or once output passes the limit.
async fn supervise(
    child: &mut tokio::process::Child,
    request: &ShellRequest,
) -> Result<ShellOutcome, ShellError> {
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw);
    let kill = || {
        if let Some(group) = group {
            // The group may already be gone; there is nothing left to kill then.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    };
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let (mut truncated, mut timed_out) = (false, false);
    {
        let reading = async {
            let (o, e, ()) = tokio::join!(
                read_capped(stdout, &mut out, request.max_output, &kill),
                read_capped(stderr, &mut err, request.max_output, &kill),
                feed(stdin, &request.stdin),
            );
            o || e
        };
        tokio::pin!(reading);
        match tokio::time::timeout(request.timeout, reading.as_mut()).await {
            Ok(over) => truncated = over,
            Err(_) => {
                timed_out = true;
                kill();
                if let Ok(over) = tokio::time::timeout(GRACE, reading).await {
                    truncated = over;
                }
            }
        }
    }
    if timed_out || truncated {
        kill();
    }
    let status = match tokio::time::timeout(GRACE, child.wait()).await {
        Ok(waited) => waited.map_err(|source| ShellError::Process { source })?,
        Err(_) => {
            kill();
            child
                .wait()
                .await
                .map_err(|source| ShellError::Process { source })?
        }
    };
    Ok(ShellOutcome {
        status: if timed_out || truncated {
            None
        } else {
            status.code()
        },
        stdout: out,
        stderr: err,
        truncated,
        timed_out,
    })
}

/// Reads `pipe` into `buf` until EOF or `max` bytes; past `max`, kills and returns `true`.
async fn read_capped(
    pipe: Option<impl AsyncRead + Unpin>,
    buf: &mut Vec<u8>,
    max: usize,
    kill: &impl Fn(),
) -> bool {
    let Some(mut pipe) = pipe else { return false };
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                let room = max.saturating_sub(buf.len());
                if n > room {
                    buf.extend_from_slice(&chunk[..room]);
                    kill();
                    return true;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
}

/// Writes `bytes` to the child's stdin and closes it; a program that stops reading early is
/// not an error.
async fn feed(stdin: Option<tokio::process::ChildStdin>, bytes: &[u8]) {
    if let Some(mut stdin) = stdin {
        let _ = stdin.write_all(bytes).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `probe` answers for the bubblewrap at `bwrap`: the reason it gave, if it refused.
    fn refusal(bwrap: &Path) -> Option<String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        match runtime.block_on(probe(bwrap)) {
            Ok(()) => None,
            Err(ShellError::SandboxUnavailable { reason, fix }) => {
                assert_eq!(fix, SANDBOX_FIX);
                Some(reason)
            }
            Err(other) => panic!("not a sandbox refusal: {other}"),
        }
    }

    #[test]
    fn a_missing_or_failing_sandbox_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("bwrap");
        let reason = refusal(&missing).unwrap();
        assert!(reason.contains("does not exist"), "{reason}");

        // A bubblewrap that cannot make namespaces exits non-zero with a message.
        std::fs::write(
            &missing,
            "#!/bin/sh\necho 'No permissions to create new namespace' >&2\nexit 1\n",
        )
        .unwrap();
        let executable = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&missing, executable).unwrap();
        let reason = refusal(&missing).unwrap();
        assert!(
            reason.contains("No permissions to create new namespace"),
            "{reason}"
        );

        // A file that is no program at all cannot be started.
        let not_a_program = dir.path().join("not-a-program");
        std::fs::write(&not_a_program, b"\x7fELF garbage").unwrap();
        std::fs::set_permissions(
            &not_a_program,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let reason = refusal(&not_a_program).unwrap();
        assert!(reason.contains("cannot start"), "{reason}");
    }

    #[test]
    fn only_listed_names_resolve_to_system_paths() {
        assert_eq!(resolve("ls").unwrap().parent(), Some(Path::new("/usr/bin")));
        assert!(matches!(
            resolve("curl"),
            Err(ShellError::ProgramNotListed { .. })
        ));
        assert!(matches!(
            resolve("/bin/sh"),
            Err(ShellError::ProgramIsPath { .. })
        ));
        assert!(matches!(
            resolve("../sh"),
            Err(ShellError::ProgramIsPath { .. })
        ));
        assert!(matches!(
            resolve(""),
            Err(ShellError::ProgramNotListed { .. })
        ));
    }
}
