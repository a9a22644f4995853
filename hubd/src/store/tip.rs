//! Where a ref points, as a compare-and-swap operand.

use std::fmt;

use gix::ObjectId;

/// The value of a ref that a write expects to replace, or that a read found.
///
/// Every write names the tip it expects, so two writers racing from the same tip cannot both
/// win: the second gets [`StoreError::Stale`](super::StoreError::Stale) with the actual tip.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tip {
    /// The ref does not exist (a chain with no commits yet).
    Absent,
    /// The ref points at this commit.
    At(ObjectId),
}

impl Tip {
    /// The commit the ref points at, if it exists.
    pub fn id(&self) -> Option<ObjectId> {
        match self {
            Tip::Absent => None,
            Tip::At(id) => Some(*id),
        }
    }
}

impl fmt::Display for Tip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tip::Absent => f.write_str("absent"),
            Tip::At(id) => write!(f, "{id}"),
        }
    }
}
