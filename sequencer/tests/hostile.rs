//! Issue 37's crash loops, replayed against the real stack: a hostile model server on loopback
//! (both dialects) and hostile letters. Control characters in a reply, a tool name with a line
//! break, a stream error with an escape, a file that starts with one, a 160 KB tool name, a
//! 2 MB error message, a 2 MB string quoted by a parser's error, five letters of 250 KiB at
//! once: each is journaled, the sequencer never exits on it, the model is told once, and a
//! failure known spends at most one call per later wake.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use common::chat::{ChatServer, Turn};
use common::*;
use l3m_core::log::{Record, RecordBody};
use l3m_core::record_format::MAX_STORED_LINE;
use sequencer::boundary::{MAX_ERROR, MAX_NAME};
use sequencer::{Config, Exit, run_agent};
use tokio_util::sync::CancellationToken;

const DIALECTS: [&str; 2] = ["openai", "anthropic"];

/// A configuration whose one model speaks `dialect` at `base_url`.
fn wire_config(dialect: &str, base_url: &str) -> Config {
    wire_config_with(dialect, base_url, "")
}

/// [`wire_config`] with more lines in the model's table.
fn wire_config_with(dialect: &str, base_url: &str, model: &str) -> Config {
    Config::parse(&format!(
        "default_model = \"m\"\n[models.m]\ndialect = \"{dialect}\"\nmodel = \"m\"\n\
         base_url = \"{base_url}\"\napi_key_env = \"KEY\"\n{model}\n[sequencer]\n\
         retry_backoff_ms = 1\nidle_exit_secs = 1\n"
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

/// Runs `demo` until it is idle: it must not exit any other way (an error is the crash loop).
async fn run_idle(hub: &TestHub, config: &Config) -> Vec<Record> {
    let run = hub.run("demo", config.clone(), factory(config)).await;
    let exit = run_agent(run, CancellationToken::new()).await;
    assert!(
        matches!(exit, Ok(Exit::Idle)),
        "the sequencer must go idle, not stop: {exit:?}"
    );
    let log = hub.log("demo").await;
    check_log(&log);
    for r in &log {
        let line = r.to_line().unwrap();
        assert!(line.len() <= MAX_STORED_LINE && !line.contains('\u{1b}'));
    }
    log
}

/// A model server that answers each request with the next raw response (status, body), the
/// last one again once they run out, and counts the requests.
#[derive(Clone)]
struct RawServer {
    base_url: String,
    requests: Arc<AtomicUsize>,
}

struct Answers {
    queue: Mutex<VecDeque<(u16, String)>>,
    last: Mutex<(u16, String)>,
    requests: Arc<AtomicUsize>,
}

async fn answer(State(answers): State<Arc<Answers>>, _body: Bytes) -> Response {
    answers.requests.fetch_add(1, Ordering::SeqCst);
    let (status, body) = {
        let next = answers.queue.lock().unwrap().pop_front();
        match next {
            Some(next) => {
                *answers.last.lock().unwrap() = next.clone();
                next
            }
            None => answers.last.lock().unwrap().clone(),
        }
    };
    let kind = if status == 200 {
        "text/event-stream"
    } else {
        "application/json"
    };
    Response::builder()
        .status(status)
        .header("content-type", kind)
        .body(Body::from(body))
        .unwrap()
}

impl RawServer {
    async fn start(answers: Vec<(u16, String)>) -> RawServer {
        let requests = Arc::new(AtomicUsize::new(0));
        let state = Arc::new(Answers {
            last: Mutex::new(answers.last().cloned().unwrap()),
            queue: Mutex::new(answers.into()),
            requests: requests.clone(),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(answer))
            .route("/v1/messages", post(answer))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        RawServer {
            base_url: format!("http://{addr}"),
            requests,
        }
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

/// A stream that fails mid-way with `kind` and `message`, in `dialect`'s words.
fn stream_error(dialect: &str, kind: &str, message: &str) -> String {
    let error = serde_json::json!({"type": kind, "message": message});
    match dialect {
        "anthropic" => format!(
            "event: message_start\ndata: {}\n\nevent: error\ndata: {}\n\n",
            serde_json::json!({"type": "message_start", "message": {"id": "m"}}),
            serde_json::json!({"type": "error", "error": error})
        ),
        _ => format!("data: {}\n\n", serde_json::json!({ "error": error })),
    }
}

/// A stream whose first event holds `big` where the dialect wants an object: the parser's
/// error quotes it.
fn malformed(dialect: &str, big: &str) -> String {
    match dialect {
        "anthropic" => format!(
            "event: message_start\ndata: {}\n\n",
            serde_json::json!({"type": "message_start", "message": big})
        ),
        _ => format!("data: {}\n\n", serde_json::json!({ "choices": big })),
    }
}

fn failures(log: &[Record]) -> Vec<(String, bool)> {
    log.iter()
        .filter_map(|r| match &r.body {
            RecordBody::CallFailed {
                error, retryable, ..
            } => Some((error.clone(), *retryable)),
            _ => None,
        })
        .collect()
}

/// A reply with control characters, a tool name with a line break, and a file that starts with
/// an escape: each journaled with its control characters made visible, the unknown name
/// refused and told to the model, the file's text shown, the turn completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_characters_from_a_model_or_a_file_are_journaled_and_the_turn_completes() {
    for dialect in DIALECTS {
        let hub = TestHub::start().await;
        hub.spawn("demo", 20).await;
        std::fs::write(
            hub.acr("demo").join("workspace/esc.txt"),
            "\u{1b}[31mred\u{1b}[0m\n",
        )
        .unwrap();
        hub.letter("demo", "look").await;
        let server = ChatServer::start(vec![
            Turn {
                text: "clearing \u{1b}[2J\u{1}".into(),
                calls: vec![("write\nfile".into(), "{}".into())],
            },
            Turn::call("read_file", r#"{"path": "workspace/esc.txt"}"#),
            Turn::text("done \u{1b}[31m"),
        ])
        .await;
        let log = run_idle(&hub, &wire_config(dialect, &server.base_url)).await;
        let texts = assistant_texts(&log);
        assert!(
            texts[0].starts_with("clearing \\u{1b}[2J\\u{1}"),
            "{dialect}: {texts:?}"
        );
        let results = tool_results(&log);
        assert!(
            results[0].1 && results[0].0.contains("no tool named \"write\\\\u{a}file\""),
            "{dialect}: {results:?}"
        );
        assert!(
            !results[1].1 && results[1].0.starts_with("\\u{1b}[31mred"),
            "{dialect}: {results:?}"
        );
        let received = server.received();
        assert_eq!(received.len(), 3, "{dialect}: one call per step");
        assert!(
            received[1].to_string().contains("no tool named"),
            "{dialect}: the model is told"
        );
        assert!(
            matches!(log.last().map(|r| &r.body), Some(RecordBody::TurnEnd)),
            "{dialect}"
        );
    }
}

/// An unknown tool name of 160 KB of combining characters is refused in a small record, and
/// the model is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_unknown_tool_name_is_refused_in_a_small_record() {
    for dialect in DIALECTS {
        let hub = TestHub::start().await;
        hub.spawn("demo", 20).await;
        hub.letter("demo", "go").await;
        let name = "\u{301}".repeat(80_000);
        let server =
            ChatServer::start(vec![Turn::call(&name, "{}"), Turn::text("sorry, done")]).await;
        let log = run_idle(&hub, &wire_config(dialect, &server.base_url)).await;
        let results = tool_results(&log);
        assert!(
            results[0].1 && results[0].0.contains("no tool named"),
            "{dialect}"
        );
        for r in &log[1..] {
            let line = r.to_line().unwrap();
            assert!(line.len() < 4 * MAX_NAME, "{dialect}: {} bytes", line.len());
        }
        assert_eq!(server.received().len(), 2, "{dialect}: told once, answered");
    }
}

/// A provider's stream error holding an escape and 2 MB of text, an HTTP error of 2 MB, and a
/// malformed reply whose parser error quotes a 2 MB string: each is a journaled failure of
/// bounded size, the sequencer goes idle, and a later wake spends one call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_provider_errors_are_bounded_failures_and_a_later_wake_spends_one_call() {
    let huge = format!("\u{1b}[2J{}", "x\u{1b}".repeat(1 << 20));
    for dialect in DIALECTS {
        let cases = [
            (
                "stream error",
                200,
                stream_error(dialect, "invalid_request_error", &huge),
            ),
            (
                "http error",
                400,
                format!("{{\"error\": \"{}\"}}", "y".repeat(2 << 20)),
            ),
            (
                "malformed reply",
                200,
                malformed(dialect, &"z".repeat(2 << 20)),
            ),
        ];
        for (case, status, body) in cases {
            let hub = TestHub::start().await;
            hub.spawn("demo", 20).await;
            hub.letter("demo", "go").await;
            let server = RawServer::start(vec![(status, body)]).await;
            let config = wire_config(dialect, &server.base_url);
            let log = run_idle(&hub, &config).await;
            let failed = failures(&log);
            assert_eq!(failed.len(), 1, "{dialect} {case}: {failed:?}");
            assert!(!failed[0].1, "{dialect} {case}: not retried");
            assert!(
                failed[0].0.len() <= MAX_ERROR,
                "{dialect} {case}: {} bytes",
                failed[0].0.len()
            );
            assert_eq!(server.requests(), 1, "{dialect} {case}");
            hub.letter("demo", "again").await;
            let log = run_idle(&hub, &config).await;
            assert_eq!(failures(&log).len(), 2, "{dialect} {case}");
            assert_eq!(
                server.requests(),
                2,
                "{dialect} {case}: one call for the next wake"
            );
        }
    }
}

/// A mail bomb: five letters of 250 KiB at once (each under the letter limit). The agent boots,
/// journals them all in appends that fit the bus, each letter cut to what a result may show with
/// a note, and goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_letters_of_250_kib_are_journaled_and_the_agent_stays_up() {
    let hub = TestHub::start().await;
    hub.spawn("demo", 20).await;
    for n in 0..5 {
        hub.letter("demo", &format!("{n}{}", "m".repeat(250 * 1024 - 1)))
            .await;
    }
    let provider = counting("[[turn]]\ntext = \"read them\"\n", Duration::ZERO);
    let run = hub
        .run(
            "demo",
            config("idle_exit_secs = 1"),
            factory_of(provider.clone()),
        )
        .await;
    let exit = run_agent(run, CancellationToken::new()).await;
    assert!(matches!(exit, Ok(Exit::Idle)), "{exit:?}");
    let log = hub.log("demo").await;
    check_log(&log);
    assert_eq!(letters_journaled(&log), 5);
    for r in &log {
        if let RecordBody::Event { text, .. } = &r.body {
            assert!(
                text.contains("(l3m) letter cut:") && text.contains("read on with read_letter"),
                "{}",
                &text[text.len() - 200..]
            );
        }
    }
    assert_eq!(provider.requests.load(Ordering::SeqCst), 1);
    assert_eq!(assistant_texts(&log), ["read them"]);
}

/// A whole reply of `text`, streamed in `dialect`'s words.
fn text_reply(dialect: &str, text: &str) -> String {
    match dialect {
        "anthropic" => [
            serde_json::json!({"type": "message_start", "message": {"id": "m"}}),
            serde_json::json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            serde_json::json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
            serde_json::json!({"type": "content_block_stop", "index": 0}),
            serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            serde_json::json!({"type": "message_stop"}),
        ]
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect(),
        _ => format!(
            "data: {}\n\ndata: [DONE]\n\n",
            serde_json::json!({"choices": [{"index": 0,
                "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
        ),
    }
}

/// A provider that keeps answering 529 (Anthropic's overload) or 500: the first wake retries up
/// to the limit, every later wake spends one call (one HTTP request, with the provider's own
/// retries off) and stays stuck showing the failure, and a reply resumes the usual retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_failure_spends_one_call_per_wake_until_a_reply() {
    for dialect in DIALECTS {
        let (status, body) = match dialect {
            "anthropic" => (
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            ),
            _ => (
                500,
                r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
            ),
        };
        let failing = (status, body.to_owned());
        let mut answers = vec![failing.clone(); 5];
        answers.push((200, text_reply(dialect, "back")));
        answers.push(failing);
        let hub = TestHub::start().await;
        hub.spawn("demo", 40).await;
        let server = RawServer::start(answers).await;
        let config = wire_config_with(dialect, &server.base_url, "max_retries = 0");
        let mut per_wake = Vec::new();
        for wake in 0..5 {
            let before = server.requests();
            hub.letter("demo", &format!("wake {wake}")).await;
            let log = run_idle(&hub, &config).await;
            per_wake.push(server.requests() - before);
            let stuck = l3m_core::stuck::stuck(&log);
            if wake != 3 {
                assert!(
                    matches!(&stuck, Some(l3m_core::stuck::Stuck::CallFailed { retryable: true, error, .. })
                        if error.contains(&status.to_string())),
                    "{dialect} wake {wake}: {stuck:?}"
                );
            } else {
                assert_eq!(stuck, None, "{dialect}: the reply unsticks");
                assert_eq!(assistant_texts(&log), ["back"], "{dialect}");
            }
        }
        assert_eq!(
            per_wake,
            [3, 1, 1, 1, 3],
            "{dialect}: HTTP requests per wake"
        );
    }
}

/// The tool use ids a request carries: its uses' and its results', in order (both dialects).
fn paired_ids(body: &serde_json::Value) -> (Vec<String>, Vec<String>) {
    let (mut uses, mut results) = (Vec::new(), Vec::new());
    let text = |v: &serde_json::Value| v.as_str().unwrap().to_owned();
    for message in body["messages"].as_array().unwrap() {
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            uses.push(text(&call["id"]));
        }
        if message["role"] == "tool" {
            results.push(text(&message["tool_call_id"]));
        }
        for part in message["content"].as_array().into_iter().flatten() {
            match part["type"].as_str() {
                Some("tool_use") => uses.push(text(&part["id"])),
                Some("tool_result") => results.push(text(&part["tool_use_id"])),
                _ => {}
            }
        }
    }
    (uses, results)
}

/// Hostile tool use ids (a control character, 300 bytes, 100 bytes no provider takes back, one
/// repeated) do not fail the reply: each use gets a fresh, well-formed id from its position,
/// runs, and the next request pairs its result with it, in both dialects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_tool_use_ids_are_replaced_and_the_tools_run() {
    let hostile = [
        "\u{1b}[2J".to_owned(),
        "x".repeat(300),
        "y".repeat(100),
        "same".to_owned(),
        "same".to_owned(),
    ];
    for dialect in DIALECTS {
        let hub = TestHub::start().await;
        hub.spawn("demo", 20).await;
        std::fs::write(hub.acr("demo").join("workspace/a.txt"), "hello\n").unwrap();
        hub.letter("demo", "read it five times").await;
        let read = (
            "read_file".to_owned(),
            r#"{"path": "workspace/a.txt"}"#.to_owned(),
        );
        let server = ChatServer::start(vec![
            Turn {
                text: String::new(),
                calls: vec![read; hostile.len()],
            },
            Turn::text("done"),
        ])
        .await;
        server.tool_ids(hostile.to_vec());
        let log = run_idle(&hub, &wire_config(dialect, &server.base_url)).await;
        let journaled: Vec<String> = log
            .iter()
            .find_map(|r| match &r.body {
                RecordBody::AssistantReply { tool_uses, .. } if !tool_uses.is_empty() => {
                    Some(tool_uses.iter().map(|u| u.id.to_string()).collect())
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{dialect}: the reply was not journaled: {log:?}"));
        assert_eq!(journaled.len(), hostile.len(), "{dialect}");
        assert_eq!(journaled[3], "same", "{dialect}: a good id is kept");
        for (given, id) in hostile
            .iter()
            .zip(&journaled)
            .filter(|(_, id)| *id != "same")
        {
            assert_ne!(given, id, "{dialect}");
            assert!(
                id.len() <= 40
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{dialect}: {id:?}"
            );
        }
        let results = tool_results(&log);
        assert_eq!(results.len(), hostile.len(), "{dialect}: {results:?}");
        assert!(
            results
                .iter()
                .all(|(out, err)| !err && out.contains("hello")),
            "{dialect}: every use ran: {results:?}"
        );
        let received = server.received();
        assert_eq!(
            received.len(),
            2,
            "{dialect}: one call for the reply, one after"
        );
        let (uses, paired) = paired_ids(&received[1]);
        assert_eq!(
            uses, journaled,
            "{dialect}: the uses carry the replaced ids"
        );
        assert_eq!(
            paired, journaled,
            "{dialect}: each result pairs with its use"
        );
        assert_eq!(assistant_texts(&log).last().unwrap(), "done", "{dialect}");
    }
}

/// The `read_letter` call a cut letter's note names, as the model reads it in `request`:
/// (letter id, from_byte).
fn named_read(request: &serde_json::Value) -> Option<(String, usize)> {
    let text = request.to_string();
    let at =
        text.find("read on with read_letter, id = ")? + "read on with read_letter, id = ".len();
    let (id, rest) = text[at..].split_once(", from_byte = ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((id.to_owned(), digits.parse().ok()?))
}

/// A letter too large to show whole is cut in its event with a note naming the `read_letter`
/// call that reads on; a model that makes exactly that call gets the letter's later bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_letter_is_read_on_with_the_call_its_note_names() {
    for dialect in DIALECTS {
        let hub = TestHub::start().await;
        hub.spawn("demo", 20).await;
        let body: String = (0..)
            .map(|i| format!("{i:08}|"))
            .take(250 * 1024 / 9)
            .collect();
        let sent = hub
            .human()
            .await
            .send_letter("demo", None, &body)
            .await
            .unwrap()
            .letter;
        let server = ChatServer::start(vec![]).await;
        server.then(|n, request| match named_read(request) {
            Some((id, from_byte)) if n == 0 => Turn::call(
                "read_letter",
                &serde_json::json!({"id": id, "from_byte": from_byte}).to_string(),
            ),
            _ => Turn::text("done"),
        });
        let log = run_idle(&hub, &wire_config(dialect, &server.base_url)).await;
        let (id, from_byte) = named_read(&server.received()[0]).expect("the note names the call");
        assert_eq!(id, sent, "{dialect}");
        let event = log
            .iter()
            .find_map(|r| match &r.body {
                RecordBody::Event { text, .. } => Some(text.clone()),
                _ => None,
            })
            .unwrap();
        assert!(
            event.starts_with(&body[..from_byte])
                && !event.contains(&body[from_byte..from_byte + 18]),
            "{dialect}: the event shows the letter up to byte {from_byte}"
        );
        let results = tool_results(&log);
        assert_eq!(results.len(), 1, "{dialect}: {results:?}");
        assert!(
            !results[0].1 && results[0].0.starts_with(&body[from_byte..from_byte + 1000]),
            "{dialect}: the result holds the letter from byte {from_byte}: {}",
            &results[0].0[..200.min(results[0].0.len())]
        );
        assert!(
            results[0].0.contains("(read_letter from_byte = "),
            "{dialect}: a result cut again names the call that reads on"
        );
        assert_eq!(assistant_texts(&log).last().unwrap(), "done", "{dialect}");
    }
}
