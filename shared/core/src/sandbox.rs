//! Bubblewrap, the one sandbox l3m runs untrusted processes in: where it is, the isolation
//! every sandbox gets, and the fix named when it cannot be built. Used by the ring's sandboxed
//! shell and by the sealed programs' evaluator, so both find the same binary and refuse the
//! same way; each adds its own view of the filesystem.

/// Bubblewrap, at its system path (never looked up on `PATH`).
pub const BWRAP: &str = "/usr/bin/bwrap";

/// The isolation flags every sandbox starts with: every namespace unshared (so no network,
/// only a loopback of its own), death with the process that started it, a new session (no
/// terminal to inject into), no capabilities even when the caller is root, an empty
/// environment.
pub const ISOLATION: &[&str] = &[
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
    "--clearenv",
];

/// The fix named when bubblewrap is missing or cannot create its namespaces.
pub const BWRAP_FIX: &str = "install bubblewrap (`apt-get install bubblewrap`, giving /usr/bin/bwrap) \
    and allow it namespaces: run as root, or enable unprivileged user namespaces \
    (`sysctl -w kernel.unprivileged_userns_clone=1`, or in a container start it with \
    `--security-opt seccomp=unconfined` or `--privileged`)";
