//! A request that always fits: when even the compacted view is over the window (one legal
//! 150 KB `write_file` in the kept tail), its largest parts are stood in for by stubs that say
//! what is missing and how to get it back. The Log keeps every part whole; only the request
//! the model is sent is fitted, so no agent is stuck behind one item compaction cannot drop.

use super::*;
use serde_json::Value;

/// The most bytes a stub takes in a message's JSON: a part no larger is never stubbed.
pub const STUB_BYTES: u64 = 400;

/// One part of a view that a stub can stand in for.
#[derive(Debug, Clone, Copy)]
enum Item {
    /// A text part or tool result of a user message: (message, part).
    Part(usize, usize),
    /// An assistant message's text.
    Said(usize),
    /// An assistant message's tool use arguments: (message, use).
    Input(usize, usize),
}

fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    serde_json::to_vec(value).map_or(0, |v| v.len() as u64)
}

/// The items of `view` and what each measures now, largest first (the oldest first among equals).
fn items(view: &View) -> Vec<(Item, u64)> {
    let mut out = Vec::new();
    for (m, message) in view.messages.iter().enumerate() {
        match message {
            Message::User { content } => {
                for (p, part) in content.iter().enumerate() {
                    let len = match part {
                        Part::Text { text } => json_len(text),
                        Part::ToolResult { output, .. } => json_len(output),
                    };
                    out.push((Item::Part(m, p), len));
                }
            }
            Message::Assistant { text, tool_uses } => {
                out.push((Item::Said(m), json_len(text)));
                for (u, tool_use) in tool_uses.iter().enumerate() {
                    out.push((Item::Input(m, u), json_len(&tool_use.input)));
                }
            }
        }
    }
    out.retain(|(_, len)| *len > STUB_BYTES);
    out.sort_by_key(|item| std::cmp::Reverse(item.1));
    out
}

/// Stands a stub in for `item`, returning the bytes it took before and takes now.
fn stub(view: &mut View, item: Item, len: u64) -> (u64, u64) {
    let why = "not shown here, to keep the request within your context window (the Log keeps it \
               whole)";
    match item {
        Item::Part(m, p) => {
            if let Some(Message::User { content }) = view.messages.get_mut(m)
                && let Some(part) = content.get_mut(p)
            {
                let text = match part {
                    Part::Text { text } => text,
                    Part::ToolResult { output, .. } => output,
                };
                *text = format!(
                    "(l3m) this part of {len} bytes is {why}; ask again for the piece you need: \
                     a line or byte range of a file (read_file from_line, from_byte), a narrower \
                     search, a shorter letter"
                );
                return (len, json_len(text));
            }
            (len, len)
        }
        Item::Said(m) => {
            if let Some(Message::Assistant { text, .. }) = view.messages.get_mut(m) {
                *text = format!("(l3m) your text of {len} bytes is {why}");
                return (len, json_len(text));
            }
            (len, len)
        }
        Item::Input(m, u) => {
            if let Some(Message::Assistant { tool_uses, .. }) = view.messages.get_mut(m)
                && let Some(tool_use) = tool_uses.get_mut(u)
            {
                let mut note = serde_json::Map::new();
                note.insert(
                    "l3m_elided".into(),
                    Value::String(format!(
                        "(l3m) these arguments of {len} bytes are {why}; the call ran with them \
                         as sent; read back what it wrote if you need it"
                    )),
                );
                tool_use.input = Value::Object(note);
                return (len, json_len(&tool_use.input));
            }
            (len, len)
        }
    }
}

/// `view` fitted to `budget` bytes as [`view_bytes`] measures: its largest parts replaced by
/// stubs, largest first, until it fits or nothing is left to stub ([`floor_bytes`]). A view
/// that fits is returned as it is.
pub fn fit_view(view: &View, budget: u64) -> View {
    let mut total = view_bytes(view);
    if total <= budget {
        return view.clone();
    }
    let mut fitted = view.clone();
    for (item, len) in items(view) {
        if total <= budget {
            break;
        }
        let (before, after) = stub(&mut fitted, item, len);
        total = total.saturating_sub(before.saturating_sub(after));
    }
    fitted
}

/// The least `view` can measure once fitted: every part larger than a stub replaced by one.
/// A budget at least this large always gets a fitted view within it.
pub fn floor_bytes(view: &View) -> u64 {
    view_bytes(&fit_view(view, 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::{ToolUse, ToolUseId};
    use proptest::prelude::*;

    fn message() -> impl Strategy<Value = Message> {
        let text = (0usize..24_000).prop_map(|n| "é\"x".repeat(n / 4));
        prop_oneof![
            proptest::collection::vec((text.clone(), any::<bool>()), 1..4).prop_map(|parts| {
                Message::User {
                    content: parts
                        .into_iter()
                        .enumerate()
                        .map(|(i, (text, result))| match result {
                            true => Part::ToolResult {
                                id: ToolUseId::new(format!("t{i}")).unwrap(),
                                output: text,
                                is_error: false,
                            },
                            false => Part::Text { text },
                        })
                        .collect(),
                }
            }),
            (text.clone(), proptest::collection::vec(text, 0..3)).prop_map(|(text, inputs)| {
                Message::Assistant {
                    text,
                    tool_uses: inputs
                        .into_iter()
                        .enumerate()
                        .map(|(i, content)| ToolUse {
                            id: ToolUseId::new(format!("t{i}")).unwrap(),
                            name: "write_file".into(),
                            input: serde_json::json!({ "path": "a", "content": content }),
                        })
                        .collect(),
                }
            }),
        ]
    }

    fn shape(view: &View) -> Vec<Vec<String>> {
        view.messages
            .iter()
            .map(|m| match m {
                Message::User { content } => content
                    .iter()
                    .map(|p| match p {
                        Part::Text { .. } => "text".to_owned(),
                        Part::ToolResult { id, .. } => format!("result {id}"),
                    })
                    .collect(),
                Message::Assistant { tool_uses, .. } => {
                    tool_uses.iter().map(|u| format!("use {}", u.id)).collect()
                }
            })
            .collect()
    }

    /// A provider that reports one prompt token for 220 KB cannot switch compaction off: the
    /// estimate never sinks below the bytes' own measure.
    #[test]
    fn under_reported_usage_never_sinks_the_estimate() {
        let mut estimate = TokenEstimate::default();
        estimate.observe(220_000, 1);
        assert!(estimate.tokens(220_000) >= 220_000 / MAX_BYTES_PER_TOKEN);
        assert!(estimate.bytes(16_000) <= 16_000 * MAX_BYTES_PER_TOKEN);
        let window = Window {
            tokens: 16_000,
            reply: 1024,
        };
        assert!(window.needs_compaction(estimate.tokens(220_000)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(40))]

        /// The law: any budget at least the view's floor gets a view within it; a view that
        /// fits is untouched; a fitted view keeps every message, part and tool use id (so
        /// uses and results stay paired), and the floor is a stub per part at most.
        #[test]
        fn a_fitted_view_fits_any_budget_above_its_floor(
            messages in proptest::collection::vec(message(), 0..8),
            budget in 0u64..400_000,
        ) {
            let view = View { system: "sys".into(), messages };
            let floor = floor_bytes(&view);
            let fitted = fit_view(&view, budget);
            prop_assert!(view_bytes(&fitted) <= budget.max(floor));
            if view_bytes(&view) <= budget {
                prop_assert_eq!(&fitted, &view);
            }
            prop_assert_eq!(shape(&fitted), shape(&view));
            let parts: u64 = items(&view).len() as u64;
            prop_assert!(floor <= view_bytes(&view));
            prop_assert!(view_bytes(&fitted) >= floor.min(view_bytes(&view)));
            prop_assert!(parts == 0 || floor < view_bytes(&view));
        }
    }
}
