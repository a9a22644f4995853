//! Starting a service as a child process, checking on it, and stopping it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};

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

/// The live (non-zombie) processes of process group `pgid`, read from `/proc/<pid>/stat`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first().is_some_and(|state| *state != "Z")
                && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
        })
        .collect()
}

/// Sends `sig` to the process group `entry`'s process leads (every service is started as the
/// leader of its own group, and the children it starts, such as the supervisor's `sequencer run`
/// processes, stay in it). A recorded process that leads no group (`l3m up --embedded` started
/// by a script, in its caller's group) is signalled alone: its caller's group is not ours.
fn signal_group(entry: &StackProcess, sig: Signal) {
    let Some(pid) = i32::try_from(entry.pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    let sent = if group_members(entry.pid).is_empty() {
        kill_process(pid, sig)
    } else {
        kill_process_group(pid, sig)
    };
    if let Err(error) = sent {
        tracing::warn!(service = entry.service, pid = entry.pid, %error, "could not signal");
    }
}

/// Stops every listed process and its process group, last started first: SIGTERM to the group
/// of each process that still runs its recorded binary, then, for any group with a process left
/// after `grace` (a child that ignores SIGTERM), SIGKILL to the whole group. A group is only
/// signalled after its leader was checked ([`alive`]); a group id is not reused while the group
/// has members, so the SIGKILL reaches only what the leader left behind. Returns the services
/// that needed SIGKILL.
pub fn stop(processes: &[StackProcess], grace: Duration) -> Vec<String> {
    let ours: Vec<&StackProcess> = processes.iter().rev().filter(|e| alive(e)).collect();
    for entry in &ours {
        signal_group(entry, Signal::TERM);
    }
    let left = |e: &&StackProcess| alive(e) || !group_members(e.pid).is_empty();
    let deadline = Instant::now() + grace;
    while ours.iter().any(left) && Instant::now() < deadline {
        std::thread::sleep(POLL);
    }
    let stubborn: Vec<&StackProcess> = ours.into_iter().filter(left).collect();
    for entry in &stubborn {
        signal_group(entry, Signal::KILL);
    }
    stubborn.iter().map(|e| e.service.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_kills_a_child_that_ignores_sigterm() {
        let dir = tempfile::tempdir().unwrap();
        // The leader goes on SIGTERM; its child ignores it, as a wedged `sequencer run` would.
        let started = start(
            "sequencer",
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                "sh -c 'trap \"\" TERM; while :; do sleep 1; done' & wait".into(),
            ],
            Inherit::Minimal,
            &[],
            dir.path().join("sh.log"),
        )
        .unwrap();
        let mut child = started.child;
        let leader = started.entry.pid;
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_members(leader).len() < 2 && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        let members = group_members(leader);
        assert!(members.len() >= 2, "the child started: {members:?}");
        let killed = stop(
            std::slice::from_ref(&started.entry),
            Duration::from_millis(300),
        );
        assert_eq!(killed, ["sequencer"]);
        let _reaped = child.wait();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !group_members(leader).is_empty() && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert_eq!(
            group_members(leader),
            Vec::<u32>::new(),
            "the whole group is gone"
        );
    }

    #[test]
    fn a_process_leading_no_group_is_stopped_alone() {
        // Started in this test's own process group, as a script starts `l3m up --embedded`:
        // down must stop it without signalling the group it shares with its caller.
        let mut child = Command::new("/bin/sleep").arg("30").spawn().unwrap();
        let entry = StackProcess {
            service: "embedded".into(),
            pid: child.id(),
            binary: PathBuf::from("/bin/sleep"),
            log: PathBuf::from("/dev/null"),
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while !alive(&entry) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        assert!(alive(&entry), "it has exec'd its binary");
        assert!(group_members(entry.pid).is_empty(), "it leads no group");
        assert_eq!(
            stop(std::slice::from_ref(&entry), Duration::from_secs(5)),
            Vec::<String>::new(),
            "SIGTERM was enough"
        );
        let status = child.wait().unwrap();
        assert!(!status.success(), "it was signalled: {status}");
    }

    #[test]
    fn a_process_that_is_not_the_recorded_binary_is_not_signalled() {
        let me = StackProcess {
            service: "hubd".into(),
            pid: std::process::id(),
            binary: PathBuf::from("/nonexistent/hubd"),
            log: PathBuf::from("/dev/null"),
        };
        assert!(!alive(&me));
        assert_eq!(stop(&[me], Duration::from_millis(10)), Vec::<String>::new());
    }
}
