//! Opening paths beneath a directory without following any symlink, anywhere on the path.
//!
//! cap-std already refuses paths that escape the directory they start from. The provider is
//! stricter: a symlink on the path is refused even when it points inside the ACR (it could
//! point into `.l3m/`, or be swapped in by another process mid-call). On Linux this is one
//! `openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`, which the kernel checks atomically;
//! where `openat2` is missing, the path is walked one component at a time with `O_NOFOLLOW`
//! (cap-fs-ext's `open_dir_nofollow`), holding each directory open, which is just as strict.
//! Files are opened `O_NONBLOCK | O_NOCTTY`, never `O_TRUNC`, and their type is checked on the
//! open handle before a byte is read or written, so a fifo or device swapped in after any
//! earlier check is still refused.

use std::io;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsMaybeDirExt};
use cap_std::fs::{Dir, File, Metadata, MetadataExt, OpenOptions, OpenOptionsExt};

use super::{FilesError, NodeKind};
use crate::path::RelPath;

/// What a caller expects at the end of the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// A regular file, to read.
    File,
    /// A directory.
    Dir,
    /// A regular file, to overwrite in place.
    Overwrite,
}

/// How an existing leaf may be overwritten.
pub(super) enum Overwrite {
    /// Nothing is there: the new file is created beside it and renamed into place.
    Absent,
    /// A regular file with one link, opened for writing: it is truncated and written in place.
    InPlace(File, Metadata),
    /// A regular file with other hard links: writing in place would write through them, so
    /// it is replaced by a rename instead.
    Linked,
}

/// Opens the regular file `rel` beneath `dir`; `shown` is the ACR-relative path for errors.
pub(super) fn file(
    dir: &Dir,
    rel: &RelPath,
    shown: &RelPath,
) -> Result<(File, Metadata), FilesError> {
    regular(dir, rel, shown, Want::File)
}

/// Opens the leaf `rel` of `dir` for overwriting, if a regular file is there.
pub(super) fn for_overwrite(
    dir: &Dir,
    rel: &RelPath,
    shown: &RelPath,
) -> Result<Overwrite, FilesError> {
    match regular(dir, rel, shown, Want::Overwrite) {
        Err(FilesError::NotFound { .. }) => Ok(Overwrite::Absent),
        Err(e) => Err(e),
        Ok((_, meta)) if meta.nlink() > 1 => Ok(Overwrite::Linked),
        Ok((file, meta)) => Ok(Overwrite::InPlace(file, meta)),
    }
}

/// Opens a regular file and checks its type on the open handle, before any byte moves.
fn regular(
    dir: &Dir,
    rel: &RelPath,
    shown: &RelPath,
    want: Want,
) -> Result<(File, Metadata), FilesError> {
    let file = beneath(dir, rel, want)
        .map(File::from_std)
        .map_err(|e| diagnose(dir, rel, shown, want, e))?;
    let meta = file.metadata().map_err(|source| FilesError::Io {
        path: shown.to_string(),
        op: "stat the open file",
        source,
    })?;
    match NodeKind::of(meta.file_type()) {
        NodeKind::File => Ok((file, meta)),
        kind => Err(unexpected(shown, shown.to_string(), kind, want)),
    }
}

/// Opens the directory `rel` beneath `dir` (`rel` may be the root: `dir` itself).
pub(super) fn dir(dir: &Dir, rel: &RelPath, shown: &RelPath) -> Result<Dir, FilesError> {
    beneath(dir, rel, Want::Dir)
        .map(Dir::from_std_file)
        .map_err(|e| diagnose(dir, rel, shown, Want::Dir, e))
}

fn beneath(dir: &Dir, rel: &RelPath, want: Want) -> io::Result<std::fs::File> {
    #[cfg(target_os = "linux")]
    match linux::openat2_beneath(dir, rel, want) {
        Err(e) if linux::is_unsupported(&e) => {}
        done => return done,
    }
    by_walk(dir, rel, want)
}

/// The portable fallback: one component at a time, each opened without following a link.
fn by_walk(dir: &Dir, rel: &RelPath, want: Want) -> io::Result<std::fs::File> {
    let components: Vec<&str> = rel.components().collect();
    let (last, parents) = match components.split_last() {
        Some((last, parents)) => (*last, parents),
        None => (".", &[][..]),
    };
    let mut held: Option<Dir> = None;
    for name in parents {
        let next = held.as_ref().unwrap_or(dir).open_dir_nofollow(name)?;
        held = Some(next);
    }
    let parent = held.as_ref().unwrap_or(dir);
    // The last component is opened for reading (not as cap-std's `O_PATH` directory handle), so
    // the result can be listed, synced and chmod-ed like the `openat2` one.
    let mut options = OpenOptions::new();
    options
        .read(want != Want::Overwrite)
        .write(want == Want::Overwrite)
        .follow(FollowSymlinks::No)
        .maybe_dir(want == Want::Dir)
        .custom_flags(last_flags(want));
    Ok(parent.open_with(last, &options)?.into_std())
}

/// Flags for the last component: a fifo must not block the open, nor a tty adopt the process;
/// a directory must be one. (Never `O_TRUNC`: the type is checked before anything changes.)
fn last_flags(want: Want) -> i32 {
    use rustix::fs::OFlags;
    let flags = match want {
        Want::File | Want::Overwrite => OFlags::NONBLOCK | OFlags::NOCTTY,
        Want::Dir => OFlags::DIRECTORY,
    };
    flags.bits() as i32
}

/// Turns a failed open into the boundary that refused it, by looking at each component
/// (without following links) to find the first that is not a plain directory.
fn diagnose(dir: &Dir, rel: &RelPath, shown: &RelPath, want: Want, err: io::Error) -> FilesError {
    let components: Vec<&str> = rel.components().collect();
    // `rel` is the tail of `shown` (a leaf under an opened parent, or the whole path).
    let above = shown.components().count().saturating_sub(components.len());
    let at = |i: usize| -> String {
        shown
            .components()
            .take(above + i + 1)
            .collect::<Vec<_>>()
            .join("/")
    };
    for i in 0..components.len() {
        let prefix = components[..=i].join("/");
        let kind = match dir.symlink_metadata(&prefix) {
            Ok(meta) => NodeKind::of(meta.file_type()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return FilesError::NotFound {
                    path: shown.to_string(),
                };
            }
            Err(_) => break,
        };
        let last = i + 1 == components.len();
        match kind {
            NodeKind::Dir if !last => continue,
            NodeKind::Symlink => {
                return FilesError::Symlink {
                    path: shown.to_string(),
                    at: at(i),
                };
            }
            _ if !last => {
                return FilesError::NotADirectory {
                    path: shown.to_string(),
                    at: at(i),
                };
            }
            kind if !matches!(
                (kind, want),
                (NodeKind::File, Want::File) | (NodeKind::Dir, Want::Dir)
            ) =>
            {
                return unexpected(shown, at(i), kind, want);
            }
            _ => break,
        }
    }
    FilesError::Io {
        path: shown.to_string(),
        op: "open",
        source: err,
    }
}

/// The refusal for finding `kind` where `want` was expected.
fn unexpected(shown: &RelPath, at: String, kind: NodeKind, want: Want) -> FilesError {
    let path = shown.to_string();
    match (kind, want) {
        (NodeKind::Symlink, _) => FilesError::Symlink { path, at },
        (NodeKind::Dir, Want::File | Want::Overwrite) => FilesError::NotAFile { path },
        (_, Want::Dir) => FilesError::NotADirectory { path, at },
        (kind, Want::File | Want::Overwrite) => FilesError::SpecialFile { path, kind },
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io;

    use cap_std::fs::Dir;
    use rustix::fs::{Mode, OFlags, ResolveFlags, openat2};

    use super::Want;
    use crate::path::RelPath;

    /// One atomic, kernel-checked open: beneath `dir`, no symlink (or magic link) anywhere.
    pub(super) fn openat2_beneath(
        dir: &Dir,
        rel: &RelPath,
        want: Want,
    ) -> io::Result<std::fs::File> {
        let path = if rel.is_root() { "." } else { rel.as_str() };
        let last = OFlags::from_bits_retain(super::last_flags(want) as _);
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        let access = match want {
            Want::Overwrite => OFlags::WRONLY,
            Want::File | Want::Dir => OFlags::RDONLY,
        };
        let flags = access | OFlags::NOFOLLOW | OFlags::CLOEXEC | last;
        let fd = openat2(dir, path, flags, Mode::empty(), resolve)?;
        Ok(std::fs::File::from(fd))
    }

    /// Whether the kernel (or a seccomp filter) lacks `openat2`, so the walk must be used.
    pub(super) fn is_unsupported(e: &io::Error) -> bool {
        e.raw_os_error() == Some(rustix::io::Errno::NOSYS.raw_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    fn acr() -> (tempfile::TempDir, Dir) {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("ws/sub")).unwrap();
        std::fs::write(t.path().join("ws/sub/f"), b"x").unwrap();
        std::os::unix::fs::symlink("sub", t.path().join("ws/link")).unwrap();
        std::os::unix::fs::symlink("sub/f", t.path().join("ws/flink")).unwrap();
        let d = Dir::open_ambient_dir(t.path(), ambient_authority()).unwrap();
        (t, d)
    }

    fn rel(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    #[test]
    fn both_strategies_open_plain_paths_and_refuse_every_link() {
        let (_t, d) = acr();
        type Strategy = fn(&Dir, &RelPath, Want) -> io::Result<std::fs::File>;
        let mut strategies: Vec<Strategy> = vec![by_walk];
        #[cfg(target_os = "linux")]
        strategies.push(linux::openat2_beneath);
        for open in strategies {
            assert!(open(&d, &rel("ws/sub/f"), Want::File).is_ok());
            assert!(open(&d, &rel("ws/sub"), Want::Dir).is_ok());
            assert!(open(&d, &RelPath::root(), Want::Dir).is_ok());
            assert!(open(&d, &rel("ws/link/f"), Want::File).is_err());
            assert!(open(&d, &rel("ws/link"), Want::Dir).is_err());
            assert!(open(&d, &rel("ws/flink"), Want::File).is_err());
        }
    }

    #[test]
    fn diagnosis_names_the_link_and_the_missing() {
        let (_t, d) = acr();
        let err = file(&d, &rel("ws/link/f"), &rel("ws/link/f")).unwrap_err();
        assert!(
            matches!(err, FilesError::Symlink { ref at, .. } if at == "ws/link"),
            "{err}"
        );
        let err = file(&d, &rel("ws/nope"), &rel("ws/nope")).unwrap_err();
        assert!(matches!(err, FilesError::NotFound { .. }), "{err}");
        let err = file(&d, &rel("ws/sub/f/g"), &rel("ws/sub/f/g")).unwrap_err();
        assert!(
            matches!(err, FilesError::NotADirectory { ref at, .. } if at == "ws/sub/f"),
            "{err}"
        );
        let err = file(&d, &rel("ws/sub"), &rel("ws/sub")).unwrap_err();
        assert!(matches!(err, FilesError::NotAFile { .. }), "{err}");
    }
}
