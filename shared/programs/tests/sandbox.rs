//! The evaluator's sandbox, attacked: a probe started by the same function that starts the
//! evaluator ([`sandbox::command`]), every flag kept and only the inner program swapped for a
//! shell, tries what an exploit of the interpreter would try: read a file of the host, reach a
//! listener on the host's loopback, see or signal the process that started it, write something
//! that lasts. Inside, each fails; the same probe run bare succeeds at each, so the checks can
//! fail. And a real program still loads and runs in the sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a probe that cannot be set up is a failed test

mod common;

use std::ffi::OsString;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use l3m_programs::sandbox::{self, Sandbox};
use serde_json::json;

/// The probe: each line it prints is something it managed. `$1` a file of the host to read,
/// `$2` a port on 127.0.0.1, `$3` the test's process id, `$4` a host folder to write in, `$5`
/// `inside` to also try writing in the sandbox's own root and `/tmp`.
const PROBE: &str = r#"
if read -r line < "$1"; then echo "read:$line"; fi
if exec 3<>"/dev/tcp/127.0.0.1/$2"; then echo connected; exec 3>&-; fi
if kill -0 "$3"; then echo signalled-parent; fi
if [ -e "/proc/$3" ]; then echo sees-parent; fi
for p in /proc/[0-9]*; do if [ -e "$p" ]; then echo "process:$p"; fi; done
if echo x > "$4/escaped"; then echo wrote-host; fi
if [ "$5" = inside ]; then
  for d in / /tmp; do if echo x > "$d/written"; then echo "wrote:$d"; fi; done
  if echo x >> /l3m-program; then echo wrote-binary; fi
fi
echo finished
"#;

/// A shell with `/dev/tcp` and the builtins the probe needs.
fn bash() -> PathBuf {
    ["/usr/bin/bash", "/bin/bash"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .expect("bash is installed")
}

/// What the probe, run by `shell` in `sandbox`, printed.
fn probe(sandbox: Sandbox, shell: &Path, secret: &Path, port: u16, host_dir: &Path) -> String {
    let mut args: Vec<OsString> = ["-c", PROBE, "probe"].map(OsString::from).to_vec();
    args.extend([
        secret.as_os_str().to_owned(),
        port.to_string().into(),
        std::process::id().to_string().into(),
        host_dir.as_os_str().to_owned(),
        if sandbox == Sandbox::Bwrap {
            "inside"
        } else {
            "bare"
        }
        .into(),
    ]);
    let mut command = sandbox::command(sandbox, shell, &args)
        .unwrap_or_else(|e| panic!("the sandbox is needed for this test: {e}"));
    let out = command.stdin(std::process::Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("finished"),
        "the probe did not run to its end ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A fake hub holding a secret, a listener on the host's loopback, a folder to write in, and
/// a copy of bash as the probe's shell (the one the sandbox binds, which the probe tries to
/// overwrite: never the system's).
struct Host {
    dir: tempfile::TempDir,
    secret: PathBuf,
    listener: TcpListener,
    shell: PathBuf,
}

impl Host {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let hub = dir.path().join("hub");
        std::fs::create_dir(&hub).unwrap();
        let secret = hub.join("credential");
        std::fs::write(&secret, "hub-secret\n").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let shell = dir.path().join("bin/bash");
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        std::fs::copy(bash(), &shell).unwrap();
        Self {
            dir,
            secret,
            listener,
            shell,
        }
    }

    fn run(&self, sandbox: Sandbox) -> String {
        let port = self.listener.local_addr().unwrap().port();
        probe(sandbox, &self.shell, &self.secret, port, self.dir.path())
    }

    /// Whether anything connected to the listener.
    fn was_reached(&self) -> bool {
        self.listener.accept().is_ok()
    }
}

#[test]
fn bare_the_probe_reads_connects_sees_its_parent_and_writes() {
    let host = Host::new();
    let out = host.run(Sandbox::None);
    for managed in [
        "read:hub-secret",
        "connected",
        "signalled-parent",
        "sees-parent",
        "process:/proc/",
        "wrote-host",
    ] {
        assert!(out.contains(managed), "{managed} in {out}");
    }
    assert!(host.was_reached());
    assert!(host.dir.path().join("escaped").exists());
}

#[test]
fn in_the_sandbox_the_probe_reads_reaches_sees_and_writes_nothing() {
    let host = Host::new();
    let out = host.run(Sandbox::Bwrap);
    assert_eq!(out.trim(), "finished", "the probe managed something");
    assert!(!host.was_reached(), "the host's listener saw a connection");
    let mut left = String::new();
    for entry in std::fs::read_dir(host.dir.path()).unwrap() {
        left.push_str(&entry.unwrap().file_name().to_string_lossy());
        left.push(' ');
    }
    let mut left: Vec<_> = left.split_whitespace().collect();
    left.sort();
    assert_eq!(left, ["bin", "hub"], "the probe left something on the host");
    let mut shell_now = Vec::new();
    std::fs::File::open(&host.shell)
        .unwrap()
        .read_to_end(&mut shell_now)
        .unwrap();
    assert!(!shell_now.ends_with(b"x\n"), "the bound binary was written");
}

#[test]
fn a_real_program_loads_and_runs_in_the_sandbox() {
    let evaluator = common::evaluator();
    assert_eq!(
        evaluator.sandbox,
        Sandbox::Bwrap,
        "the sandbox is the default"
    );
    let s = common::Session::new();
    std::fs::write(s.hub.acr.join("workspace/notes.md"), "one\ntwo\n").unwrap();
    let tool = s
        .admit(
            "lines",
            "FOOTPRINT = [\"fs-read\"]\nDESCRIPTION = \"count lines\"\n\
             INPUT = {\"type\": \"object\"}\n\
             def main(input):\n    return len(fs_read(\"workspace/notes.md\").split(\"\\n\"))\n",
        )
        .unwrap();
    // Twice: the second call is served by the same warm, sandboxed evaluator.
    for _ in 0..2 {
        let out = s.call(&tool, json!({})).unwrap();
        assert_eq!(out.text.trim(), "3");
    }
}

/// A process's name and the `Seccomp:` mode `/proc/<pid>/status` shows for it.
fn seccomp_mode(pid: u32) -> Option<(String, String)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
    };
    Some((field("Name:")?, field("Seccomp:")?))
}

/// The evaluator filters its own system calls before it reads a program: one waiting for its
/// program, bare and in the sandbox, is in the kernel's filter mode (2); this test process,
/// the control, is not (0). What the filter refuses: `seccomp::tests` (unit).
#[test]
fn the_evaluator_filters_its_system_calls_before_it_reads_a_program() {
    assert_eq!(seccomp_mode(std::process::id()).unwrap().1, "0");
    let program = PathBuf::from(env!("CARGO_BIN_EXE_l3m-program"));
    let args = ["serve", "--memory-mib", "192", "--cpu-secs", "3"].map(OsString::from);
    for sandbox in [Sandbox::None, Sandbox::Bwrap] {
        let mut child = sandbox::command(sandbox, &program, &args)
            .unwrap()
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mode = loop {
            let modes: Vec<String> = common::tree(child.id())
                .into_iter()
                .filter_map(seccomp_mode)
                .filter_map(|(name, mode)| (name == "l3m-program").then_some(mode))
                .collect();
            if modes.iter().any(|m| m != "0") || std::time::Instant::now() > deadline {
                break modes;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(mode, ["2"], "{sandbox:?}");
    }
}
