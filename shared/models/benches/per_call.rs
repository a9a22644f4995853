//! What one request costs this crate before anything leaves the process, as the history grows.
//!
//! For views of 10 and 10,000 messages (user lines, replies with tool uses, tool results) it
//! measures the least time of many rounds for:
//! - `clone`: cloning the view, which the sequencer does anyway to build a `ModelRequest` — the
//!   reference every other figure is divided by;
//! - `scripted`: the scripted provider's choice of reply (counting assistant turns and bytes);
//! - `anthropic` / `openai`: rendering the request body and serializing it to bytes.
//!
//! It prints each figure and its ratio to `clone` at the same size. All are O(history) by
//! design (the wire carries the whole conversation); the point is that none is a large multiple
//! of the clone the sequencer cannot avoid.
//!
//! Run: `cargo bench -p l3m-models --bench per_call`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use l3m_core::log::{CallId, ToolUse, ToolUseId};
use l3m_core::view::{Message, Part, View};
use l3m_models::scripted::Script;
use l3m_models::{ModelRequest, ToolSpec, anthropic, openai};
use serde_json::json;

type Fixture<T> = Result<T, Box<dyn std::error::Error>>;

fn view(messages: usize) -> Fixture<View> {
    let mut out = Vec::with_capacity(messages);
    let mut n = 0;
    while out.len() < messages {
        n += 1;
        out.push(Message::User {
            content: vec![Part::Text {
                text: format!("Please look at module {n} and tidy it. ").repeat(3),
            }],
        });
        let id = ToolUseId::new(format!("toolu_{n}"))?;
        out.push(Message::Assistant {
            text: "Let me read it first, then make the change. ".repeat(2),
            tool_uses: vec![ToolUse {
                id: id.clone(),
                name: "read_file".into(),
                input: json!({"path": format!("src/m{n}.rs"), "lines": [1, 80]}),
            }],
        });
        out.push(Message::User {
            content: vec![Part::ToolResult {
                id,
                output: "fn main() {}\n".repeat(20),
                is_error: false,
            }],
        });
    }
    out.truncate(messages);
    Ok(View {
        system: "You are a careful engineer. ".repeat(40),
        messages: out,
    })
}

fn least(rounds: u32, mut f: impl FnMut()) -> Duration {
    (0..rounds)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() -> Fixture<()> {
    let script = Script::parse(
        Path::new("bench.toml"),
        "[[turn]]\ntext = \"ok\"\n[[turn.tool_use]]\nname = \"read_file\"\n",
    )?;
    for size in [10, 10_000] {
        let request = ModelRequest {
            model: "m".into(),
            view: view(size)?,
            notes: Some("notes".into()),
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads a file.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            max_tokens: 1024,
            call: CallId::new("call-1")?,
        };
        let rounds = if size > 1000 { 200 } else { 20_000 };
        let clone = least(rounds, || {
            black_box(request.view.clone());
        });
        let scripted = least(rounds, || {
            let _ = black_box(script.answer(black_box(&request)));
        });
        let anthropic = least(rounds, || {
            black_box(serde_json::to_vec(&anthropic::render(black_box(&request))).ok());
        });
        let openai = least(rounds, || {
            black_box(serde_json::to_vec(&openai::render(black_box(&request))).ok());
        });
        let ratio = |d: Duration| d.as_secs_f64() / clone.as_secs_f64().max(1e-12);
        println!("view of {size} messages: clone {clone:?} (reference)");
        for (name, d) in [
            ("scripted", scripted),
            ("anthropic", anthropic),
            ("openai", openai),
        ] {
            println!("  {name:<9} {d:>12?}  = {:.2}x clone", ratio(d));
        }
    }
    Ok(())
}
