//! Finding the binaries the stack runs: a sibling of the running `l3m` first (so a `cargo
//! build` tree or an installed bundle uses its own matching versions), then `PATH`, then the
//! places Debian installs system packages.

use std::path::{Path, PathBuf};

use crate::error::CliError;

/// Where a binary is looked for after the sibling directory and `PATH`.
const FALLBACK_DIRS: &[&str] = &["/usr/sbin", "/usr/local/bin", "/usr/bin"];

/// Finds `name`: next to `current_exe` (and one level up, for test binaries in
/// `target/debug/deps/`), then on `path`, then in the fallback directories.
pub fn find_in(
    name: &str,
    current_exe: Option<&Path>,
    path: Option<&std::ffi::OsStr>,
) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = current_exe.and_then(Path::parent) {
        dirs.push(dir.to_owned());
        if dir.file_name().is_some_and(|n| n == "deps")
            && let Some(up) = dir.parent()
        {
            dirs.push(up.to_owned());
        }
    }
    if let Some(path) = path {
        dirs.extend(std::env::split_paths(path));
    }
    dirs.extend(FALLBACK_DIRS.iter().map(PathBuf::from));
    dirs.into_iter().map(|d| d.join(name)).collect()
}

/// The first candidate that is an executable file.
pub fn find(name: &str, hint: &str) -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe().ok();
    let path = std::env::var_os("PATH");
    let candidates = find_in(name, exe.as_deref(), path.as_deref());
    candidates
        .iter()
        .find(|p| is_executable(p))
        .cloned()
        .ok_or_else(|| {
            CliError::Runtime(format!(
                "cannot find the `{name}` binary (looked next to l3m, on PATH and in {}): {hint}",
                FALLBACK_DIRS.join(", ")
            ))
        })
}

/// Whether `path` is a file with an execute bit.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What to tell a human who lacks `binary`.
pub fn install_hint(binary: &str) -> &'static str {
    match binary {
        "nats-server" => "install it: apt-get install -y nats-server",
        "hubd" => "build it: cargo build -p hubd (or install the l3m bundle)",
        "sequencer" => "build it: cargo build -p sequencer (or install the l3m bundle)",
        "reviewer" => "build it: cargo build -p reviewer (or install the l3m bundle)",
        "builder" => "build it: cargo build -p builder (or scripts/install, which installs it)",
        "runner" => "build it: cargo build -p runner (or scripts/install, which installs it)",
        "git" => "install it: apt-get install -y git",
        "docker" => "install it: apt-get install -y docker.io, and start the engine",
        "bwrap" => "install it: apt-get install -y bubblewrap",
        _ => "install it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siblings_come_first_then_path_then_fallbacks() {
        let found = find_in(
            "hubd",
            Some(Path::new("/t/debug/deps/cli-123")),
            Some(std::ffi::OsStr::new("/a:/b")),
        );
        let want: Vec<PathBuf> = [
            "/t/debug/deps/hubd",
            "/t/debug/hubd",
            "/a/hubd",
            "/b/hubd",
            "/usr/sbin/hubd",
            "/usr/local/bin/hubd",
            "/usr/bin/hubd",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(found, want);
    }
}
