//! Trees as flat maps of files, read from a commit or from the worktree on disk, and written back.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use gix::ObjectId;
use gix::objs::tree::{Entry, EntryKind};

use super::error::{GitError, gix};

/// One file as git stores it: its mode and its blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Leaf {
    /// Blob, executable blob, symlink (or a submodule's commit, in a tree read from git).
    pub(crate) kind: EntryKind,
    /// The blob's id.
    pub(crate) id: ObjectId,
}

/// Every file of a tree, by its `/`-separated path (raw bytes: git names need not be UTF-8).
pub(crate) type Files = BTreeMap<Vec<u8>, Leaf>;

/// The files of the tree `tree` (none for an unborn branch).
pub(crate) fn of_tree(repo: &gix::Repository, tree: Option<ObjectId>) -> Result<Files, GitError> {
    let mut files = Files::new();
    if let Some(tree) = tree {
        collect_tree(repo, tree, &mut Vec::new(), &mut files)?;
    }
    Ok(files)
}

fn collect_tree(
    repo: &gix::Repository,
    tree: ObjectId,
    prefix: &mut Vec<u8>,
    files: &mut Files,
) -> Result<(), GitError> {
    let tree = repo.find_tree(tree).map_err(gix("read a tree"))?;
    let decoded = tree.decode().map_err(gix("decode a tree"))?;
    for entry in &decoded.entries {
        let len = prefix.len();
        if len > 0 {
            prefix.push(b'/');
        }
        prefix.extend_from_slice(entry.filename);
        match entry.mode.kind() {
            EntryKind::Tree => collect_tree(repo, entry.oid.to_owned(), prefix, files)?,
            kind => {
                files.insert(
                    prefix.clone(),
                    Leaf {
                        kind,
                        id: entry.oid.to_owned(),
                    },
                );
            }
        }
        prefix.truncate(len);
    }
    Ok(())
}

/// The files of the worktree at `root`, every `.git` skipped; each blob is written to the
/// object store when `write`, else only hashed. Device files, sockets and fifos are skipped.
pub(crate) fn of_worktree(
    repo: &gix::Repository,
    root: &Path,
    write: bool,
) -> Result<Files, GitError> {
    let mut files = Files::new();
    collect_dir(repo, root, &mut Vec::new(), write, &mut files)?;
    Ok(files)
}

fn collect_dir(
    repo: &gix::Repository,
    dir: &Path,
    prefix: &mut Vec<u8>,
    write: bool,
    files: &mut Files,
) -> Result<(), GitError> {
    let io = |path: &Path| {
        let shown = path.display().to_string();
        move |source| GitError::Io {
            path: shown.clone(),
            source,
        }
    };
    let mut entries = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(io(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name.as_bytes() == b".git" {
            continue;
        }
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).map_err(io(&path))?;
        let len = prefix.len();
        if len > 0 {
            prefix.push(b'/');
        }
        prefix.extend_from_slice(name.as_bytes());
        let file = if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).map_err(io(&path))?;
            Some((EntryKind::Link, target.as_os_str().as_bytes().to_vec()))
        } else if meta.is_dir() {
            collect_dir(repo, &path, prefix, write, files)?;
            None
        } else if meta.is_file() {
            let kind = if meta.permissions().mode() & 0o100 != 0 {
                EntryKind::BlobExecutable
            } else {
                EntryKind::Blob
            };
            Some((kind, std::fs::read(&path).map_err(io(&path))?))
        } else {
            tracing::debug!(path = %path.display(), "skipping a special file in the worktree");
            None
        };
        if let Some((kind, data)) = file {
            let id = if write {
                repo.write_blob(&data)
                    .map_err(gix("write a blob"))?
                    .detach()
            } else {
                gix::objs::compute_hash(repo.object_hash(), gix::objs::Kind::Blob, &data)
                    .map_err(gix("hash a blob"))?
            };
            files.insert(prefix.clone(), Leaf { kind, id });
        }
        prefix.truncate(len);
    }
    Ok(())
}

/// Writes the trees holding `files` and returns the root tree's id (the empty tree for none).
pub(crate) fn write(repo: &gix::Repository, files: &Files) -> Result<ObjectId, GitError> {
    let flat: Vec<(&[u8], Leaf)> = files.iter().map(|(p, l)| (p.as_slice(), *l)).collect();
    write_level(repo, &flat)
}

/// Writes one tree from `files`, whose paths are relative to it.
fn write_level(repo: &gix::Repository, files: &[(&[u8], Leaf)]) -> Result<ObjectId, GitError> {
    let mut entries = Vec::new();
    let mut subdirs: BTreeMap<&[u8], Vec<(&[u8], Leaf)>> = BTreeMap::new();
    for (path, leaf) in files {
        match path.iter().position(|b| *b == b'/') {
            None => entries.push(Entry {
                mode: leaf.kind.into(),
                filename: (*path).into(),
                oid: leaf.id,
            }),
            Some(slash) => subdirs
                .entry(&path[..slash])
                .or_default()
                .push((&path[slash + 1..], *leaf)),
        }
    }
    for (name, below) in subdirs {
        entries.push(Entry {
            mode: EntryKind::Tree.into(),
            filename: name.into(),
            oid: write_level(repo, &below)?,
        });
    }
    entries.sort();
    repo.write_object(&gix::objs::Tree { entries })
        .map(gix::Id::detach)
        .map_err(gix("write a tree"))
}
