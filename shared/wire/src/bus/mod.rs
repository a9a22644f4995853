//! The [`Bus`]: request/reply and notifications between l3m processes, over NATS ([`NatsBus`])
//! or inside one process ([`LocalBus`]), with the same semantics.
//!
//! The trait is object-safe (its methods return boxed futures and streams) so that a service is
//! written once against `Arc<dyn Bus>` and the choice between a real nats-server and the CLI's
//! embedded single-process mode is made at run time, by configuration, not by recompiling every
//! service generically. The cost, one allocation per call, is negligible next to a message hop.
//!
//! # Contract (both implementations)
//! - Subjects are checked with [`crate::subjects`]'s rules before anything is sent; a bad one is
//!   [`WireError::Subject`].
//! - When `subscribe` or `serve` returns, the subscription is live: anything published afterwards
//!   on a matching subject is delivered to it.
//! - Messages from one publisher reach one subscriber in the order they were published.
//! - `*` matches one token, `>` (last) one or more; members of one queue group on one filter
//!   share its messages, each message going to exactly one member.
//! - A request to a subject with no subscriber fails at once with [`WireError::NoResponders`];
//!   one that is received but not answered in time fails with [`WireError::Timeout`].
//! - Dropping a stream ends its subscription.
//! - A message is a hint, never the only copy of a fact: anything that must survive is written
//!   to Git first and announced second.

#[cfg(feature = "cli")]
mod args;
mod local;
mod nats;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use crate::error::WireError;

#[cfg(feature = "cli")]
pub use args::{ConnectError, NatsArgs};
pub use local::{DEFAULT_CAPACITY, LocalBus};
pub use nats::{NatsAuth, NatsBus, NatsTls, inbox_prefix};

/// Takes what `answers` yields within `window`, at most [`MAX_GATHERED`].
async fn collect(
    answers: impl futures_util::Stream<Item = Bytes> + Unpin,
    window: Duration,
) -> Vec<Bytes> {
    use futures_util::StreamExt;
    let until = tokio::time::Instant::now() + window;
    let mut answers = answers.take(MAX_GATHERED);
    let mut gathered = Vec::new();
    while let Ok(Some(answer)) = tokio::time::timeout_at(until, answers.next()).await {
        gathered.push(answer);
    }
    gathered
}

/// The future every bus operation returns.
pub type BusFuture<'a, T> = BoxFuture<'a, Result<T, WireError>>;

/// A stream of notifications from [`Bus::subscribe`]; dropping it unsubscribes.
pub type MessageStream = BoxStream<'static, BusMessage>;

/// A stream of requests from [`Bus::serve`]; dropping it stops serving.
pub type RequestStream = BoxStream<'static, Request>;

/// A message as delivered to a subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BusMessage {
    /// The subject it was published on (the concrete one, not the filter that matched it).
    pub subject: String,
    /// The bytes, normally an [envelope](crate::envelope).
    pub payload: Bytes,
    /// Where an answer should go, if the sender expects one.
    pub reply: Option<String>,
}

/// A request delivered to a server, with the means to answer it.
pub struct Request {
    /// The subject it was sent to (servers on a wildcard read the agent from it).
    pub subject: String,
    /// The request bytes, normally an [envelope](crate::envelope).
    pub payload: Bytes,
    /// Where the answer goes; `None` if the sender published without expecting one.
    reply: Option<String>,
    /// The bus the answer is published on.
    bus: Arc<dyn Bus>,
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("subject", &self.subject)
            .field("payload_len", &self.payload.len())
            .field("reply", &self.reply)
            .finish_non_exhaustive()
    }
}

impl Request {
    /// Where the answer goes, if the sender expects one.
    pub fn reply(&self) -> Option<&str> {
        self.reply.as_deref()
    }

    /// A request received on `bus`; the bus implementations build these from their messages.
    pub(crate) fn new(message: BusMessage, bus: Arc<dyn Bus>) -> Self {
        Request {
            subject: message.subject,
            payload: message.payload,
            reply: message.reply,
            bus,
        }
    }

    /// Answers the request. A request without a reply subject cannot be answered and says so.
    pub async fn respond(self, payload: Bytes) -> Result<(), WireError> {
        let Some(reply) = self.reply else {
            return Err(WireError::NoReplySubject {
                subject: self.subject,
            });
        };
        self.bus.publish(&reply, payload).await
    }
}

/// The most answers [`Bus::gather`] keeps: more servers than this on one subject is a
/// misconfigured site, and the gatherer's memory stays bounded.
pub const MAX_GATHERED: usize = 1024;

/// Request/reply and publish/subscribe between l3m processes. See the module docs for the
/// contract both implementations keep.
pub trait Bus: Send + Sync + fmt::Debug {
    /// Sends `payload` to `subject` and waits up to `timeout` for the first answer.
    fn request<'a>(
        &'a self,
        subject: &'a str,
        payload: Bytes,
        timeout: Duration,
    ) -> BusFuture<'a, Bytes>;

    /// Sends `payload` to `subject` and collects every answer that arrives within `window`, at
    /// most [`MAX_GATHERED`]: for asking each server of a subject (every sequencer host's
    /// health), where [`Bus::request`] takes the first. Nobody answering is an empty list.
    fn gather<'a>(
        &'a self,
        subject: &'a str,
        payload: Bytes,
        window: Duration,
    ) -> BusFuture<'a, Vec<Bytes>>;

    /// Publishes a notification; nobody listening is not an error.
    fn publish<'a>(&'a self, subject: &'a str, payload: Bytes) -> BusFuture<'a, ()>;

    /// Subscribes to a filter (`*` and `>` allowed); every matching message is delivered.
    fn subscribe<'a>(&'a self, filter: &'a str) -> BusFuture<'a, MessageStream>;

    /// Takes requests on a filter. With a queue group, each request goes to one member of the
    /// group; without, to every server on the filter (and the caller takes the first answer).
    fn serve<'a>(
        &'a self,
        filter: &'a str,
        queue_group: Option<&'a str>,
    ) -> BusFuture<'a, RequestStream>;

    /// Returns once everything published so far has been processed by the router (nats-server,
    /// or the in-process routing table): from then on it is in its subscribers' queues.
    fn flush(&self) -> BusFuture<'_, ()>;
}
