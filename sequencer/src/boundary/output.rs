//! Foreign input bounded before it is journaled: a model's reply and a tool's output.
//!
//! Every record must fit one stored line (`record_format::MAX_STORED_LINE`), or hubd refuses the
//! append and the sequencer cannot go on. A model (or a tool reading a large file) is foreign
//! input like any other, so both are measured here as they will be stored — JSON-escaped, where
//! one control character becomes six bytes — before they reach a record:
//! - a reply over [`MAX_REPLY`] becomes a failed call that says why ([`check_reply`]), journaled
//!   like any other, so the sequencer keeps running and spends the one call;
//! - a tool output over the model's cap (at most [`MAX_TOOL_OUTPUT`]) is cut at a character
//!   boundary with a note saying how much there was and how to get the rest ([`fit_output`]).
//!
//! A reply's text appears once in its record and each tool input at most twice in the pass
//! that journals it (the reply and the admitted call), so these bounds keep a pass's append
//! under the bus's 1 MiB message too.

use l3m_core::log::ToolUse;

/// The most bytes a model reply may take as stored (its text and tool uses, JSON-escaped).
pub const MAX_REPLY: usize = 160 * 1024;

/// The most bytes a tool's output may take as stored (JSON-escaped) before it is cut.
pub const MAX_TOOL_OUTPUT: usize = 128 * 1024;

/// How many bytes `c` takes inside a JSON string.
fn escaped_len(c: char) -> usize {
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

/// Refuses a reply that would not fit a record, naming its size and the limit.
pub fn check_reply(text: &str, tool_uses: &[ToolUse]) -> Result<(), String> {
    let inputs: usize = tool_uses
        .iter()
        .map(|u| stored_len(&u.name) + u.input.to_string().len())
        .sum();
    let size = stored_len(text) + inputs;
    if size > MAX_REPLY {
        return Err(format!(
            "the model's reply of {size} bytes (as stored) exceeds the limit of {MAX_REPLY} bytes \
             for one reply; it was not journaled or run. Answer in smaller steps: write large \
             content in several calls"
        ));
    }
    Ok(())
}

/// `output` cut, if it is over `cap` bytes as stored (never more than [`MAX_TOOL_OUTPUT`]), at
/// a character boundary, with a note saying how much there was, which lines were shown and how
/// to get the rest. The cap is per model (`tool_output_cap` in its table), so no single result
/// floods a small context window.
pub fn fit_output(output: String, cap: usize) -> String {
    let cap = cap.clamp(NOTE_ROOM * 2, MAX_TOOL_OUTPUT);
    let total = stored_len(&output);
    if total <= cap {
        return output;
    }
    let budget = cap - NOTE_ROOM;
    let mut used = 0;
    let end = output
        .char_indices()
        .find(|(_, c)| {
            used += escaped_len(*c);
            used > budget
        })
        .map_or(output.len(), |(i, _)| i);
    let shown = &output[..end];
    let lines = output.lines().count();
    let whole_lines = shown.matches('\n').count();
    format!(
        "{shown}\n(l3m) output cut at {cap} bytes: {} of {total} bytes shown, lines 1-{whole_lines} \
         of {lines} whole; get the rest in pieces — a line range (read_file from_line = {}), a \
         narrower search",
        stored_len(shown),
        whole_lines + 1
    )
}

/// Room kept under a cap for the note [`fit_output`] adds.
const NOTE_ROOM: usize = 256;

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
    fn a_reply_of_control_characters_is_refused_by_its_stored_size() {
        let text = "\u{0}".repeat(MAX_REPLY / 6 + 1);
        let err = check_reply(&text, &[]).unwrap_err();
        assert!(
            err.contains(&format!("limit of {MAX_REPLY} bytes")),
            "{err}"
        );
        assert!(check_reply("fine", &[]).is_ok());
    }

    proptest! {
        /// A cut output always fits, keeps a prefix of the original, and says it was cut;
        /// an output that fits is untouched.
        #[test]
        fn fitted_output_fits_and_keeps_a_prefix(
            chunk in "[a-z\u{0}\u{1}é\"\n]{1,64}",
            times in 1usize..8000,
            cap in 0usize..200_000,
        ) {
            let output = chunk.repeat(times);
            let fitted = fit_output(output.clone(), cap);
            let cap = cap.clamp(NOTE_ROOM * 2, MAX_TOOL_OUTPUT);
            prop_assert!(stored_len(&fitted) <= cap);
            match fitted.find("\n(l3m) output cut") {
                Some(at) => prop_assert!(output.starts_with(&fitted[..at])),
                None => prop_assert_eq!(&fitted, &output),
            }
            prop_assert_eq!(fitted == output, stored_len(&output) <= cap);
        }
    }
}
