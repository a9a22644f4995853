//! `edit_file`: replace one exact piece of a text file, refusing when it is missing or ambiguous.
//!
//! The decision ([`replace_unique`]) is pure; the tool reads the file, decides, and writes the
//! result back through the journaled provider only when the text occurs exactly once.

use l3m_core::effects::{EffectClass, Reversibility, ToolDecl};
use l3m_ring::effects::Granted;
use serde_json::{Value, json};

use crate::args::{Args, bad};
use crate::tool::{Tool, ToolError, ToolOutput, declare};

/// Replaces the single occurrence of `old` in a file with `new`.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditFile;

impl Tool for EditFile {
    fn decl(&self) -> ToolDecl {
        declare(
            "edit_file",
            [EffectClass::FsRead, EffectClass::FsWrite],
            Reversibility::RoundTrip,
        )
    }

    fn description(&self) -> &str {
        "Replace the exact text `old` with `new` in a file under one of your write roots. `old` must occur exactly once; quote enough surrounding text to make it unique. Journaled; rewind restores the file."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "the file to edit"},
                "old": {"type": "string", "description": "the exact text to replace; must occur exactly once"},
                "new": {"type": "string", "description": "the text to put in its place"}
            },
            "required": ["path", "old", "new"],
            "additionalProperties": false
        })
    }

    fn call(&self, input: Value, fx: &Granted<'_>) -> Result<ToolOutput, ToolError> {
        let args = Args::parse(&input, &self.input_schema())?;
        let path = args.string("path")?;
        let old = args.string("old")?;
        let new = args.string("new")?;
        if old.is_empty() {
            return Err(bad("old", "must not be empty".into()));
        }
        let bytes = fx.fs_read()?.read(path)?;
        let len = bytes.len();
        let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText {
            path: path.to_owned(),
            len,
        })?;
        let edited = match replace_unique(&text, old, new) {
            Ok(edited) => edited,
            Err(0) => return Err(ToolError::NoMatch { path: path.into() }),
            Err(count) => {
                return Err(ToolError::Ambiguous {
                    path: path.into(),
                    count,
                });
            }
        };
        fx.fs_write()?.write(path, edited.as_bytes())?;
        Ok(ToolOutput::text(format!(
            "replaced 1 occurrence in `{path}`"
        )))
    }
}

/// `text` with its one occurrence of `old` replaced by `new`, or the number of occurrences when
/// that is not exactly one. Overlapping occurrences count (`aa` occurs twice in `aaa`), since
/// either could be the one meant.
pub fn replace_unique(text: &str, old: &str, new: &str) -> Result<String, usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text.get(from..).and_then(|rest| rest.find(old)) {
        let start = from + at;
        found.push(start);
        let step = text[start..].chars().next().map_or(1, char::len_utf8);
        from = start + step;
    }
    match found.as_slice() {
        [start] => {
            let mut out = String::with_capacity(text.len() - old.len() + new.len());
            out.push_str(&text[..*start]);
            out.push_str(new);
            out.push_str(&text[start + old.len()..]);
            Ok(out)
        }
        _ => Err(found.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn replaces_a_unique_match_and_counts_the_rest() {
        assert_eq!(
            replace_unique("a = 1;\nb = 2;\n", "b = 2", "b = 3").unwrap(),
            "a = 1;\nb = 3;\n"
        );
        assert_eq!(replace_unique("x", "y", "z"), Err(0));
        assert_eq!(replace_unique("one one one", "one", "two"), Err(3));
        assert_eq!(replace_unique("aaa", "aa", "b"), Err(2));
        assert_eq!(replace_unique("ünïcode ü", "ü", "u"), Err(2));
        assert_eq!(replace_unique("ünïcode", "ï", "i").unwrap(), "ünicode");
    }

    proptest! {
        /// `unique_replace_then_reverse_is_identity`: when `old` occurs once in `text` and `new`
        /// once in the result, replacing `new` by `old` gives `text` back. (`new` holds an `e`,
        /// which nothing else does, so it is unique in the result.)
        #[test]
        fn unique_replace_then_reverse_is_identity(
            head in "[a-c ]{0,12}", old in "[a-d]{1,4}", new in "e[a-e]{0,3}", tail in "[a-c ]{0,12}"
        ) {
            let text = format!("{head}{old}{tail}");
            let edited = replace_unique(&text, &old, &new);
            prop_assume!(edited.is_ok(), "old occurs more than once");
            let back = replace_unique(&edited.unwrap(), &new, &old);
            prop_assert_eq!(back, Ok(text));
        }

        /// `replace_unique_succeeds_iff_one_occurrence`: the edit happens exactly when the
        /// naive count of (overlapping) positions is one, and it changes only that span.
        #[test]
        fn replace_unique_succeeds_iff_one_occurrence(text in "[ab]{0,16}", old in "[ab]{1,3}") {
            let naive = (0..text.len()).filter(|i| text[*i..].starts_with(&old)).count();
            match replace_unique(&text, &old, "X") {
                Ok(edited) => {
                    prop_assert_eq!(naive, 1);
                    prop_assert_eq!(edited.len(), text.len() - old.len() + 1);
                }
                Err(count) => prop_assert_eq!(count, naive),
            }
        }
    }
}
