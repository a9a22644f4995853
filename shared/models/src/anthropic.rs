//! The Anthropic Messages dialect: `POST {base}/v1/messages`, streamed.
//!
//! # Format
//! The request carries the system prompt (the view's, then the model's notes) as the top-level
//! `system` field, never as a message. An assistant turn renders as a `text` block (when it has
//! text) followed by one `tool_use` block per tool use; a user turn renders its `tool_result`
//! blocks first (each with its `tool_use_id` and `is_error`), then its text blocks — the API
//! wants the results of the previous turn's uses to open the next user turn. Tools go as
//! `{name, description, input_schema}`. Tool-use ids are sent as the API accepts them
//! (`[A-Za-z0-9_-]+`, other characters as `_`, on uses and results alike), so a conversation
//! begun with another dialect can fall back to this one.
//!
//! The reply streams as server-sent events: `message_start` (input and cache usage),
//! `content_block_start` (a `text` or `tool_use` block at an index), `content_block_delta`
//! (`text_delta`, or `input_json_delta` fragments of a tool input), `content_block_stop`,
//! `message_delta` (stop reason, cumulative output usage), `message_stop`; `ping` in between and
//! `error` when the server gives up mid-stream. Block types and deltas this client does not use
//! (thinking, signatures, citations) are skipped; a stream that ends before `message_stop`, a
//! delta for a block that never started are typed errors. A tool input that is not JSON is kept
//! as the model's text ([`crate::parse_tool_input`]) so the model is told and can correct it.
//!
//! # Layout
//! - [`render`], [`Body`]: the request body (pure, borrowed from the request).
//! - [`Decoder`]: assembles a reply from the events (pure, no IO).
//! - [`Anthropic`]: the [`Provider`] over the shared [`Endpoint`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use futures_util::future::BoxFuture;
use l3m_core::log::{ToolUse, ToolUseId, Usage};
use l3m_core::view::{Message, Part};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::excerpt;
use crate::http::{Endpoint, HttpTuning, StreamDecoder, header_pair, join_url};
use crate::{ModelError, ModelReply, ModelRequest, Provider, sse};

/// Where the Messages API lives unless the configuration says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The API version this dialect speaks.
pub const API_VERSION: &str = "2023-06-01";
/// The environment variable the key is read from unless the configuration names another.
pub const DEFAULT_KEY_ENV: &str = "ANTHROPIC_API_KEY";
const NAME: &str = "anthropic";

/// The request body: borrowed from the request and serialized straight to bytes, with no
/// intermediate JSON tree (the view can be long).
#[derive(Debug, Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock; 1]>,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

/// A prompt-cache breakpoint: the provider caches the prompt up to and including the block
/// that carries it, and a later request whose prefix is byte-identical reads it from the cache.
#[derive(Debug, Clone, Copy, Serialize)]
struct Breakpoint {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: Option<Breakpoint> = Some(Breakpoint { kind: "ephemeral" });

/// The system prompt as one text block, so it can carry a breakpoint.
#[derive(Debug, Serialize)]
struct SystemBlock {
    #[serde(rename = "type")]
    kind: &'static str,
    text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Breakpoint>,
}

#[derive(Debug, Serialize)]
struct WireMessage<'a> {
    role: &'static str,
    content: Vec<CachedBlock<'a>>,
}

/// One content block and its breakpoint, if it carries one.
#[derive(Debug, Serialize)]
struct CachedBlock<'a> {
    #[serde(flatten)]
    content: WireContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Breakpoint>,
}

#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireContent<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: Cow<'a, str>,
        name: &'a str,
        input: &'a Value,
    },
    ToolResult {
        tool_use_id: Cow<'a, str>,
        content: &'a str,
        is_error: bool,
    },
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<Breakpoint>,
}

/// The request body for `request`, with prompt-cache breakpoints on its stable parts: the last
/// tool and the system prompt (the API orders tools, then system, then messages), and the last
/// block of each of the last two user turns. The view only ever appends between calls, so the
/// previous request's last breakpoint is this one's second-to-last, at the same bytes: the
/// whole history but the newest turn is read from the cache. Four breakpoints, the API's most.
pub fn render(request: &ModelRequest) -> Body<'_> {
    let system = request.system_prompt();
    let mut messages: Vec<WireMessage<'_>> = request
        .view
        .messages
        .iter()
        .filter_map(render_message)
        .collect();
    for message in messages
        .iter_mut()
        .rev()
        .filter(|m| m.role == "user")
        .take(2)
    {
        if let Some(last) = message.content.last_mut() {
            last.cache_control = EPHEMERAL;
        }
    }
    let last_tool = request.tools.len().saturating_sub(1);
    Body {
        model: &request.model,
        max_tokens: request.max_tokens,
        stream: true,
        system: (!system.is_empty()).then_some([SystemBlock {
            kind: "text",
            text: system,
            cache_control: EPHEMERAL,
        }]),
        messages,
        tools: request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| WireTool {
                name: &t.name,
                description: &t.description,
                input_schema: &t.input_schema,
                cache_control: if i == last_tool { EPHEMERAL } else { None },
            })
            .collect(),
    }
}

/// A tool-use id as the Messages API accepts it (`[A-Za-z0-9_-]+`): other characters become
/// `_`. Applied to uses and results alike, so pairs stay pairs when a conversation begun with
/// another dialect (or the scripted provider) falls back to this one.
fn wire_id(id: &ToolUseId) -> Cow<'_, str> {
    let id = id.as_str();
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if id.chars().all(allowed) {
        return Cow::Borrowed(id);
    }
    Cow::Owned(
        id.chars()
            .map(|c| if allowed(c) { c } else { '_' })
            .collect(),
    )
}

/// The input sent for a tool use whose arguments were not a JSON object.
static EMPTY_INPUT: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| Value::Object(serde_json::Map::new()));

fn render_message(message: &Message) -> Option<WireMessage<'_>> {
    let (role, content): (&'static str, Vec<WireContent<'_>>) = match message {
        Message::Assistant { text, tool_uses } => {
            let text = (!text.is_empty()).then_some(WireContent::Text { text });
            let uses = tool_uses.iter().map(|u| WireContent::ToolUse {
                id: wire_id(&u.id),
                name: &u.name,
                // The API takes only an object; arguments that did not parse (kept as the
                // model's text) go back as an empty one beside the error result.
                input: if u.input.is_object() {
                    &u.input
                } else {
                    &EMPTY_INPUT
                },
            });
            ("assistant", text.into_iter().chain(uses).collect())
        }
        Message::User { content } => {
            let results = content.iter().filter_map(|part| match part {
                Part::ToolResult {
                    id,
                    output,
                    is_error,
                } => Some(WireContent::ToolResult {
                    tool_use_id: wire_id(id),
                    content: output,
                    is_error: *is_error,
                }),
                Part::Text { .. } => None,
            });
            let texts = content.iter().filter_map(|part| match part {
                Part::Text { text } if !text.is_empty() => Some(WireContent::Text { text }),
                _ => None,
            });
            ("user", results.chain(texts).collect())
        }
    };
    let content: Vec<CachedBlock<'_>> = content
        .into_iter()
        .map(|content| CachedBlock {
            content,
            cache_control: None,
        })
        .collect();
    (!content.is_empty()).then_some(WireMessage { role, content })
}

/// One event of the stream, as the API sends it.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireEvent {
    MessageStart {
        message: WireStart,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: WireDelta,
    },
    ContentBlockStop {
        index: u64,
    },
    MessageDelta {
        delta: WireMessageDelta,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Error {
        error: WireError,
    },
    /// `ping`, and event types added after this client was written.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct WireStart {
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Option<Value>,
    },
    /// Thinking, redacted thinking, server tools: not part of the reply the Log keeps.
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct WireMessageDelta {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

/// A content block being assembled.
#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        start_input: Option<Value>,
        json: String,
    },
    Skipped,
}

/// Assembles one reply from the stream's events.
#[derive(Debug, Default)]
pub struct Decoder {
    started: bool,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
}

fn bad(what: impl Into<String>) -> ModelError {
    ModelError::BadResponse {
        provider: NAME,
        what: what.into(),
    }
}

impl Decoder {
    fn apply_usage(&mut self, usage: Option<WireUsage>) {
        let Some(u) = usage else { return };
        let slots = [
            (u.input_tokens, &mut self.usage.input_tokens),
            (u.output_tokens, &mut self.usage.output_tokens),
            (u.cache_read_input_tokens, &mut self.usage.cache_read_tokens),
            (
                u.cache_creation_input_tokens,
                &mut self.usage.cache_write_tokens,
            ),
        ];
        for (given, slot) in slots {
            if let Some(n) = given {
                *slot = n;
            }
        }
    }

    fn delta(&mut self, index: u64, delta: WireDelta) -> Result<(), ModelError> {
        let block = self.blocks.get_mut(&index).ok_or_else(|| {
            bad(format!(
                "a delta for content block {index}, which never started"
            ))
        })?;
        match (block, delta) {
            (Block::Text(text), WireDelta::TextDelta { text: more }) => text.push_str(&more),
            (Block::ToolUse { json, .. }, WireDelta::InputJsonDelta { partial_json }) => {
                json.push_str(&partial_json);
            }
            (Block::Skipped, _) | (_, WireDelta::Other) => {}
            (Block::Text(_), WireDelta::InputJsonDelta { .. }) => {
                return Err(bad(format!(
                    "an input_json_delta for content block {index}, which is a text block"
                )));
            }
            (Block::ToolUse { .. }, WireDelta::TextDelta { .. }) => {
                return Err(bad(format!(
                    "a text_delta for content block {index}, which is a tool_use block"
                )));
            }
        }
        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: sse::Event) -> Result<bool, ModelError> {
        let wire: WireEvent = serde_json::from_str(&event.data).map_err(|e| {
            bad(format!(
                "event {:?} is not a Messages stream event ({e}): {}",
                event.name.as_deref().unwrap_or("(unnamed)"),
                excerpt(&event.data)
            ))
        })?;
        if !self.started
            && !matches!(
                wire,
                WireEvent::MessageStart { .. } | WireEvent::Error { .. } | WireEvent::Other
            )
        {
            return Err(bad("the stream did not open with message_start"));
        }
        match wire {
            WireEvent::MessageStart { message } => {
                self.started = true;
                self.apply_usage(message.usage);
            }
            WireEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    WireBlock::Text { text } => Block::Text(text),
                    WireBlock::ToolUse { id, name, input } => Block::ToolUse {
                        id,
                        name,
                        start_input: input,
                        json: String::new(),
                    },
                    WireBlock::Other => Block::Skipped,
                };
                if self.blocks.insert(index, block).is_some() {
                    return Err(bad(format!("content block {index} started twice")));
                }
            }
            WireEvent::ContentBlockDelta { index, delta } => self.delta(index, delta)?,
            WireEvent::ContentBlockStop { index } => {
                if !self.blocks.contains_key(&index) {
                    return Err(bad(format!(
                        "content_block_stop for block {index}, which never started"
                    )));
                }
            }
            WireEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                self.apply_usage(usage);
            }
            WireEvent::MessageStop => return Ok(true),
            WireEvent::Error { error } => {
                return Err(ModelError::StreamError {
                    kind: error.kind,
                    message: error.message,
                });
            }
            WireEvent::Other => {}
        }
        Ok(false)
    }

    fn finish(self, complete: bool) -> Result<ModelReply, ModelError> {
        if !complete {
            return Err(bad("the stream ended before message_stop"));
        }
        let stop_reason = self
            .stop_reason
            .ok_or_else(|| bad("message_delta never gave a stop_reason"))?;
        let mut text = String::new();
        let mut tool_uses = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(more) => text.push_str(&more),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => {
                    let input = if json.trim().is_empty() {
                        start_input.unwrap_or_else(|| json!({}))
                    } else {
                        crate::parse_tool_input(&json)
                    };
                    // An id that cannot be one does not fail the reply: the journal gives the use a fresh id.
                    let id = ToolUseId::new(id).unwrap_or_else(|_| ToolUseId::unusable());
                    tool_uses.push(ToolUse { id, name, input });
                }
                Block::Skipped => {}
            }
        }
        Ok(ModelReply {
            text,
            tool_uses,
            usage: self.usage,
            stop_reason,
        })
    }
}

/// The Anthropic Messages API as a [`Provider`].
#[derive(Debug)]
pub struct Anthropic {
    endpoint: Endpoint,
}

impl Anthropic {
    /// A provider posting to `{base_url}/v1/messages` with `api_key`.
    pub fn new(base_url: &str, api_key: &str, tuning: HttpTuning) -> Result<Self, ModelError> {
        let mut headers = HeaderMap::new();
        for (name, value, secret) in [
            ("x-api-key", api_key, true),
            ("anthropic-version", API_VERSION, false),
        ] {
            let (name, value) = header_pair(name, value, secret)?;
            headers.insert(name, value);
        }
        let endpoint = Endpoint::new(NAME, join_url(base_url, "/v1/messages"), headers, tuning)?;
        Ok(Self { endpoint })
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        NAME
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            self.endpoint
                .send(request, &render(request), Decoder::default)
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> Result<ModelReply, ModelError> {
        let mut decoder = Decoder::default();
        for data in events {
            let done = decoder.event(sse::Event {
                name: None,
                data: (*data).to_owned(),
            })?;
            if done {
                return decoder.finish(true);
            }
        }
        decoder.finish(false)
    }

    const START: &str = r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":4,"cache_creation_input_tokens":2}}}"#;

    #[test]
    fn text_and_a_split_tool_input_assemble() {
        let reply = feed(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
            r#"{"type":"ping"}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"tu_1","name":"read_file","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"th\": \"a\"}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":17}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(reply.text, "Hello");
        assert_eq!(reply.tool_uses.len(), 1);
        assert_eq!(reply.tool_uses[0].input, json!({"path": "a"}));
        assert_eq!(reply.stop_reason, "tool_use");
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 17,
                cache_read_tokens: 4,
                cache_write_tokens: 2
            }
        );
    }

    #[test]
    fn thinking_blocks_and_unknown_events_are_skipped() {
        let reply = feed(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"sig"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"some_future_event","x":1}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":"Hi"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(reply.text, "Hi");
        assert!(reply.tool_uses.is_empty());
        assert_eq!(reply.stop_reason, "end_turn");
    }

    #[test]
    fn malformed_streams_are_named() {
        let cases: &[(&[&str], &str)] = &[
            (&[START], "ended before message_stop"),
            (&["not json"], "not a Messages stream event"),
            (
                &[r#"{"type":"content_block_start","index":0,"content_block":{"type":"text"}}"#],
                "did not open with message_start",
            ),
            (
                &[
                    START,
                    r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"x"}}"#,
                ],
                "never started",
            ),
            (
                &[START, r#"{"type":"message_stop"}"#],
                "never gave a stop_reason",
            ),
        ];
        for (events, expected) in cases {
            let error = feed(events).unwrap_err();
            assert!(!error.retryable());
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn an_input_that_is_not_json_reaches_the_log_as_written_and_goes_back_as_an_object() {
        let reply = feed(&[
            START,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"n"}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{oops"}}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"}}"#,
            r#"{"type":"message_stop"}"#,
        ])
        .unwrap();
        assert_eq!(reply.tool_uses[0].input, Value::String("{oops".into()));
        let message = Message::Assistant {
            text: String::new(),
            tool_uses: reply.tool_uses,
        };
        let wire = serde_json::to_value(render_message(&message)).unwrap();
        assert_eq!(wire["content"][0]["input"], serde_json::json!({}));
    }

    #[test]
    fn ids_other_dialects_allow_are_rewritten_the_same_on_both_sides() {
        let id = ToolUseId::new("call:7/1").unwrap();
        let view = l3m_core::view::View {
            system: String::new(),
            messages: vec![
                Message::Assistant {
                    text: String::new(),
                    tool_uses: vec![ToolUse {
                        id: id.clone(),
                        name: "t".into(),
                        input: json!({}),
                    }],
                },
                Message::User {
                    content: vec![Part::ToolResult {
                        id,
                        output: "ok".into(),
                        is_error: false,
                    }],
                },
            ],
        };
        let request = ModelRequest {
            model: "m".into(),
            view,
            notes: None,
            tools: Vec::new(),
            max_tokens: 1,
            call: l3m_core::log::CallId::new("c").unwrap(),
        };
        let body = serde_json::to_value(render(&request)).unwrap();
        assert_eq!(body["messages"][0]["content"][0]["id"], "call_7_1");
        assert_eq!(body["messages"][1]["content"][0]["tool_use_id"], "call_7_1");
        assert!(
            body.get("system").is_none(),
            "an empty system prompt is left out"
        );
    }

    #[test]
    fn an_overloaded_error_event_is_retryable() {
        let error = feed(&[
            START,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ])
        .unwrap_err();
        assert!(matches!(error, ModelError::StreamError { .. }));
        assert!(error.retryable());
    }
}
