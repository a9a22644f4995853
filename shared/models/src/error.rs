//! Why a model call ended without a reply, and whether trying again may help.
//!
//! One enum for every provider, so the sequencer journals a `call-failed` record the same way
//! whatever answered: [`ModelError`]'s `Display` is the record's `error`, and
//! [`ModelError::retryable`] its `retryable`.
//!
//! # Layout
//! - [`ModelError`]: the failure, carrying its evidence (status and body excerpt, what part of a
//!   response was wrong, which script line).
//! - [`TimeoutKind`]: which of the two deadlines ran out.

use std::path::PathBuf;
use std::time::Duration;

/// How much of an error body an error keeps: enough to read the provider's reason, not so much
/// that a hostile server fills the Log.
pub const BODY_EXCERPT_CHARS: usize = 500;

/// A model call that ended without a reply.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with a non-success HTTP status.
    #[error("HTTP {status} from {url}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The endpoint asked.
        url: String,
        /// The start of the response body (the provider's own reason), at most
        /// [`BODY_EXCERPT_CHARS`] characters.
        body: String,
        /// How long the provider asked us to wait (`retry-after`, `retry-after-ms`), if it said.
        retry_after: Option<Duration>,
    },
    /// A deadline ran out.
    #[error("{kind} after {after:?} waiting on {url}")]
    Timeout {
        /// Which deadline.
        kind: TimeoutKind,
        /// The deadline.
        after: Duration,
        /// The endpoint asked.
        url: String,
    },
    /// No connection could be made.
    #[error("could not connect to {url}: {detail}")]
    Connect {
        /// The endpoint asked.
        url: String,
        /// What the transport said.
        detail: String,
    },
    /// The connection broke while the request or the reply was in flight.
    #[error("transport failed talking to {url}: {detail}")]
    Transport {
        /// The endpoint asked.
        url: String,
        /// What the transport said.
        detail: String,
    },
    /// The provider reported an error inside a stream that had started well (Anthropic's
    /// `error` event, an OpenAI-compatible `{"error": ...}` chunk).
    #[error("the provider reported {kind} mid-stream: {message}")]
    StreamError {
        /// The provider's error type (`overloaded_error`, `api_error`, `server_error`, ...).
        kind: String,
        /// Its message.
        message: String,
    },
    /// The reply was not what the dialect says it must be.
    #[error("bad response from {provider}: {what}")]
    BadResponse {
        /// The dialect that read it.
        provider: &'static str,
        /// What was wrong, naming the event, field or value.
        what: String,
    },
    /// A script file could not be read.
    #[error("cannot read script {path}: {detail}")]
    ScriptRead {
        /// The script's path.
        path: PathBuf,
        /// What the filesystem said.
        detail: String,
    },
    /// A script file is not a valid script.
    #[error("script {path} line {line}: {message}")]
    ScriptParse {
        /// The script's path.
        path: PathBuf,
        /// The line the problem is on, from 1.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// A scripted turn expected its request to carry a text that it does not.
    #[error(
        "script {path} turn {turn} expects the last user message to contain {expected:?}, but it was {found:?}"
    )]
    ScriptExpectation {
        /// The script's path.
        path: PathBuf,
        /// The turn, from 1.
        turn: usize,
        /// The text the turn expects.
        expected: String,
        /// The start of what the last user message held.
        found: String,
    },
    /// The model configuration cannot make a provider.
    #[error("model configuration: {what}")]
    Config {
        /// What is wrong, and the fix where there is one.
        what: String,
    },
}

/// Which deadline of a request ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// The whole request, from sending to the last byte of the reply.
    Request,
    /// The gap between two pieces of a streamed reply.
    Idle,
    /// Making the connection.
    Connect,
}

impl std::fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Request => "the request timed out",
            Self::Idle => "the stream went idle",
            Self::Connect => "the connection was not made",
        })
    }
}

impl ModelError {
    /// Whether the same request may succeed if sent again: overload (529), rate limits (429),
    /// server errors (5xx), request timeouts (408), a conflict with a try of the same key still
    /// in flight (409), our own deadlines and broken connections may pass; a refused request
    /// (400, 401, 403, 404, 422), a reply we cannot read and a bad script or table will not.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Status { status, .. } => matches!(status, 408 | 409 | 429) || *status >= 500,
            Self::Timeout { .. } | Self::Connect { .. } | Self::Transport { .. } => true,
            Self::StreamError { kind, .. } => matches!(
                kind.as_str(),
                "overloaded_error" | "api_error" | "rate_limit_error" | "server_error"
            ),
            Self::BadResponse { .. }
            | Self::ScriptRead { .. }
            | Self::ScriptParse { .. }
            | Self::ScriptExpectation { .. }
            | Self::Config { .. } => false,
        }
    }

    /// Whether the provider refused the request as longer than the model's context window (an
    /// HTTP 400 or 413 whose body is one of the providers' known shapes: OpenAI's
    /// `context_length_exceeded`, Anthropic's "prompt is too long", the "maximum context
    /// length" of OpenAI-compatible servers). Such a call is not hopeless: a smaller request
    /// may be answered, so the caller compacts and asks again.
    pub fn is_context_overflow(&self) -> bool {
        const SHAPES: [&str; 7] = [
            "context_length_exceeded",
            "prompt is too long",
            "maximum context length",
            "context window",
            "context length",
            "too many tokens",
            "request_too_large",
        ];
        match self {
            Self::Status {
                status: 400 | 413,
                body,
                ..
            } => {
                let body = body.to_lowercase();
                SHAPES.iter().any(|shape| body.contains(shape))
            }
            _ => false,
        }
    }

    /// How long the provider asked us to wait before trying again, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub(crate) fn config(what: impl Into<String>) -> Self {
        Self::Config { what: what.into() }
    }
}

/// The first [`BODY_EXCERPT_CHARS`] characters of `text`, marked when cut.
pub(crate) fn excerpt(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(BODY_EXCERPT_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> ModelError {
        ModelError::Status {
            status: code,
            url: "u".into(),
            body: String::new(),
            retry_after: None,
        }
    }

    #[test]
    fn the_providers_context_overflow_answers_are_known() {
        let answer = |status, body: &str| ModelError::Status {
            status,
            url: "u".into(),
            body: body.into(),
            retry_after: None,
        };
        for body in [
            r#"{"error":{"message":"This model's maximum context length is 16385 tokens","code":"context_length_exceeded"}}"#,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum size"}}"#,
        ] {
            assert!(answer(400, body).is_context_overflow(), "{body}");
        }
        assert!(!answer(400, r#"{"error":{"message":"bad tool schema"}}"#).is_context_overflow());
        assert!(!answer(500, "maximum context length").is_context_overflow());
    }

    #[test]
    fn retryable_statuses_are_overload_limits_and_server_errors() {
        for code in [408, 429, 500, 502, 503, 529] {
            assert!(status(code).retryable(), "{code}");
        }
        for code in [400, 401, 403, 404, 422] {
            assert!(!status(code).retryable(), "{code}");
        }
    }

    #[test]
    fn excerpt_cuts_long_bodies() {
        let long = "x".repeat(BODY_EXCERPT_CHARS + 10);
        assert_eq!(excerpt(&long).chars().count(), BODY_EXCERPT_CHARS + 1);
        assert_eq!(excerpt("short"), "short");
    }
}
