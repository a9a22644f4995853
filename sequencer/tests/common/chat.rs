//! A local HTTP server speaking the OpenAI Chat Completions and Anthropic Messages APIs with
//! scripted answers, recording every request body: the model a session under test talks to.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};

/// What the server answers next: a reply's text, and its tool calls as (name, raw arguments).
#[derive(Debug, Clone)]
pub struct Turn {
    pub text: String,
    pub calls: Vec<(String, String)>,
}

impl Turn {
    pub fn text(text: &str) -> Self {
        Turn {
            text: text.into(),
            calls: vec![],
        }
    }

    pub fn call(name: &str, raw_arguments: &str) -> Self {
        Turn {
            text: String::new(),
            calls: vec![(name.into(), raw_arguments.into())],
        }
    }
}

/// Makes the answer to request `n` with body `body`.
type MakeTurn = Box<dyn Fn(usize, &Value) -> Turn + Send>;

/// The scripted answers and the requests received.
#[derive(Default)]
struct Script {
    turns: Mutex<VecDeque<Turn>>,
    /// Answers once the turns run out, if set: from the request's index and body.
    fallback: Mutex<Option<MakeTurn>>,
    received: Mutex<Vec<Value>>,
    /// Each request body, byte for byte as sent.
    raw: Mutex<Vec<Vec<u8>>>,
    /// A body longer than this is refused as over the context window (HTTP 400, in the
    /// dialect's words), as a real provider does.
    window: Mutex<Option<usize>>,
    /// The ids the next tool calls get, in order (then fresh ones).
    ids: Mutex<VecDeque<String>>,
}

/// The server.
#[derive(Clone)]
pub struct ChatServer {
    pub base_url: String,
    script: Arc<Script>,
}

impl ChatServer {
    pub async fn start(turns: Vec<Turn>) -> Self {
        let script = Arc::new(Script {
            turns: Mutex::new(turns.into()),
            ..Script::default()
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        ChatServer {
            base_url: format!("http://{addr}"),
            script,
        }
    }

    /// Answers with `make(n, body)` (n = the request's index) once the scripted turns run out.
    pub fn then(&self, make: impl Fn(usize, &Value) -> Turn + Send + 'static) {
        *self.script.fallback.lock().unwrap() = Some(Box::new(make));
    }

    /// Refuses every request body longer than `bytes` as over the context window.
    pub fn refuse_over(&self, bytes: usize) {
        *self.script.window.lock().unwrap() = Some(bytes);
    }

    /// Gives the next tool calls these ids, in order, as a hostile provider would.
    pub fn tool_ids(&self, ids: Vec<String>) {
        *self.script.ids.lock().unwrap() = ids.into();
    }

    /// Every request body, byte for byte as sent, in order.
    pub fn raw(&self) -> Vec<Vec<u8>> {
        self.script.raw.lock().unwrap().clone()
    }

    /// Every request body received, in order.
    pub fn received(&self) -> Vec<Value> {
        self.script.received.lock().unwrap().clone()
    }
}

/// The tokens this server's model bills for a request: one per four bytes of its body.
pub fn tokens_of(body: &[u8]) -> u64 {
    (body.len() as u64).div_ceil(4)
}

fn next(script: &Script, bytes: &Bytes) -> Turn {
    let body: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
    let n = script.received.lock().unwrap().len();
    let turn = script.turns.lock().unwrap().pop_front().unwrap_or_else(|| {
        match &*script.fallback.lock().unwrap() {
            Some(make) => make(n, &body),
            None => Turn::text("(the script ran out)"),
        }
    });
    script.received.lock().unwrap().push(body);
    script.raw.lock().unwrap().push(bytes.to_vec());
    turn
}

fn sse(events: Vec<String>) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(events.concat()))
        .unwrap()
}

/// The provider's refusal of a body over the window, if there is one: OpenAI's and
/// Anthropic's own shapes.
fn over_window(script: &Script, body: &Bytes, anthropic: bool) -> Option<Response> {
    let limit = (*script.window.lock().unwrap())?;
    if body.len() <= limit {
        return None;
    }
    script.raw.lock().unwrap().push(body.to_vec());
    script
        .received
        .lock()
        .unwrap()
        .push(serde_json::from_slice(body).unwrap_or(Value::Null));
    let tokens = tokens_of(body);
    let error = if anthropic {
        json!({"type": "error", "error": {"type": "invalid_request_error",
            "message": format!("prompt is too long: {tokens} tokens > {} maximum", limit / 4)}})
    } else {
        json!({"error": {"message": format!("This model's maximum context length is {} tokens.             However, your messages resulted in {tokens} tokens.", limit / 4),
            "type": "invalid_request_error", "code": "context_length_exceeded"}})
    };
    Some(
        Response::builder()
            .status(400)
            .header("content-type", "application/json")
            .body(Body::from(error.to_string()))
            .unwrap(),
    )
}

async fn openai(State(script): State<Arc<Script>>, body: Bytes) -> Response {
    if let Some(refused) = over_window(&script, &body, false) {
        return refused;
    }
    let turn = next(&script, &body);
    let tokens = tokens_of(&body);
    let data = |v: Value| format!("data: {v}\n\n");
    let chunk = |delta: Value, finish: Value| {
        data(
            json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
        )
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": turn.text}),
        Value::Null,
    )];
    for (i, (name, args)) in turn.calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{"index": i, "id": tool_id(&script, "tc"), "type": "function",
                   "function": {"name": name, "arguments": args}}]}),
            Value::Null,
        ));
    }
    let finish = if turn.calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    out.push(chunk(json!({}), json!(finish)));
    out.push(data(
        json!({"id": "c", "object": "chat.completion.chunk", "created": 1,
        "model": "m", "choices": [],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 10, "total_tokens": tokens + 10}}),
    ));
    out.push("data: [DONE]\n\n".into());
    sse(out)
}

async fn anthropic(State(script): State<Arc<Script>>, body: Bytes) -> Response {
    if let Some(refused) = over_window(&script, &body, true) {
        return refused;
    }
    let turn = next(&script, &body);
    let tokens = tokens_of(&body);
    let event = |name: &str, v: Value| format!("event: {name}\ndata: {v}\n\n");
    let mut out = vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"id": "m",
            "usage": {"input_tokens": tokens, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": turn.text}}),
        ),
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ];
    for (i, (name, args)) in turn.calls.iter().enumerate() {
        out.push(event(
            "content_block_start",
            json!({"type": "content_block_start",
            "index": i + 1, "content_block": {"type": "tool_use", "id": tool_id(&script, "tu"),
            "name": name, "input": {}}}),
        ));
        out.push(event(
            "content_block_delta",
            json!({"type": "content_block_delta",
            "index": i + 1, "delta": {"type": "input_json_delta", "partial_json": args}}),
        ));
        out.push(event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i + 1}),
        ));
    }
    let stop = if turn.calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    out.push(event(
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop}, "usage": {"output_tokens": 10}}),
    ));
    out.push(event("message_stop", json!({"type": "message_stop"})));
    sse(out)
}

/// The id of the next tool call: the next one given to [`ChatServer::tool_ids`], else a fresh
/// one with `prefix`.
fn tool_id(script: &Script, prefix: &str) -> String {
    let given = script.ids.lock().unwrap().pop_front();
    given.unwrap_or_else(|| format!("{prefix}{}", uuidish()))
}

/// A process-wide counter, so every tool call id the server hands out is fresh.
fn uuidish() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}
