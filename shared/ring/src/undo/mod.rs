//! Undo entries: what a path held, or where a branch stood, before each tame edit, recorded
//! before the edit happens.
//!
//! Every tame write, remove and mkdir first appends an [`UndoEntry`] — the path and its
//! [`Prior`] state — to an [`UndoStore`], and every commit one with the branch's move
//! ([`RefMove`]); only once `record` returns (durably) does the edit touch the disk or the ref.
//! Rewind is then [`crate::rewind::restore`] over a suffix of the entries, newest first.
//!
//! The real store is the agent's undo chain on the hub (`refs/l3m/a/<agent>/_/undo`, written by
//! the sequencer through hubd), so deleting an ACR loses nothing the harness wrote; [`lines`]
//! is its pure format. [`MemoryUndo`] keeps entries for a process that need not outlive it.

pub mod lines;
mod memory;

use l3m_core::record_format::LineError;
use serde::{Deserialize, Serialize};

use crate::path::RelPath;

pub use memory::MemoryUndo;

/// Identifies one entry within its agent's undo chain; assigned by the store, increasing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct EntryId(pub u64);

impl std::fmt::Display for EntryId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// One recorded edit: what it changed and how to put it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndoEntry {
    /// The entry's id in its chain.
    pub id: EntryId,
    /// What was edited and its state before.
    #[serde(flatten)]
    pub undo: Undo,
    /// When the entry was recorded, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// What one entry restores. Stored untagged, so a path entry reads exactly as it did before
/// branch moves were journaled (`"path"` and `"prior"` beside the id).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Undo {
    /// A path under the ACR and its state before the edit; restoring puts exactly this back.
    Path {
        /// The path edited, relative to the ACR.
        path: RelPath,
        /// Its state before the edit.
        prior: Prior,
    },
    /// A branch a tame git action moved (a commit); restoring moves it back.
    Ref(RefMove),
}

/// A local branch move, journaled before the ref is swapped: by a commit, or by a rewind moving
/// it back. Rewind moves a branch by compare-and-swap against the `new` of the branch's last
/// journaled move, so a branch someone else moved since is never clobbered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefMove {
    /// The worktree whose checked-out branch moved, relative to the ACR.
    pub worktree: RelPath,
    /// The branch's full ref name (`refs/heads/...`).
    pub branch: String,
    /// The commit it pointed at before (hex); `None` when the move created it.
    pub old: Option<String>,
    /// The commit it was moved to (hex); `None` when the move deleted it.
    pub new: Option<String>,
}

impl UndoEntry {
    /// What the entry touched, as a person reads it: the path, or the branch.
    pub fn target(&self) -> &str {
        match &self.undo {
            Undo::Path { path, .. } => path.as_str(),
            Undo::Ref(moved) => &moved.branch,
        }
    }
}

/// The state of a path before an edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Prior {
    /// Nothing was there; restoring removes what the edit created.
    Absent,
    /// A regular file with these bytes and permission bits (`0o777` mask).
    File {
        /// The file's content.
        #[serde(with = "base64_bytes")]
        bytes: Vec<u8>,
        /// Permission bits; setuid, setgid and sticky are never recorded or written.
        mode: u32,
    },
    /// An empty directory with these permission bits (a removed empty directory).
    Dir {
        /// Permission bits.
        mode: u32,
    },
}

/// Where undo entries go before the edits they describe. `record` must be durable on return:
/// the edit happens right after, and a crash in between must leave the entry behind.
pub trait UndoStore: Send + Sync {
    /// Reserves the id for the next entry.
    fn next_id(&self) -> Result<EntryId, UndoError>;
    /// Appends `entry`, durably, before the edit it describes.
    fn record(&self, entry: &UndoEntry) -> Result<(), UndoError>;
}

/// Why undo entries could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// The store did not take the entry (the hub refused or could not be reached).
    #[error("the undo chain could not take the entry: {0}")]
    Store(String),
    /// A stored line is not an entry, or a piece of one, that this build reads.
    #[error("undo chain line {line}: {source}")]
    Decode {
        /// The line's number in the chain (0 is the first).
        line: u64,
        /// What the parser said.
        source: LineError,
    },
    /// Pieces of an entry disagree (a piece for another entry before the last piece of the
    /// one begun): the chain was written by something other than the sequencer, or damaged.
    #[error("undo chain line {line}: {reason}")]
    Corrupt {
        /// The line's number in the chain.
        line: u64,
        /// What did not fit.
        reason: &'static str,
    },
    /// An entry could not be rendered as a JSON line.
    #[error("undo entry could not be encoded: {0}")]
    Encode(LineError),
    /// A previous append panicked while holding the store; its state is unknown.
    #[error("the undo store was left mid-append by a panic; reopen it")]
    Poisoned,
}

/// Serde for byte strings as standard base64, so entries stay one readable JSON line.
mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::record_format::{from_line, to_line};
    use proptest::prelude::*;

    fn prior() -> impl Strategy<Value = Prior> {
        prop_oneof![
            Just(Prior::Absent),
            (proptest::collection::vec(any::<u8>(), 0..64), 0u32..0o1000)
                .prop_map(|(bytes, mode)| Prior::File { bytes, mode }),
            (0u32..0o1000).prop_map(|mode| Prior::Dir { mode }),
        ]
    }

    #[test]
    fn entry_renders_as_a_versioned_kebab_tagged_line() {
        let e = UndoEntry {
            id: EntryId(7),
            undo: Undo::Path {
                path: RelPath::parse("workspace/a").unwrap(),
                prior: Prior::File {
                    bytes: b"hi\n".to_vec(),
                    mode: 0o644,
                },
            },
            at_ms: 12,
        };
        let line = to_line(&e).unwrap();
        assert_eq!(
            line,
            r#"{"v":1,"id":7,"path":"workspace/a","prior":{"kind":"file","bytes":"aGkK","mode":420},"at_ms":12}"#
        );
        assert_eq!(from_line::<UndoEntry>(&line, 1).unwrap(), e);
    }

    #[test]
    fn a_branch_move_renders_beside_path_entries_and_reads_back() {
        let e = UndoEntry {
            id: EntryId(8),
            undo: Undo::Ref(RefMove {
                worktree: RelPath::parse("workspace").unwrap(),
                branch: "refs/heads/l3m/a/_/work".into(),
                old: None,
                new: Some("ab".repeat(20)),
            }),
            at_ms: 3,
        };
        let line = to_line(&e).unwrap();
        assert!(line.starts_with(r#"{"v":1,"id":8,"worktree":"workspace","branch":"refs/heads/l3m/a/_/work","old":null"#), "{line}");
        assert_eq!(from_line::<UndoEntry>(&line, 1).unwrap(), e);
        assert_eq!(e.target(), "refs/heads/l3m/a/_/work");
    }

    #[test]
    fn a_line_with_a_climbing_path_or_bad_base64_is_refused() {
        let climbing = r#"{"v":1,"id":1,"path":"../x","prior":{"kind":"absent"},"at_ms":0}"#;
        assert!(from_line::<UndoEntry>(climbing, 1).is_err());
        let bad = r#"{"v":1,"id":1,"path":"a","prior":{"kind":"file","bytes":"!!","mode":420},"at_ms":0}"#;
        assert!(from_line::<UndoEntry>(bad, 1).is_err());
    }

    proptest! {
        #[test]
        fn entry_line_round_trips(id in any::<u64>(), at_ms in any::<u64>(), prior in prior(), path in "[a-z]{1,5}(/[a-z]{1,5}){0,3}") {
            let e = UndoEntry { id: EntryId(id), undo: Undo::Path { path: RelPath::parse(&path).unwrap(), prior }, at_ms };
            let line = to_line(&e).unwrap();
            prop_assert_eq!(from_line::<UndoEntry>(&line, 1).unwrap(), e);
        }
    }
}
