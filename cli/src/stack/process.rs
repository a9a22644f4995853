//! Starting a service as a child process, checking on it, and stopping it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use super::runfile::StackProcess;
use crate::error::CliError;

/// How long `l3m down` waits after SIGTERM before it sends SIGKILL.
pub const GRACE: Duration = Duration::from_secs(5);

/// How often a stopping process is checked on.
const POLL: Duration = Duration::from_millis(50);

/// A service just started: its process and where its output goes.
#[derive(Debug)]
pub struct Started {
    /// The child process (dropping it does not stop the process).
    pub child: Child,
    /// The run-file entry.
    pub entry: StackProcess,
}

/// What a service keeps of `l3m up`'s environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inherit {
    /// Everything (the sequencers: the model API keys `l3m.toml` names are read from it).
    All,
    /// Only [`KEPT`] (nats-server, hubd): no API key or other secret of the shell reaches a
    /// process that has no use for it.
    Minimal,
}

/// The variables a service started with [`Inherit::Minimal`] keeps.
pub const KEPT: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "RUST_LOG", "TZ"];

/// Starts `binary args` in its own process group (so a Ctrl-C at the terminal after `l3m up`
/// returned does not reach it), with the environment `inherit` keeps plus `env` (secrets go
/// there, never in `args`), stdin closed and stdout and stderr appended to `log`.
pub fn start(
    service: &str,
    binary: &Path,
    args: &[String],
    inherit: Inherit,
    env: &[(String, String)],
    log: PathBuf,
) -> Result<Started, CliError> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .map_err(|e| CliError::io("open the log", &log, e))?;
    let err = file
        .try_clone()
        .map_err(|e| CliError::io("open the log", &log, e))?;
    let mut command = Command::new(binary);
    if inherit == Inherit::Minimal {
        command
            .env_clear()
            .envs(KEPT.iter().filter_map(|k| Some((*k, std::env::var_os(k)?))));
    }
    let child = command
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| CliError::io("start", binary, e))?;
    tracing::info!(service, pid = child.id(), binary = %binary.display(), "started");
    Ok(Started {
        entry: StackProcess {
            service: service.to_owned(),
            pid: child.id(),
            binary: binary.to_owned(),
            log,
        },
        child,
    })
}

/// The last `lines` lines of a log file, for error messages.
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether `entry`'s process is alive and still runs the binary the run file recorded (a
/// zombie or a recycled pid counts as gone). The binary matches by `/proc/<pid>/exe` (a rebuilt
/// binary reads as `... (deleted)`) or by the file name of its `argv[0]`.
pub fn alive(entry: &StackProcess) -> bool {
    let proc = PathBuf::from(format!("/proc/{}", entry.pid));
    let Ok(cmdline) = std::fs::read(proc.join("cmdline")) else {
        return false;
    };
    let exe = std::fs::read_link(proc.join("exe"))
        .map(|p| PathBuf::from(p.to_string_lossy().trim_end_matches(" (deleted)")))
        .ok();
    let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
    let argv0 = Path::new(std::str::from_utf8(argv0).unwrap_or_default());
    let runs_it = exe.as_deref() == Some(entry.binary.as_path())
        || (argv0.file_name().is_some() && argv0.file_name() == entry.binary.file_name());
    let zombie = std::fs::read_to_string(proc.join("stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false);
    runs_it && !zombie
}

fn signal(entry: &StackProcess, sig: Signal) {
    let Some(pid) = i32::try_from(entry.pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    if alive(entry)
        && let Err(error) = kill_process(pid, sig)
    {
        tracing::warn!(service = entry.service, pid = entry.pid, %error, "could not signal");
    }
}

/// Stops every listed process, last started first: SIGTERM, then SIGKILL for any still alive
/// after `grace`. Returns the services that needed SIGKILL.
pub fn stop(processes: &[StackProcess], grace: Duration) -> Vec<String> {
    for entry in processes.iter().rev() {
        signal(entry, Signal::TERM);
    }
    let deadline = Instant::now() + grace;
    while processes.iter().any(alive) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let stubborn: Vec<String> = processes
        .iter()
        .filter(|e| alive(e))
        .map(|e| e.service.clone())
        .collect();
    for entry in processes.iter().filter(|e| alive(e)) {
        signal(entry, Signal::KILL);
    }
    stubborn
}
