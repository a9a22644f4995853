//! A local HTTP server speaking both the Anthropic Messages and the OpenAI Chat Completions
//! APIs with queued answers, recording every request; plus a Log whose view has tool uses,
//! a rewind and a compaction.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns are test code too
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use axum::routing::post;
use futures_util::future::BoxFuture;
use futures_util::stream::{self, StreamExt};
use l3m_core::log::{CallId, Log, RecordBody, ToolUse, ToolUseId, Usage};
use l3m_core::names::Entity;
use l3m_models::backoff::Backoff;
use l3m_models::http::{HttpTuning, Pause};
use l3m_models::{ModelRequest, ToolSpec};
use serde_json::{Value, json};

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// One queued answer.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A 200 event stream, its bytes cut into `chunk`-byte pieces.
    Sse { events: Vec<String>, chunk: usize },
    /// A 200 event stream of exactly these bytes.
    RawSse(Vec<u8>),
    /// A status with headers and a body.
    Status {
        status: u16,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// A 200 event stream that sends these events and then goes silent, never ending.
    StallAfter(Vec<String>),
    /// Never answers at all.
    Hang,
    /// Waits until the test opens the gate (`notify_one`), then gives the answer: holds a
    /// reply back until what the test starts meanwhile is ready.
    Gated(Arc<tokio::sync::Notify>, Box<Answer>),
}

impl Answer {
    pub fn sse(events: Vec<String>) -> Self {
        Self::Sse { events, chunk: 7 }
    }

    pub fn status(status: u16, body: &str) -> Self {
        Self::Status {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        }
    }
}

#[derive(Debug, Default)]
struct Fake {
    received: Mutex<Vec<Received>>,
    answers: Mutex<VecDeque<Answer>>,
}

/// The running server.
#[derive(Debug, Clone)]
pub struct Server {
    pub base_url: String,
    fake: Arc<Fake>,
}

impl Server {
    pub async fn start(answers: Vec<Answer>) -> Self {
        let fake = Arc::new(Fake {
            received: Mutex::new(Vec::new()),
            answers: Mutex::new(answers.into()),
        });
        let app = Router::new()
            .route("/v1/messages", post(handle))
            .route("/v1/chat/completions", post(handle))
            .with_state(fake.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            base_url: format!("http://{addr}"),
            fake,
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.fake.received.lock().unwrap().clone()
    }
}

async fn handle(
    State(fake): State<Arc<Fake>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.received.lock().unwrap().push(Received {
        path: uri.path().to_owned(),
        headers,
        body,
    });
    let answer = fake.answers.lock().unwrap().pop_front();
    let answer = match answer {
        Some(Answer::Gated(gate, answer)) => {
            gate.notified().await;
            Some(*answer)
        }
        other => other,
    };
    let sse = |body: Body| {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(body)
            .unwrap()
    };
    match answer {
        None => Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from("fake server: no answer queued"))
            .unwrap(),
        Some(Answer::Sse { events, chunk }) => {
            let bytes = events.concat().into_bytes();
            let pieces: Vec<Result<Vec<u8>, std::io::Error>> =
                bytes.chunks(chunk.max(1)).map(|c| Ok(c.to_vec())).collect();
            sse(Body::from_stream(stream::iter(pieces)))
        }
        Some(Answer::RawSse(bytes)) => sse(Body::from(bytes)),
        Some(Answer::Status {
            status,
            headers,
            body,
        }) => {
            let mut response = Response::builder().status(status);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
        Some(Answer::StallAfter(events)) => {
            let first: Vec<Result<String, std::io::Error>> = events.into_iter().map(Ok).collect();
            sse(Body::from_stream(
                stream::iter(first).chain(stream::pending()),
            ))
        }
        Some(Answer::Hang) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Some(Answer::Gated(..)) => unreachable!("opened above"),
    }
}

/// Formats one server-sent event.
pub fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A realistic Anthropic stream: a text block split in two deltas, then (if given) a tool use
/// whose input arrives in fragments, then the stop reason and usage.
pub fn anthropic_stream(text: &[&str], tool: Option<(&str, &str, &[&str])>) -> Vec<String> {
    let mut out = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "content": [], "model": "claude-test", "stop_reason": null,
                "usage": {"input_tokens": 120, "output_tokens": 1,
                          "cache_creation_input_tokens": 30, "cache_read_input_tokens": 40}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", json!({"type": "ping"})),
    ];
    for piece in text {
        out.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                   "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    out.push(event(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    if let Some((id, name, fragments)) = tool {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for fragment in fragments {
            out.push(event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 1,
                       "delta": {"type": "input_json_delta", "partial_json": fragment}}),
            ));
        }
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ));
    }
    let stop = if tool.is_some() {
        "tool_use"
    } else {
        "end_turn"
    };
    out.push(event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 42}}),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    out
}

/// A realistic OpenAI stream: content in pieces, then (if given) one tool call whose arguments
/// arrive in fragments, the finish reason, the usage chunk and `[DONE]`.
pub fn openai_stream(text: &[&str], tool: Option<(&str, &str, &[&str])>) -> Vec<String> {
    let data = |v: Value| format!("data: {v}\n\n");
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "gpt-test", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in text {
        out.push(chunk(json!({"content": piece}), Value::Null));
    }
    if let Some((id, name, fragments)) = tool {
        out.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                   "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        for fragment in fragments {
            out.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
                Value::Null,
            ));
        }
    }
    let finish = if tool.is_some() { "tool_calls" } else { "stop" };
    out.push(chunk(json!({}), json!(finish)));
    out.push(data(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
        "model": "gpt-test", "choices": [],
        "usage": {"prompt_tokens": 200, "completion_tokens": 33, "total_tokens": 233,
                  "prompt_tokens_details": {"cached_tokens": 50}}}),
    ));
    out.push("data: [DONE]\n\n".to_owned());
    out
}

/// Pauses that are recorded, not slept.
#[derive(Debug, Default)]
pub struct RecordingPause {
    pub waits: Mutex<Vec<Duration>>,
}

impl Pause for RecordingPause {
    fn pause(&self, delay: Duration) -> BoxFuture<'static, ()> {
        self.waits.lock().unwrap().push(delay);
        Box::pin(async {})
    }
}

/// Test tuning: short deadlines, 1–4 ms backoff, waits recorded.
pub fn tuning(pause: Arc<RecordingPause>) -> HttpTuning {
    HttpTuning {
        timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(2),
        max_retries: 3,
        backoff: Backoff {
            base: Duration::from_millis(1),
            max: Duration::from_millis(4),
            max_retry_after: Duration::from_secs(60),
            seed: 1,
        },
        pause,
    }
}

pub fn call(id: &str) -> CallId {
    CallId::new(id).unwrap()
}

fn use_of(id: &str, name: &str, input: Value) -> ToolUse {
    ToolUse {
        id: ToolUseId::new(id).unwrap(),
        name: name.into(),
        input,
    }
}

pub const SYSTEM: &str = "You are the l3m test agent.";
pub const SUMMARY: &str = "SUMMARY: the user asked a first question and was answered.";

/// A Log with an early exchange later compacted, a turn with two tool uses (one failing), and
/// a turn that a rewind retracts.
pub fn sample_log() -> Log {
    let human = || Entity::parse("human:alice").unwrap();
    let reply = |c: &str, text: &str, tool_uses: Vec<ToolUse>| RecordBody::AssistantReply {
        call: call(c),
        text: text.into(),
        tool_uses,
        usage: Usage::default(),
        stop_reason: "end_turn".into(),
    };
    let started = |c: &str| RecordBody::CallStarted {
        call: call(c),
        provider: "anthropic".into(),
        model: "claude-test".into(),
        attempt: 1,
        fallback_of: None,
    };
    let result = |id: &str, output: &str, is_error: bool| RecordBody::ToolResult {
        id: ToolUseId::new(id).unwrap(),
        output: output.into(),
        is_error,
        effects: Vec::new(),
        refusal: None,
    };
    let bodies = vec![
        /* 0 */
        RecordBody::SystemPrompt {
            text: SYSTEM.into(),
            continues: false,
        },
        /* 1 */
        RecordBody::UserLine {
            from: human(),
            text: "first question OLD-SPAN".into(),
        },
        /* 2 */ started("c1"),
        /* 3 */ reply("c1", "old answer OLD-SPAN", vec![]),
        /* 4 */ RecordBody::TurnEnd,
        /* 5 */
        RecordBody::UserLine {
            from: human(),
            text: "please read the file".into(),
        },
        /* 6 */ started("c2"),
        /* 7 */
        reply(
            "c2",
            "Reading.",
            vec![
                use_of("tu_1", "read_file", json!({"path": "workspace/a.md"})),
                use_of("tu_2", "list_dir", json!({"path": "secret"})),
            ],
        ),
        /* 8 */
        RecordBody::ToolStarted {
            id: ToolUseId::new("tu_1").unwrap(),
        },
        /* 9 */ result("tu_1", "contents of a", false),
        /* 10 */ result("tu_2", "permission denied", true),
        /* 11 */ started("c3"),
        /* 12 */ reply("c3", "The file says hi.", vec![]),
        /* 13 */ RecordBody::TurnEnd,
        /* 14 */
        RecordBody::UserLine {
            from: human(),
            text: "REWOUND-LINE delete everything".into(),
        },
        /* 15 */ started("c4"),
        /* 16 */ reply("c4", "REWOUND-REPLY deleting", vec![]),
        /* 17 */ RecordBody::TurnEnd,
        /* 18 */
        RecordBody::Rewind {
            to: 13,
            reason: "alice undid the deletion".into(),
        },
        /* 19 */
        RecordBody::Compaction {
            from: 1,
            to: 4,
            summary: SUMMARY.into(),
        },
        /* 20 */
        RecordBody::UserLine {
            from: human(),
            text: "and now?".into(),
        },
    ];
    let mut log = Log::new();
    for (i, body) in bodies.into_iter().enumerate() {
        log.append(1_700_000_000_000 + i as u64, body).unwrap();
    }
    log
}

/// A request for the next call after [`sample_log`], with two tools and notes.
pub fn sample_request(model: &str) -> ModelRequest {
    ModelRequest {
        model: model.into(),
        view: l3m_core::view::view(sample_log().records()),
        notes: Some("NOTES: prefer short answers.".into()),
        tools: vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Reads a file under the ACR.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}},
                                     "required": ["path"]}),
            },
            ToolSpec {
                name: "list_dir".into(),
                description: "Lists a directory.".into(),
                input_schema: json!({"type": "object"}),
            },
        ],
        max_tokens: 1024,
        call: call("c5"),
    }
}
