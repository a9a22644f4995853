//! What long sessions send, with and without the economy: request bytes per call and the
//! share of them a provider can read from its prompt cache, at calls 10, 100 and 500 of one
//! scripted session, against the same session rendered without compaction and caching.
//!
//! The session is the Log a sequencer writes (a line, then each call a reply with a tool use
//! and its ~2.5 KB result), folded by core's view. The economy run compacts as the sequencer
//! does (core's `Window`, `TokenEstimate` calibrated on a 4-bytes-a-token model,
//! `ViewFold::oldest_span`, a fixed summary) and renders with the Anthropic dialect's cache
//! breakpoints; the plain run neither compacts nor marks breakpoints. *Cacheable* bytes are
//! those before a breakpoint whose content equals the previous request's up to one of its
//! breakpoints (the provider reads them from the cache), plus the tools when unchanged.
//!
//! The cacheable share is also printed across compactions (the requests right after one, whose
//! prefix the compaction changed) and between them.
//!
//! Run: `cargo bench -p l3m-models --bench economy`.

use l3m_core::log::{CallId, Record, RecordBody, ToolUse, ToolUseId, Usage};
use l3m_core::names::Entity;
use l3m_core::view::{TokenEstimate, ViewFold, Window, view_bytes};
use l3m_models::{ModelRequest, ToolSpec, anthropic};
use serde_json::json;

type Fixture<T> = Result<T, Box<dyn std::error::Error>>;

const CALLS: usize = 500;
const SAMPLES: [usize; 3] = [10, 100, 500];
const WINDOW: u64 = 200_000;
const MAX_TOKENS: u64 = 8192;
const BREAKPOINT: &[u8] = br#","cache_control":{"type":"ephemeral"}"#;

fn tools() -> Vec<ToolSpec> {
    // About the size of the table a sequencer offers (a dozen tools, ~6 KB of specs).
    [
        "read_file",
        "write_file",
        "list_dir",
        "remove",
        "make_dir",
        "edit_file",
        "search",
        "git_status",
        "git_commit",
        "send_letter",
        "read_inbox",
        "now",
    ]
    .iter()
    .map(|name| ToolSpec {
        name: (*name).into(),
        description: format!("The {name} tool, described for the model at some length. ").repeat(4),
        input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "a path under your context root"},
                "content": {"type": "string"}}}),
    })
    .collect()
}

/// The records of call `n`: its reply with a tool use, and the use's result.
fn call_records(n: usize) -> Fixture<Vec<RecordBody>> {
    let id = ToolUseId::new(format!("toolu_{n}"))?;
    let call = CallId::new(format!("c{n}"))?;
    Ok(vec![
        RecordBody::CallStarted {
            call: call.clone(),
            provider: "anthropic".into(),
            model: "claude".into(),
            attempt: 1,
            fallback_of: None,
        },
        RecordBody::AssistantReply {
            call,
            text: format!("Step {n}: reading the next module before I change it."),
            tool_uses: vec![ToolUse {
                id: id.clone(),
                name: "read_file".into(),
                input: json!({"path": format!("workspace/src/m{n}.rs")}),
            }],
            usage: Usage::default(),
            stop_reason: "tool_use".into(),
        },
        RecordBody::ToolResult {
            id,
            output: format!(
                "// module {n}\n{}",
                "fn step() { let x = compute(); }\n".repeat(75)
            ),
            is_error: false,
            effects: vec![],
            refusal: None,
        },
    ])
}

/// One run of the session: each request's bytes as sent.
struct Run {
    records: Vec<Record>,
    fold: ViewFold,
    bodies: Vec<Vec<u8>>,
    /// The indices of the requests sent right after a compaction: the ones whose prefix the
    /// compaction changed.
    after_compaction: Vec<usize>,
}

impl Run {
    fn push(&mut self, body: RecordBody) {
        let record = Record {
            seq: self.records.len() as u64,
            at_ms: 0,
            body,
        };
        self.fold.advance(&record);
        self.records.push(record);
    }
}

fn unmarked(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(at) = rest.windows(BREAKPOINT.len()).position(|w| w == BREAKPOINT) {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at + BREAKPOINT.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Bytes of `body` a provider reads from its cache after `previous` was sent.
fn cacheable(previous: Option<&[u8]>, body: &[u8]) -> usize {
    let Some(previous) = previous else { return 0 };
    let current = unmarked(body);
    let tools_at = current
        .windows(9)
        .position(|w| w == br#","tools":"#)
        .unwrap_or(current.len());
    let tools = current.len() - tools_at;
    let mut best = 0;
    let mut rest = previous;
    let mut consumed = 0;
    while let Some(at) = rest.windows(BREAKPOINT.len()).position(|w| w == BREAKPOINT) {
        let prefix = unmarked(&previous[..consumed + at]);
        if prefix.len() <= tools_at && current.starts_with(&prefix) {
            best = best.max(prefix.len());
        }
        consumed += at + BREAKPOINT.len();
        rest = &previous[consumed..];
    }
    let tools_same = previous.ends_with(&body[body.len() - tools.min(body.len())..])
        || unmarked(previous).ends_with(&current[tools_at..]);
    best + if tools_same && best > 0 { tools } else { 0 }
}

fn run(economy: bool) -> Fixture<Run> {
    let tools = tools();
    let tools_bytes: u64 = tools
        .iter()
        .map(|t| (t.name.len() + t.description.len() + t.input_schema.to_string().len()) as u64)
        .sum();
    let window = Window {
        tokens: WINDOW,
        reply: MAX_TOKENS,
    };
    let mut estimate = TokenEstimate::default();
    let mut run = Run {
        records: Vec::new(),
        fold: ViewFold::new(),
        bodies: Vec::new(),
        after_compaction: Vec::new(),
    };
    run.push(RecordBody::SystemPrompt {
        text: "You are the agent demo in l3m. ".repeat(60),
        continues: false,
    });
    run.push(RecordBody::UserLine {
        from: Entity::parse("human:alice")?,
        text: "Tidy every module of workspace/src, one at a time.".into(),
    });
    for n in 1..=CALLS {
        let measured = view_bytes(run.fold.view()) + tools_bytes;
        if economy && window.needs_compaction(estimate.tokens(measured)) {
            let keep = estimate.bytes(window.keep()).saturating_sub(tools_bytes);
            if let Some(span) = run.fold.oldest_span(keep) {
                run.push(RecordBody::Compaction {
                    from: span.from,
                    to: span.to,
                    summary: "Tidied the modules so far; each kept its behaviour. ".repeat(20),
                });
                run.after_compaction.push(n - 1);
            }
        }
        let request = ModelRequest {
            model: "claude".into(),
            view: run.fold.view().clone(),
            notes: None,
            tools: tools.clone(),
            max_tokens: MAX_TOKENS as u32,
            call: CallId::new(format!("c{n}"))?,
        };
        let mut body = serde_json::to_vec(&anthropic::render(&request))?;
        if !economy {
            body = unmarked(&body);
        }
        estimate.observe(
            view_bytes(&request.view) + tools_bytes,
            (body.len() as u64).div_ceil(4),
        );
        run.bodies.push(body);
        for record in call_records(n)? {
            run.push(record);
        }
    }
    Ok(run)
}

fn main() -> Fixture<()> {
    let plain = run(false)?;
    let economy = run(true)?;
    println!(
        "{:>5} {:>12} {:>12} {:>7} {:>16} {:>18}",
        "call", "plain bytes", "economy", "ratio", "plain cacheable", "economy cacheable"
    );
    for n in SAMPLES {
        let share = |run: &Run| {
            let body = &run.bodies[n - 1];
            let previous = run.bodies.get(n.wrapping_sub(2)).map(Vec::as_slice);
            let cached = if std::ptr::eq(run, &plain) {
                0
            } else {
                cacheable(previous, body)
            };
            cached as f64 / body.len() as f64 * 100.0
        };
        let (p, e) = (plain.bodies[n - 1].len(), economy.bodies[n - 1].len());
        println!(
            "{n:>5} {p:>12} {e:>12} {:>7.3} {:>15.1}% {:>17.1}%",
            e as f64 / p as f64,
            share(&plain),
            share(&economy)
        );
    }
    let largest = economy.bodies.iter().map(Vec::len).max().unwrap_or(0);
    let compactions = economy
        .records
        .iter()
        .filter(|r| matches!(r.body, RecordBody::Compaction { .. }))
        .count();
    let cached: usize = (1..economy.bodies.len())
        .map(|i| cacheable(Some(&economy.bodies[i - 1]), &economy.bodies[i]))
        .sum();
    let sent: usize = economy.bodies.iter().skip(1).map(Vec::len).sum();
    // The share across compactions: of the requests right after one, and of those between.
    let share_of = |indices: &mut dyn Iterator<Item = usize>| {
        let (cached, sent) = indices
            .filter(|&i| i > 0)
            .map(|i| {
                let body = &economy.bodies[i];
                (cacheable(Some(&economy.bodies[i - 1]), body), body.len())
            })
            .fold((0usize, 0usize), |(c, s), (ci, si)| (c + ci, s + si));
        cached as f64 / sent.max(1) as f64 * 100.0
    };
    let across = share_of(&mut economy.after_compaction.iter().copied());
    let between =
        share_of(&mut (1..economy.bodies.len()).filter(|i| !economy.after_compaction.contains(i)));
    println!(
        "economy: {:.1}% of input bytes cacheable in the {} requests right after a compaction, \
         {:.1}% in the requests between compactions",
        across,
        economy.after_compaction.len(),
        between
    );
    println!(
        "economy: {compactions} compactions; largest request {largest} bytes (~{} tokens of a \
         {WINDOW}-token window); {:.1}% of input bytes cacheable over calls 2..{CALLS}",
        largest.div_ceil(4),
        cached as f64 / sent as f64 * 100.0
    );
    Ok(())
}
