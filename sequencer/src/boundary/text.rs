//! Foreign text made storable: control characters made visible, and a field cut to a byte
//! budget (as stored, JSON-escaped) with a note saying what was cut and how much there was.

/// How many bytes `c` takes inside a JSON string.
pub(crate) fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// How many bytes `text` takes inside a JSON string.
pub fn stored_len(text: &str) -> usize {
    text.chars().map(escaped_len).sum()
}

/// Whether a field may keep line breaks and tabs (a reply, an output, a letter) or must be one
/// token-like line (a tool name, a stop reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// `\n`, `\r` and `\t` are kept; every other control character is made visible.
    Kept,
    /// Every control character, line breaks included, is made visible.
    One,
}

/// `text` with its control characters (C0, DEL, C1) written as `\u{1b}`, so no record holds a
/// byte that would end a summary's line or drive a terminal. Text without one is returned as is.
pub fn visible(text: &mut String, lines: Lines) {
    let kept = |c: char| lines == Lines::Kept && matches!(c, '\n' | '\r' | '\t');
    if !text.chars().any(|c| c.is_control() && !kept(c)) {
        return;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_control() && !kept(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    *text = out;
}

/// Room kept under a budget for the note [`cut`] adds (a letter's names a `read_letter` call
/// with its 64-byte id).
pub(crate) const NOTE_ROOM: usize = 320;

/// The byte index in `text` where a prefix of at most `budget` stored bytes ends (a character
/// boundary).
pub(crate) fn prefix_end(text: &str, budget: usize) -> usize {
    let mut used = 0;
    text.char_indices()
        .find(|(_, c)| {
            used += escaped_len(*c);
            used > budget
        })
        .map_or(text.len(), |(i, _)| i)
}

/// Cuts `text` to at most `max` bytes as stored (never below `NOTE_ROOM` twice), keeping a
/// prefix and appending a note that names `what`, how much was kept and how much there was, and
/// `how` to get the rest (`{from_byte}` in it becomes the byte of `text` where the kept prefix
/// ends, to read on from). Text within `max` is left alone. Returns whether it cut.
pub fn cut(text: &mut String, max: usize, what: &str, how: &str) -> bool {
    let max = max.max(NOTE_ROOM * 2);
    let total = stored_len(text);
    if total <= max {
        return false;
    }
    let mut note = format!(
        "\n(l3m) {what} cut: {{kept}} of {total} bytes (as stored) kept{}{how}",
        if how.is_empty() { "" } else { "; " }
    );
    // The note is foreign-free except `what`/`how`, which callers write; bound it anyway.
    if stored_len(&note) > NOTE_ROOM {
        let end = prefix_end(&note, NOTE_ROOM - 16);
        note.truncate(end);
    }
    let end = prefix_end(text, max - NOTE_ROOM);
    text.truncate(end);
    let kept = stored_len(text);
    let note = note
        .replace("{kept}", &kept.to_string())
        .replace("{from_byte}", &end.to_string());
    text.push_str(&note);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn control_characters_count_as_stored() {
        assert_eq!(stored_len("a\u{1}\n\"é"), 1 + 6 + 2 + 2 + 2);
        assert_eq!(
            serde_json::to_string("a\u{1}\n\"é").unwrap().len() - 2,
            stored_len("a\u{1}\n\"é")
        );
    }

    #[test]
    fn control_characters_are_made_visible() {
        let mut text = "a\u{1b}[2J\nb\u{7f}\u{85}\t".to_owned();
        visible(&mut text, Lines::Kept);
        assert_eq!(text, "a\\u{1b}[2J\nb\\u{7f}\\u{85}\t");
        let mut name = "write\nfile".to_owned();
        visible(&mut name, Lines::One);
        assert_eq!(name, "write\\u{a}file");
    }

    proptest! {
        /// A cut text fits its budget, keeps a prefix, and says what there was.
        #[test]
        fn a_cut_fits_and_keeps_a_prefix(text in "[a-z\u{0}é\"\n\u{301}]{0,3000}", max in 0usize..4000) {
            let mut out = text.clone();
            let did = cut(&mut out, max, "field", "ask again");
            prop_assert!(stored_len(&out) <= max.max(NOTE_ROOM * 2));
            prop_assert_eq!(did, out != text);
            if did {
                let at = out.rfind("\n(l3m) field cut").unwrap();
                prop_assert!(text.starts_with(&out[..at]));
            }
        }
    }
}
