//! Why the file provider refused or failed a call; each refusal names the boundary that stopped it.

use l3m_core::axis::Axis;
use l3m_core::log::Refusal;

use crate::path::PathError;
use crate::undo::UndoError;

use super::NodeKind;

/// A file provider call that did not happen. Refusals leave the world unchanged: every check
/// runs before the journal entry, and the journal entry before the edit.
#[derive(Debug, thiserror::Error)]
pub enum FilesError {
    /// The path boundary: `..`, an absolute path or a NUL byte.
    #[error("refused by the path boundary: {0}")]
    Path(#[from] PathError),
    /// The harness boundary: `.l3m/` is the harness's, and agents can read or write nothing there.
    #[error(
        "refused by the harness boundary: `{path}` lies in `.l3m/`, which agents can neither read nor write"
    )]
    Harness {
        /// The path asked for.
        path: String,
    },
    /// The write-root boundary: writes land only under the token's write roots.
    #[error("refused by the write-root boundary: `{path}` is outside every write root {roots:?}")]
    OutsideWriteRoots {
        /// The path asked for.
        path: String,
        /// The token's write roots.
        roots: Vec<String>,
    },
    /// The symlink boundary: no component of a path the provider acts on may be a symlink.
    #[error(
        "refused by the symlink boundary: `{at}` on the way to `{path}` is a symbolic link; the provider follows none"
    )]
    Symlink {
        /// The path asked for.
        path: String,
        /// The component found to be a link.
        at: String,
    },
    /// The file-type boundary: fifos, sockets and devices are never opened for content.
    #[error("refused by the file-type boundary: `{path}` is a {kind}, not a regular file")]
    SpecialFile {
        /// The path asked for.
        path: String,
        /// What is there instead.
        kind: NodeKind,
    },
    /// A file was asked for, and a directory is there.
    #[error("`{path}` is a directory, not a file")]
    NotAFile {
        /// The path asked for.
        path: String,
    },
    /// A directory was needed, and `at` is not one.
    #[error("`{at}` on the way to `{path}` is not a directory")]
    NotADirectory {
        /// The path asked for.
        path: String,
        /// The component that is not a directory.
        at: String,
    },
    /// Nothing is at the path (or at one of its parents).
    #[error("`{path}` does not exist")]
    NotFound {
        /// The path asked for.
        path: String,
    },
    /// `mkdir` of a path that already holds something.
    #[error("`{path}` already exists (a {kind})")]
    AlreadyExists {
        /// The path asked for.
        path: String,
        /// What is there.
        kind: NodeKind,
    },
    /// Removing a directory that still has entries; remove them first, each one journaled.
    #[error("`{path}` is a directory that is not empty; remove its entries first")]
    DirNotEmpty {
        /// The path asked for.
        path: String,
    },
    /// The undo chain could not record the edit, so the edit was not made.
    #[error("`{path}` was not changed because the undo chain refused the entry: {source}")]
    Journal {
        /// The path asked for.
        path: String,
        /// The journal's error.
        source: UndoError,
    },
    /// The OS refused an operation the checks allowed.
    #[error("`{path}`: {op} failed: {source}")]
    Io {
        /// The path asked for.
        path: String,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

impl FilesError {
    /// The boundary that refused, when this is a refusal (not a failure of the disk).
    pub fn refusal(&self) -> Option<Refusal> {
        let boundary = match self {
            FilesError::Path(_) => "path",
            FilesError::Harness { .. } => "harness",
            FilesError::OutsideWriteRoots { .. } => "write-root",
            FilesError::Symlink { .. } => "symlink",
            FilesError::SpecialFile { .. } => "file-type",
            _ => return None,
        };
        Some(Refusal::new(boundary, Some(Axis::Files)))
    }
}
