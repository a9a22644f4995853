//! The undo chain's lines: pure, so that what a crash between appends leaves is tested here.
//!
//! # Format
//! Each line of `refs/l3m/a/<agent>/_/undo` is a versioned JSON line
//! (`l3m_core::record_format`): an [`UndoEntry`], or, for an entry whose line would pass
//! [`MAX_STORED_LINE`] (a large file's prior bytes),
//! one piece of that line: `{"v":1,"piece":"<text>","of":<id>,"at":<n>,"more":<bool>}`. The
//! pieces of one entry are consecutive, numbered from 0, and the last has `"more": false`.
//!
//! A hub append is atomic, but an entry's pieces may need several appends. If the sequencer
//! dies between them, the edit never happened (it waits for the last piece), so an unfinished
//! run of pieces is dropped, at the end of the chain or where a new entry or a new first piece
//! begins. A piece that does not continue the run begun (another entry, a gap) is damage and is
//! refused.

use l3m_core::record_format::{MAX_STORED_LINE, from_line, to_line};
use serde::{Deserialize, Serialize};

use super::{EntryId, UndoEntry, UndoError};

/// The most text one piece carries: escaped into a JSON string it at most doubles, so a piece's
/// line stays under the stored limit.
pub const PIECE_BYTES: usize = MAX_STORED_LINE / 2 - 1024;

/// A slice of one entry's line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Piece {
    /// The slice.
    piece: String,
    /// The entry's id.
    of: u64,
    /// The slice's place, from 0.
    at: u64,
    /// Whether more slices follow.
    more: bool,
}

/// The chain lines that store `entry`: one, or its pieces.
pub fn encode(entry: &UndoEntry) -> Result<Vec<String>, UndoError> {
    let line = to_line(entry).map_err(UndoError::Encode)?;
    if line.len() <= MAX_STORED_LINE {
        return Ok(vec![line]);
    }
    let slices = slices(&line, PIECE_BYTES);
    let last = slices.len() - 1;
    slices
        .into_iter()
        .enumerate()
        .map(|(at, slice)| {
            to_line(&Piece {
                piece: slice.to_owned(),
                of: entry.id.0,
                at: at as u64,
                more: at < last,
            })
            .map_err(UndoError::Encode)
        })
        .collect()
}

/// `text` cut into slices of at most `max` bytes, each ending at a char boundary.
fn slices(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(head);
        rest = tail;
    }
    out
}

/// Reads a chain's lines, in order, into its entries.
#[derive(Debug, Default)]
pub struct Decoder {
    entries: Vec<UndoEntry>,
    /// The unfinished run of pieces: the entry's id, the next place, the text so far.
    run: Option<(u64, u64, String)>,
}

impl Decoder {
    /// Takes chain line `number` (0 is the first).
    pub fn push(&mut self, number: u64, line: &str) -> Result<(), UndoError> {
        let decode = |source| UndoError::Decode {
            line: number,
            source,
        };
        let Ok(piece) = from_line::<Piece>(line, 1) else {
            self.run = None;
            self.entries.push(from_line(line, 1).map_err(decode)?);
            return Ok(());
        };
        let mut text = match self.run.take() {
            _ if piece.at == 0 => String::new(),
            Some((of, at, text)) if of == piece.of && at == piece.at => text,
            _ => {
                return Err(UndoError::Corrupt {
                    line: number,
                    reason: "a piece that does not continue the entry begun before it",
                });
            }
        };
        text.push_str(&piece.piece);
        if piece.more {
            self.run = Some((piece.of, piece.at + 1, text));
            return Ok(());
        }
        let entry: UndoEntry = from_line(&text, 1).map_err(decode)?;
        if entry.id.0 != piece.of {
            return Err(UndoError::Corrupt {
                line: number,
                reason: "pieces joined into an entry with another id",
            });
        }
        self.entries.push(entry);
        Ok(())
    }

    /// The entries read; an unfinished run of pieces at the end is dropped (its edit never
    /// happened).
    pub fn finish(self) -> Vec<UndoEntry> {
        self.entries
    }
}

/// The id of the entry a line stores whole or a piece of: the last line of a chain names the
/// highest id it holds, since ids only increase.
pub fn id_of(number: u64, line: &str) -> Result<EntryId, UndoError> {
    if let Ok(piece) = from_line::<Piece>(line, 1) {
        return Ok(EntryId(piece.of));
    }
    from_line::<UndoEntry>(line, 1)
        .map(|entry| entry.id)
        .map_err(|source| UndoError::Decode {
            line: number,
            source,
        })
}

/// Reads a whole chain's lines into its entries.
pub fn decode<'a>(lines: impl IntoIterator<Item = &'a str>) -> Result<Vec<UndoEntry>, UndoError> {
    let mut decoder = Decoder::default();
    for (number, line) in (0u64..).zip(lines) {
        decoder.push(number, line)?;
    }
    Ok(decoder.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::RelPath;
    use crate::undo::{Prior, Undo};
    use proptest::prelude::*;

    fn entry(id: u64, len: usize) -> UndoEntry {
        UndoEntry {
            id: EntryId(id),
            undo: Undo::Path {
                path: RelPath::parse("workspace/big.bin").unwrap(),
                prior: Prior::File {
                    bytes: (0..len).map(|i| (i % 251) as u8).collect(),
                    mode: 0o644,
                },
            },
            at_ms: id,
        }
    }

    fn lines_of(entries: &[UndoEntry]) -> Vec<String> {
        entries.iter().flat_map(|e| encode(e).unwrap()).collect()
    }

    #[test]
    fn a_small_entry_is_one_line_and_a_large_one_pieces_that_each_fit() {
        assert_eq!(encode(&entry(1, 100)).unwrap().len(), 1);
        let big = entry(2, 3 * MAX_STORED_LINE);
        let lines = encode(&big).unwrap();
        assert!(lines.len() > 3, "{} lines", lines.len());
        assert!(lines.iter().all(|l| l.len() <= MAX_STORED_LINE));
        assert_eq!(id_of(9, lines.last().unwrap()).unwrap(), EntryId(2));
        assert_eq!(decode(lines.iter().map(String::as_str)).unwrap(), [big]);
    }

    #[test]
    fn a_piece_that_does_not_continue_its_run_is_refused() {
        let a = encode(&entry(1, 2 * MAX_STORED_LINE)).unwrap();
        let b = encode(&entry(2, 2 * MAX_STORED_LINE)).unwrap();
        let spliced = [&a[0], &b[1]];
        let err = decode(spliced.iter().map(|s| s.as_str())).unwrap_err();
        assert!(matches!(err, UndoError::Corrupt { line: 1, .. }), "{err}");
    }

    proptest! {
        /// Whatever prefix of its appends a crash leaves, the chain reads as the entries wholly
        /// before the cut, and entries appended after the crash read after them.
        #[test]
        fn a_cut_run_of_pieces_is_dropped_and_later_entries_read(
            sizes in proptest::collection::vec(prop_oneof![0usize..64, Just(MAX_STORED_LINE + 7)], 1..5),
            cut_in_last in any::<prop::sample::Index>(),
        ) {
            let entries: Vec<UndoEntry> =
                sizes.iter().enumerate().map(|(i, len)| entry(i as u64 + 1, *len)).collect();
            let (last, before) = entries.split_last().unwrap();
            let mut lines = lines_of(before);
            let last_lines = encode(last).unwrap();
            let kept = cut_in_last.index(last_lines.len());
            lines.extend(last_lines[..kept].iter().cloned());
            prop_assert_eq!(decode(lines.iter().map(String::as_str)).unwrap(), before.to_vec());

            // The restarted sequencer reuses the lost entry's id for its next entry.
            let again = entry(last.id.0, 5);
            lines.extend(encode(&again).unwrap());
            let mut want = before.to_vec();
            want.push(again);
            prop_assert_eq!(decode(lines.iter().map(String::as_str)).unwrap(), want);
        }
    }
}
