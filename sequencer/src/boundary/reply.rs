//! The provider door: a model's reply measured as it will be stored before it is journaled, and
//! a provider's failure told in bounded words.

use l3m_core::log::ToolUse;

use super::text::stored_len;

/// The most bytes a model reply may take as stored (its text and tool uses, JSON-escaped).
pub const MAX_REPLY: usize = 160 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
