//! Typed request/response over a [`Bus`]: [`call`] for clients, [`TypedServer`] and
//! [`serve_typed`] for servers.
//!
//! A server is layered as in mini-redis: the envelope is checked (size, version), then decoded
//! (kind, body), then handed to the handler. Whatever goes wrong in the first two layers is
//! answered with a typed [`RemoteError`] and the server goes on to the next request, so a bad
//! client costs one reply, never the service. A handler that panics is answered with
//! [`ErrorCode::Internal`]. In-flight handlers are bounded by a semaphore; when it is full,
//! further requests wait in the subscription's queue.
//!
//! A server may also refuse what it must not answer before anything is decoded
//! ([`ServeOptions::inbox_only`]: a reply subject that is not an inbox gets no answer at all, so
//! the server cannot be made to publish on another party's subjects), and check the envelope
//! (its kind, seal and capability) before the body is decoded ([`ServeOptions::precheck`]);
//! the precheck names the session key the answer is then sealed with
//! ([`crate::sealed_reply`]), and [`call_sealed`] opens it.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use l3m_wire::{bus::{Bus, LocalBus}, envelope::{Limits, Message}, typed::*};
//! use serde::{Deserialize, Serialize};
//! use tokio_util::sync::CancellationToken;
//!
//! #[derive(Serialize, Deserialize)]
//! struct Add { a: i64, b: i64 }
//! impl Message for Add { const KIND: &'static str = "calc.add"; }
//! #[derive(Serialize, Deserialize, Debug, PartialEq)]
//! struct Sum(i64);
//! impl Message for Sum { const KIND: &'static str = "calc.sum"; }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let bus: Arc<dyn Bus> = Arc::new(LocalBus::new());
//! let shutdown = CancellationToken::new();
//! let server = TypedServer::<Add, Sum>::bind(bus.as_ref(), "l3m.t.calc.add", ServeOptions::default()).await?;
//! let task = tokio::spawn(server.run(|req: TypedRequest<Add>| async move { Ok(Sum(req.body.a + req.body.b)) }, shutdown.clone()));
//! let sum: Sum = call(bus.as_ref(), "l3m.t.calc.add", &Add { a: 2, b: 3 }, Duration::from_secs(5), &Limits::default()).await??;
//! assert_eq!(sum, Sum(5));
//! shutdown.cancel();
//! task.await.unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{FutureExt as _, StreamExt};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::bus::{Bus, Request, RequestStream};
use crate::credential::{Seal, SessionKey};
use crate::envelope::{Envelope, Limits, Message, encode, encode_sealed};
use crate::error::WireError;
use crate::reply::{ErrorCode, RemoteError, Reply, decode_reply, encode_reply};
use crate::sealed_reply::ReplyKey;

/// The default bound on handlers running at once in one server.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;

/// Sends a typed request and opens the typed reply.
///
/// The outer `Result` is the wire (transport, timeout, a reply that does not open); the inner
/// [`Reply`] is the server's answer, a response or its typed refusal.
pub async fn call<Req: Message, Resp: Message>(
    bus: &dyn Bus,
    subject: &str,
    request: &Req,
    timeout: Duration,
    limits: &Limits,
) -> Result<Reply<Resp>, WireError> {
    exchange(bus, subject, encode(request, limits)?, timeout, limits).await
}

/// [`call`] for a request of an open session: sealed with `key` as request number `n` of the
/// session named by capability `cap`. The answer must be sealed to the session for this request
/// ([`ReplyKey::open`](crate::sealed_reply::ReplyKey::open)), or be a plain refusal signed by
/// `hub` when the caller pins hubd's key; one that is not is a [`WireError::UnsealedReply`],
/// [`WireError::BadReplySeal`] or [`WireError::UnsignedRefusal`], never read.
pub async fn call_sealed<Req: Message, Resp: Message>(
    bus: &dyn Bus,
    subject: &str,
    request: &Req,
    timeout: Duration,
    limits: &Limits,
    (key, n, cap): (&SessionKey, u64, &str),
    hub: Option<&l3m_core::credential::PublicKey>,
) -> Result<Reply<Resp>, WireError> {
    let payload = encode_sealed(request, limits, key, n, cap)?;
    let bytes = bus.request(subject, payload, timeout).await?;
    key.reply().open((cap, n, Req::KIND), hub, &bytes, limits)
}

async fn exchange<Resp: Message>(
    bus: &dyn Bus,
    subject: &str,
    payload: bytes::Bytes,
    timeout: Duration,
    limits: &Limits,
) -> Result<Reply<Resp>, WireError> {
    let bytes = bus.request(subject, payload, timeout).await?;
    decode_reply(&bytes, limits)
}

/// What a handler receives: the decoded body and the subject it came on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedRequest<Req> {
    /// The concrete subject, so a server on a wildcard knows e.g. which agent is addressed.
    pub subject: String,
    /// The decoded request.
    pub body: Req,
    /// The seal the envelope carried, with the body bytes it seals; the server whose sessions
    /// hold the keys checks it.
    pub sealed: Option<Sealed>,
    /// Where the answer goes (its first token names the sender's inbox, e.g. `_INBOX_hubd`).
    pub reply: Option<String>,
}

/// A request's seal and the exact body bytes it was computed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealed {
    /// The seal.
    pub seal: Seal,
    /// The body as sent.
    pub body: Vec<u8>,
    /// The capability the envelope named beside the seal ([`Envelope::cap`]).
    pub capability: Option<String>,
}

/// Whether `reply` is an inbox: its first token is `_INBOX` (an anonymous connection's) or
/// `_INBOX_<user>` (a NATS user's own, deploy/nats.conf), never a service's or an
/// announcement's subject.
pub fn is_inbox(reply: &str) -> bool {
    let first = reply.split('.').next().unwrap_or(reply);
    reply.len() > first.len() + 1
        && (first == "_INBOX" || first.strip_prefix("_INBOX_").is_some_and(|u| !u.is_empty()))
}

/// The function a [`Precheck`] runs: the envelope and the reply subject, before the body is
/// decoded.
pub type PrecheckFn = dyn Fn(&Envelope, Option<&str>) -> Prechecked + Send + Sync;

/// What a [`Precheck`] decided about one request.
#[derive(Debug)]
pub struct Prechecked {
    /// The reply key of the session the request proved it comes from (its seal verified):
    /// the answer, a refusal included, is sealed with it as the answer to that request. `None`
    /// answers in clear (the session is unknown, or the seal did not verify).
    pub reply_key: Option<ReplyKey>,
    /// `Err` refuses the request, answered with this error, before its body is decoded.
    pub verdict: Result<(), RemoteError>,
}

/// A check on a request's envelope (kind already matched; its seal and capability) and reply
/// subject that runs before the body is decoded, so a request that fails it costs no decoding.
/// It also names the key the answer is sealed with ([`Prechecked::reply_key`]): the one place a
/// server seals replies.
#[derive(Clone)]
pub struct Precheck(pub Arc<PrecheckFn>);

impl std::fmt::Debug for Precheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Precheck(..)")
    }
}

impl PartialEq for Precheck {
    fn eq(&self, other: &Precheck) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Precheck {}

/// How a typed server takes its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// Share requests with other servers in this queue group (each request to one of them).
    pub queue_group: Option<String>,
    /// The size limit for requests and responses.
    pub limits: Limits,
    /// How many handlers may run at once; at least one.
    pub max_in_flight: usize,
    /// Answer only requests whose reply subject is an inbox ([`is_inbox`]); any other request
    /// is dropped unanswered and undecoded.
    pub inbox_only: bool,
    /// Run on the envelope before its body is decoded; a refusal is the answer.
    pub precheck: Option<Precheck>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            queue_group: None,
            limits: Limits::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            inbox_only: false,
            precheck: None,
        }
    }
}

/// A server bound to its subject and not yet running.
///
/// Binding and running are separate so that a caller knows the subscription is live (a request
/// sent after `bind` returns will be served) before it spawns `run`.
pub struct TypedServer<Req, Resp> {
    requests: RequestStream,
    options: ServeOptions,
    _types: PhantomData<fn(Req) -> Resp>,
}

impl<Req, Resp> std::fmt::Debug for TypedServer<Req, Resp> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedServer")
            .field("request_kind", &std::any::type_name::<Req>())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<Req, Resp> TypedServer<Req, Resp>
where
    Req: Message + Send + 'static,
    Resp: Message + Send + 'static,
{
    /// Subscribes to `subject` (a filter; wildcards allowed) with the given options.
    pub async fn bind(
        bus: &dyn Bus,
        subject: &str,
        options: ServeOptions,
    ) -> Result<Self, WireError> {
        let requests = bus.serve(subject, options.queue_group.as_deref()).await?;
        Ok(TypedServer {
            requests,
            options,
            _types: PhantomData,
        })
    }

    /// Serves until `shutdown` is cancelled or the bus ends the subscription, answering every
    /// request; then stops taking requests and waits for the ones in flight to be answered.
    pub async fn run<H, Fut>(mut self, handler: H, shutdown: CancellationToken)
    where
        H: Fn(TypedRequest<Req>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Reply<Resp>> + Send + 'static,
    {
        let options = Arc::new(self.options.clone());
        let slots = Arc::new(Semaphore::new(self.options.max_in_flight.max(1)));
        let handler = Arc::new(handler);
        let mut in_flight = JoinSet::new();
        loop {
            let slot = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                slot = Arc::clone(&slots).acquire_owned() => match slot {
                    Ok(slot) => slot,
                    Err(_) => break,
                },
            };
            let request = tokio::select! {
                biased;
                () = shutdown.cancelled() => break,
                next = self.requests.next() => match next {
                    Some(request) => request,
                    None => break,
                },
            };
            if options.inbox_only && !request.reply().is_some_and(is_inbox) {
                tracing::debug!(
                    subject = request.subject.as_str(),
                    reply = request.reply().unwrap_or("(none)"),
                    "dropped a request whose answer would not go to an inbox"
                );
                continue;
            }
            let (handler, options) = (Arc::clone(&handler), Arc::clone(&options));
            in_flight.spawn(async move {
                answer(request, &handler, &options).await;
                drop(slot);
            });
            while in_flight.try_join_next().is_some() {}
        }
        drop(self.requests);
        while in_flight.join_next().await.is_some() {}
    }
}

/// Binds `subject` with default options and serves it until `shutdown` is cancelled.
///
/// Use [`TypedServer::bind`] and [`TypedServer::run`] instead when the caller must know the
/// subscription is live before it goes on, or needs a queue group or other limits.
pub async fn serve_typed<Req, Resp, H, Fut>(
    bus: &dyn Bus,
    subject: &str,
    handler: H,
    shutdown: CancellationToken,
) -> Result<(), WireError>
where
    Req: Message + Send + 'static,
    Resp: Message + Send + 'static,
    H: Fn(TypedRequest<Req>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply<Resp>> + Send + 'static,
{
    TypedServer::<Req, Resp>::bind(bus, subject, ServeOptions::default())
        .await?
        .run(handler, shutdown)
        .await;
    Ok(())
}

/// Checks, decodes, handles and answers one request. It always sends an answer unless the
/// request has nowhere to send it or the bus refuses it, which is logged.
async fn answer<Req, Resp, H, Fut>(request: Request, handler: &Arc<H>, options: &ServeOptions)
where
    Req: Message + Send + 'static,
    Resp: Message + Send + 'static,
    H: Fn(TypedRequest<Req>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply<Resp>> + Send + 'static,
{
    let limits = &options.limits;
    let wire = |e: WireError| RemoteError::from_wire(&e);
    // The key and request number the answer is sealed for, once the precheck found them.
    let mut sealing: Option<(ReplyKey, u64)> = None;
    let opened = Envelope::from_bytes(&request.payload, limits)
        .map_err(wire)
        .and_then(|envelope| {
            envelope.expect_kind(Req::KIND).map_err(wire)?;
            if let Some(precheck) = &options.precheck {
                let checked = (precheck.0)(&envelope, request.reply());
                sealing = checked.reply_key.zip(envelope.seal.map(|seal| seal.n));
                checked.verdict?;
            }
            Ok((envelope.open::<Req>().map_err(wire)?, envelope))
        });
    let reply: Reply<Resp> = match opened {
        Err(e) => {
            tracing::debug!(subject = request.subject.as_str(), error = %e.message, "refused a request");
            Err(e)
        }
        Ok((body, envelope)) => {
            let typed = TypedRequest {
                subject: request.subject.clone(),
                body,
                sealed: envelope.seal.map(|seal| Sealed {
                    seal,
                    body: envelope.body,
                    capability: envelope.cap,
                }),
                reply: request.reply().map(str::to_owned),
            };
            // A handler that panics, while building its future or while running it, still
            // gets its caller an answer. Caught in this task rather than by running the handler
            // as a task of its own: a request is then one task hop shorter.
            let failed = |panic: Box<dyn std::any::Any + Send>| {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".to_owned());
                Err(RemoteError::new(
                    ErrorCode::Internal,
                    format!("the handler for `{}` failed: {what}", Req::KIND),
                ))
            };
            match std::panic::catch_unwind(AssertUnwindSafe(|| handler(typed))) {
                Ok(future) => AssertUnwindSafe(future)
                    .catch_unwind()
                    .await
                    .unwrap_or_else(failed),
                Err(panic) => failed(panic),
            }
        }
    };
    let encode = |reply: &Reply<Resp>| match &sealing {
        Some((key, n)) => key.seal(*n, Req::KIND, reply, limits),
        None => encode_reply(reply, limits),
    };
    let bytes = encode(&reply).or_else(|e| {
        let code = RemoteError::from_wire(&e).code;
        let error = RemoteError::new(code, format!("the response could not be sent: {e}"));
        encode(&Err(error))
    });
    let subject = request.subject.clone();
    let sent = match bytes {
        Ok(bytes) => request.respond(bytes).await,
        Err(e) => Err(e),
    };
    if let Err(e) = sent {
        tracing::warn!(subject = subject.as_str(), error = %e, "could not answer a request");
    }
}

#[cfg(test)]
mod tests {
    use super::is_inbox;

    #[test]
    fn only_an_inbox_is_an_inbox() {
        for inbox in ["_INBOX.abc.1", "_INBOX_cli.abc.1", "_INBOX_sequencer.x"] {
            assert!(is_inbox(inbox), "{inbox}");
        }
        for other in [
            "l3m.t.ref.log.bob",
            "l3m.t.sequencer.interrupt.bob",
            "_INBOX",
            "_INBOX_",
            "_INBOX_.x",
            "_INBOXcli.x",
            "x._INBOX.y",
            "",
        ] {
            assert!(!is_inbox(other), "{other}");
        }
    }
}
