//! `l3m-models`: the model providers the sequencer calls — the view goes out, a reply comes back.
//!
//! A [`ModelRequest`] carries the provider-neutral [`View`] the Log's fold computed, plus what
//! the wire needs (model id, tools, the call id its idempotency key comes from). A [`Provider`]
//! renders it in its dialect, sends it, reads the streamed answer and hands back a
//! [`ModelReply`] the sequencer journals as an `assistant-reply` — or a [`ModelError`] it
//! journals as a `call-failed`, with [`ModelError::retryable`] deciding whether to try again.
//! Two HTTP dialects ([`anthropic`]: the Messages API; [`openai`]: Chat Completions, which also
//! covers vLLM, llama.cpp server and Ollama) share one client with retries and timeouts
//! ([`http`]). The [`scripted`] provider answers from a file, for demos and offline runs, and
//! names itself `scripted` so the Log says so. [`ModelChain`] lists a primary model and its
//! fallbacks; the sequencer picks one per attempt and journals which, so the Log always records
//! which model answered.
//!
//! **Must never**: read the environment (the caller passes a lookup to [`build`]), read the
//! clock or sleep except through tokio's timers (deadlines, backoff, a script's `delay_ms`),
//! read any file but the script a `scripted` table names (once, when it is built), or write the
//! Log — the sequencer journals before and after every call ([`ModelReply::into_record`],
//! [`ModelError::to_record`] make the records; it appends them).
//!
//! # Layout
//! - this file: [`ModelRequest`], [`ToolSpec`], [`ModelReply`], the [`Provider`] trait.
//! - [`config`]: [`ModelConfig`] (one `[models.<label>]` table), [`Dialect`], [`build`].
//! - [`chain`]: [`ModelChain`], the primary model and its fallbacks, per attempt.
//! - [`error`]: [`ModelError`] and what is retryable.
//! - [`http`]: the shared HTTP client: headers, deadlines, retries with one idempotency key.
//! - [`backoff`]: the pure retry-delay decision (exponential, deterministic jitter).
//! - [`sse`]: the incremental server-sent-events parser both dialects stream through.
//! - [`anthropic`], [`openai`]: the dialects — rendering a request, assembling a stream.
//! - [`scripted`]: the scripted provider and its TOML script format.
//!
//! # Example
//! The sequencer builds a chain from the `[models]` tables, asks it which model attempt 1 uses,
//! and sends the view. Here the model is scripted, so the example runs offline.
//! ```
//! use std::collections::BTreeMap;
//! use l3m_core::log::CallId;
//! use l3m_core::view::{Message, Part, View};
//! use l3m_models::{ModelChain, ModelConfig, ModelRequest, build};
//!
//! let dir = tempfile::tempdir()?;
//! std::fs::write(dir.path().join("demo.toml"), r#"
//!     [[turn]]
//!     text = "I will read the file."
//!     [[turn.tool_use]]
//!     name = "read_file"
//!     input = { path = "workspace/README.md" }
//! "#)?;
//! let mut demo: ModelConfig = toml::from_str(r#"
//!     dialect = "scripted"
//!     model = "demo"
//!     script = "demo.toml"
//!     notes = "Answer briefly."
//! "#)?;
//! demo.resolve_paths(dir.path());
//! let models = BTreeMap::from([("demo".to_owned(), demo)]);
//! let no_env = |_: &str| None; // a binary passes |name| std::env::var(name).ok()
//! let chain = ModelChain::from_config(&models, "demo", |_, config| build(config, &no_env))?;
//!
//! let (provider, model, notes) = chain.for_attempt(1);
//! let request = ModelRequest {
//!     model: model.to_owned(),
//!     view: View {
//!         system: "You are an l3m agent.".into(),
//!         messages: vec![Message::User { content: vec![Part::Text { text: "Read it.".into() }] }],
//!     },
//!     notes: notes.map(str::to_owned),
//!     tools: Vec::new(),
//!     max_tokens: chain.entry_for_attempt(1).max_tokens,
//!     call: CallId::new("call-1")?,
//! };
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build()?;
//! let reply = runtime.block_on(provider.complete(&request))?;
//! assert_eq!(provider.name(), "scripted");
//! assert_eq!(reply.stop_reason, "tool_use");
//! assert_eq!(reply.tool_uses[0].id.as_str(), "call-1-1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod anthropic;
pub mod backoff;
pub mod chain;
pub mod config;
pub mod error;
pub mod http;
pub mod openai;
pub mod scripted;
pub mod sse;

use futures_util::future::BoxFuture;
use l3m_core::log::{CallId, RecordBody, ToolUse, Usage};
use l3m_core::view::View;

pub use chain::{ChainEntry, ModelChain};
pub use config::{Dialect, ModelConfig, build, build_tuned, default_context_window};
pub use error::{ModelError, TimeoutKind};

/// One request: the provider-neutral view plus what the wire needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// The model id at this endpoint (`claude-sonnet-4-5`, `gpt-4o`, `qwen2.5:7b`, ...).
    pub model: String,
    /// The system prompt and the conversation, from the Log's view fold.
    pub view: View,
    /// This model's own notes, appended to the system prompt for this request only; never
    /// stored, so a fallback model gets its own.
    pub notes: Option<String>,
    /// The tools offered, as the tool table describes them.
    pub tools: Vec<ToolSpec>,
    /// The most tokens the reply may spend.
    pub max_tokens: u32,
    /// The Log's id for this call; the idempotency key is derived from it, so every try of one
    /// call carries the same key.
    pub call: CallId,
}

impl ModelRequest {
    /// The system prompt this request sends: the view's, then the model's notes.
    pub fn system_prompt(&self) -> String {
        match self.notes.as_deref().filter(|n| !n.trim().is_empty()) {
            Some(notes) if self.view.system.is_empty() => notes.to_owned(),
            Some(notes) => format!("{}\n\n{notes}", self.view.system),
            None => self.view.system.clone(),
        }
    }

    /// The `Idempotency-Key` every try of this call sends: `l3m-` and the call id, any byte
    /// outside visible ASCII percent-encoded so the key is always a valid header value.
    pub fn idempotency_key(&self) -> String {
        let mut key = String::from("l3m-");
        for byte in self.call.as_str().bytes() {
            if byte.is_ascii_graphic() && byte != b'%' {
                key.push(char::from(byte));
            } else {
                key.push_str(&format!("%{byte:02X}"));
            }
        }
        key
    }
}

/// A tool call's arguments as the model streamed them: the JSON they hold, `{}` when empty, or
/// — when they are not JSON at all — the text itself as a JSON string. That is not an object,
/// so core's plan answers the use with an error result the model can correct on its next call
/// instead of the whole reply failing.
pub fn parse_tool_input(raw: &str) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::json!({});
    }
    serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_owned()))
}

/// One tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: serde_json::Value,
}

/// A model's complete answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// The reply's text (all text blocks, in order).
    pub text: String,
    /// The tools the model asks to use, in its order.
    pub tool_uses: Vec<ToolUse>,
    /// What the reply cost, as the provider counted it.
    pub usage: Usage,
    /// Why the model stopped, in the provider's words (`end_turn`, `tool_use`, `stop`,
    /// `tool_calls`, `length`, ...).
    pub stop_reason: String,
}

impl ModelReply {
    /// The `assistant-reply` record the sequencer journals for this reply to `call`.
    pub fn into_record(self, call: CallId) -> RecordBody {
        RecordBody::AssistantReply {
            call,
            text: self.text,
            tool_uses: self.tool_uses,
            usage: self.usage,
            stop_reason: self.stop_reason,
        }
    }
}

impl ModelError {
    /// The `call-failed` record the sequencer journals for this failure of `call`.
    pub fn to_record(&self, call: CallId) -> RecordBody {
        RecordBody::CallFailed {
            call,
            error: self.to_string(),
            retryable: self.retryable(),
        }
    }
}

/// A model endpoint the sequencer can ask for a reply.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Label written in the Log's call-started record (e.g. "anthropic", "openai", "scripted").
    fn name(&self) -> &str;

    /// Sends `request` and waits for the complete reply, retrying retryable failures within
    /// the provider's own budget of tries.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(call: &str, system: &str, notes: Option<&str>) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            view: View {
                system: system.into(),
                messages: Vec::new(),
            },
            notes: notes.map(str::to_owned),
            tools: Vec::new(),
            max_tokens: 1,
            call: CallId::new(call).unwrap(),
        }
    }

    #[test]
    fn idempotency_keys_are_header_safe_and_distinct() {
        assert_eq!(request("c-1", "", None).idempotency_key(), "l3m-c-1");
        let key = request("é%1", "", None).idempotency_key();
        assert_eq!(key, "l3m-%C3%A9%251");
        assert!(reqwest::header::HeaderValue::from_str(&key).is_ok());
        assert_ne!(key, request("%C3%A9%1", "", None).idempotency_key());
    }

    #[test]
    fn notes_follow_the_system_prompt() {
        assert_eq!(request("c", "sys", Some("n")).system_prompt(), "sys\n\nn");
        assert_eq!(request("c", "", Some("n")).system_prompt(), "n");
        assert_eq!(request("c", "sys", Some("  ")).system_prompt(), "sys");
        assert_eq!(request("c", "sys", None).system_prompt(), "sys");
    }
}
