//! [`WireError`]: everything that can go wrong between two l3m processes, named by what was wrong.
//!
//! One enum covers the envelope layer and the bus, because a caller of the bus meets both in one
//! call: a request can fail in transport (`Timeout`, `NoResponders`, `Transport`) or come back as
//! bytes that do not open (`Oversized`, `Malformed`, `UnknownVersion`, `UnknownKind`).

use std::time::Duration;

use crate::subjects::SubjectError;

/// A boxed transport cause, kept so that the original async-nats error is never lost.
pub type TransportCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a message could not be sent, received, opened or answered.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The bytes are longer than the receiver's limit; nothing was decoded.
    #[error(
        "message of {actual} bytes exceeds the limit of {limit} bytes \
         (send less, or raise `Limits::max_bytes` on both ends)"
    )]
    Oversized {
        /// The limit in force, in bytes.
        limit: usize,
        /// The size of the message that was refused, in bytes.
        actual: usize,
    },
    /// The bytes are not the MessagePack the receiver expects.
    #[error("malformed message: {reason}")]
    Malformed {
        /// Which part failed to decode and why.
        reason: String,
    },
    /// The envelope is from a version of the protocol this build does not speak.
    #[error("envelope version {found} is not supported; this build speaks {supported:?}")]
    UnknownVersion {
        /// The version the envelope declared.
        found: u16,
        /// The versions this build can open.
        supported: &'static [u16],
    },
    /// The envelope opened but carries another kind of message than the receiver expects.
    #[error("message kind `{kind}` was not expected here; expected `{expected}`")]
    UnknownKind {
        /// The kind the envelope declared.
        kind: String,
        /// The kind (or kinds, `|`-separated) the receiver accepts.
        expected: String,
    },
    /// A typed value could not be encoded (a serializer refused it).
    #[error("could not encode a `{kind}` message: {reason}")]
    Encode {
        /// The kind being encoded.
        kind: &'static str,
        /// What the serializer said.
        reason: String,
    },
    /// A subject, filter or queue group name broke the subject rules.
    #[error(transparent)]
    Subject(#[from] SubjectError),
    /// A request got no reply within its timeout (someone was listening but did not answer).
    #[error("no reply on `{subject}` within {after:?}")]
    Timeout {
        /// The subject the request was sent to.
        subject: String,
        /// The timeout that ran out.
        after: Duration,
    },
    /// A request was sent to a subject nobody is listening on.
    #[error("no service is listening on `{subject}` (is it running, and on this hub?)")]
    NoResponders {
        /// The subject the request was sent to.
        subject: String,
    },
    /// A received request carried no reply subject, so it cannot be answered.
    #[error("the message on `{subject}` has no reply subject, so it cannot be answered")]
    NoReplySubject {
        /// The subject the message arrived on.
        subject: String,
    },
    /// The answer to a sealed request came in clear, and is not a refusal the server could
    /// not have sealed: whoever answered does not hold the session's key
    /// ([`crate::sealed_reply`]).
    #[error(
        "the answer (kind `{kind}`) is not sealed to the session; whoever answered does not \
         hold its key, and it was not read"
    )]
    UnsealedReply {
        /// The kind it came under.
        kind: String,
    },
    /// A sealed answer does not open with the session's reply key for the request asked: it
    /// was sealed for another request or another session, altered, or forged.
    #[error(
        "the sealed answer does not open as the answer to this request of this session \
         (another request's, another session's, altered or forged); it was not read"
    )]
    BadReplySeal,
    /// A plain refusal that would make the client reopen its session and resend (`{code}`)
    /// is not signed by the hubd its credential pins ([`crate::sealed_reply`]): whoever
    /// answered is not hubd, and the request is not sent again.
    #[error(
        "the plain `{code}` refusal is not signed by the pinned hubd; it was not believed and \
         the request is not sent again"
    )]
    UnsignedRefusal {
        /// The refusal's code.
        code: crate::reply::ErrorCode,
    },
    /// The transport (the NATS connection) failed; `source` is the client library's own error.
    #[error("NATS transport failed to {op}: {source}")]
    Transport {
        /// What was being attempted, e.g. ``publish to `l3m.t.hubd.append` ``.
        op: String,
        /// The underlying error, unchanged.
        #[source]
        source: TransportCause,
    },
}

impl WireError {
    /// Wraps a transport failure, keeping its cause.
    pub fn transport(op: impl Into<String>, source: impl Into<TransportCause>) -> Self {
        WireError::Transport {
            op: op.into(),
            source: source.into(),
        }
    }
}
