//! The model's view, rendered for a human: the system prompt, then each turn with its role,
//! its text, the tools the model asked for and their results. Nothing is summarized or cut:
//! `l3m view` shows exactly what the model would be sent, before a dialect renders it, with
//! control characters made visible (the model's text is shown, never obeyed by the terminal).

use l3m_core::view::{Message, Part, View};

use super::escape::{Foreign, ForeignBlock};

/// Indents every line of `text` by two spaces, its control characters made visible.
fn indented(text: &str) -> String {
    ForeignBlock(text)
        .to_string()
        .lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The whole view as text.
pub fn render(view: &View) -> String {
    let mut out = format!("── system ──\n{}\n", indented(&view.system));
    for (i, message) in view.messages.iter().enumerate() {
        match message {
            Message::User { content } => {
                out.push_str(&format!("── {i} user ──\n"));
                for part in content {
                    match part {
                        Part::Text { text } => out.push_str(&format!("{}\n", indented(text))),
                        Part::ToolResult {
                            id,
                            output,
                            is_error,
                        } => {
                            let tag = if *is_error { "error" } else { "result" };
                            out.push_str(&format!(
                                "  ← {tag} {}:\n{}\n",
                                Foreign(id.as_str()),
                                indented(&indented(output))
                            ));
                        }
                    }
                }
            }
            Message::Assistant { text, tool_uses } => {
                out.push_str(&format!("── {i} assistant ──\n"));
                if !text.is_empty() {
                    out.push_str(&format!("{}\n", indented(text)));
                }
                for used in tool_uses {
                    out.push_str(&format!(
                        "  → {} {} {}\n",
                        Foreign(&used.name),
                        Foreign(used.id.as_str()),
                        Foreign(&used.input.to_string())
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::{Record, RecordBody};
    use l3m_core::names::Entity;

    #[test]
    fn the_view_of_a_prompt_and_a_line_shows_both() {
        let records = vec![
            Record {
                seq: 0,
                at_ms: 0,
                body: RecordBody::SystemPrompt {
                    text: "You are a tester.".into(),
                    continues: false,
                },
            },
            Record {
                seq: 1,
                at_ms: 1,
                body: RecordBody::UserLine {
                    from: Entity::parse("human:alice").unwrap(),
                    text: "hi".into(),
                },
            },
        ];
        let text = render(&l3m_core::view::view(&records));
        assert!(
            text.starts_with("── system ──\n  You are a tester.\n"),
            "{text}"
        );
        assert!(text.contains("── 0 user ──\n"), "{text}");
        assert!(text.contains("hi"), "{text}");
    }
}
