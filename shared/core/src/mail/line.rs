//! The storage line of an inbox entry: one versioned JSON object that no text can break.
//!
//! # Format
//! `{"v":1,"kind":"letter",...}`, `{"v":1,"kind":"read-mark",...}` or
//! `{"v":1,"kind":"receipt",...}`, written by
//! [`record_format::to_line`](crate::record_format::to_line) and then hardened: every character a
//! line splitter or a terminal could act on is written as a JSON `\uXXXX` escape instead of
//! raw. serde_json already escapes C0 controls; this adds DEL, the C1 controls (NEL among them),
//! U+2028/U+2029 (line and paragraph separators) and the bidirectional controls, which could
//! reorder a line on screen so a body poses as another field. The escapes are plain JSON, so the
//! line parses back to exactly the text that went in, and `cat` shows them as visible `\u2028`.

use serde::{Deserialize, Serialize};

use super::inbox::ReadMark;
use super::letter::{Letter, LetterError};
use super::receipt::Receipt;
use crate::record_format;

/// One line of an inbox or outbox ref's blob: a letter, a read mark, or a receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum InboxEntry {
    /// A letter delivered to the box (boxed: a letter dwarfs a read mark).
    Letter(Box<Letter>),
    /// A reader's mark on a letter: its receipt.
    ReadMark(ReadMark),
    /// A read mark on airmail: on the reader's outbox, on its way back to the sending hub; in
    /// the sender's inbox, back home.
    Receipt(Receipt),
}

impl InboxEntry {
    /// Renders the entry as one hardened storage line (see the module docs), without a newline.
    /// Fails only if serialisation fails, which these plain-data types never do.
    pub fn to_line(&self) -> Result<String, LetterError> {
        Ok(harden(&record_format::to_line(self)?))
    }

    /// Parses one storage line; `line` is its one-based number, used in errors.
    pub fn from_line(text: &str, line: usize) -> Result<Self, LetterError> {
        Ok(record_format::from_line(text, line)?)
    }

    /// The letter this entry is, if it is one: how code outside core picks letters out of a
    /// chain without matching on the entry's variants.
    pub fn letter(&self) -> Option<&Letter> {
        match self {
            Self::Letter(letter) => Some(letter),
            Self::ReadMark(_) | Self::Receipt(_) => None,
        }
    }

    /// [`InboxEntry::letter`], by value.
    pub fn into_letter(self) -> Option<Letter> {
        match self {
            Self::Letter(letter) => Some(*letter),
            Self::ReadMark(_) | Self::Receipt(_) => None,
        }
    }

    /// The receipt this entry is, if it is one.
    pub fn receipt(&self) -> Option<&Receipt> {
        match self {
            Self::Receipt(receipt) => Some(receipt),
            Self::Letter(_) | Self::ReadMark(_) => None,
        }
    }

    /// The entry's kind as written in its `kind` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Letter(_) => "letter",
            Self::ReadMark(_) => "read-mark",
            Self::Receipt(_) => "receipt",
        }
    }
}

/// Whether `c` must never appear raw in a one-line record: a control character (C0, DEL, C1,
/// which covers `\n`, `\r`, tab, VT, FF and NEL), a Unicode line or paragraph separator, or a
/// bidirectional control.
pub(super) fn is_line_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// Rewrites every raw unsafe character of a JSON text as `\uXXXX`. Outside strings serde_json
/// writes only ASCII punctuation and digits, so every such character sits inside a string,
/// where the escape means the same character.
fn harden(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_line_unsafe(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `text` for a human one-liner: unsafe characters shown as Rust
/// escapes (`\n`, `\u{2028}`), and an ellipsis if anything was cut.
pub(super) fn excerpt(text: &str, max: usize) -> String {
    let mut out = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == max {
            out.push('…');
            break;
        }
        if is_line_unsafe(c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn harden_escapes_what_serde_json_leaves_raw() {
        let raw = "{\"t\":\"a\u{2028}b\u{85}c\u{7f}d\u{202e}e\"}";
        let hard = harden(raw);
        assert_eq!(hard, "{\"t\":\"a\\u2028b\\u0085c\\u007fd\\u202ee\"}");
        let back: serde_json::Value = serde_json::from_str(&hard).unwrap();
        assert_eq!(back["t"], "a\u{2028}b\u{85}c\u{7f}d\u{202e}e");
    }

    #[test]
    fn excerpt_escapes_and_cuts() {
        assert_eq!(excerpt("a\nb\u{2028}", 10), "a\\nb\\u{2028}");
        assert_eq!(excerpt("abcdef", 3), "abc…");
        assert_eq!(excerpt("abc", 3), "abc");
    }
}
