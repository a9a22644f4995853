//! Journaled edits and their undoing.
//!
//! Each edit opens the parent directory once (beneath the ACR, no links), and does everything
//! else relative to that open handle with single-component names: capture the prior state,
//! journal it, then change the leaf. A directory swapped for a symlink after the parent was
//! opened does not matter: the handle still names the directory that was checked.

use std::io::{Read, Write};

use cap_std::fs::{Dir, OpenOptions, Permissions, PermissionsExt};

use super::open::Overwrite;
use super::{FilesError, NodeKind, open, scope};
use crate::path::RelPath;
use crate::tokens::FilesToken;
use crate::undo::{EntryId, Prior, Undo, UndoEntry, UndoStore};

/// Permission bits the provider records and writes; setuid, setgid and sticky never.
const MODE_MASK: u32 = 0o777;

/// Writes `bytes` as the whole content of a file under a write root, creating it or replacing
/// it (its permission bits are kept). Its parent directory must exist. Journaled first.
pub fn write(
    token: &FilesToken,
    path: &str,
    bytes: &[u8],
    journal: &dyn UndoStore,
) -> Result<(), FilesError> {
    let path = scope::writable(token, path)?;
    let target = Target::open(token, &path)?;
    let prior = target.capture()?;
    let mode = match &prior {
        Prior::Absent => None,
        Prior::File { mode, .. } => Some(*mode),
        Prior::Dir { .. } => {
            return Err(FilesError::NotAFile {
                path: path.to_string(),
            });
        }
    };
    let id = journal_before(journal, &path, prior)?;
    target.replace(bytes, mode, id)
}

/// Removes a file, or an empty directory, under a write root. Journaled first.
pub fn remove(token: &FilesToken, path: &str, journal: &dyn UndoStore) -> Result<(), FilesError> {
    let path = scope::writable(token, path)?;
    let target = Target::open(token, &path)?;
    let prior = target.capture()?;
    match prior {
        Prior::Absent => {
            return Err(FilesError::NotFound {
                path: path.to_string(),
            });
        }
        Prior::Dir { .. } if !target.is_empty_dir()? => {
            return Err(FilesError::DirNotEmpty {
                path: path.to_string(),
            });
        }
        Prior::File { .. } | Prior::Dir { .. } => {}
    }
    journal_before(journal, &path, prior.clone())?;
    target.unlink(&prior)
}

/// Creates one directory under a write root (its parent must exist). Journaled first.
pub fn mkdir(token: &FilesToken, path: &str, journal: &dyn UndoStore) -> Result<(), FilesError> {
    let path = scope::writable(token, path)?;
    let target = Target::open(token, &path)?;
    if let Some(kind) = target.kind()? {
        return Err(FilesError::AlreadyExists {
            path: path.to_string(),
            kind,
        });
    }
    journal_before(journal, &path, Prior::Absent)?;
    target.create_dir(None)
}

/// Puts back what the path entries among `entries` recorded, newest first, so the tree is as it
/// was before the oldest of them. Every path is checked against the token before anything
/// changes. A temporary file an interrupted write left behind is removed with its entry. Restore
/// stops at the first entry it cannot put back (say, a symlink someone planted at its path),
/// leaving the newer ones restored; once the obstacle is gone, restoring the same entries again
/// finishes the job, since putting back an entry already put back changes nothing.
///
/// Branch moves among `entries` are the git provider's to restore; [`crate::rewind::restore`]
/// restores both kinds, checking the branches first.
pub fn restore(token: &FilesToken, entries: &[UndoEntry]) -> Result<(), FilesError> {
    let paths: Vec<(EntryId, &RelPath, &Prior)> = entries
        .iter()
        .filter_map(|e| match &e.undo {
            Undo::Path { path, prior } => Some((e.id, path, prior)),
            Undo::Ref(_) => None,
        })
        .collect();
    for (_, path, _) in &paths {
        scope::check_writable(token, path)?;
    }
    for (id, path, prior) in paths.into_iter().rev() {
        let target = Target::open(token, path)?;
        target.remove_stale_temp(id)?;
        match (prior, target.kind()?) {
            (_, Some(kind)) if !matches!(kind, NodeKind::File | NodeKind::Dir) => {
                return Err(refusal(path, kind));
            }
            (Prior::Absent, None) => {}
            (Prior::Absent, Some(_)) => target.unlink(prior)?,
            (Prior::File { .. }, Some(NodeKind::Dir)) => {
                return Err(FilesError::NotAFile {
                    path: path.to_string(),
                });
            }
            (Prior::File { bytes, mode }, _) => target.replace(bytes, Some(*mode), id)?,
            (Prior::Dir { .. }, Some(NodeKind::File)) => {
                return Err(FilesError::NotADirectory {
                    path: path.to_string(),
                    at: path.to_string(),
                });
            }
            (Prior::Dir { mode }, None) => target.create_dir(Some(*mode))?,
            (Prior::Dir { mode }, Some(_)) => target.set_dir_mode(*mode)?,
        }
    }
    Ok(())
}

/// Checks that every path entry among `entries` may be restored under `token`, changing nothing.
pub fn check_restorable(token: &FilesToken, entries: &[UndoEntry]) -> Result<(), FilesError> {
    entries.iter().try_for_each(|e| match &e.undo {
        Undo::Path { path, .. } => scope::check_writable(token, path),
        Undo::Ref(_) => Ok(()),
    })
}

/// The refusal for a link or special file found where the provider would act.
fn refusal(path: &RelPath, kind: NodeKind) -> FilesError {
    match kind {
        NodeKind::Symlink => FilesError::Symlink {
            path: path.to_string(),
            at: path.to_string(),
        },
        kind => FilesError::SpecialFile {
            path: path.to_string(),
            kind,
        },
    }
}

/// Records the prior state of `path`, durably, and returns the entry's id.
fn journal_before(
    journal: &dyn UndoStore,
    path: &RelPath,
    prior: Prior,
) -> Result<EntryId, FilesError> {
    let refused = |source| FilesError::Journal {
        path: path.to_string(),
        source,
    };
    let entry = UndoEntry {
        id: journal.next_id().map_err(refused)?,
        undo: Undo::Path {
            path: path.clone(),
            prior,
        },
        at_ms: l3m_core::clock::now_ms(),
    };
    journal.record(&entry).map_err(refused)?;
    Ok(entry.id)
}

/// The name of the temporary file a write of entry `id` goes through.
fn temp_name(id: EntryId) -> String {
    format!(".l3m-tmp-{id}")
}

/// An edit's target: its parent directory, opened once, and its name in it.
struct Target<'a> {
    parent: Dir,
    leaf: RelPath,
    path: &'a RelPath,
}

impl<'a> Target<'a> {
    fn open(token: &FilesToken, path: &'a RelPath) -> Result<Self, FilesError> {
        let (parent_path, leaf) = path.split_leaf().ok_or_else(|| FilesError::NotAFile {
            path: path.to_string(),
        })?;
        // Refusals on the way name the path asked for, and the component that refused it.
        let full = path.to_string();
        let parent = open::dir(token.acr(), &parent_path, &parent_path).map_err(|e| match e {
            FilesError::NotFound { .. } => FilesError::NotFound { path: full },
            FilesError::Symlink { at, .. } => FilesError::Symlink { path: full, at },
            FilesError::NotADirectory { at, .. } => FilesError::NotADirectory { path: full, at },
            other => other,
        })?;
        Ok(Self {
            parent,
            leaf: RelPath::parse(leaf)?,
            path,
        })
    }

    fn io(&self, op: &'static str) -> impl FnOnce(std::io::Error) -> FilesError {
        move |source| FilesError::Io {
            path: self.path.to_string(),
            op,
            source,
        }
    }

    /// What is at the leaf now, without following a link; `None` if nothing.
    fn kind(&self) -> Result<Option<NodeKind>, FilesError> {
        match self.parent.symlink_metadata(self.leaf.as_str()) {
            Ok(meta) => Ok(Some(NodeKind::of(meta.file_type()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io("stat")(e)),
        }
    }

    /// The leaf's state as an undo entry records it; links and special files are refused.
    fn capture(&self) -> Result<Prior, FilesError> {
        let meta = match self.parent.symlink_metadata(self.leaf.as_str()) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Prior::Absent),
            Err(e) => return Err(self.io("stat")(e)),
        };
        match NodeKind::of(meta.file_type()) {
            NodeKind::Dir => Ok(Prior::Dir {
                mode: meta.permissions().mode() & MODE_MASK,
            }),
            NodeKind::File => {
                let (mut file, meta) = open::file(&self.parent, &self.leaf, self.path)?;
                let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
                file.read_to_end(&mut bytes)
                    .map_err(self.io("read the prior content"))?;
                Ok(Prior::File {
                    bytes,
                    mode: meta.permissions().mode() & MODE_MASK,
                })
            }
            kind => Err(refusal(self.path, kind)),
        }
    }

    fn is_empty_dir(&self) -> Result<bool, FilesError> {
        let dir = open::dir(&self.parent, &self.leaf, self.path)?;
        let mut entries = dir.entries().map_err(self.io("list"))?;
        Ok(entries.next().is_none())
    }

    /// Makes the leaf hold `bytes` (with permission bits `mode`, if given). An existing regular
    /// file with one link is truncated and written in place: a rename over it would cost ext4 a
    /// data flush per write (its `auto_da_alloc`), and the journal already holds its prior
    /// content. A new file, or one with other hard links (which an in-place write would write
    /// through), is written beside the leaf and renamed into place; a rename replaces a link
    /// rather than following it.
    fn replace(&self, bytes: &[u8], mode: Option<u32>, id: EntryId) -> Result<(), FilesError> {
        match open::for_overwrite(&self.parent, &self.leaf, self.path)? {
            Overwrite::InPlace(mut file, meta) => {
                let current = meta.permissions().mode() & MODE_MASK;
                file.set_len(0)
                    .and_then(|()| file.write_all(bytes))
                    .and_then(|()| match mode {
                        Some(mode) if mode & MODE_MASK != current => {
                            file.set_permissions(Permissions::from_mode(mode & MODE_MASK))
                        }
                        _ => Ok(()),
                    })
                    .map_err(self.io("write"))
            }
            Overwrite::Absent | Overwrite::Linked => self.replace_by_rename(bytes, mode, id),
        }
    }

    fn replace_by_rename(
        &self,
        bytes: &[u8],
        mode: Option<u32>,
        id: EntryId,
    ) -> Result<(), FilesError> {
        let temp = temp_name(id);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = self
            .parent
            .open_with(&temp, &options)
            .map_err(self.io("create the temporary file"))?;
        let written = file
            .write_all(bytes)
            .and_then(|()| match mode {
                Some(mode) => file.set_permissions(Permissions::from_mode(mode & MODE_MASK)),
                None => Ok(()),
            })
            .and_then(|()| {
                drop(file);
                self.parent.rename(&temp, &self.parent, self.leaf.as_str())
            });
        written.map_err(|e| {
            // Best effort: the entry is journaled, and restore removes the leftover anyway.
            let _leftover = self.parent.remove_file(&temp);
            self.io("write")(e)
        })
    }

    /// Removes the leaf: a file, or (for a `Dir` prior) an empty directory.
    fn unlink(&self, prior: &Prior) -> Result<(), FilesError> {
        let removed = match (prior, self.kind()?) {
            (Prior::Dir { .. }, _) | (Prior::Absent, Some(NodeKind::Dir)) => {
                self.parent.remove_dir(self.leaf.as_str())
            }
            _ => self.parent.remove_file(self.leaf.as_str()),
        };
        removed.map_err(|e| {
            if e.kind() == std::io::ErrorKind::DirectoryNotEmpty {
                FilesError::DirNotEmpty {
                    path: self.path.to_string(),
                }
            } else {
                self.io("remove")(e)
            }
        })
    }

    fn create_dir(&self, mode: Option<u32>) -> Result<(), FilesError> {
        self.parent
            .create_dir(self.leaf.as_str())
            .map_err(self.io("create the directory"))?;
        match mode {
            Some(mode) => self.set_dir_mode(mode),
            None => Ok(()),
        }
    }

    fn set_dir_mode(&self, mode: u32) -> Result<(), FilesError> {
        let dir = open::dir(&self.parent, &self.leaf, self.path)?;
        let handle = cap_std::fs::File::from_std(dir.into_std_file());
        handle
            .set_permissions(Permissions::from_mode(mode & MODE_MASK))
            .map_err(self.io("set the directory's mode"))
    }

    fn remove_stale_temp(&self, id: EntryId) -> Result<(), FilesError> {
        let temp = temp_name(id);
        match self.parent.symlink_metadata(&temp) {
            Ok(meta) if meta.is_file() => self
                .parent
                .remove_file(&temp)
                .map_err(self.io("remove a leftover temporary file")),
            _ => Ok(()),
        }
    }
}
