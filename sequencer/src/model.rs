//! The model-provider face the sequencer calls, and a scripted provider for offline runs.
//!
//! This module is deliberately small: the names and shapes are those of `l3m-models`, which
//! replaces it at merge. [`Scripted`] follows that crate's scripted-provider rules exactly (the
//! reply to a request is turn N, N = the number of assistant messages in the request's view;
//! tool-use ids are `"{call}-{k}"`), so tests written over it stay valid after the swap.
//!
//! **Must never**: answer as if it were a real model: the scripted provider's name says
//! `scripted`, so the Log records which provider answered.
//!
//! # Layout
//! - [`ModelRequest`], [`ToolSpec`], [`ModelReply`], [`ModelError`], [`Provider`]: the face.
//! - [`Scripted`]: answers read from a TOML script (`[[turn]] text = ..`, `[[turn.tool_use]]`).

use std::path::Path;
use std::time::Duration;

use futures_util::future::BoxFuture;
use l3m_core::log::{CallId, ToolUse, ToolUseId, Usage};
use l3m_core::view::{Message, View};
use serde::Deserialize;

/// One call to a model: the view, the tools offered, and the call's id (idempotency key).
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The model asked.
    pub model: String,
    /// The conversation (system prompt and messages).
    pub view: View,
    /// Per-model notes added to this request only; never stored in the Log.
    pub notes: Option<String>,
    /// The tools the model may name.
    pub tools: Vec<ToolSpec>,
    /// The reply's output limit.
    pub max_tokens: u32,
    /// The call's id, journaled before the request is sent.
    pub call: CallId,
}

/// A tool as the provider shows it to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its input.
    pub input_schema: serde_json::Value,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// Its text.
    pub text: String,
    /// The tools it asks to use.
    pub tool_uses: Vec<ToolUse>,
    /// What it cost.
    pub usage: Usage,
    /// The provider's stop reason.
    pub stop_reason: String,
}

/// Why a call produced no reply.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The provider's configuration is unusable (unknown provider, bad script, ...).
    #[error("model provider misconfigured: {0}")]
    Config(String),
    /// The provider refused the request; trying again will not help.
    #[error("the model refused the request: {0}")]
    Refused(String),
    /// A transient failure (timeout, overload); a retry may help.
    #[error("the model call failed, transiently: {0}")]
    Transient(String),
}

impl ModelError {
    /// Whether trying the call again may help.
    pub fn retryable(&self) -> bool {
        matches!(self, ModelError::Transient(_))
    }
}

/// A model provider: one dialect, one endpoint.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// The provider's name, as the Log records it.
    fn name(&self) -> &str;
    /// Sends one request and waits for its reply.
    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>>;
}

/// A script: the turns, in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Script {
    #[serde(default)]
    turn: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_use: Vec<ScriptedUse>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedUse {
    name: String,
    #[serde(default = "empty_object")]
    input: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

/// Answers read from a script, for demos, offline runs and tests. Labelled `scripted`.
#[derive(Debug, Clone)]
pub struct Scripted {
    turns: Vec<Turn>,
    delay: Duration,
}

impl Scripted {
    /// Parses a script's text; `delay` is waited before each answer (to model latency).
    pub fn parse(text: &str, delay: Duration) -> Result<Scripted, ModelError> {
        let script: Script = toml::from_str(text)
            .map_err(|e| ModelError::Config(format!("the script is not valid: {e}")))?;
        Ok(Scripted {
            turns: script.turn,
            delay,
        })
    }

    /// Reads a script file.
    pub fn load(path: &Path, delay: Duration) -> Result<Scripted, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ModelError::Config(format!("cannot read the script {}: {e}", path.display()))
        })?;
        Scripted::parse(&text, delay)
    }

    fn answer(&self, request: &ModelRequest) -> Result<ModelReply, ModelError> {
        let n = request
            .view
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let turn = self.turns.get(n).ok_or_else(|| {
            ModelError::Refused(format!(
                "the script has {} turns and turn {n} was asked for",
                self.turns.len()
            ))
        })?;
        let tool_uses = turn
            .tool_use
            .iter()
            .enumerate()
            .map(|(k, u)| {
                let id = ToolUseId::new(format!("{}-{k}", request.call))
                    .map_err(|e| ModelError::Refused(e.to_string()))?;
                Ok(ToolUse {
                    id,
                    name: u.name.clone(),
                    input: u.input.clone(),
                })
            })
            .collect::<Result<Vec<_>, ModelError>>()?;
        let stop_reason = if tool_uses.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        Ok(ModelReply {
            text: turn.text.clone(),
            tool_uses,
            usage: Usage::default(),
            stop_reason: stop_reason.to_owned(),
        })
    }
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            if !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            self.answer(request)
        })
    }
}
