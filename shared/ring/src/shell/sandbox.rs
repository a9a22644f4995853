//! The bubblewrap command line, as a pure function of what the run may see and write.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{ACR_MOUNT, PATH};
use crate::path::RelPath;

/// The system directories bound read-only (each only if the host has it; on merged-`/usr`
/// systems `/bin` and `/lib*` are links into `/usr`, which bubblewrap follows at the source).
const SYSTEM_RO: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
];

/// The isolation every run gets: every namespace unshared (so no network, only a loopback
/// that is down), no capabilities even when the harness is root, a new session (no terminal
/// to inject into), death with the harness, an empty environment but `PATH`, `HOME` and
/// `LANG`, the system directories read-only, a private `/proc`, `/dev` and `/tmp`.
pub(super) fn isolation() -> Vec<OsString> {
    let mut args: Vec<OsString> = l3m_core::sandbox::ISOLATION
        .iter()
        .map(OsString::from)
        .collect();
    args.extend(
        [
            "--setenv", "PATH", PATH, "--setenv", "HOME", "/tmp", "--setenv", "LANG", "C.UTF-8",
        ]
        .map(OsString::from),
    );
    for dir in SYSTEM_RO {
        args.extend(["--ro-bind-try", dir, dir].map(OsString::from));
    }
    args.extend(["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"].map(OsString::from));
    args
}

/// What one run sees: the ACR read-only at [`ACR_MOUNT`], `.l3m/` (if present) covered by an
/// empty read-only tmpfs, each write root bound read-write over its place, the cwd inside.
pub(super) struct View<'a> {
    /// The ACR on the host.
    pub acr: &'a Path,
    /// Whether the ACR has a `.l3m/` to hide.
    pub has_harness: bool,
    /// The write roots, parents before children (a `BTreeSet`'s order).
    pub write_roots: Vec<&'a RelPath>,
    /// The working directory.
    pub cwd: &'a RelPath,
}

/// The full argument list after `bwrap`: isolation, the view, then `program args`.
pub(super) fn command(view: &View<'_>, program: &Path, args: &[String]) -> Vec<OsString> {
    let inside = |rel: &RelPath| -> PathBuf {
        if rel.is_root() {
            PathBuf::from(ACR_MOUNT)
        } else {
            Path::new(ACR_MOUNT).join(rel.as_str())
        }
    };
    let mut out = isolation();
    out.extend([
        OsString::from("--ro-bind"),
        view.acr.into(),
        ACR_MOUNT.into(),
    ]);
    if view.has_harness {
        let harness = Path::new(ACR_MOUNT).join(crate::path::HARNESS_DIR);
        out.extend([
            OsString::from("--tmpfs"),
            harness.clone().into(),
            "--remount-ro".into(),
            harness.into(),
        ]);
    }
    for root in &view.write_roots {
        out.extend([
            OsString::from("--bind"),
            view.acr.join(root.as_str()).into(),
            inside(root).into(),
        ]);
    }
    out.extend([OsString::from("--chdir"), inside(view.cwd).into()]);
    out.push("--".into());
    out.push(program.into());
    out.extend(args.iter().map(OsString::from));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_binds_acr_read_only_roots_writable_and_hides_the_harness() {
        let roots = [RelPath::parse("workspace").unwrap()];
        let cwd = RelPath::parse("workspace").unwrap();
        let view = View {
            acr: Path::new("/hub/acr"),
            has_harness: true,
            write_roots: roots.iter().collect(),
            cwd: &cwd,
        };
        let args: Vec<String> = command(&view, Path::new("/usr/bin/ls"), &["-a".into()])
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        let joined = args.join(" ");
        for expected in [
            "--unshare-all",
            "--cap-drop ALL",
            "--clearenv",
            "--ro-bind /hub/acr /acr",
            "--tmpfs /acr/.l3m --remount-ro /acr/.l3m",
            "--bind /hub/acr/workspace /acr/workspace",
            "--chdir /acr/workspace -- /usr/bin/ls -a",
        ] {
            assert!(joined.contains(expected), "{expected} in {joined}");
        }
        assert!(joined.ends_with("-- /usr/bin/ls -a"));
    }
}
