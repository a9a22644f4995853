//! Long sessions on real model wires: mistakes go back to the model, tool output is capped per
//! model. A real hubd on a real nats-server; the model is a local HTTP server speaking the
//! OpenAI and Anthropic APIs with scripted answers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;

use common::chat::{self, ChatServer, Turn};
use common::*;
use l3m_core::log::{Record, RecordBody};
use sequencer::{Config, Exit, run_agent};
use tokio_util::sync::CancellationToken;

/// A configuration whose one model speaks `dialect` at `server`, with `extra` lines in its table.
fn wire_config(dialect: &str, server: &ChatServer, extra: &str) -> Config {
    Config::parse(&format!(
        "default_model = \"m\"\n[models.m]\ndialect = \"{dialect}\"\nmodel = \"qwen2.5:7b\"\n\
         base_url = \"{}\"\napi_key_env = \"KEY\"\n{extra}\n[sequencer]\nretry_backoff_ms = 1\n\
         idle_exit_secs = 2\n",
        server.base_url
    ))
    .unwrap()
}

fn factory(config: &Config) -> sequencer::ProviderFactory {
    sequencer::model::provider_factory(
        config.clone(),
        std::env::temp_dir(),
        Arc::new(|name: &str| (name == "KEY").then(|| "k".to_owned())),
    )
}

async fn run_session(hub: &TestHub, config: Config) -> Vec<Record> {
    let run = hub.run("demo", config.clone(), factory(&config)).await;
    let exit = run_agent(run, CancellationToken::new()).await.unwrap();
    assert_eq!(exit, Exit::Idle);
    let log = hub.log("demo").await;
    check_log(&log);
    log
}

fn tool_results(log: &[Record]) -> Vec<(String, bool, Option<String>)> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult {
                output,
                is_error,
                refusal,
                ..
            } => Some((
                output.clone(),
                *is_error,
                refusal.as_ref().map(|r| r.boundary.clone()),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_then_schema_violating_arguments_are_corrected_in_the_same_turn() {
    for dialect in ["openai", "anthropic"] {
        let hub = TestHub::start().await;
        hub.spawn("demo", 20).await;
        hub.letter("demo", "write a.txt").await;
        let server = ChatServer::start(vec![
            // Not JSON at all: cut off mid-object, as small local models do.
            Turn::call("write_file", r#"{"path": "workspace/a.txt", "content": "#),
            // JSON, but a field the schema does not have.
            Turn::call(
                "write_file",
                r#"{"file": "workspace/a.txt", "content": "one"}"#,
            ),
            Turn::call(
                "write_file",
                r#"{"path": "workspace/a.txt", "content": "one"}"#,
            ),
            Turn::text("done"),
        ])
        .await;
        let log = run_session(&hub, wire_config(dialect, &server, "")).await;

        let results = tool_results(&log);
        assert_eq!(results.len(), 3, "{dialect}: {results:?}");
        assert!(results[0].0.contains("not a JSON object"), "{results:?}");
        assert_eq!(results[0].2.as_deref(), Some("tool-arguments"));
        assert!(results[1].1 && results[1].0.contains("file"), "{results:?}");
        assert_eq!(results[1].2.as_deref(), Some("tool-arguments"));
        assert_eq!((results[2].1, results[2].2.as_deref()), (false, None));
        assert_eq!(
            std::fs::read(hub.acr("demo").join("workspace/a.txt")).unwrap(),
            b"one"
        );
        assert!(
            !log.iter()
                .any(|r| matches!(r.body, RecordBody::CallFailed { .. })),
            "{dialect}: no call failed: {:?}",
            kinds(&log)
        );
        assert_eq!(assistant_texts(&log).last().unwrap(), "done");
        // One turn: the line, four calls, one turn-end.
        assert_eq!(kinds(&log).iter().filter(|k| **k == "turn-end").count(), 1);
        // The model saw each error on the call after its mistake.
        let received = server.received();
        assert_eq!(received.len(), 4);
        let second = received[1].to_string();
        assert!(second.contains("not a JSON object"), "{dialect}: {second}");
        let third = received[2].to_string();
        assert!(third.contains("unknown field"), "{dialect}: {third}");
    }
}

/// The content of the last tool result an OpenAI request carries.
fn last_tool_message(request: &serde_json::Value) -> &str {
    let messages = request["messages"].as_array().unwrap();
    let result = messages.iter().rev().find(|m| m["role"] == "tool").unwrap();
    result["content"].as_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_900_kb_read_reaches_the_model_cut_at_its_cap_with_a_note() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    let workspace = hub.acr("demo").join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let line = "0123456789 the quick brown fox jumps over the lazy dog, again and again\n";
    let big = line.repeat(900 * 1024 / line.len());
    std::fs::write(workspace.join("big.txt"), &big).unwrap();
    hub.letter("demo", "read big.txt").await;
    let server = ChatServer::start(vec![
        Turn::call("read_file", r#"{"path": "workspace/big.txt"}"#),
        Turn::call(
            "read_file",
            r#"{"path": "workspace/big.txt", "from_line": 50, "to_line": 51}"#,
        ),
        Turn::text("done"),
    ])
    .await;
    let log = run_session(
        &hub,
        wire_config("openai", &server, "tool_output_cap = 8192"),
    )
    .await;

    let received = server.received();
    assert_eq!(received.len(), 3);
    let content = last_tool_message(&received[1]);
    assert!(
        content.len() <= 8192,
        "{} bytes reached the model",
        content.len()
    );
    assert!(big.starts_with(content.split("\n(l3m) output cut").next().unwrap()));
    assert!(
        content.contains("output cut at 8192 bytes") && content.contains("from_line"),
        "{content}"
    );
    // The range it then asked for came back whole.
    assert_eq!(last_tool_message(&received[2]), line.repeat(2));
    assert_eq!(assistant_texts(&log).last().unwrap(), "done");
}

/// Whether `body` is a compaction's summary request, in either dialect.
fn is_summary_request(body: &serde_json::Value) -> bool {
    let system = match &body["system"] {
        serde_json::Value::Null => body["messages"][0]["content"].to_string(),
        system => system.to_string(),
    };
    system.contains("You are summarizing")
}

/// A long session against a model with a 16k-token window, in both dialects: every call reads
/// a large file or writes a small one, so the history outgrows the window many times over. The
/// session completes; every request, summaries included, fits the window as the server's own
/// tokenizer counts it; every compaction was a summary the model was asked for; the Log keeps
/// every result. `L3M_LONG_SESSION=1` runs 500 calls; CI runs 60.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_session_compacts_and_never_sends_over_the_window() {
    let calls: usize = if std::env::var_os("L3M_LONG_SESSION").is_some() {
        500
    } else {
        60
    };
    for dialect in ["openai", "anthropic"] {
        long_session(dialect, calls).await;
    }
}

async fn long_session(dialect: &str, calls: usize) {
    const WINDOW: u64 = 16_384;
    const MAX_TOKENS: u64 = 2048;
    let hub = TestHub::start().await;
    hub.spawn("demo", 4 * calls as u64).await;
    let workspace = hub.acr("demo").join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    let notes: String = (0..800)
        .map(|i| format!("note {i}: the build passes on every platform we try\n"))
        .collect();
    std::fs::write(workspace.join("notes.txt"), notes).unwrap();
    hub.letter("demo", "go through the notes and keep a log")
        .await;
    let server = ChatServer::start(vec![]).await;
    let agent_requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = agent_requests.clone();
    server.then(move |_, body| {
        if is_summary_request(body) {
            return Turn::text("summary: read the notes, kept a log in workspace/log-*.txt");
        }
        match counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            n if n + 1 >= calls => Turn::text("done"),
            n if n % 2 == 0 => Turn::call("read_file", r#"{"path": "workspace/notes.txt"}"#),
            n => Turn::call(
                "write_file",
                &format!(
                    r#"{{"path": "workspace/log-{n}.txt", "content": "read the notes again"}}"#
                ),
            ),
        }
    });
    let mut config = wire_config(dialect, &server, &format!("context_window = {WINDOW}"));
    config.sequencer.max_tokens = MAX_TOKENS as u32;
    let log = run_session(&hub, config).await;

    assert_eq!(assistant_texts(&log).last().unwrap(), "done");
    let raw = server.raw();
    for (i, body) in raw.iter().enumerate() {
        let tokens = chat::tokens_of(body);
        assert!(
            tokens + MAX_TOKENS <= WINDOW,
            "{dialect}: request {i} of {} bytes ({tokens} tokens) does not fit the window",
            body.len()
        );
    }
    let compactions = kinds(&log).iter().filter(|k| **k == "compaction").count();
    let summaries = server
        .received()
        .iter()
        .filter(|b| is_summary_request(b))
        .count();
    let largest = raw.iter().map(Vec::len).max().unwrap_or(0);
    println!(
        "{dialect}: {calls} calls, {compactions} compactions; largest request {largest} bytes \
         (~{} tokens of a {WINDOW}-token window)",
        largest.div_ceil(4)
    );
    assert!(
        compactions >= 3,
        "{dialect}: only {compactions} compactions"
    );
    assert_eq!(compactions, summaries);
    let agent_requests = agent_requests.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(agent_requests, calls);
    assert_eq!(raw.len(), agent_requests + summaries);
    // The Log keeps every result, compacted or not.
    let results = kinds(&log).iter().filter(|k| **k == "tool-result").count();
    assert_eq!(results, calls - 1);
    rewind_and_fork_across_a_compaction(&log);
}

/// On a real Log: a rewind to before its first compaction gives the view a fresh fold of the
/// records up to the target gives, and a fork just after it starts from the compacted view.
fn rewind_and_fork_across_a_compaction(log: &[Record]) {
    use l3m_core::view::view;
    let c = log
        .iter()
        .position(|r| matches!(r.body, RecordBody::Compaction { .. }))
        .unwrap();
    let rewind = |seq: usize| Record {
        seq: seq as u64,
        at_ms: 0,
        body: RecordBody::Rewind {
            to: c as u64 - 1,
            reason: "back".into(),
        },
    };
    let mut rewound = log.to_vec();
    rewound.push(rewind(log.len()));
    let mut fresh = log[..c].to_vec();
    fresh.push(rewind(c));
    assert_eq!(view(&rewound), view(&fresh));
    let compacted = view(&log[..=c]);
    let forked = l3m_core::owed::fork_log(log[..=c].to_vec(), "fork", 0);
    assert_eq!(
        view(&forked).messages[..compacted.messages.len()],
        compacted.messages[..]
    );
}

/// Where `needle` last occurs in `hay`.
fn rfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).rposition(|w| w == needle)
}

const BREAKPOINT: &[u8] = br#","cache_control":{"type":"ephemeral"}"#;

/// `body` without its cache breakpoints: the provider matches cached prefixes on content,
/// and a breakpoint only says where to cache, so where the breakpoints sit may move.
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

/// The content of an Anthropic request up to its last breakpoint in the conversation, unmarked.
fn cached_prefix(body: &[u8]) -> Vec<u8> {
    let messages_end = rfind(body, br#"],"tools":["#).unwrap_or(body.len());
    let at = rfind(&body[..messages_end], BREAKPOINT).expect("a breakpoint in the conversation");
    unmarked(&body[..at])
}

/// The bytes of an OpenAI request up to the end of its message list.
fn message_prefix(body: &[u8]) -> Vec<u8> {
    let end = rfind(body, br#"],"tools":["#).unwrap_or(body.len() - 2);
    body[..end].to_vec()
}

/// Bytes of the harness's own narration in a request: user texts that begin with `(l3m)`.
fn narration_bytes(body: &serde_json::Value) -> usize {
    let mut total = 0;
    for message in body["messages"].as_array().unwrap() {
        if message["role"] != "user" {
            continue;
        }
        let texts: Vec<&str> = match &message["content"] {
            serde_json::Value::String(s) => vec![s.as_str()],
            serde_json::Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect(),
            _ => vec![],
        };
        total += texts
            .iter()
            .flat_map(|t| t.split("\n\n"))
            .filter(|t| t.starts_with("(l3m)"))
            .map(str::len)
            .sum::<usize>();
    }
    total
}

/// The recorded requests of a 50-call session, in both dialects: each request's prefix is
/// byte-identical to the previous request's (up to its last cache breakpoint for Anthropic,
/// the breakpoints themselves aside; its whole message list for OpenAI), so the provider can
/// serve it from its cache; the
/// harness's narration is at most 2% of what is sent, and no budget line appears in a session
/// that never runs low.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_call_session_sends_append_only_prefixes_and_little_narration() {
    for (dialect, model) in [("anthropic", "claude-test"), ("openai", "gpt-4o")] {
        let hub = TestHub::start().await;
        hub.spawn("demo", 200).await;
        let workspace = hub.acr("demo").join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("plan.md"), "1. read\n2. write\n3. repeat\n").unwrap();
        hub.letter("demo", "follow workspace/plan.md").await;
        let server = ChatServer::start(vec![]).await;
        server.then(move |n, _| match n {
            49 => Turn::text("done"),
            n if n % 2 == 0 => Turn::call("read_file", r#"{"path": "workspace/plan.md"}"#),
            n => Turn::call(
                "write_file",
                &format!(r#"{{"path": "workspace/out-{n}.md", "content": "step {n}"}}"#),
            ),
        });
        let config = Config::parse(&format!(
            "default_model = \"m\"\n[models.m]\ndialect = \"{dialect}\"\nmodel = \"{model}\"\n\
             base_url = \"{}\"\napi_key_env = \"KEY\"\n[sequencer]\nretry_backoff_ms = 1\n\
             idle_exit_secs = 2\n",
            server.base_url
        ))
        .unwrap();
        let log = run_session(&hub, config).await;
        assert_eq!(assistant_texts(&log).last().unwrap(), "done");

        let raw = server.raw();
        assert_eq!(raw.len(), 50, "{dialect}");
        for i in 1..raw.len() {
            let prefix = match dialect {
                "anthropic" => cached_prefix(&raw[i - 1]),
                _ => message_prefix(&raw[i - 1]),
            };
            let next = match dialect {
                "anthropic" => unmarked(&raw[i]),
                _ => raw[i].clone(),
            };
            assert!(
                next.starts_with(&prefix),
                "{dialect}: request {i} does not start with request {}'s {} bytes",
                i - 1,
                prefix.len()
            );
        }
        let sent: usize = raw.iter().map(Vec::len).sum();
        let narrated: usize = server.received().iter().map(narration_bytes).sum();
        let share = narrated as f64 / sent as f64;
        println!(
            "{dialect}: 50 calls, {sent} request bytes, narration {narrated} bytes ({:.2}%)",
            share * 100.0
        );
        assert!(
            share <= 0.02,
            "{dialect}: narration is {:.2}% of the request bytes",
            share * 100.0
        );
        for body in server.received() {
            assert!(
                !body.to_string().contains("your budget"),
                "{dialect}: a budget line was sent"
            );
        }
        assert!(!kinds(&log).contains(&"compaction"));
    }
}

/// A window with room for little more than the last exchange: each compaction swallows the
/// previous summary and everything since, up to the last reply (a summary's origin is newer
/// than what follows it, so the span must start at the oldest record before the cut), every
/// request fits the window, and each call costs at most one summary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_with_room_for_little_more_than_the_last_exchange_stays_bounded() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 100).await;
    hub.letter("demo", "write notes").await;
    let server = ChatServer::start(vec![]).await;
    let agent_requests = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = agent_requests.clone();
    server.then(move |_, body| {
        if is_summary_request(body) {
            return Turn::text("summary: wrote notes");
        }
        match counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            n if n >= 9 => Turn::text("done"),
            n => Turn::call(
                "write_file",
                &format!(
                    r#"{{"path": "workspace/n{n}.md", "content": "{}"}}"#,
                    "x".repeat(2000)
                ),
            ),
        }
    });
    let mut config = wire_config("openai", &server, "context_window = 4096");
    config.sequencer.max_tokens = 1024;
    let log = run_session(&hub, config).await;
    assert_eq!(assistant_texts(&log).last().unwrap(), "done");
    let compactions = kinds(&log).iter().filter(|k| **k == "compaction").count();
    let calls = kinds(&log).iter().filter(|k| **k == "call-started").count();
    assert_eq!(calls, 10);
    for (i, body) in server.raw().iter().enumerate() {
        let tokens = chat::tokens_of(body);
        assert!(tokens + 1024 <= 4096, "request {i}: {tokens} tokens");
    }
    assert!(
        compactions >= 1 && compactions <= calls,
        "{compactions} compactions for {calls} calls"
    );
}
