//! The in-memory index of one chain: its tip and which commit holds which entries. Pure.
//!
//! Entry `n` of a chain is the `n`-th JSON line over the whole chain, oldest first, 0-based. The
//! index keeps, per commit, the blob holding its lines and the range of sequence numbers they
//! take, so a read finds the blobs it needs by binary search and never walks history.

use gix::ObjectId;

use super::Tip;

/// One commit of a chain and the entries it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// The commit.
    pub commit: ObjectId,
    /// Its `records.jsonl` blob.
    pub records: ObjectId,
    /// Sequence number of the commit's first entry.
    pub first_seq: u64,
    /// How many entries the commit carries (at least one).
    pub count: u64,
}

impl Span {
    /// One past the sequence number of the commit's last entry.
    pub fn end_seq(&self) -> u64 {
        self.first_seq + self.count
    }
}

/// What the store knows about one chain, oldest commit first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChainIndex {
    spans: Vec<Span>,
}

impl ChainIndex {
    /// The index of a chain that has no commits.
    pub fn empty() -> Self {
        Self::default()
    }

    /// The commit the chain's ref points at.
    pub fn tip(&self) -> Tip {
        self.spans
            .last()
            .map_or(Tip::Absent, |span| Tip::At(span.commit))
    }

    /// Number of entries in the whole chain.
    pub fn len(&self) -> u64 {
        self.spans.last().map_or(0, Span::end_seq)
    }

    /// Whether the chain has no commits.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Every commit of the chain, oldest first.
    pub fn spans(&self) -> &[Span] {
        &self.spans
    }

    /// Records a new tip commit carrying `count` entries; returns the new span.
    pub(crate) fn push(&mut self, commit: ObjectId, records: ObjectId, count: u64) -> Span {
        let span = Span {
            commit,
            records,
            first_seq: self.len(),
            count,
        };
        self.spans.push(span);
        span
    }

    /// The commits holding entries `from..to`, oldest first; empty if the range is empty.
    pub(crate) fn covering(&self, from: u64, to: u64) -> &[Span] {
        if from >= to {
            return &[];
        }
        let start = self.spans.partition_point(|span| span.end_seq() <= from);
        let end = self.spans.partition_point(|span| span.first_seq < to);
        self.spans.get(start..end).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn oid(n: u64) -> ObjectId {
        let mut bytes = [0u8; 20];
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        ObjectId::from_bytes_or_panic(&bytes)
    }

    fn index_of(counts: &[u64]) -> ChainIndex {
        let mut index = ChainIndex::empty();
        for (i, count) in counts.iter().enumerate() {
            index.push(oid(2 * i as u64), oid(2 * i as u64 + 1), *count);
        }
        index
    }

    #[test]
    fn empty_chain_is_absent() {
        let index = ChainIndex::empty();
        assert_eq!(index.tip(), Tip::Absent);
        assert_eq!(index.len(), 0);
        assert!(index.covering(0, 1).is_empty());
    }

    #[test]
    fn an_empty_range_needs_no_commit() {
        let index = index_of(&[12, 3]);
        assert!(index.covering(11, 11).is_empty());
        assert!(index.covering(5, 2).is_empty());
        assert_eq!(index.covering(11, 12).len(), 1);
        assert_eq!(index.covering(11, 13).len(), 2);
    }

    proptest! {
        /// Pushing commits numbers their entries consecutively: each span starts where the last
        /// ended, the length is the sum of the counts and the tip is the last commit pushed.
        #[test]
        fn pushes_number_entries_consecutively(counts in proptest::collection::vec(1u64..50, 0..40)) {
            let index = index_of(&counts);
            prop_assert_eq!(index.len(), counts.iter().sum::<u64>());
            let mut next = 0;
            for span in index.spans() {
                prop_assert_eq!(span.first_seq, next);
                next = span.end_seq();
            }
            let last = counts.len().checked_sub(1).map(|i| oid(2 * i as u64));
            prop_assert_eq!(index.tip().id(), last);
        }

        /// `covering(from, to)` returns exactly the spans that hold at least one entry of
        /// `from..to`, in order (none for an empty range).
        #[test]
        fn covering_is_exactly_the_overlapping_spans(
            counts in proptest::collection::vec(1u64..20, 0..30),
            a in 0u64..700,
            b in 0u64..700,
        ) {
            let index = index_of(&counts);
            let (from, to) = (a.min(b), a.max(b));
            let expected: Vec<Span> = index
                .spans()
                .iter()
                .copied()
                .filter(|s| from < to && s.first_seq < to && from < s.end_seq())
                .collect();
            prop_assert_eq!(index.covering(from, to).to_vec(), expected);
        }
    }
}
