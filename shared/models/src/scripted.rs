//! The scripted provider: answers read from a TOML file, for demos, tests and offline runs.
//!
//! The reply to a request is a pure function of its view: turn `N` (from 0) of the script
//! answers a view holding `N` assistant messages, so a restarted sequencer, a rewind or a fork
//! gets the same answer for the same conversation. Its [`Provider::name`] is `scripted`, so the
//! Log's `call-started` records say the answers were not a model's.
//!
//! # Format
//! ```toml
//! [[turn]]
//! text = "I will read the file."
//! expect_contains = "read"      # optional: the last user message must contain this
//! delay_ms = 50                 # optional: answer this late (for tests of slowness)
//! [[turn.tool_use]]
//! name = "read_file"
//! input = { path = "workspace/README.md" }
//! [[turn]]
//! text = "Done."
//! ```
//! A turn needs text or a tool use (an empty reply would leave the view unchanged and the same
//! turn would answer forever). Tool-use ids are `{call}-{k}`, `k` from 1, fresh per call. The
//! stop reason is `tool_use` when the turn uses tools, else `end_turn`. Past the last turn every
//! answer is [`NO_MORE_TURNS`]. Usage counts a "token" per 4 bytes (rounded up) of the request's
//! system prompt, messages and tools, and of the reply, so cost tables have numbers.
//!
//! # Layout
//! - [`Script`], [`Turn`], [`ScriptedToolUse`]: the parsed file; [`Script::parse`] names the
//!   line of any problem.
//! - [`Script::answer`]: the pure choice of reply.
//! - [`Scripted`]: the [`Provider`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::BoxFuture;
use l3m_core::log::{ToolUse, ToolUseId, Usage};
use l3m_core::view::{Message, Part};
use serde::Deserialize;
use toml::Spanned;

use crate::error::excerpt;
use crate::{ModelError, ModelReply, ModelRequest, Provider};

/// The answer past the script's last turn.
pub const NO_MORE_TURNS: &str = "(scripted) the script has no more turns";
const NAME: &str = "scripted";

/// A parsed script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    /// The file it came from, for errors.
    pub path: PathBuf,
    /// The turns, in order.
    pub turns: Vec<Turn>,
}

/// One scripted reply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The reply's text.
    #[serde(default)]
    pub text: String,
    /// The tools the reply asks to use.
    #[serde(default)]
    pub tool_use: Vec<ScriptedToolUse>,
    /// How long to wait before answering.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// A text the request's last user message must contain, so a demo whose flow broke fails
    /// loudly instead of answering out of step.
    #[serde(default)]
    pub expect_contains: Option<String>,
}

/// One tool use of a scripted reply.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolUse {
    /// The tool's name.
    pub name: String,
    /// Its input; an empty table when left out.
    #[serde(default = "empty_input")]
    pub input: toml::Value,
}

fn empty_input() -> toml::Value {
    toml::Value::Table(toml::Table::new())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    turn: Vec<Spanned<Turn>>,
}

/// The line (from 1) of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let offset = offset.min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// A token estimate: one per 4 bytes, rounded up.
fn tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(4)).unwrap_or(u64::MAX)
}

impl Script {
    /// Reads and parses the script at `path`.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::ScriptRead {
            path: path.to_owned(),
            detail: e.to_string(),
        })?;
        Self::parse(path, &text)
    }

    /// Parses `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ModelError> {
        let at = |offset: usize, message: String| ModelError::ScriptParse {
            path: path.to_owned(),
            line: line_of(text, offset),
            message,
        };
        let file: ScriptFile = toml::from_str(text).map_err(|e| {
            let offset = e.span().map_or(0, |s| s.start);
            at(offset, e.message().trim().to_owned())
        })?;
        let mut turns = Vec::with_capacity(file.turn.len());
        for (n, spanned) in file.turn.into_iter().enumerate() {
            let start = spanned.span().start;
            let turn = spanned.into_inner();
            if turn.text.is_empty() && turn.tool_use.is_empty() {
                return Err(at(
                    start,
                    format!("turn {} has neither text nor a tool_use", n + 1),
                ));
            }
            if let Some(blank) = turn.tool_use.iter().position(|u| u.name.trim().is_empty()) {
                return Err(at(
                    start,
                    format!("turn {} tool_use {} has an empty name", n + 1, blank + 1),
                ));
            }
            turns.push(turn);
        }
        Ok(Self {
            path: path.to_owned(),
            turns,
        })
    }

    /// The reply to `request`, and how long to wait before giving it.
    pub fn answer(
        &self,
        request: &ModelRequest,
    ) -> Result<(ModelReply, Option<Duration>), ModelError> {
        let n = request
            .view
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let Some(turn) = self.turns.get(n) else {
            let reply = reply(request, NO_MORE_TURNS.to_owned(), Vec::new());
            return Ok((reply, None));
        };
        if let Some(expected) = &turn.expect_contains {
            let last_user = last_user_text(request);
            if !last_user.contains(expected.as_str()) {
                return Err(ModelError::ScriptExpectation {
                    path: self.path.clone(),
                    turn: n + 1,
                    expected: expected.clone(),
                    found: excerpt(&last_user),
                });
            }
        }
        let mut tool_uses = Vec::with_capacity(turn.tool_use.len());
        for (k, scripted) in turn.tool_use.iter().enumerate() {
            let id = ToolUseId::new(format!("{}-{}", request.call, k + 1)).map_err(|e| {
                ModelError::BadResponse {
                    provider: NAME,
                    what: format!("tool use id: {e}"),
                }
            })?;
            let input =
                serde_json::to_value(&scripted.input).map_err(|e| ModelError::BadResponse {
                    provider: NAME,
                    what: format!("turn {} input of {}: {e}", n + 1, scripted.name),
                })?;
            tool_uses.push(ToolUse {
                id,
                name: scripted.name.clone(),
                input,
            });
        }
        let delay = turn.delay_ms.map(Duration::from_millis);
        Ok((reply(request, turn.text.clone(), tool_uses), delay))
    }
}

/// The reply with its stop reason and estimated usage.
fn reply(request: &ModelRequest, text: String, tool_uses: Vec<ToolUse>) -> ModelReply {
    let input_bytes = request.system_prompt().len()
        + request
            .view
            .messages
            .iter()
            .map(message_bytes)
            .sum::<usize>()
        + request
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + json_bytes(&t.input_schema))
            .sum::<usize>();
    let output_bytes = text.len() + uses_bytes(&tool_uses);
    let stop_reason = if tool_uses.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    ModelReply {
        text,
        tool_uses,
        usage: Usage {
            input_tokens: tokens(input_bytes),
            output_tokens: tokens(output_bytes),
            ..Usage::default()
        },
        stop_reason: stop_reason.to_owned(),
    }
}

fn uses_bytes(uses: &[ToolUse]) -> usize {
    uses.iter()
        .map(|u| u.name.len() + json_bytes(&u.input))
        .sum()
}

/// The length of `value` as compact JSON, counted without building the text.
fn json_bytes(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a Value to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

fn message_bytes(message: &Message) -> usize {
    match message {
        Message::Assistant { text, tool_uses } => text.len() + uses_bytes(tool_uses),
        Message::User { content } => content
            .iter()
            .map(|part| match part {
                Part::Text { text } => text.len(),
                Part::ToolResult { output, .. } => output.len(),
            })
            .sum(),
    }
}

/// Everything the last user message shows: its texts and tool results, one per line.
fn last_user_text(request: &ModelRequest) -> String {
    let Some(content) = request.view.messages.iter().rev().find_map(|m| match m {
        Message::User { content } => Some(content),
        Message::Assistant { .. } => None,
    }) else {
        return String::new();
    };
    let parts: Vec<&str> = content
        .iter()
        .map(|part| match part {
            Part::Text { text } => text.as_str(),
            Part::ToolResult { output, .. } => output.as_str(),
        })
        .collect();
    parts.join("\n")
}

/// The scripted provider.
#[derive(Debug, Clone)]
pub struct Scripted {
    script: Script,
}

impl Scripted {
    /// A provider answering from `script`.
    pub fn new(script: Script) -> Self {
        Self { script }
    }

    /// A provider answering from the script at `path`.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        Script::load(path).map(Self::new)
    }
}

impl Provider for Scripted {
    fn name(&self) -> &str {
        NAME
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        Box::pin(async move {
            let (reply, delay) = self.script.answer(request)?;
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            Ok(reply)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_of_counts_from_one() {
        assert_eq!(line_of("a\nb\nc", 0), 1);
        assert_eq!(line_of("a\nb\nc", 2), 2);
        assert_eq!(line_of("a\nb\nc", 99), 3);
    }

    #[test]
    fn json_bytes_is_the_compact_length() {
        let value = serde_json::json!({"path": "a", "n": [1, 2]});
        assert_eq!(json_bytes(&value), value.to_string().len());
    }

    #[test]
    fn tokens_round_up() {
        assert_eq!(tokens(0), 0);
        assert_eq!(tokens(1), 1);
        assert_eq!(tokens(8), 2);
    }
}
