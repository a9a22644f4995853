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

/// [`call`] for a request of an open session: sealed with `key` as request number `n`.
pub async fn call_sealed<Req: Message, Resp: Message>(
    bus: &dyn Bus,
    subject: &str,
    request: &Req,
    timeout: Duration,
    limits: &Limits,
    (key, n): (&SessionKey, u64),
) -> Result<Reply<Resp>, WireError> {
    let payload = encode_sealed(request, limits, key, n)?;
    exchange(bus, subject, payload, timeout, limits).await
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
}

/// How a typed server takes its requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// Share requests with other servers in this queue group (each request to one of them).
    pub queue_group: Option<String>,
    /// The size limit for requests and responses.
    pub limits: Limits,
    /// How many handlers may run at once; at least one.
    pub max_in_flight: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            queue_group: None,
            limits: Limits::default(),
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
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
        let limits = self.options.limits;
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
            let handler = Arc::clone(&handler);
            in_flight.spawn(async move {
                answer(request, &handler, &limits).await;
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
async fn answer<Req, Resp, H, Fut>(request: Request, handler: &Arc<H>, limits: &Limits)
where
    Req: Message + Send + 'static,
    Resp: Message + Send + 'static,
    H: Fn(TypedRequest<Req>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Reply<Resp>> + Send + 'static,
{
    let opened = Envelope::from_bytes(&request.payload, limits)
        .and_then(|envelope| Ok((envelope.open::<Req>()?, envelope)));
    let reply: Reply<Resp> = match opened {
        Err(e) => {
            tracing::debug!(subject = request.subject.as_str(), error = %e, "refused a request");
            Err(RemoteError::from_wire(&e))
        }
        Ok((body, envelope)) => {
            let typed = TypedRequest {
                subject: request.subject.clone(),
                body,
                sealed: envelope.seal.map(|seal| Sealed {
                    seal,
                    body: envelope.body,
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
    let bytes = encode_reply(&reply, limits).or_else(|e| {
        let code = RemoteError::from_wire(&e).code;
        let error = RemoteError::new(code, format!("the response could not be sent: {e}"));
        encode_reply::<Resp>(&Err(error), limits)
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
