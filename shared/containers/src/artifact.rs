//! Content-addressed artifacts: hash a folder, store it under its digest, verify before use.
//!
//! The digest is blake3 over the core's [`tree_manifest`], so the builder that stores and the
//! runner that verifies hash the same way. Verification re-hashes the stored bytes every time:
//! the store's folder is on disk where other processes live, and a changed byte must be a
//! refusal, not a run.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use l3m_core::build::{ArtifactDigest, TreeEntry, tree_manifest};

/// What went wrong hashing, storing or verifying an artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Reading or writing a path failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS's answer.
        #[source]
        source: io::Error,
    },
    /// No artifact with that digest is stored.
    #[error("no artifact {digest} in the cache")]
    Missing {
        /// The digest asked for.
        digest: ArtifactDigest,
    },
    /// The stored bytes no longer hash to their name: something changed them after hashing.
    #[error("artifact {expected} changed after hashing: its bytes now hash to {actual}")]
    Changed {
        /// The digest the caller handed on.
        expected: ArtifactDigest,
        /// What the bytes hash to now.
        actual: ArtifactDigest,
    },
    /// An entry is neither file, folder nor symlink (a device, a socket, a fifo).
    #[error("{path}: not a file, folder or symlink")]
    Special {
        /// The path.
        path: PathBuf,
    },
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ArtifactError + '_ {
    move |source| ArtifactError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Lists `root` without following symlinks, hashing each file's bytes.
pub fn list_tree(root: &Path) -> Result<Vec<TreeEntry>, ArtifactError> {
    let mut entries = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = root.join(&rel);
        for item in fs::read_dir(&dir).map_err(io_at(&dir))? {
            let item = item.map_err(io_at(&dir))?;
            let path = item.path();
            let rel_path = rel.join(item.file_name());
            let name = rel_path.to_string_lossy().into_owned();
            let meta = fs::symlink_metadata(&path).map_err(io_at(&path))?;
            let kind = meta.file_type();
            if kind.is_symlink() {
                let target = fs::read_link(&path).map_err(io_at(&path))?;
                entries.push(TreeEntry::Symlink {
                    path: name,
                    target: target.to_string_lossy().into_owned(),
                });
            } else if kind.is_dir() {
                entries.push(TreeEntry::Dir { path: name });
                pending.push(rel_path);
            } else if kind.is_file() {
                let mut hasher = blake3::Hasher::new();
                let file = fs::File::open(&path).map_err(io_at(&path))?;
                hasher.update_reader(file).map_err(io_at(&path))?;
                entries.push(TreeEntry::File {
                    path: name,
                    executable: meta.permissions().mode() & 0o111 != 0,
                    len: meta.len(),
                    hash: ArtifactDigest::from_bytes(*hasher.finalize().as_bytes()),
                });
            } else {
                return Err(ArtifactError::Special { path });
            }
        }
    }
    Ok(entries)
}

/// The digest of the folder at `root`.
pub fn hash_tree(root: &Path) -> Result<ArtifactDigest, ArtifactError> {
    let manifest = tree_manifest(&list_tree(root)?);
    Ok(ArtifactDigest::from_bytes(
        *blake3::hash(&manifest).as_bytes(),
    ))
}

/// The hub's content-addressed store of artifacts and fetched caches (`HUB/cache/artifacts`).
#[derive(Debug, Clone)]
pub struct ArtifactStore {
    root: PathBuf,
}

impl ArtifactStore {
    /// A store rooted at `root` (created if missing).
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, ArtifactError> {
        let root = root.into();
        fs::create_dir_all(&root).map_err(io_at(&root))?;
        Ok(ArtifactStore { root })
    }

    /// A fresh scratch folder inside the store, on the same filesystem so storing is a rename.
    pub fn scratch(&self, name: &str) -> Result<PathBuf, ArtifactError> {
        let base = self.root.join(".scratch");
        fs::create_dir_all(&base).map_err(io_at(&base))?;
        for n in 0u32.. {
            let dir = base.join(format!("{name}-{}-{n}", std::process::id()));
            match fs::create_dir(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(ArtifactError::Io {
                        path: dir,
                        source: e,
                    });
                }
            }
        }
        Err(ArtifactError::Io {
            path: base,
            source: io::Error::other("no free scratch name"),
        })
    }

    /// Hashes `dir` and moves it into the store under its digest (dropping it if that digest is
    /// already stored), then makes the stored copy read-only.
    pub fn put(&self, dir: &Path) -> Result<ArtifactDigest, ArtifactError> {
        let digest = hash_tree(dir)?;
        let dest = self.path_of(&digest);
        if dest.exists() {
            fs::remove_dir_all(dir).map_err(io_at(dir))?;
        } else {
            fs::rename(dir, &dest).map_err(io_at(&dest))?;
            seal(&dest)?;
        }
        Ok(digest)
    }

    /// The stored folder of `digest`, after checking its bytes still hash to it.
    pub fn verified(&self, digest: &ArtifactDigest) -> Result<PathBuf, ArtifactError> {
        let path = self.path_of(digest);
        if !path.is_dir() {
            return Err(ArtifactError::Missing {
                digest: digest.clone(),
            });
        }
        let actual = hash_tree(&path)?;
        if &actual != digest {
            return Err(ArtifactError::Changed {
                expected: digest.clone(),
                actual,
            });
        }
        Ok(path)
    }

    /// A private copy of `digest`'s folder in a fresh scratch folder, hashed after copying:
    /// the bytes a run mounts are the bytes that were checked, whatever happens to the store
    /// in between. The caller removes the copy when the run is over.
    pub fn checked_copy(&self, digest: &ArtifactDigest) -> Result<PathBuf, ArtifactError> {
        let stored = self.path_of(digest);
        if !stored.is_dir() {
            return Err(ArtifactError::Missing {
                digest: digest.clone(),
            });
        }
        let copy = self.scratch("artifact")?;
        let checked = copy_tree(&stored, &copy).and_then(|()| hash_tree(&copy));
        match checked {
            Ok(actual) if &actual == digest => Ok(copy),
            Ok(actual) => {
                let _ = fs::remove_dir_all(&copy);
                Err(ArtifactError::Changed {
                    expected: digest.clone(),
                    actual,
                })
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&copy);
                Err(e)
            }
        }
    }

    /// Where `digest` is (or would be) stored.
    pub fn path_of(&self, digest: &ArtifactDigest) -> PathBuf {
        self.root.join(digest.as_str())
    }
}

/// Copies the tree at `from` into the empty folder `to`: folders, files with their modes,
/// symlinks as links (never followed).
fn copy_tree(from: &Path, to: &Path) -> Result<(), ArtifactError> {
    let mut entries = list_tree(from)?;
    entries.sort_by(|a, b| a.path().cmp(b.path()));
    for entry in entries {
        let dest = to.join(entry.path());
        match &entry {
            TreeEntry::Dir { .. } => fs::create_dir_all(&dest).map_err(io_at(&dest))?,
            TreeEntry::File { path, .. } => {
                let src = from.join(path);
                fs::copy(&src, &dest).map_err(io_at(&src))?;
            }
            TreeEntry::Symlink { target, .. } => {
                std::os::unix::fs::symlink(target, &dest).map_err(io_at(&dest))?;
            }
        }
    }
    Ok(())
}

/// Removes write bits below `root` (folders last), so a stray writer fails loudly.
fn seal(root: &Path) -> Result<(), ArtifactError> {
    for entry in list_tree(root)? {
        if let TreeEntry::File { path, .. } = &entry {
            let p = root.join(path);
            let mode = fs::metadata(&p).map_err(io_at(&p))?.permissions().mode();
            fs::set_permissions(&p, fs::Permissions::from_mode(mode & !0o222))
                .map_err(io_at(&p))?;
        }
    }
    Ok(())
}
