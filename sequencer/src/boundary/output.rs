//! The tool door: a tool's output (a file read, a search, a command's output) cut to the
//! model's cap before it becomes a result, with a note that says how to read past the cut.

use super::text::{escaped_len, stored_len};

/// The most bytes a tool's output may take as stored (JSON-escaped) before it is cut.
pub const MAX_TOOL_OUTPUT: usize = 128 * 1024;

/// `output` cut, if it is over `cap` bytes as stored (never more than [`MAX_TOOL_OUTPUT`]), at
/// a character boundary, with a note saying how much there was, which lines were shown and how
/// to get the rest: the next whole line, and the byte where the cut falls (so a single long
/// line can be read past its cut too), counted from where the call began reading (`skipped`,
/// its own `from_byte`) and named as a call of `tool`. The cap is per model
/// (`tool_output_cap` in its table), so no single result floods a small context window.
pub fn fit_output(output: String, cap: usize, tool: &str, skipped: usize) -> String {
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
    let at = skipped.saturating_add(end);
    let past = if whole_lines == 0 {
        format!("the cut falls inside line 1: read on from byte {at} ({tool} from_byte = {at})")
    } else {
        format!(
            "read on from line {} ({tool} from_line = {}) or from byte {at} (from_byte = {at})",
            whole_lines + 1,
            whole_lines + 1
        )
    };
    format!(
        "{shown}\n(l3m) output cut at {cap} bytes: {} of {total} bytes shown, lines 1-{whole_lines} \
         of {lines} whole; {past}, with the same arguments; or narrow a search",
        stored_len(shown),
    )
}

/// Room kept under a cap for the note [`fit_output`] adds.
const NOTE_ROOM: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cut_single_line_says_where_to_read_on() {
        let out = fit_output("x".repeat(10_000), 1000, "read_file", 0);
        assert!(
            out.contains(
                "the cut falls inside line 1: read on from byte 744 (read_file from_byte = 744)"
            ),
            "{out}"
        );
        assert!(!out.contains("lines 1-0 of 1 whole; from_line"), "{out}");
        let out = fit_output("line\n".repeat(1000), 1000, "read_file", 0);
        assert!(out.contains("read_file from_line = 125"), "{out}");
        let out = fit_output("y".repeat(10_000), 1000, "read_letter", 5000);
        assert!(
            out.contains("read on from byte 5744 (read_letter from_byte = 5744)"),
            "{out}"
        );
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
            let fitted = fit_output(output.clone(), cap, "read_file", 0);
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
