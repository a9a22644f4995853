//! The evaluator's sandbox: bubblewrap around `l3m-program`, so that an exploit of the
//! interpreter holds nothing of the sequencer's ambient authority.
//!
//! The evaluator reaches its parent only through its three pipes, so the sandbox gives it
//! nothing else: every namespace unshared (no network, no other process, no host name), no
//! capabilities, a new session, an empty environment, and an empty root, remounted read-only,
//! that holds the system's library directories read-only (for the dynamic loader) and the
//! evaluator binary read-only at [`INSIDE`]. No `/proc`, no `/dev`, no `/tmp`: nothing on the
//! host can be read, written or signalled from inside. The evaluator's own limits
//! ([`crate::limits`]) and its system-call filter (`seccomp`) still apply: it sets them on
//! itself once it starts inside.
//!
//! Where bubblewrap is missing, or cannot create namespaces here, every evaluation is refused
//! with [`Rule::Sandbox`](crate::Rule::Sandbox) and the fix; [`Sandbox::None`] is the explicit
//! opt-out that runs the evaluator bare (its rlimits and its filter only).
//!
//! [`arguments`] is the pure part (the argument list), [`command`] the process it becomes; a
//! test can put another program in the evaluator's place and keep every flag.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use l3m_core::sandbox::{BWRAP, BWRAP_FIX, ISOLATION};
use serde::{Deserialize, Serialize};

/// Where the evaluator runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sandbox {
    /// Under bubblewrap, or not at all.
    #[default]
    Bwrap,
    /// Bare, under its rlimits only: the explicit opt-out for hosts without namespaces.
    None,
}

/// Where the evaluator binary appears inside the sandbox.
pub const INSIDE: &str = "/l3m-program";

/// The library directories bound read-only, each only if the host has it, for the dynamic
/// loader; on merged-`/usr` systems `/lib*` are links into `/usr`, which bubblewrap follows at
/// the source. Programs in `/usr/bin` and `/bin` are not bound.
const LIBRARIES: &[&str] = &[
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr/lib",
    "/usr/lib32",
    "/usr/lib64",
    "/usr/libx32",
    "/etc/ld.so.cache",
];

/// Why the sandbox cannot be built.
#[derive(Debug, thiserror::Error)]
#[error(
    "refused by the sandbox boundary: {reason}; fix: {fix} (or set `[sequencer] program_sandbox = \"none\"` to run programs without a sandbox)"
)]
pub struct SandboxError {
    /// What failed.
    pub reason: String,
    /// How to make the sandbox work.
    pub fix: &'static str,
}

/// The argument list after `bwrap` that runs `program args` at [`INSIDE`]: the isolation of
/// every sandbox, the libraries, the binary, the root read-only, `/` as the cwd.
pub fn arguments(program: &Path, args: &[OsString]) -> Vec<OsString> {
    let mut out: Vec<OsString> = ISOLATION.iter().map(OsString::from).collect();
    for dir in LIBRARIES {
        out.extend(["--ro-bind-try", dir, dir].map(OsString::from));
    }
    out.extend([
        OsString::from("--ro-bind"),
        program.into(),
        INSIDE.into(),
        "--remount-ro".into(),
        "/".into(),
        "--chdir".into(),
        "/".into(),
        "--".into(),
        INSIDE.into(),
    ]);
    out.extend(args.iter().cloned());
    out
}

/// The command that runs `program args` in `sandbox` (bubblewrap at `bwrap`, which is
/// [`BWRAP`] outside tests), with an empty environment, at `/`, its three pipes captured.
/// Refused when `bwrap` is not a file; a bubblewrap that cannot build its namespaces says so on
/// stderr, in a line starting with `bwrap:` ([`is_refusal`]).
pub fn command_with(
    sandbox: Sandbox,
    bwrap: &Path,
    program: &Path,
    args: &[OsString],
) -> Result<Command, SandboxError> {
    let mut command = match sandbox {
        Sandbox::None => {
            let mut bare = Command::new(program);
            bare.args(args);
            bare
        }
        Sandbox::Bwrap => {
            if !bwrap.is_file() {
                return Err(SandboxError {
                    reason: format!("{} does not exist", bwrap.display()),
                    fix: BWRAP_FIX,
                });
            }
            let mut wrapped = Command::new(bwrap);
            wrapped.args(arguments(program, args));
            wrapped
        }
    };
    command
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(command)
}

/// [`command_with`] the system's bubblewrap.
pub fn command(
    sandbox: Sandbox,
    program: &Path,
    args: &[OsString],
) -> Result<Command, SandboxError> {
    command_with(sandbox, Path::new(BWRAP), program, args)
}

/// Whether an evaluator that exited with `code` and `stderr` was stopped by bubblewrap
/// before it started (namespaces refused, a bind failed): bubblewrap then exits 1 with a
/// line starting `bwrap:`. The evaluator's own messages start with `l3m-program:`.
pub fn is_refusal(sandbox: Sandbox, code: Option<i32>, stderr: &str) -> bool {
    sandbox == Sandbox::Bwrap && code == Some(1) && stderr.starts_with("bwrap:")
}

/// The signal that ended a sandboxed process whose bubblewrap exited with `code`: bubblewrap
/// reports its child's death by signal `n` as exit code `128 + n`.
pub fn signal_of(sandbox: Sandbox, code: Option<i32>) -> Option<i32> {
    match (sandbox, code) {
        (Sandbox::Bwrap, Some(code)) if (129..=128 + 64).contains(&code) => Some(code - 128),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|a| a.into_string().unwrap_or_default())
            .collect()
    }

    #[test]
    fn the_evaluator_alone_is_bound_read_only_in_an_isolated_read_only_root() {
        let args = strings(arguments(
            Path::new("/opt/l3m/l3m-program"),
            &["serve".into(), "--cpu-secs".into(), "3".into()],
        ));
        let joined = args.join(" ");
        for expected in [
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop ALL",
            "--clearenv",
            "--ro-bind-try /lib /lib",
            "--ro-bind /opt/l3m/l3m-program /l3m-program",
            "--remount-ro / --chdir / -- /l3m-program serve --cpu-secs 3",
        ] {
            assert!(joined.contains(expected), "{expected} in {joined}");
        }
        // Nothing writable, nothing of the host's processes or devices, no programs to start.
        for absent in [
            "--bind ",
            "--proc",
            "--dev",
            "--tmpfs",
            "--share-net",
            "/usr/bin",
            "--setenv",
        ] {
            assert!(!joined.contains(absent), "{absent} in {joined}");
        }
        assert!(joined.ends_with("-- /l3m-program serve --cpu-secs 3"));
    }

    #[test]
    fn a_missing_bubblewrap_is_refused_with_the_fix_and_none_runs_bare() {
        let dir = std::env::temp_dir().join("l3m-no-such-dir-for-bwrap");
        let missing = dir.join("bwrap");
        let err = command_with(Sandbox::Bwrap, &missing, Path::new("/x"), &[]).unwrap_err();
        assert!(err.reason.contains("does not exist"), "{err}");
        assert_eq!(err.fix, BWRAP_FIX);
        assert!(err.to_string().contains("program_sandbox"), "{err}");
        let bare = command_with(Sandbox::None, &missing, Path::new("/x"), &["a".into()]).unwrap();
        assert_eq!(bare.get_program(), "/x");
    }

    #[test]
    fn bubblewraps_exit_codes_are_read_back() {
        assert_eq!(signal_of(Sandbox::Bwrap, Some(134)), Some(6));
        assert_eq!(signal_of(Sandbox::Bwrap, Some(152)), Some(24));
        assert_eq!(signal_of(Sandbox::Bwrap, Some(1)), None);
        assert_eq!(signal_of(Sandbox::None, Some(134)), None);
        assert!(is_refusal(
            Sandbox::Bwrap,
            Some(1),
            "bwrap: No permissions to creating new namespace"
        ));
        assert!(!is_refusal(
            Sandbox::Bwrap,
            Some(1),
            "l3m-program: bad mode"
        ));
        assert!(!is_refusal(Sandbox::None, Some(1), "bwrap: x"));
    }

    #[test]
    fn the_opt_out_is_spelt_none() {
        let none: Sandbox = serde_json::from_str("\"none\"").unwrap();
        let bwrap: Sandbox = serde_json::from_str("\"bwrap\"").unwrap();
        assert_eq!((none, bwrap), (Sandbox::None, Sandbox::Bwrap));
    }
}
