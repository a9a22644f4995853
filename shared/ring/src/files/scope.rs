//! Whether a path is in a token's scope: pure decisions, made before anything touches the disk.

use super::FilesError;
use crate::path::RelPath;
use crate::tokens::FilesToken;

/// A path the token may read: anything in the ACR except `.l3m/`.
pub(super) fn readable(text: &str) -> Result<RelPath, FilesError> {
    let path = RelPath::parse(text)?;
    refuse_harness(&path)?;
    Ok(path)
}

/// A path the token may write: readable, and at or below one of its write roots.
pub(super) fn writable(token: &FilesToken, text: &str) -> Result<RelPath, FilesError> {
    let path = RelPath::parse(text)?;
    check_writable(token, &path)?;
    Ok(path)
}

/// The write check on an already parsed path (journal entries carry parsed paths).
pub(super) fn check_writable(token: &FilesToken, path: &RelPath) -> Result<(), FilesError> {
    refuse_harness(path)?;
    if token.write_roots().iter().any(|root| path.is_within(root)) {
        Ok(())
    } else {
        Err(FilesError::OutsideWriteRoots {
            path: path.to_string(),
            roots: token
                .write_roots()
                .iter()
                .map(ToString::to_string)
                .collect(),
        })
    }
}

fn refuse_harness(path: &RelPath) -> Result<(), FilesError> {
    if path.is_harness() {
        Err(FilesError::Harness {
            path: path.to_string(),
        })
    } else {
        Ok(())
    }
}
