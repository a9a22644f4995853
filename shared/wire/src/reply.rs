//! Replies: a typed response or a typed [`RemoteError`] with a stable [`ErrorCode`].
//!
//! A server answers every request, including one it could not read, so a caller never waits
//! out a timeout because its request was bad: it gets an error naming what was wrong.
//!
//! # Format
//! A reply is an [envelope](crate::envelope) whose kind is either the response's
//! [`Message::KIND`] (success) or [`RemoteError::KIND`] (`l3m.error`, failure). An error body
//! is a MessagePack map:
//!
//! | key | type | meaning |
//! |---|---|---|
//! | `code` | str | one of the stable kebab-case codes of [`ErrorCode`] |
//! | `message` | str | a human-readable account, at most [`MAX_ERROR_MESSAGE`] bytes |
//!
//! A code this build does not know decodes as [`ErrorCode::Unrecognized`], so a newer server can
//! add codes without breaking older callers.

use l3m_core::axis::Axis;
use serde::{Deserialize, Serialize};

use crate::envelope::{Envelope, Limits, Message, encode};
use crate::error::WireError;

/// The longest error message carried, in bytes; longer ones are cut at a character boundary so
/// an error reply can always be encoded within any sane size limit.
pub const MAX_ERROR_MESSAGE: usize = 1024;

/// What a caller gets back: the response, or the server's typed refusal.
pub type Reply<T> = Result<T, RemoteError>;

/// Stable error codes. Their kebab-case names are part of the protocol: never rename one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCode {
    /// The request's bytes did not decode (bad MessagePack, wrong shape, trailing bytes).
    Malformed,
    /// The request's envelope version is not spoken by the server.
    UnknownVersion,
    /// The request (or the response it would need) exceeds the size limit.
    Oversized,
    /// The request's kind is not the one served on this subject.
    UnknownKind,
    /// The request decoded but its content is invalid (e.g. a bad name inside it).
    Invalid,
    /// The request is well-formed but not allowed: an authority check said no.
    Refused,
    /// A compare-and-swap lost: the state moved since the caller looked.
    Conflict,
    /// The thing the request names does not exist.
    NotFound,
    /// The session's capability was revoked: its agent retired or was collected (a name spawned
    /// again is a new agent, which its old sessions never reach).
    Revoked,
    /// The capability is not one this server minted: its session ended when the server
    /// restarted (or it was never real). A client opens a new session and asks again; nothing
    /// was done for the request.
    SessionEnded,
    /// The server failed while handling a good request; the message says how.
    Internal,
    /// A code from a newer peer that this build does not know.
    #[serde(other)]
    Unrecognized,
}

impl ErrorCode {
    /// Every code, in a fixed order (`Unrecognized` last: it is what a newer peer's code reads as).
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::Malformed,
        ErrorCode::UnknownVersion,
        ErrorCode::Oversized,
        ErrorCode::UnknownKind,
        ErrorCode::Invalid,
        ErrorCode::Refused,
        ErrorCode::Conflict,
        ErrorCode::NotFound,
        ErrorCode::Revoked,
        ErrorCode::SessionEnded,
        ErrorCode::Internal,
        ErrorCode::Unrecognized,
    ];

    /// The stable wire name of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::Malformed => "malformed",
            ErrorCode::UnknownVersion => "unknown-version",
            ErrorCode::Oversized => "oversized",
            ErrorCode::UnknownKind => "unknown-kind",
            ErrorCode::Invalid => "invalid",
            ErrorCode::Refused => "refused",
            ErrorCode::Conflict => "conflict",
            ErrorCode::NotFound => "not-found",
            ErrorCode::Revoked => "revoked",
            ErrorCode::SessionEnded => "session-ended",
            ErrorCode::Internal => "internal",
            ErrorCode::Unrecognized => "unrecognized",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A server's typed answer that the request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("remote error [{code}]: {message}")]
pub struct RemoteError {
    /// What kind of failure, for code to branch on.
    pub code: ErrorCode,
    /// What exactly was wrong, for a human to read.
    pub message: String,
    /// The grant axis a refusal was about, when it was about one (a spawn widening `net`), for
    /// code that must not parse the message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axis: Option<Axis>,
    /// hubd's identity signature over a refusal it could not seal (`session-ended`, `revoked`),
    /// bound to the request it answers ([`crate::sealed_reply::sign_refusal`]), so a client
    /// pinning hubd reads only hubd's own as a reason to reopen and resend.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "serde_bytes")]
    pub signature: Option<Vec<u8>>,
}

impl Message for RemoteError {
    const KIND: &'static str = "l3m.error";
}

impl RemoteError {
    /// A remote error with the given code; the message is cut to [`MAX_ERROR_MESSAGE`] bytes.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message = message.into();
        if message.len() > MAX_ERROR_MESSAGE {
            let mut cut = MAX_ERROR_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        RemoteError {
            code,
            message,
            axis: None,
            signature: None,
        }
    }

    /// The error, naming the grant axis it refused on.
    pub fn on_axis(mut self, axis: Option<Axis>) -> Self {
        self.axis = axis;
        self
    }

    /// The answer a server gives when a request failed at the wire layer (it did not open, or
    /// the response could not be encoded): the code follows the error, the message is its text.
    pub fn from_wire(err: &WireError) -> Self {
        let code = match err {
            WireError::Oversized { .. } => ErrorCode::Oversized,
            WireError::Malformed { .. } => ErrorCode::Malformed,
            WireError::UnknownVersion { .. } => ErrorCode::UnknownVersion,
            WireError::UnknownKind { .. } => ErrorCode::UnknownKind,
            _ => ErrorCode::Internal,
        };
        RemoteError::new(code, err.to_string())
    }
}

/// Encodes a reply: the response under its own kind, or the error under `l3m.error`.
pub fn encode_reply<T: Message>(
    reply: &Reply<T>,
    limits: &Limits,
) -> Result<bytes::Bytes, WireError> {
    match reply {
        Ok(response) => encode(response, limits),
        Err(error) => encode(error, limits),
    }
}

/// Opens a reply: a `T` if the kind is `T::KIND`, a [`RemoteError`] if it is `l3m.error`, and
/// [`WireError::UnknownKind`] for anything else.
pub fn decode_reply<T: Message>(bytes: &[u8], limits: &Limits) -> Result<Reply<T>, WireError> {
    reply_of(Envelope::from_bytes(bytes, limits)?)
}

/// [`decode_reply`] on an opened envelope (a sealed reply's inner one, say).
pub(crate) fn reply_of<T: Message>(envelope: Envelope) -> Result<Reply<T>, WireError> {
    if envelope.kind == T::KIND {
        Ok(Ok(envelope.open_unchecked()?))
    } else if envelope.kind == RemoteError::KIND {
        Ok(Err(envelope.open_unchecked()?))
    } else {
        Err(WireError::UnknownKind {
            kind: envelope.kind,
            expected: format!("{}|{}", T::KIND, RemoteError::KIND),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_stable_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }

    #[test]
    fn a_code_from_a_newer_peer_is_unrecognized_not_malformed() {
        #[derive(Serialize)]
        struct Future {
            code: &'static str,
            message: &'static str,
        }
        let body = rmp_serde::to_vec_named(&Future {
            code: "quota-exceeded",
            message: "later",
        })
        .unwrap();
        let bytes = Envelope::new(RemoteError::KIND, body)
            .to_bytes(&Limits::default())
            .unwrap();
        let error: RemoteError = crate::envelope::decode(&bytes, &Limits::default()).unwrap();
        assert_eq!(error.code, ErrorCode::Unrecognized);
        assert_eq!(error.message, "later");
    }

    #[test]
    fn long_messages_are_cut_on_a_char_boundary() {
        let err = RemoteError::new(ErrorCode::Internal, "é".repeat(MAX_ERROR_MESSAGE));
        assert!(err.message.len() <= MAX_ERROR_MESSAGE);
        assert!(err.message.chars().all(|c| c == 'é'));
    }
}
