//! Which characters must never be shown or stored as themselves, defined once: the ring refuses
//! them in paths (a bidi override in a file name spoofs listings) and the CLI makes them
//! visible before anything reaches the human's terminal.

/// Whether `c` is one of the invisible format characters that can reorder or hide text:
/// the Arabic letter mark, the Mongolian vowel separator, zero-width characters and marks,
/// line and paragraph separators, bidi embeddings, overrides and isolates, invisible
/// operators, the byte-order mark and interlinear annotation controls.
pub fn is_format(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// Whether `c` is unprintable: a control character (C0, DEL, C1) or a format character.
pub fn is_unprintable(c: char) -> bool {
    c.is_control() || is_format(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_format_characters_are_unprintable_and_text_is_not() {
        for c in [
            '\u{1b}', '\u{7f}', '\u{9b}', '\u{202e}', '\u{200b}', '\u{2066}', '\u{feff}',
        ] {
            assert!(is_unprintable(c), "{c:?}");
        }
        for c in ['a', 'é', '\u{301}', '中', ' ', '\u{2030}', '\u{2065}'] {
            assert!(!is_unprintable(c), "{c:?}");
        }
        assert!(!is_format('\u{1b}'));
    }
}
