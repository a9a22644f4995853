//! The content address of an artifact, and the canonical listing it is the hash of.
//!
//! An artifact is a directory. Its digest is blake3 over [`tree_manifest`]: one line per entry,
//! sorted by path, naming the entry's kind, executable bit and content hash (or link target).
//! The services walk the directory and hash; the core fixes the encoding so the builder that
//! stores an artifact and the runner that verifies it can never disagree on what was hashed.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A blake3 digest in lowercase hex: the only way an artifact is named between processes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ArtifactDigest(String);

/// A digest that is not 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a blake3 digest (64 lowercase hex digits): {found:?}")]
pub struct DigestError {
    /// What was given, cut to 80 characters.
    pub found: String,
}

impl ArtifactDigest {
    /// Parses a digest, refusing anything but 64 lowercase hex digits.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        if s.len() == 64
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(ArtifactDigest(s.to_owned()))
        } else {
            Err(DigestError {
                found: s.chars().take(80).collect(),
            })
        }
    }

    /// Wraps the 32 bytes of a hash.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        use fmt::Write as _;
        let mut hex = String::with_capacity(64);
        for b in bytes {
            let _ = write!(hex, "{b:02x}");
        }
        ArtifactDigest(hex)
    }

    /// The hex form.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ArtifactDigest {
    type Error = DigestError;
    fn try_from(s: String) -> Result<Self, DigestError> {
        ArtifactDigest::parse(&s)
    }
}

impl From<ArtifactDigest> for String {
    fn from(d: ArtifactDigest) -> String {
        d.0
    }
}

impl fmt::Display for ArtifactDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of an artifact directory, as the manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum TreeEntry {
    /// A directory.
    Dir {
        /// Path relative to the artifact root, `/`-separated.
        path: String,
    },
    /// A regular file.
    File {
        /// Path relative to the artifact root.
        path: String,
        /// Whether any execute bit is set.
        executable: bool,
        /// Its size in bytes.
        len: u64,
        /// blake3 of its bytes.
        hash: ArtifactDigest,
    },
    /// A symbolic link (never followed when hashing).
    Symlink {
        /// Path relative to the artifact root.
        path: String,
        /// What it points at, verbatim.
        target: String,
    },
}

impl TreeEntry {
    /// The entry's path.
    pub fn path(&self) -> &str {
        match self {
            TreeEntry::Dir { path }
            | TreeEntry::File { path, .. }
            | TreeEntry::Symlink { path, .. } => path,
        }
    }
}

/// The canonical bytes an artifact's digest is the blake3 of: entries sorted by path, one JSON
/// line each, so any change to a byte, a name, a mode bit or a link changes the digest.
pub fn tree_manifest(entries: &[TreeEntry]) -> Vec<u8> {
    let mut sorted: Vec<&TreeEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.path().cmp(b.path()));
    let mut out = Vec::new();
    for e in sorted {
        // Serializing a plain enum of strings, bools and integers cannot fail.
        if let Ok(line) = serde_json::to_vec(e) {
            out.extend_from_slice(&line);
        }
        out.push(b'\n');
    }
    out
}
