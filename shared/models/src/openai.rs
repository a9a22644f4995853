//! The OpenAI-compatible Chat Completions dialect: `POST {base}/v1/chat/completions`, streamed.
//! The same wire serves OpenAI, vLLM, llama.cpp server and Ollama.
//!
//! # Format
//! The system prompt (the view's, then the model's notes) is the first message, role `system`.
//! An assistant turn is one `assistant` message: its text as `content` (`null` when it only
//! calls tools) and its tool uses as `tool_calls` (`{id, type: function, function: {name,
//! arguments}}`, the arguments a JSON string). A user turn renders its tool results first, one
//! `tool` message each with its `tool_call_id` — a failed one prefixed `error: `, since this API
//! has no error flag — then its text parts as one `user` message. Tools go as `{type: function,
//! function: {name, description, parameters}}`. The request asks for `stream: true` and
//! `stream_options: {include_usage: true}`.
//!
//! The reply streams as `data:` chunks: `choices[0].delta.content` fragments,
//! `choices[0].delta.tool_calls[]` fragments keyed by `index` (the id and name in the first,
//! the arguments split across many), `choices[0].finish_reason`, then a chunk with empty
//! `choices` and the `usage`, then `data: [DONE]`. A chunk with an `error` member is a
//! mid-stream failure. A server that closes without `[DONE]` after a finish reason is accepted
//! (some local servers do); one that closes before a finish reason is a typed error. A tool call
//! without an id (some local servers) gets `{call}-{index}`.
//!
//! # Layout
//! - [`render`], [`Body`]: the request body (pure, borrowed from the request).
//! - [`Decoder`]: assembles a reply from the chunks (pure, no IO).
//! - [`OpenAi`]: the [`Provider`] over the shared [`Endpoint`].

use std::borrow::Cow;
use std::collections::BTreeMap;

use futures_util::future::BoxFuture;
use l3m_core::log::{CallId, ToolUse, ToolUseId, Usage};
use l3m_core::view::{Message, Part};
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::excerpt;
use crate::http::{Endpoint, HttpTuning, StreamDecoder, header_pair, join_url};
use crate::{ModelError, ModelReply, ModelRequest, Provider, sse};

/// Where the API lives unless the configuration says otherwise.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com";
/// The environment variable the key is read from unless the configuration names another.
pub const DEFAULT_KEY_ENV: &str = "OPENAI_API_KEY";
/// What a failed tool result's content starts with, so the model sees it failed.
pub const ERROR_PREFIX: &str = "error: ";
const NAME: &str = "openai";

/// The request body: borrowed from the request and serialized straight to bytes, with no
/// intermediate JSON tree (the view can be long).
#[derive(Debug, Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u32,
    stream: bool,
    stream_options: StreamOptions,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Debug, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: String,
    },
    User {
        content: Cow<'a, str>,
    },
    Assistant {
        /// `null` when the turn only calls tools.
        content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: Cow<'a, str>,
    },
}

#[derive(Debug, Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireCallFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireCallFunction<'a> {
    name: &'a str,
    /// The input as a JSON string, as this API wants it.
    arguments: String,
}

#[derive(Debug, Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Debug, Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The request body for `request`.
pub fn render(request: &ModelRequest) -> Body<'_> {
    let system = request.system_prompt();
    let system = (!system.is_empty()).then_some(WireMessage::System { content: system });
    Body {
        model: &request.model,
        max_tokens: request.max_tokens,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        messages: system
            .into_iter()
            .chain(request.view.messages.iter().flat_map(render_message))
            .collect(),
        tools: request
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireToolFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.input_schema,
                },
            })
            .collect(),
    }
}

fn render_message(message: &Message) -> Vec<WireMessage<'_>> {
    match message {
        Message::Assistant { text, tool_uses } if text.is_empty() && tool_uses.is_empty() => {
            Vec::new()
        }
        Message::Assistant { text, tool_uses } => vec![WireMessage::Assistant {
            content: (!text.is_empty()).then_some(text.as_str()),
            tool_calls: tool_uses
                .iter()
                .map(|u| WireCall {
                    id: u.id.as_str(),
                    kind: "function",
                    function: WireCallFunction {
                        name: &u.name,
                        arguments: match &u.input {
                            // Arguments that did not parse go back as the model wrote them.
                            Value::String(raw) => raw.clone(),
                            input => input.to_string(),
                        },
                    },
                })
                .collect(),
        }],
        Message::User { content } => {
            let results = content.iter().filter_map(|part| match part {
                Part::ToolResult {
                    id,
                    output,
                    is_error,
                } => Some(WireMessage::Tool {
                    tool_call_id: id.as_str(),
                    content: if *is_error {
                        Cow::Owned(format!("{ERROR_PREFIX}{output}"))
                    } else {
                        Cow::Borrowed(output)
                    },
                }),
                Part::Text { .. } => None,
            });
            let texts: Vec<&str> = content
                .iter()
                .filter_map(|part| match part {
                    Part::Text { text } if !text.is_empty() => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let text = match texts.as_slice() {
                [] => None,
                [one] => Some(Cow::Borrowed(*one)),
                many => Some(Cow::Owned(many.join("\n\n"))),
            };
            let text = text.map(|content| WireMessage::User { content });
            results.chain(text).collect()
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
struct WireChoice {
    #[serde(default)]
    index: u64,
    #[serde(default)]
    delta: Option<WireDelta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
    #[serde(default)]
    prompt_tokens_details: Option<WirePromptDetails>,
}

#[derive(Debug, Deserialize)]
struct WirePromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: String,
}

/// A tool call being assembled.
#[derive(Debug, Default)]
struct PendingCall {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Assembles one reply from the stream's chunks.
#[derive(Debug)]
pub struct Decoder {
    call: CallId,
    text: String,
    calls: BTreeMap<u64, PendingCall>,
    finish_reason: Option<String>,
    usage: Usage,
}

fn bad(what: impl Into<String>) -> ModelError {
    ModelError::BadResponse {
        provider: NAME,
        what: what.into(),
    }
}

impl Decoder {
    /// A decoder for a reply to `call` (its id names tool calls the server left unnamed).
    pub fn new(call: &CallId) -> Self {
        Self {
            call: call.clone(),
            text: String::new(),
            calls: BTreeMap::new(),
            finish_reason: None,
            usage: Usage::default(),
        }
    }

    /// The slot a fragment belongs to: its `index`, or — from servers that omit it — the last
    /// call unless the fragment brings a new id.
    /// A stream that already named the last possible slot has no slot for a new call: that is
    /// refused as a bad response, never merged into another call nor overflowed.
    fn slot(&self, fragment: &WireToolCall) -> Result<u64, ModelError> {
        if let Some(index) = fragment.index {
            return Ok(index);
        }
        match self.calls.last_key_value() {
            Some((&last, pending))
                if fragment.id.is_none() || fragment.id.as_deref() == pending.id.as_deref() =>
            {
                Ok(last)
            }
            Some((&last, _)) => last
                .checked_add(1)
                .ok_or_else(|| bad("a tool call without an index follows the last possible slot")),
            None => Ok(0),
        }
    }

    fn tool_fragment(&mut self, fragment: WireToolCall) -> Result<(), ModelError> {
        let slot = self.slot(&fragment)?;
        let pending = self.calls.entry(slot).or_default();
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            pending.id = Some(id);
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name {
                pending.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                pending.arguments.push_str(&arguments);
            }
        }
        Ok(())
    }
}

impl StreamDecoder for Decoder {
    fn event(&mut self, event: sse::Event) -> Result<bool, ModelError> {
        if event.data.trim() == "[DONE]" {
            return Ok(true);
        }
        let chunk: WireChunk = serde_json::from_str(&event.data).map_err(|e| {
            bad(format!(
                "a stream chunk is not a chat completion chunk ({e}): {}",
                excerpt(&event.data)
            ))
        })?;
        if let Some(error) = chunk.error {
            let kind = error
                .kind
                .or_else(|| {
                    error
                        .code
                        .map(|c| c.to_string().trim_matches('"').to_owned())
                })
                .unwrap_or_else(|| "error".to_owned());
            return Err(ModelError::StreamError {
                kind,
                message: error.message,
            });
        }
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if let Some(delta) = choice.delta {
                if let Some(content) = delta.content {
                    self.text.push_str(&content);
                }
                for fragment in delta.tool_calls.unwrap_or_default() {
                    self.tool_fragment(fragment)?;
                }
            }
            if choice.finish_reason.is_some() {
                self.finish_reason = choice.finish_reason;
            }
        }
        if let Some(usage) = chunk.usage {
            let cached = usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            self.usage = Usage {
                input_tokens: usage.prompt_tokens.saturating_sub(cached),
                output_tokens: usage.completion_tokens,
                cache_read_tokens: cached,
                cache_write_tokens: 0,
            };
        }
        Ok(false)
    }

    fn finish(self, _complete: bool) -> Result<ModelReply, ModelError> {
        let stop_reason = self
            .finish_reason
            .ok_or_else(|| bad("the stream ended before any choice gave a finish_reason"))?;
        let mut tool_uses = Vec::with_capacity(self.calls.len());
        for (index, pending) in self.calls {
            if pending.name.is_empty() {
                return Err(bad(format!("tool call {index} has no function name")));
            }
            let id = pending
                .id
                .unwrap_or_else(|| format!("{}-{index}", self.call));
            let input = crate::parse_tool_input(&pending.arguments);
            // An id that cannot be one does not fail the reply: the journal gives the use a fresh id.
            let id = ToolUseId::new(id).unwrap_or_else(|_| ToolUseId::unusable());
            tool_uses.push(ToolUse {
                id,
                name: pending.name,
                input,
            });
        }
        Ok(ModelReply {
            text: self.text,
            tool_uses,
            usage: self.usage,
            stop_reason,
        })
    }
}

/// An OpenAI-compatible Chat Completions endpoint as a [`Provider`].
#[derive(Debug)]
pub struct OpenAi {
    endpoint: Endpoint,
}

impl OpenAi {
    /// A provider posting to `{base_url}/v1/chat/completions`, with a bearer `api_key` if
    /// given (local servers often need none).
    pub fn new(
        base_url: &str,
        api_key: Option<&str>,
        tuning: HttpTuning,
    ) -> Result<Self, ModelError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            let (name, value) = header_pair("authorization", &format!("Bearer {key}"), true)?;
            headers.insert(name, value);
        }
        let endpoint = Endpoint::new(
            NAME,
            join_url(base_url, "/v1/chat/completions"),
            headers,
            tuning,
        )?;
        Ok(Self { endpoint })
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        NAME
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            self.endpoint
                .send(request, &render(request), || Decoder::new(&request.call))
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed(chunks: &[&str]) -> Result<ModelReply, ModelError> {
        let mut decoder = Decoder::new(&CallId::new("c7").unwrap());
        for data in chunks {
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

    #[test]
    fn a_fragment_after_the_last_possible_slot_does_not_overflow() {
        let outcome = feed(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":18446744073709551615,"id":"call_a","function":{"name":"read_file","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_b","function":{"name":"list","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        match outcome {
            Err(ModelError::BadResponse { what, .. }) => {
                assert!(what.contains("last possible slot"))
            }
            other => panic!("expected a bad response, got {other:?}"),
        }
    }

    #[test]
    fn content_and_split_tool_calls_assemble_with_usage() {
        let reply = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Let me "}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"look."}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","function":{"name":"list","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9,"prompt_tokens_details":{"cached_tokens":20}}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(reply.text, "Let me look.");
        assert_eq!(reply.stop_reason, "tool_calls");
        let uses: Vec<_> = reply
            .tool_uses
            .iter()
            .map(|u| (u.id.as_str(), u.name.as_str(), u.input.clone()))
            .collect();
        assert_eq!(
            uses,
            vec![
                ("call_a", "read_file", json!({"path": "x"})),
                ("call_b", "list", json!({}))
            ]
        );
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 30,
                output_tokens: 9,
                cache_read_tokens: 20,
                cache_write_tokens: 0
            }
        );
    }

    #[test]
    fn unnamed_unindexed_calls_get_ids_from_the_call() {
        let reply = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"a","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        assert_eq!(reply.tool_uses[0].id.as_str(), "c7-0");
    }

    #[test]
    fn malformed_streams_are_named() {
        let cases: &[(&[&str], &str)] = &[
            (
                &[r#"{"choices":[{"delta":{"content":"x"}}]}"#],
                "finish_reason",
            ),
            (&["{not json"], "not a chat completion chunk"),
            (
                &[
                    r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"t"}]},"finish_reason":"tool_calls"}]}"#,
                ],
                "no function name",
            ),
        ];
        for (chunks, expected) in cases {
            let error = feed(chunks).unwrap_err();
            assert!(!error.retryable());
            assert!(error.to_string().contains(expected), "{error}");
        }
    }

    #[test]
    fn arguments_that_are_not_json_reach_the_log_as_written() {
        let reply = feed(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"t","function":{"name":"n","arguments":"{bad"}}]},"finish_reason":"tool_calls"}]}"#,
        ])
        .unwrap();
        assert_eq!(reply.tool_uses[0].input, Value::String("{bad".into()));
    }

    #[test]
    fn an_error_chunk_is_a_stream_error() {
        let error = feed(&[r#"{"error":{"message":"boom","type":"server_error"}}"#]).unwrap_err();
        assert!(
            matches!(error, ModelError::StreamError { ref kind, .. } if kind == "server_error")
        );
        assert!(error.retryable());
    }
}
