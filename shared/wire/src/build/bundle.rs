//! A build's source as bytes: how the source and lockfile folders of an agent's ACR travel to
//! a builder on another host, so the builder reads no forest and shares no filesystem with the
//! sequencer host.
//!
//! # Format
//! The line `l3m source bundle v1`, then one entry per file, folder and symlink, sorted by
//! path: a [`TreeEntry`] as one JSON line, and for a file its `len` bytes right after. Paths
//! start with `src/` (the source folder) or `lock/` (the lockfile folder), each top folder an
//! entry of its own. A file's entry carries the blake3 of its bytes, checked as it is unpacked.
//!
//! [`unpack`] trusts nothing in the bytes: a path that is absolute, climbs with `..`, lies
//! under neither top folder, comes twice, has no folder above it, or passes through a symlink
//! is refused; so is a symlink whose target leaves its top folder, a file whose bytes do not
//! hash to its entry, and anything past [`MAX_BUNDLE_BYTES`] or [`MAX_ENTRIES`]. Nothing is
//! written outside the folder it unpacks into, and no file there is overwritten.

use std::collections::BTreeSet;
use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use l3m_core::build::{ArtifactDigest, TreeEntry};

/// The first line of every bundle.
const MAGIC: &[u8] = b"l3m source bundle v1\n";

/// The largest bundle made or accepted: a build's source is code, not a dataset.
pub const MAX_BUNDLE_BYTES: u64 = 32 * 1024 * 1024;

/// The most entries a bundle holds.
pub const MAX_ENTRIES: usize = 20_000;

/// The longest entry line, in bytes.
const MAX_LINE: usize = 8 * 1024;

/// The top folder the source unpacks into.
pub const SOURCE: &str = "src";

/// The top folder the lockfiles unpack into.
pub const LOCKFILE: &str = "lock";

/// Why a bundle could not be made or unpacked.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// Reading or writing a path failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS's answer.
        #[source]
        source: std::io::Error,
    },
    /// A folder to bundle is not under the agent's ACR once its links are resolved.
    #[error("{what} {path:?} {reason}")]
    Outside {
        /// `source` or `lockfile`.
        what: &'static str,
        /// As given, relative to the ACR.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An entry is neither file, folder nor symlink (a device, a socket, a fifo).
    #[error("{path}: not a file, folder or symlink; a build's source holds only those")]
    Special {
        /// The path.
        path: PathBuf,
    },
    /// The bundle passed a limit.
    #[error("the source is larger than a build takes ({limit}); build a smaller folder")]
    TooLarge {
        /// The limit passed, in words.
        limit: String,
    },
    /// The bytes are not a bundle this build reads, or an entry breaks a rule.
    #[error("a malformed source bundle: {0}")]
    Malformed(String),
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_owned(),
        source,
    }
}

/// The folder `rel` of the ACR at `acr`: relative, without `..`, existing, a folder, and still
/// under the ACR once links are resolved (a link out to another agent's checkout is refused).
pub fn under_acr(acr: &Path, rel: &str, what: &'static str) -> Result<PathBuf, BundleError> {
    let outside = |reason: String| BundleError::Outside {
        what,
        path: rel.to_owned(),
        reason,
    };
    let normal = Path::new(rel)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if rel.is_empty() || !normal {
        return Err(outside(
            "must be relative to the ACR, without `..`".to_owned(),
        ));
    }
    let root = acr
        .canonicalize()
        .map_err(|e| outside(format!("cannot be resolved: the ACR: {e}")))?;
    let full = root
        .join(rel)
        .canonicalize()
        .map_err(|e| outside(format!("cannot be resolved: {e}")))?;
    if !full.starts_with(&root) || !full.is_dir() {
        return Err(outside(
            "resolves outside the agent's ACR or is not a folder".to_owned(),
        ));
    }
    Ok(full)
}

/// The bundle of the folders `source` and `lockfile` (already resolved, e.g. by [`under_acr`]).
/// Links inside them are kept as links, never followed.
pub fn pack(source: &Path, lockfile: Option<&Path>) -> Result<Vec<u8>, BundleError> {
    let mut out = MAGIC.to_vec();
    let mut entries = 0usize;
    let tops = [(SOURCE, Some(source)), (LOCKFILE, lockfile)];
    for (top, folder) in tops {
        let Some(folder) = folder else { continue };
        let mut listed = Vec::new();
        list(folder, Path::new(top), &mut listed)?;
        listed.sort_by(|a, b| a.0.path().cmp(b.0.path()));
        for (entry, content) in listed {
            entries += 1;
            if entries > MAX_ENTRIES {
                return Err(BundleError::TooLarge {
                    limit: format!("{MAX_ENTRIES} files and folders"),
                });
            }
            let line = serde_json::to_vec(&entry)
                .map_err(|e| BundleError::Malformed(format!("an entry: {e}")))?;
            out.extend_from_slice(&line);
            out.push(b'\n');
            out.extend_from_slice(&content);
            if out.len() as u64 > MAX_BUNDLE_BYTES {
                return Err(BundleError::TooLarge {
                    limit: format!("{} MiB", MAX_BUNDLE_BYTES >> 20),
                });
            }
        }
    }
    Ok(out)
}

/// Lists `folder` as the entries of `named` (its path in the bundle) and below, each file with
/// its bytes (read once: hashed for its entry, then bundled).
fn list(
    folder: &Path,
    named: &Path,
    out: &mut Vec<(TreeEntry, Vec<u8>)>,
) -> Result<(), BundleError> {
    let text = |p: &Path| p.to_string_lossy().into_owned();
    out.push((TreeEntry::Dir { path: text(named) }, Vec::new()));
    for item in fs::read_dir(folder).map_err(io_at(folder))? {
        let item = item.map_err(io_at(folder))?;
        let path = item.path();
        let name = named.join(item.file_name());
        let meta = fs::symlink_metadata(&path).map_err(io_at(&path))?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = fs::read_link(&path).map_err(io_at(&path))?;
            out.push((
                TreeEntry::Symlink {
                    path: text(&name),
                    target: text(&target),
                },
                Vec::new(),
            ));
        } else if kind.is_dir() {
            list(&path, &name, out)?;
        } else if kind.is_file() {
            let bytes = fs::read(&path).map_err(io_at(&path))?;
            out.push((
                TreeEntry::File {
                    path: text(&name),
                    executable: meta.permissions().mode() & 0o111 != 0,
                    len: bytes.len() as u64,
                    hash: ArtifactDigest::from_bytes(*blake3::hash(&bytes).as_bytes()),
                },
                bytes,
            ));
        } else {
            return Err(BundleError::Special { path });
        }
    }
    Ok(())
}

/// Where a bundle was unpacked: its source folder and, if it held one, its lockfile folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unpacked {
    /// `<into>/src`.
    pub source: PathBuf,
    /// `<into>/lock`, when the bundle holds lockfiles.
    pub lockfile: Option<PathBuf>,
}

/// Unpacks `bytes` into the empty folder `into`, checking every entry (the module's rules).
pub fn unpack(bytes: &[u8], into: &Path) -> Result<Unpacked, BundleError> {
    let bad = |why: String| BundleError::Malformed(why);
    if bytes.len() as u64 > MAX_BUNDLE_BYTES {
        return Err(BundleError::TooLarge {
            limit: format!("{} MiB", MAX_BUNDLE_BYTES >> 20),
        });
    }
    let mut rest = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| bad("it does not start with the bundle's first line".into()))?;
    let mut folders: BTreeSet<PathBuf> = BTreeSet::new();
    let mut seen: BTreeSet<PathBuf> = BTreeSet::new();
    let mut count = 0usize;
    while !rest.is_empty() {
        count += 1;
        if count > MAX_ENTRIES {
            return Err(BundleError::TooLarge {
                limit: format!("{MAX_ENTRIES} files and folders"),
            });
        }
        let end = (rest.iter().take(MAX_LINE + 1))
            .position(|b| *b == b'\n')
            .ok_or_else(|| {
                bad(format!(
                    "entry {count} is not a line of at most {MAX_LINE} bytes"
                ))
            })?;
        let entry: TreeEntry =
            serde_json::from_slice(&rest[..end]).map_err(|e| bad(format!("entry {count}: {e}")))?;
        rest = &rest[end + 1..];
        let rel = entry_path(entry.path(), &folders)?;
        if !seen.insert(rel.clone()) {
            return Err(bad(format!("{} comes twice", entry.path())));
        }
        let at = into.join(&rel);
        match &entry {
            TreeEntry::Dir { .. } => {
                fs::create_dir(&at).map_err(io_at(&at))?;
                folders.insert(rel);
            }
            TreeEntry::Symlink { target, .. } => {
                symlink_stays_inside(&rel, target)?;
                std::os::unix::fs::symlink(target, &at).map_err(io_at(&at))?;
            }
            TreeEntry::File {
                len,
                hash,
                executable,
                ..
            } => {
                let len = usize::try_from(*len).unwrap_or(usize::MAX);
                if len > rest.len() {
                    return Err(bad(format!("{} is cut short", entry.path())));
                }
                let (content, after) = rest.split_at(len);
                rest = after;
                if ArtifactDigest::from_bytes(*blake3::hash(content).as_bytes()) != *hash {
                    return Err(bad(format!(
                        "{}'s bytes do not match its hash",
                        entry.path()
                    )));
                }
                let mode = if *executable { 0o755 } else { 0o644 };
                let mut file = fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode)
                    .open(&at)
                    .map_err(io_at(&at))?;
                file.write_all(content).map_err(io_at(&at))?;
            }
        }
    }
    if !folders.contains(Path::new(SOURCE)) {
        return Err(bad(format!("it holds no `{SOURCE}` folder")));
    }
    Ok(Unpacked {
        source: into.join(SOURCE),
        lockfile: folders
            .contains(Path::new(LOCKFILE))
            .then(|| into.join(LOCKFILE)),
    })
}

/// `path` as a relative path under one of the two top folders, whose parent is a folder
/// already unpacked (so no entry goes through a symlink or lands before its folder).
fn entry_path(path: &str, folders: &BTreeSet<PathBuf>) -> Result<PathBuf, BundleError> {
    let bad = |why: &str| BundleError::Malformed(format!("{path:?} {why}"));
    let rel = PathBuf::from(path);
    if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(bad("is not a plain relative path"));
    }
    let mut components = rel.components();
    let top = components.next().map(|c| c.as_os_str());
    if top != Some(SOURCE.as_ref()) && top != Some(LOCKFILE.as_ref()) {
        return Err(bad(&format!(
            "lies under neither `{SOURCE}/` nor `{LOCKFILE}/`"
        )));
    }
    match rel.parent() {
        Some(parent) if parent.as_os_str().is_empty() => Ok(rel),
        Some(parent) if folders.contains(parent) => Ok(rel),
        _ => Err(bad("has no folder above it in the bundle")),
    }
}

/// Refuses a symlink at `rel` whose `target` is absolute or, read from the link's folder,
/// climbs out of its top folder.
fn symlink_stays_inside(rel: &Path, target: &str) -> Result<(), BundleError> {
    let escapes = || {
        BundleError::Malformed(format!(
            "the link {} points to {target:?}, outside its folder",
            rel.display()
        ))
    };
    let mut depth: usize = rel.components().count().saturating_sub(1);
    for component in Path::new(target).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => {
                depth = depth.checked_sub(1).ok_or_else(escapes)?;
                if depth == 0 {
                    return Err(escapes());
                }
            }
            Component::RootDir | Component::Prefix(_) => return Err(escapes()),
        }
    }
    if target.is_empty() {
        return Err(escapes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) {
        fs::create_dir_all(root.join("project/src")).unwrap();
        fs::write(root.join("project/src/main.c"), "int main(){return 0;}\n").unwrap();
        fs::write(root.join("project/build.sh"), "#!/bin/sh\n").unwrap();
        fs::set_permissions(
            root.join("project/build.sh"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("src/main.c", root.join("project/main.c")).unwrap();
        fs::create_dir_all(root.join("lock")).unwrap();
        fs::write(root.join("lock/deps.lock"), "a.tar\n").unwrap();
    }

    /// The bundle with its header lines edited by `edit` (files' bytes kept).
    fn edited(bundle: &[u8], edit: impl Fn(TreeEntry) -> TreeEntry) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let mut rest = &bundle[MAGIC.len()..];
        while !rest.is_empty() {
            let end = rest.iter().position(|b| *b == b'\n').unwrap();
            let entry: TreeEntry = serde_json::from_slice(&rest[..end]).unwrap();
            rest = &rest[end + 1..];
            let len = match &entry {
                TreeEntry::File { len, .. } => *len as usize,
                _ => 0,
            };
            out.extend_from_slice(&serde_json::to_vec(&edit(entry)).unwrap());
            out.push(b'\n');
            out.extend_from_slice(&rest[..len]);
            rest = &rest[len..];
        }
        out
    }

    #[test]
    fn a_bundle_unpacks_to_the_same_folders_links_kept() {
        let acr = tempfile::tempdir().unwrap();
        tree(acr.path());
        let source = under_acr(acr.path(), "project", "source").unwrap();
        let lock = under_acr(acr.path(), "lock", "lockfile").unwrap();
        let bundle = pack(&source, Some(&lock)).unwrap();
        let into = tempfile::tempdir().unwrap();
        let unpacked = unpack(&bundle, into.path()).unwrap();
        assert_eq!(
            fs::read_to_string(unpacked.source.join("src/main.c")).unwrap(),
            "int main(){return 0;}\n"
        );
        let mode = fs::metadata(unpacked.source.join("build.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
        assert_eq!(
            fs::read_link(unpacked.source.join("main.c")).unwrap(),
            Path::new("src/main.c")
        );
        let lock = unpacked.lockfile.unwrap();
        assert_eq!(
            fs::read_to_string(lock.join("deps.lock")).unwrap(),
            "a.tar\n"
        );
        // The same folders make the same bytes.
        assert_eq!(pack(&source, Some(&lock)).unwrap(), bundle);
    }

    #[test]
    fn a_folder_outside_the_acr_is_refused_before_anything_is_read() {
        let acr = tempfile::tempdir().unwrap();
        tree(acr.path());
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), acr.path().join("out")).unwrap();
        for rel in ["../x", "/etc", "", "out"] {
            let e = under_acr(acr.path(), rel, "source").unwrap_err();
            assert!(matches!(e, BundleError::Outside { .. }), "{rel}: {e}");
        }
    }

    #[test]
    fn every_hostile_entry_is_refused_and_nothing_lands_outside() {
        let acr = tempfile::tempdir().unwrap();
        tree(acr.path());
        let source = under_acr(acr.path(), "project", "source").unwrap();
        let good = pack(&source, None).unwrap();
        let renamed = |from: &'static str, to: &'static str| {
            edited(&good, move |e| match e {
                TreeEntry::File {
                    path,
                    executable,
                    len,
                    hash,
                } if path == from => TreeEntry::File {
                    path: to.into(),
                    executable,
                    len,
                    hash,
                },
                other => other,
            })
        };
        let relinked = |to: &'static str| {
            edited(&good, move |e| match e {
                TreeEntry::Symlink { path, .. } => TreeEntry::Symlink {
                    path,
                    target: to.into(),
                },
                other => other,
            })
        };
        let mut cut = good.clone();
        cut.truncate(cut.len() - 3);
        let mut changed = good.clone();
        let last = changed.len() - 2;
        changed[last] ^= 1;
        let hostile: Vec<(&str, Vec<u8>)> = vec![
            ("climbs", renamed("src/build.sh", "src/../../escaped")),
            ("absolute", renamed("src/build.sh", "/tmp/escaped")),
            ("elsewhere", renamed("src/build.sh", "other/escaped")),
            ("no folder", renamed("src/build.sh", "src/nowhere/escaped")),
            (
                "through a link",
                renamed("src/build.sh", "src/main.c/escaped"),
            ),
            ("twice", renamed("src/build.sh", "src/src")),
            ("link out", relinked("../../escaped")),
            ("link absolute", relinked("/etc/passwd")),
            ("cut short", cut),
            ("changed bytes", changed),
            ("not a bundle", b"GIF89a".to_vec()),
        ];
        let into = |name: &str| {
            let dir = tempfile::tempdir().unwrap();
            fs::create_dir(dir.path().join(name)).unwrap();
            dir
        };
        // The control: the good bundle unpacks where each hostile one is tried.
        let dir = into("in");
        assert!(unpack(&good, &dir.path().join("in")).is_ok());
        for (what, bytes) in hostile {
            let dir = into("in");
            let e = unpack(&bytes, &dir.path().join("in")).err();
            assert!(e.is_some(), "{what} was unpacked");
            assert!(!dir.path().join("escaped").exists(), "{what}");
        }
    }
}
