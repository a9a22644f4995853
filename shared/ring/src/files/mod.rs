//! The tame file provider: reads over the ACR, journaled writes under the write roots.
//!
//! Every call takes a [`FilesToken`] and an ACR-relative path string, and refuses — with a
//! [`FilesError`] naming the boundary — before touching anything:
//! - **path**: `..`, absolute paths, NUL ([`crate::path::RelPath`]);
//! - **harness**: anything in `.l3m/`, for reads as for writes;
//! - **write roots**: writes outside every root of the token;
//! - **symlink**: a symlink at *any* component, for reads as for writes, even one pointing inside
//!   the ACR; enforced atomically by the kernel at open (see `open`), so a link swapped in during
//!   a call cannot redirect it;
//! - **file type**: fifos, sockets and devices, checked on the open handle before any byte moves.
//!
//! Edits ([`write()`], [`remove`], [`mkdir`]) record an [`UndoEntry`](crate::undo::UndoEntry)
//! with the path's prior state *before* changing it; [`restore`] puts entries back, newest
//! first. A new file is written beside its name and renamed into place, so it appears whole; an
//! existing regular file is truncated and rewritten in place, after its type and link count are
//! checked on the open handle (a file with other hard links is replaced by a rename instead, so
//! nothing is ever written through a link). A reader racing a write may see it partly done; a
//! crash mid-write leaves a file that rewind restores. The write itself is not fsynced: its undo
//! entry is durable, which is what rewind needs.

mod edit;
mod error;
mod open;
mod scope;

use std::fmt;
use std::io::Read;

use cap_std::fs::{FileType, FileTypeExt};

use crate::path::HARNESS_DIR;
use crate::tokens::FilesToken;

pub use edit::{check_restorable, mkdir, remove, restore, write};
pub use error::FilesError;

/// What is at a path, as `lstat` sees it (links are never followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Something the platform reports but this list does not name.
    Unknown,
}

impl NodeKind {
    fn of(t: FileType) -> Self {
        if t.is_file() {
            Self::File
        } else if t.is_dir() {
            Self::Dir
        } else if t.is_symlink() {
            Self::Symlink
        } else if t.is_fifo() {
            Self::Fifo
        } else if t.is_socket() {
            Self::Socket
        } else if t.is_char_device() {
            Self::CharDevice
        } else if t.is_block_device() {
            Self::BlockDevice
        } else {
            Self::Unknown
        }
    }
}

impl fmt::Display for NodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::File => "regular file",
            Self::Dir => "directory",
            Self::Symlink => "symbolic link",
            Self::Fifo => "fifo",
            Self::Socket => "socket",
            Self::CharDevice => "character device",
            Self::BlockDevice => "block device",
            Self::Unknown => "file of unknown type",
        })
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListEntry {
    /// The entry's name within the directory.
    pub name: String,
    /// What it is (links are reported, not followed).
    pub kind: NodeKind,
}

/// A directory's entries, sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// The entries whose names are UTF-8 with no control or invisible format character (the only
    /// names the provider can address).
    pub entries: Vec<ListEntry>,
    /// How many entries were left out because their names are not UTF-8 or hold a control or
    /// invisible format character (see [`crate::path::is_unprintable`]).
    pub unaddressable: usize,
}

/// Reads a regular file anywhere in the ACR except `.l3m/`.
pub fn read(token: &FilesToken, path: &str) -> Result<Vec<u8>, FilesError> {
    let path = scope::readable(path)?;
    let (mut file, meta) = open::file(token.acr(), &path, &path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|source| FilesError::Io {
            path: path.to_string(),
            op: "read",
            source,
        })?;
    Ok(bytes)
}

/// Lists a directory anywhere in the ACR except `.l3m/` (which a listing of the ACR root omits).
pub fn list(token: &FilesToken, path: &str) -> Result<Listing, FilesError> {
    let path = scope::readable(path)?;
    let dir = open::dir(token.acr(), &path, &path)?;
    let io = |op| {
        let path = path.to_string();
        move |source| FilesError::Io { path, op, source }
    };
    let mut listing = Listing::default();
    for entry in dir.entries().map_err(io("list"))? {
        let entry = entry.map_err(io("list"))?;
        let kind = NodeKind::of(entry.file_type().map_err(io("stat an entry"))?);
        match entry.file_name().into_string() {
            Ok(name) if path.is_root() && name == HARNESS_DIR => {}
            Ok(name) if name.chars().any(crate::path::is_unprintable) => {
                listing.unaddressable += 1;
            }
            Ok(name) => listing.entries.push(ListEntry { name, kind }),
            Err(_) => listing.unaddressable += 1,
        }
    }
    listing.entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(listing)
}
