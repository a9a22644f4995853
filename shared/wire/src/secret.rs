//! Reading the hub secret a session is opened with, from a file only its owner may read.
//!
//! Every process that opens sessions (hubd, the sequencers, the CLI) reads it through
//! [`read`], so none of them uses a secret other local users could have read too.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a secret file was not read.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The file could not be read.
    #[error("cannot read the hub secret {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is readable (or writable) by others than its owner.
    #[error("the hub secret {} has mode {mode:o}; make it 0600 (chmod 600 {})", path.display(), path.display())]
    Exposed {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

/// The secret in `path`, trimmed, if the file is its owner's alone (no group or other bits).
pub fn read(path: &Path) -> Result<String, SecretError> {
    let failed = |source| SecretError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mode = std::fs::metadata(path)
        .map_err(failed)?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(SecretError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(std::fs::read_to_string(path)
        .map_err(failed)?
        .trim()
        .to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_file_its_owner_alone_may_read_yields_the_secret() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "abc\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read(&path).unwrap_err();
        assert!(
            matches!(err, SecretError::Exposed { mode: 0o644, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read(&path).unwrap(), "abc");
        assert!(matches!(
            read(&dir.path().join("none")),
            Err(SecretError::Read { .. })
        ));
    }
}
