//! The files token: the ACR, opened once at mint, and the write roots inside it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::Dir;
use l3m_core::axis::Axis;

use super::{TokenError, narrow_set};
use crate::path::RelPath;

/// The right to read the ACR (except `.l3m/`) and to write under its write roots. It holds the
/// ACR as an open `cap_std::fs::Dir`, so no provider call ever resolves a path from `/`.
#[derive(Debug)]
pub struct FilesToken {
    /// The ACR, opened once at mint; shared with tokens narrowed from this one.
    acr: Arc<Dir>,
    /// Where the ACR was opened from, for messages only; never reopened.
    acr_path: PathBuf,
    /// Where writes may land, relative to the ACR; never the ACR itself or `.l3m/`.
    write_roots: BTreeSet<RelPath>,
}

impl FilesToken {
    /// Made only by [`super::mint`] and [`FilesToken::narrow`].
    pub(crate) fn new(acr: Arc<Dir>, acr_path: PathBuf, write_roots: BTreeSet<RelPath>) -> Self {
        Self {
            acr,
            acr_path,
            write_roots,
        }
    }

    /// The ACR's path as it was opened at mint (for messages; providers use the open handle).
    pub fn acr_path(&self) -> &Path {
        &self.acr_path
    }

    /// The write roots, relative to the ACR.
    pub fn write_roots(&self) -> &BTreeSet<RelPath> {
        &self.write_roots
    }

    /// A token for a sub-tool that may write only under `roots`, each of which must lie within
    /// one of this token's roots. Reads keep ranging over the ACR.
    pub fn narrow(&self, roots: &[&str]) -> Result<FilesToken, TokenError> {
        let asked = parse_roots(roots)?;
        let roots = narrow_set(Axis::Files, &self.write_roots, asked, |held, asked| {
            asked.is_within(held)
        })?;
        Ok(Self::new(
            Arc::clone(&self.acr),
            self.acr_path.clone(),
            roots,
        ))
    }

    /// The open ACR, for the providers.
    pub(crate) fn acr(&self) -> &Dir {
        &self.acr
    }
}

/// Checks write roots: each ACR-relative, below the ACR itself, outside `.l3m/`.
pub(super) fn parse_roots<S: AsRef<str>>(roots: &[S]) -> Result<BTreeSet<RelPath>, TokenError> {
    roots
        .iter()
        .map(|root| {
            let root = root.as_ref();
            let path = RelPath::parse(root).map_err(|source| TokenError::Root {
                root: root.into(),
                source,
            })?;
            if path.is_root() {
                Err(TokenError::RootIsAcr { root: root.into() })
            } else if path.is_harness() {
                Err(TokenError::RootIsHarness { root: root.into() })
            } else {
                Ok(path)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use cap_std::ambient_authority;

    fn token(roots: &[&str]) -> (tempfile::TempDir, FilesToken) {
        let dir = tempfile::tempdir().unwrap();
        let acr = Dir::open_ambient_dir(dir.path(), ambient_authority()).unwrap();
        let roots = parse_roots(roots).unwrap();
        let t = FilesToken::new(Arc::new(acr), dir.path().into(), roots);
        (dir, t)
    }

    #[test]
    fn narrowing_to_a_subdirectory_is_allowed() {
        let (_d, t) = token(&["workspace", "agent"]);
        let n = t.narrow(&["workspace/src"]).unwrap();
        let roots: Vec<_> = n.write_roots().iter().map(RelPath::as_str).collect();
        assert_eq!(roots, ["workspace/src"]);
        assert_eq!(n.acr_path(), t.acr_path());
    }

    #[test]
    fn narrowing_never_widens() {
        let (_d, t) = token(&["workspace/src"]);
        let err = t.narrow(&["workspace"]).unwrap_err();
        assert!(
            matches!(err, TokenError::Widening { axis: Axis::Files, ref asked, .. } if asked == "workspace")
        );
        assert!(t.narrow(&["workspace/srcx"]).is_err());
        assert!(t.narrow(&["workspace/src/../.."]).is_err());
    }
}
