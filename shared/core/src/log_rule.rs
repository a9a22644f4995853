//! What hubd accepts as a Log record, defined once: hubd's gate refuses by these rules, and the
//! sequencer builds its records as [`Journaled`], which only a record passing them can become.
//!
//! A record hubd refuses stops its sequencer (the fold is then ahead of the Log), and a record
//! made of a model's text would be refused again at every wake. So the rules a record must pass
//! are not repeated in the writer as a convention: the writer holds [`Journaled`] records, whose
//! one constructor runs the same checks as hubd's gate ([`check_line`], the body's own
//! [`check`](crate::log::RecordBody::check), [`is_one_line`] on the commit subject hubd will
//! write from it), so the two cannot drift.
//!
//! The rules:
//! - the rendered line holds no line break and is at most
//!   [`MAX_STORED_LINE`](record_format::MAX_STORED_LINE) bytes;
//! - the body holds on its own at its seq (a rewind points back, tiers follow footprints, ...);
//! - the commit subject [`story::subject`] writes for it is one line ([`is_one_line`]), as the
//!   store requires of every commit message.
//!
//! One append carries at most [`MAX_APPEND_BYTES`] of lines, so its bus message fits.

use crate::log::{LogError, Record};
use crate::record_format;
use crate::story;

/// The most bytes of record lines one Log append carries: with its envelope, the append's
/// message stays under the bus's 1 MiB limit. A writer with more splits them over appends.
pub const MAX_APPEND_BYTES: usize = 3 * record_format::MAX_STORED_LINE;

/// Whether `summary` can be a commit's subject: non-empty, and no control character but a tab,
/// so `git log --oneline` reads one line per write. The store refuses any other.
pub fn is_one_line(summary: &str) -> bool {
    !summary.trim().is_empty() && !summary.chars().any(|c| c.is_control() && c != '\t')
}

/// Why a record cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The rendered line holds a line break, so it would read back as two records.
    #[error("the record contains a line break; each record is one JSON line")]
    LineBreak,
    /// The rendered line is longer than one stored line may be.
    #[error("the record is {len} bytes, over the limit of {limit} bytes for one Log record")]
    TooLong {
        /// The line's length in bytes.
        len: usize,
        /// [`record_format::MAX_STORED_LINE`].
        limit: usize,
    },
    /// The record does not render, or its body does not hold at its seq.
    #[error(transparent)]
    Record(#[from] LogError),
    /// The commit subject hubd would write for the record is not one line.
    #[error("the record's summary is not one line: {summary:?}")]
    Summary {
        /// The subject (its first 200 characters).
        summary: String,
    },
}

/// Checks one stored line as hubd's gate does before decoding it: no line break, and at most
/// [`record_format::MAX_STORED_LINE`] bytes.
pub fn check_line(line: &str) -> Result<(), Refused> {
    if line.contains(['\n', '\r']) {
        return Err(Refused::LineBreak);
    }
    if line.len() > record_format::MAX_STORED_LINE {
        return Err(Refused::TooLong {
            len: line.len(),
            limit: record_format::MAX_STORED_LINE,
        });
    }
    Ok(())
}

/// Checks that the commit subject hubd writes for `record` is one line. A batch's subject is
/// one of its records' subjects with an ASCII count after it, so a batch of records that each
/// pass passes too.
pub fn check_summary(record: &Record) -> Result<(), Refused> {
    let subject = story::subject(std::slice::from_ref(record));
    if is_one_line(&subject) {
        Ok(())
    } else {
        Err(Refused::Summary {
            summary: subject.chars().take(200).collect(),
        })
    }
}

/// A record hubd accepts (at its seq, after the records before it): it renders to one line
/// within the limit, its body holds, and its commit subject is one line. Only [`Self::new`]
/// makes one, so a writer that holds these cannot append a record hubd refuses for its content.
#[derive(Debug, Clone, PartialEq)]
pub struct Journaled {
    record: Record,
    line: String,
}

impl Journaled {
    /// Admits `record` by the rules hubd applies, or says which it breaks.
    pub fn new(record: Record) -> Result<Journaled, Refused> {
        let line = record.to_line()?;
        check_line(&line)?;
        record.body.check(record.seq)?;
        check_summary(&record)?;
        Ok(Journaled { record, line })
    }

    /// The record.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The record as stored: one versioned JSON line, without its newline.
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The record, given back.
    pub fn into_record(self) -> Record {
        self.record
    }
}

/// `journaled` in order, grouped so each group's lines stay within [`MAX_APPEND_BYTES`]: the
/// appends a writer makes of them, each a message the bus carries.
pub fn appends(journaled: Vec<Journaled>) -> Vec<Vec<Journaled>> {
    let mut out: Vec<Vec<Journaled>> = Vec::new();
    let mut bytes = 0usize;
    for j in journaled {
        let len = j.line.len();
        match out.last_mut() {
            Some(batch) if bytes.saturating_add(len) <= MAX_APPEND_BYTES => {
                bytes += len;
                batch.push(j);
            }
            _ => {
                bytes = len;
                out.push(vec![j]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{CallId, RecordBody, ToolUseId};

    #[test]
    fn a_summary_with_a_control_character_is_not_one_line() {
        assert!(is_one_line("reply: hello\tthere"));
        assert!(!is_one_line(" "));
        assert!(!is_one_line("a\u{1b}[2Jb"));
        assert!(!is_one_line("a\nb"));
    }

    #[test]
    fn a_record_hubd_would_refuse_is_not_journaled() {
        let call = CallId::new("c1").unwrap();
        let escape = Record::fixture(
            3,
            RecordBody::CallFailed {
                call: call.clone(),
                error: "boom \u{1b}[2J".into(),
                retryable: false,
            },
        );
        assert!(matches!(
            Journaled::new(escape),
            Err(Refused::Summary { .. })
        ));
        let name = Record::fixture(
            3,
            RecordBody::ToolResult {
                id: ToolUseId::new("t1").unwrap(),
                output: "ok".into(),
                is_error: false,
                effects: vec![],
                refusal: None,
            },
        );
        assert!(Journaled::new(name).is_ok());
        let huge = Record::fixture(
            3,
            RecordBody::CallFailed {
                call,
                error: "x".repeat(record_format::MAX_STORED_LINE),
                retryable: false,
            },
        );
        assert!(matches!(Journaled::new(huge), Err(Refused::TooLong { .. })));
        let back = Record::fixture(
            3,
            RecordBody::Rewind {
                to: 3,
                reason: "r".into(),
            },
        );
        assert!(matches!(Journaled::new(back), Err(Refused::Record(_))));
    }

    #[test]
    fn appends_keep_order_and_stay_within_the_message() {
        let journaled: Vec<Journaled> = (0..9)
            .map(|seq| {
                let text = "y".repeat(200 * 1024);
                Journaled::new(Record::fixture(
                    seq,
                    RecordBody::UserLine {
                        from: crate::names::Entity::parse("human:alice").unwrap(),
                        text,
                    },
                ))
                .unwrap()
            })
            .collect();
        let appends = appends(journaled);
        assert_eq!(appends.len(), 3);
        let seqs: Vec<u64> = appends.iter().flatten().map(|j| j.record().seq).collect();
        assert_eq!(seqs, (0..9).collect::<Vec<_>>());
        for batch in &appends {
            let bytes: usize = batch.iter().map(|j| j.line().len()).sum();
            assert!(bytes <= MAX_APPEND_BYTES, "{bytes}");
        }
    }
}
