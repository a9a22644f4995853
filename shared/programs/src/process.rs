//! The evaluator as a process: starting `l3m-program` under its limits, in its sandbox
//! ([`crate::sandbox`]), exchanging one request for its last line within a deadline, and naming
//! how it ended when it did not answer.
//! A serving evaluator (`crate::warm`) keeps one such process for many calls.
//!
//! Used by the sequencer's programs and hooks ([`crate::host`], [`crate::hooks`]) and by the
//! CLI's `l3m hooks test`; it links no interpreter and no ring.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, ExitStatus};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::Errno;

use crate::decl::MAX_SOURCE;
use crate::limits::Limits;
use crate::protocol::{FromChild, LineError, MAX_LINE, write_line};
use crate::rule::{LoadError, Rule, RunError};
use crate::sandbox::{self, Sandbox};

/// The most stderr kept from a failed evaluator, for its error.
const STDERR_TAIL: usize = 2048;

/// The evaluator binary, its sandbox and the limits each evaluation runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluator {
    /// The `l3m-program` binary.
    pub program: PathBuf,
    /// Where it runs: under bubblewrap unless explicitly opted out.
    pub sandbox: Sandbox,
    /// Its address-space and CPU limits.
    pub limits: Limits,
    /// Wall-clock time a check or a run may take, effects included.
    pub deadline: Duration,
    /// Statements a run may execute.
    pub steps: u64,
}

impl Evaluator {
    /// The binary at `program` in the sandbox, with the default limits: 192 MiB of address
    /// space, 10 s of CPU and wall time, a million statements.
    pub fn new(program: PathBuf) -> Self {
        Self {
            program,
            sandbox: Sandbox::Bwrap,
            limits: Limits {
                memory_mib: 192,
                cpu_secs: 10,
            },
            deadline: Duration::from_secs(10),
            steps: 1_000_000,
        }
    }

    /// `l3m-program` next to `exe` (the running binary), where `cargo build` and the install
    /// script put it.
    pub fn beside(exe: &Path) -> Option<Self> {
        let dir = exe.parent()?;
        let up = (dir.file_name()? == "deps").then(|| dir.parent()).flatten();
        [Some(dir), up]
            .into_iter()
            .flatten()
            .map(|d| d.join(EVALUATOR_NAME))
            .find(|p| p.is_file())
            .map(Self::new)
    }

    /// Starts the evaluator in `mode` in its sandbox, with an empty environment, at `/`, all
    /// three pipes captured; refused with [`Rule::Sandbox`] when the sandbox cannot be built.
    fn spawn(&self, mode: &str, file: &str) -> Result<Child, RunError> {
        let args = [
            mode.to_owned(),
            "--memory-mib".into(),
            self.limits.memory_mib.to_string(),
            "--cpu-secs".into(),
            self.limits.cpu_secs.to_string(),
        ]
        .map(OsString::from);
        // Checked here too: bubblewrap would report a missing binary as a failed bind.
        if !self.program.is_file() {
            let detail = format!("starting {}: no such file", self.program.display());
            return Err(parent_stop(file, Rule::Evaluator, detail));
        }
        let mut command = sandbox::command(self.sandbox, &self.program, &args)
            .map_err(|e| parent_stop(file, Rule::Sandbox, e.to_string()))?;
        command.spawn().map_err(|e| {
            parent_stop(
                file,
                Rule::Evaluator,
                format!("starting {}: {e}", self.program.display()),
            )
        })
    }
}

/// A child process that is killed and reaped when dropped, however the call ends.
pub(crate) struct Running {
    child: Child,
    /// The sandbox it runs in, which says how its end is reported.
    sandbox: Sandbox,
    stdin: Option<ChildStdin>,
    /// Read on the calling thread, polled up to the deadline: no thread between the child's
    /// line and the call that waits for it.
    stdout: ChildStdout,
    /// What was read from stdout past the last whole line.
    pending: Vec<u8>,
    /// The tail of the child's stderr, read all along so that the child never blocks on it.
    stderr: Option<std::thread::JoinHandle<Vec<u8>>>,
}

/// Why [`Running::next`] returned no line.
#[derive(Debug)]
pub(crate) enum NoLine {
    /// The deadline passed first.
    Deadline,
    /// The pipe closed, or the child broke the protocol.
    Broken(LineError),
}

impl Running {
    /// Starts the evaluator in `mode` for `file`, its stderr drained by a thread of its own.
    pub(crate) fn start(evaluator: &Evaluator, mode: &str, file: &str) -> Result<Self, RunError> {
        let mut child = evaluator.spawn(mode, file)?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            let _ = child.kill();
            let _ = child.wait();
            let detail = "the evaluator's pipes were not captured".into();
            return Err(parent_stop(file, Rule::Evaluator, detail));
        };
        let stderr = std::thread::spawn(move || tail(stderr));
        Ok(Self {
            child,
            sandbox: evaluator.sandbox,
            stdin: Some(stdin),
            stdout,
            pending: Vec::new(),
            stderr: Some(stderr),
        })
    }

    /// The child's next line, waiting for it until `until` at the latest. A line longer than
    /// [`MAX_LINE`] is a protocol error.
    pub(crate) fn next(&mut self, until: Instant) -> Result<FromChild, NoLine> {
        let mut scanned = 0;
        loop {
            if let Some(at) = self.pending[scanned..].iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=scanned + at).collect();
                return serde_json::from_slice(&line).map_err(|e| NoLine::Broken(e.into()));
            }
            scanned = self.pending.len();
            if scanned > MAX_LINE {
                return Err(NoLine::Broken(LineError::TooLong));
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(NoLine::Deadline);
            }
            let timeout = Timespec {
                tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(left.subsec_nanos()),
            };
            let mut fds = [PollFd::new(&self.stdout, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(0) | Err(Errno::INTR) => continue,
                Ok(_) => {}
                Err(e) => return Err(NoLine::Broken(LineError::Io(e.into()))),
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.stdout.read(&mut chunk) {
                Ok(0) => return Err(NoLine::Broken(LineError::Closed)),
                Ok(n) => self.pending.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(NoLine::Broken(LineError::Io(e))),
            }
        }
    }

    /// The stop of `file` that `why` means: at the deadline the child is killed; when the
    /// pipe closed, how the child ended says why; a protocol error is the evaluator's.
    pub(crate) fn stop(self, file: &str, why: NoLine) -> RunError {
        match why {
            NoLine::Deadline => {
                let sandbox = self.sandbox;
                let (status, stderr) = self.end();
                ended(file, sandbox, status, &stderr, true)
            }
            NoLine::Broken(LineError::Closed) => {
                let sandbox = self.sandbox;
                let (status, stderr) = self.end();
                ended(file, sandbox, status, &stderr, false)
            }
            NoLine::Broken(e) => parent_stop(file, Rule::Evaluator, e.to_string()),
        }
    }

    /// The child's process id (a warm evaluator's, for [`crate::host::ProgramTool`]).
    #[cfg(feature = "host")]
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the child has ended (it is reaped if so): a warm evaluator that ended while it
    /// waited is not given the next call.
    #[cfg(feature = "host")]
    pub(crate) fn exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Writes `message` as one line on the child's stdin.
    pub(crate) fn send(&mut self, message: &impl serde::Serialize) -> std::io::Result<()> {
        match self.stdin.as_mut() {
            Some(stdin) => write_line(stdin, message),
            None => Err(std::io::Error::other("stdin closed")),
        }
    }

    /// Kills the child (if still running) and says how it ended, with its stderr's tail.
    pub(crate) fn end(mut self) -> (Option<ExitStatus>, String) {
        self.stdin = None;
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        let tail = self
            .stderr
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_default();
        (status, String::from_utf8_lossy(&tail).trim().to_owned())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last [`STDERR_TAIL`] bytes of `stderr`, read to its end.
fn tail(mut stderr: impl Read) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stderr.read(&mut chunk) {
            Ok(0) => return kept,
            Ok(n) => {
                kept.extend_from_slice(&chunk[..n]);
                let cut = kept.len().saturating_sub(STDERR_TAIL);
                kept.drain(..cut);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return kept,
        }
    }
}

/// The evaluator binary's name: `cargo build` and the install script make `l3m-program`, and
/// the `l3m` binary started under this name (through a link, as `l3m demo` does) is the
/// evaluator and nothing else.
pub const EVALUATOR_NAME: &str = "l3m-program";

/// The signal the kernel kills a process with for a system call its seccomp filter forbids.
const SIGSYS: i32 = 31;

/// Why an evaluator ended without a final line: its deadline, a limit the kernel enforced, its
/// sandbox refused to start, or something else, named. Bubblewrap reports its child's death by
/// a signal as an exit code ([`sandbox::signal_of`]).
pub(crate) fn ended(
    file: &str,
    sandbox: Sandbox,
    status: Option<ExitStatus>,
    stderr: &str,
    killed: bool,
) -> RunError {
    let code = status.and_then(|s| s.code());
    let signal = status
        .and_then(|s| s.signal())
        .or_else(|| sandbox::signal_of(sandbox, code));
    let (rule, detail) = match signal {
        _ if killed => (
            Rule::Deadline,
            "it ran past its deadline and was killed".to_owned(),
        ),
        Some(9) | Some(24) => (
            Rule::Deadline,
            "it used up its CPU time and the kernel stopped it".to_owned(),
        ),
        Some(6) => (
            Rule::Memory,
            "it ran out of memory under its address-space limit and aborted".to_owned(),
        ),
        Some(SIGSYS) => (
            Rule::Syscall,
            "it made a system call its filter forbids and the kernel killed it".to_owned(),
        ),
        Some(signal) => (
            Rule::Evaluator,
            format!("the evaluator died of signal {signal}"),
        ),
        None if sandbox::is_refusal(sandbox, code, stderr) => (
            Rule::Sandbox,
            format!(
                "the evaluator's sandbox could not be built; fix: {}, or set \
                 `[sequencer] program_sandbox = \"none\"` to run programs without one",
                l3m_core::sandbox::BWRAP_FIX
            ),
        ),
        None => (
            Rule::Evaluator,
            match code {
                Some(code) => format!("the evaluator exited with code {code} without answering"),
                None => "the evaluator ended without answering".to_owned(),
            },
        ),
    };
    let detail = if stderr.is_empty() || !matches!(rule, Rule::Evaluator | Rule::Sandbox) {
        detail
    } else {
        format!("{detail}: {stderr}")
    };
    RunError {
        file: file.to_owned(),
        line: None,
        rule,
        detail,
    }
}

/// Sends `request` to a fresh evaluator in `mode` and waits, at most its deadline, for its
/// last line (a [`FromChild::Call`] is not one: modes that use this make no calls). Every way
/// it can fail is a [`RunError`] of `file`, naming the rule (its deadline, a kernel limit, the
/// protocol).
pub fn exchange(
    evaluator: &Evaluator,
    mode: &str,
    file: &str,
    request: &impl serde::Serialize,
) -> Result<FromChild, RunError> {
    let mut running = Running::start(evaluator, mode, file)?;
    let until = Instant::now() + evaluator.deadline;
    if let Err(e) = running.send(request) {
        let (status, stderr) = running.end();
        let mut stop = ended(file, evaluator.sandbox, status, &stderr, false);
        stop.detail = format!("{}; sending the request failed: {e}", stop.detail);
        return Err(stop);
    }
    match running.next(until) {
        Ok(FromChild::Call { function, .. }) => Err(parent_stop(
            file,
            Rule::Evaluator,
            format!("the evaluator asked for `{function}` where no call is allowed"),
        )),
        Ok(last) => Ok(last),
        Err(why) => Err(running.stop(file, why)),
    }
}

/// A stop of `file` by `rule` that the parent decided (the child never said).
pub(crate) fn parent_stop(file: &str, rule: Rule, detail: String) -> RunError {
    RunError {
        file: file.to_owned(),
        line: None,
        rule,
        detail,
    }
}

/// The text of the regular file at `path`, at most [`MAX_SOURCE`] bytes, opened without
/// following a link.
pub(crate) fn read_source(path: &Path, file: &str) -> Result<String, LoadError> {
    use rustix::fs::{Mode, OFlags, open};
    let refuse = |rule, detail: String| LoadError::new(file, 1, rule, detail);
    let fd = open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| {
        refuse(
            Rule::FileName,
            format!("cannot be opened (links are refused): {e}"),
        )
    })?;
    let mut handle = std::fs::File::from(fd);
    let is_file = handle.metadata().map(|m| m.is_file()).unwrap_or(false);
    if !is_file {
        return Err(refuse(Rule::FileName, "is not a regular file".into()));
    }
    let mut bytes = Vec::new();
    (&mut handle)
        .take(u64::try_from(MAX_SOURCE).unwrap_or(u64::MAX) + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(Rule::FileName, format!("cannot be read: {e}")))?;
    if bytes.len() > MAX_SOURCE {
        return Err(refuse(
            Rule::TooLarge,
            format!("more than {MAX_SOURCE} bytes; a program is at most that"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| refuse(Rule::Syntax, "is not UTF-8 text".into()))
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    /// How each death is named: the kernel's CPU stop and a deadline as `deadline`, an
    /// aborted heap as `memory`, the filter's kill as `syscall` (bare, or as bubblewrap's exit
    /// code `128 + 31`), anything else as `evaluator`.
    #[test]
    fn each_death_of_the_evaluator_is_named_by_its_signal() {
        let rule = |sandbox, status: i32, killed| {
            ended(
                "p.star",
                sandbox,
                Some(ExitStatus::from_raw(status)),
                "",
                killed,
            )
            .rule
        };
        // A raw wait status: the signal in the low bits, an exit code in the next byte.
        let signalled = |signal: i32| signal;
        let exited = |code: i32| code << 8;
        assert_eq!(rule(Sandbox::None, signalled(SIGSYS), false), Rule::Syscall);
        assert_eq!(
            rule(Sandbox::Bwrap, exited(128 + SIGSYS), false),
            Rule::Syscall
        );
        assert_eq!(rule(Sandbox::None, signalled(24), false), Rule::Deadline);
        assert_eq!(rule(Sandbox::None, signalled(6), false), Rule::Memory);
        assert_eq!(rule(Sandbox::None, signalled(11), false), Rule::Evaluator);
        assert_eq!(rule(Sandbox::None, signalled(SIGSYS), true), Rule::Deadline);
    }
}
