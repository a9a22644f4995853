//! Letters: the envelope around a body, stamped by the host.
//!
//! A letter is stored as exactly one line, its [`InboxEntry`] storage line
//! ([`Letter::render_line`]): lossless, versioned, and readable with `cat`. For `git log` and
//! terminal listings there is a second, lossy form, [`Letter::headline`], also one line. Both
//! write every line-breaking or control character as a visible escape, so no subject or body can
//! pose as a second letter or as another field.

use serde::{Deserialize, Serialize};

use super::address::Address;
use super::line::{InboxEntry, excerpt};
use super::{TokenFault, check_token};
use crate::record_format::LineError;

/// Longest letter id, in bytes.
pub const MAX_ID_LEN: usize = 128;

/// How many characters of subject (or summary, or body) a [`Letter::headline`] shows.
pub const HEADLINE_TEXT_CHARS: usize = 72;

/// Why a letter, its id or its line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LetterError {
    /// A letter id broke the id rules.
    #[error("letter id {id:?} is invalid: {fault} (use ASCII letters, digits and `-._:/`)")]
    BadId {
        /// The id as given.
        id: String,
        /// The rule it broke.
        fault: TokenFault,
    },
    /// The storage line could not be written or read.
    #[error(transparent)]
    Line(#[from] LineError),
    /// A line parsed, but as another kind of entry.
    #[error("line {line} holds a {kind} entry, not a letter")]
    NotALetter {
        /// One-based line number.
        line: usize,
        /// The kind found.
        kind: &'static str,
    },
}

/// A letter's identity, minted by the host that stamps it (the hub store), never by the sender.
///
/// At most [`MAX_ID_LEN`] bytes of ASCII letters, digits and `-._:/`, so a ULID, a hash or an
/// `agent/sequence` scheme all fit and none needs escaping anywhere.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct LetterId(String);

impl LetterId {
    /// Validates an id; the error carries the id and the rule it broke.
    pub fn parse(s: &str) -> Result<Self, LetterError> {
        check_token(s, MAX_ID_LEN, |c| {
            c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':' | '/')
        })
        .map_err(|fault| LetterError::BadId {
            id: s.to_owned(),
            fault,
        })?;
        Ok(Self(s.to_owned()))
    }

    /// The id as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

crate::string_form!(LetterId, LetterError, display);

/// A stamped letter. Build one with [`stamp`](super::stamp); store it with
/// [`Letter::render_line`], never with a bare serialiser, which would leave some line breaks raw.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Letter {
    /// Host-minted identity; read marks and replies refer to it.
    pub id: LetterId,
    /// When the host stamped it, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The true sender, as stamped by the host.
    pub from: Address,
    /// The recipient; its star names who must handle the letter.
    pub to: Address,
    /// An optional subject line the model may add for the human.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// An optional one-line summary the model may add for the human.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The letter this one answers, stamped by the reply tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<LetterId>,
    /// The model's text, any characters at all.
    pub body: String,
}

impl Letter {
    /// The letter's one storage line (`{"v":1,"kind":"letter",...}`), without a newline: the
    /// same line an inbox blob holds. It parses back equal with [`Letter::parse_line`].
    pub fn render_line(&self) -> Result<String, LetterError> {
        InboxEntry::Letter(Box::new(self.clone())).to_line()
    }

    /// Parses a storage line written by [`Letter::render_line`]; a read mark's line is refused.
    pub fn parse_line(text: &str) -> Result<Letter, LetterError> {
        match InboxEntry::from_line(text, 1)? {
            InboxEntry::Letter(letter) => Ok(*letter),
            other => Err(LetterError::NotALetter {
                line: 1,
                kind: other.kind(),
            }),
        }
    }

    /// The letter as its agent reads it: `[subject] body`, every control character a space. The
    /// sequencer journals this text (cut with a note when too long to show whole), and the
    /// `read_letter` tool reads on in it from a byte, so the note's byte and the tool's agree.
    pub fn as_read(&self) -> String {
        let text = match &self.subject {
            Some(s) => format!("[{s}] {}", self.body),
            None => self.body.clone(),
        };
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }

    /// A lossy one-line summary for commit messages and listings:
    /// `ID FROM -> TO: TEXT`, where TEXT is the subject, else the summary, else the body, cut to
    /// [`HEADLINE_TEXT_CHARS`] characters with line breaks and controls shown as escapes.
    pub fn headline(&self) -> String {
        let text = self
            .subject
            .as_deref()
            .or(self.summary.as_deref())
            .unwrap_or(&self.body);
        format!(
            "{} {} -> {}: {}",
            self.id,
            self.from.render_short(),
            self.to.render_short(),
            excerpt(text, HEADLINE_TEXT_CHARS)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter() -> Letter {
        Letter {
            id: LetterId::parse("l-1").unwrap(),
            at_ms: 5,
            from: Address::parse("alice/main/worker").unwrap(),
            to: Address::parse("branch:fix human:bob*").unwrap(),
            subject: None,
            summary: Some("sum".into()),
            in_reply_to: None,
            body: "line one\nline two".into(),
        }
    }

    #[test]
    fn the_storage_line_reads_with_cat() {
        let line = letter().render_line().unwrap();
        assert!(
            line.starts_with(
                r#"{"v":1,"kind":"letter","id":"l-1","at_ms":5,"from":"agent:alice/main/worker*","to":"branch:fix human:bob*","summary":"sum","body":"line one\nline two"}"#
            ),
            "{line}"
        );
    }

    #[test]
    fn headline_prefers_subject_then_summary_then_body() {
        let mut l = letter();
        assert_eq!(
            l.headline(),
            "l-1 alice/main/worker -> branch:fix human:bob*: sum"
        );
        l.summary = None;
        assert_eq!(
            l.headline(),
            "l-1 alice/main/worker -> branch:fix human:bob*: line one\\nline two"
        );
        l.subject = Some("hi".into());
        assert!(l.headline().ends_with(": hi"));
    }

    #[test]
    fn bad_ids_name_the_id_and_the_rule() {
        let err = LetterId::parse("a b").unwrap_err();
        assert_eq!(
            err,
            LetterError::BadId {
                id: "a b".into(),
                fault: TokenFault::BadChar(' ')
            }
        );
        assert!(err.to_string().contains("\"a b\""), "{err}");
        assert!(matches!(
            LetterId::parse(""),
            Err(LetterError::BadId {
                fault: TokenFault::Empty,
                ..
            })
        ));
        let long = "x".repeat(MAX_ID_LEN + 1);
        assert!(matches!(
            LetterId::parse(&long),
            Err(LetterError::BadId {
                fault: TokenFault::TooLong { len: 129, max: 128 },
                ..
            })
        ));
        assert!(LetterId::parse(&"x".repeat(MAX_ID_LEN)).is_ok());
    }

    #[test]
    fn parse_line_refuses_other_entries_and_bad_lines() {
        let mark = r#"{"v":1,"kind":"read-mark","letter":"l-1","by":"human:bob","at_ms":9}"#;
        let err = Letter::parse_line(mark).unwrap_err();
        assert_eq!(
            err,
            LetterError::NotALetter {
                line: 1,
                kind: "read-mark"
            }
        );
        assert!(err.to_string().contains("read-mark"));
        let future = letter()
            .render_line()
            .unwrap()
            .replace("\"v\":1", "\"v\":2");
        assert!(matches!(
            Letter::parse_line(&future),
            Err(LetterError::Line(LineError::UnknownVersion {
                found: 2,
                ..
            }))
        ));
        let bad_to = letter()
            .render_line()
            .unwrap()
            .replace("human:bob*", "branch:x*");
        let err = Letter::parse_line(&bad_to).unwrap_err();
        assert!(err.to_string().contains("branch:x*"), "{err}");
    }
}
