//! Foreign text made visible: what an agent, a model, a letter, a tool, a record, a file name,
//! an office or hubd quoting any of them brings is shown with its control characters spelled
//! out, as `git` and `less` do, so none of it can drive the human's terminal.
//!
//! C0 controls and DEL are shown in caret notation (`^[` for ESC, `^M` for CR, `^?` for DEL);
//! C1 controls and the invisible format characters that reorder or hide text (bidi overrides
//! and isolates, zero-width characters, line and paragraph separators, the byte-order mark) as
//! `<U+202E>`. [`Foreign`] escapes a one-line field (newlines and tabs too, so a field cannot
//! fake a line); [`ForeignBlock`] keeps newlines and tabs, for text shown whole (`l3m view`).
//! The terminal sink in [`crate::output`] runs [`visible`] over everything it writes, so a
//! string that skipped both wrappers still cannot reach the terminal raw.

use std::fmt;

pub use l3m_core::unprintable::is_format;

/// Whether `c` must never reach a terminal as itself: C0, DEL, C1 or a format character.
pub fn is_hostile(c: char) -> bool {
    l3m_core::unprintable::is_unprintable(c)
}

/// Writes `c` made visible: caret notation for C0 and DEL, `<U+XXXX>` for the rest.
fn write_visible(out: &mut impl fmt::Write, c: char) -> fmt::Result {
    match c {
        '\u{0}'..='\u{1F}' => {
            out.write_char('^')?;
            out.write_char(char::from(c as u8 + 0x40))
        }
        '\u{7F}' => out.write_str("^?"),
        _ => write!(out, "<U+{:04X}>", u32::from(c)),
    }
}

/// Writes `text` with every hostile character made visible, except those `keep` lets through.
fn write_escaped(out: &mut impl fmt::Write, text: &str, keep: fn(char) -> bool) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(|c: char| is_hostile(c) && !keep(c)) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        write_visible(out, c)?;
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}

/// Only newlines and tabs, for text shown whole.
fn lines_and_tabs(c: char) -> bool {
    c == '\n' || c == '\t'
}

/// `text` with every hostile character made visible but newlines and tabs: what the terminal
/// sink writes, whatever it is given.
pub fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let _infallible = write_escaped(&mut out, text, lines_and_tabs);
    out
}

/// A one-line field that came from outside the CLI, shown with every control and format
/// character (newlines and tabs included) made visible.
#[derive(Debug, Clone, Copy)]
pub struct Foreign<'a>(pub &'a str);

impl fmt::Display for Foreign<'_> {
    /// Honours width and alignment (`{:<16}`), for tables.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut shown = String::with_capacity(self.0.len());
        write_escaped(&mut shown, self.0, |_| false)?;
        f.pad(&shown)
    }
}

/// Foreign text shown whole (a reply, a file, a prompt): its lines and tabs kept, every other
/// control and format character made visible.
#[derive(Debug, Clone, Copy)]
pub struct ForeignBlock<'a>(pub &'a str);

impl fmt::Display for ForeignBlock<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_escaped(f, self.0, lines_and_tabs)
    }
}

/// `text` as a one-line field, owned: for renders that hold strings rather than format them.
pub fn one_line(text: &str) -> String {
    Foreign(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_format_characters_are_spelled_out() {
        let hostile = "a\x1b[2Jb\r\n\tc\x7f\u{9b}31m\u{202E}d\u{200B}e\u{2028}";
        assert_eq!(
            Foreign(hostile).to_string(),
            "a^[[2Jb^M^J^Ic^?<U+009B>31m<U+202E>d<U+200B>e<U+2028>"
        );
        assert_eq!(
            ForeignBlock(hostile).to_string(),
            "a^[[2Jb^M\n\tc^?<U+009B>31m<U+202E>d<U+200B>e<U+2028>"
        );
        assert_eq!(visible(hostile), ForeignBlock(hostile).to_string());
        assert_eq!(
            Foreign("plain — ünïcode ✓").to_string(),
            "plain — ünïcode ✓"
        );
    }

    #[test]
    fn nothing_hostile_survives_any_text() {
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        for shown in [Foreign(&all).to_string(), visible(&all)] {
            assert!(
                !shown.chars().any(|c| is_hostile(c) && !lines_and_tabs(c)),
                "{shown:?}"
            );
        }
        assert!(!Foreign(&all).to_string().contains(['\n', '\t']));
    }
}
