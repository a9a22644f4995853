//! [`NatsBus`]: the [`Bus`] over a real nats-server, through async-nats.
//!
//! Every async-nats error becomes a [`WireError`] that keeps the original as its source; the two
//! a caller branches on, no responders and timeouts, get their own variants. NATS reports some
//! failures asynchronously, after the call that caused them returned: a publish or subscribe the
//! server's permissions refuse is answered with `-ERR 'Permissions Violation ...'` on the
//! connection, which async-nats turns into an event. [`NatsBus::server_errors`] hands those to
//! whoever needs to know; the connection stays up.
//!
//! Between hosts a site's NATS runs over TLS ([`NatsTls::SiteCa`]): the servers show
//! certificates the site's CA signed (`l3m site init`), and a client trusts that CA alone, not
//! the system's roots. A client may name several servers of a cluster; it connects to one and
//! moves to another by itself when that one dies, re-subscribing as it goes.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_nats::{ConnectOptions, Event, RequestErrorKind, client::PublishErrorKind};
use bytes::Bytes;
use futures_util::StreamExt;
use tokio::sync::broadcast;

use super::{Bus, BusFuture, BusMessage, MessageStream, Request, RequestStream};
use crate::error::WireError;
use crate::subjects::{Filter, check_publish, check_queue_group};

/// How long [`NatsBus::sync`] waits for the server to confirm it has caught up.
const SYNC_WITHIN: Duration = Duration::from_secs(10);

/// How many asynchronous server errors are kept for a slow reader of [`NatsBus::server_errors`].
const SERVER_ERROR_BACKLOG: usize = 64;

/// How a client proves who it is to nats-server.
#[derive(Clone, PartialEq, Eq)]
pub enum NatsAuth {
    /// No credentials (a server without authorization, e.g. in tests).
    Anonymous,
    /// A user and password from the server's `authorization { users = [...] }`.
    UserPassword {
        /// The user name.
        user: String,
        /// The password.
        password: String,
    },
    /// A bearer token from the server's `authorization { token: ... }`.
    Token(String),
}

/// How a client secures its connection to nats-server.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NatsTls {
    /// Plain TCP: for a server on loopback, which no other host can reach.
    #[default]
    Plain,
    /// TLS required, the server's certificate checked against this CA certificate (PEM) and
    /// nothing else: the site's own CA, so no public CA can vouch for a NATS server of ours.
    SiteCa(PathBuf),
}

impl NatsTls {
    /// TLS against `ca` when a CA is given (a `--nats-ca` flag or a hub's `nats_ca`), plain
    /// otherwise.
    pub fn from_ca(ca: Option<PathBuf>) -> NatsTls {
        ca.map_or(NatsTls::Plain, NatsTls::SiteCa)
    }
}

/// Where the replies to a NATS user's requests arrive: `_INBOX_<user>`, which deploy/nats.conf
/// lets only that user subscribe to, so no other service reads its replies (the capabilities
/// hubd hands out, the Log ranges it serves). Characters a subject token cannot hold become `_`.
pub fn inbox_prefix(user: &str) -> String {
    let token: String = user
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("_INBOX_{token}")
}

impl fmt::Debug for NatsAuth {
    /// Never prints a secret: logs of a connection attempt must be safe to share.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NatsAuth::Anonymous => f.write_str("Anonymous"),
            NatsAuth::UserPassword { user, .. } => f
                .debug_struct("UserPassword")
                .field("user", user)
                .field("password", &"<redacted>")
                .finish(),
            NatsAuth::Token(_) => f.write_str("Token(<redacted>)"),
        }
    }
}

/// A bus over one NATS connection. Clones share the connection.
#[derive(Debug, Clone)]
pub struct NatsBus {
    /// The async-nats client (itself a cheap handle to the connection task).
    client: async_nats::Client,
    /// Errors the server reported asynchronously, e.g. permission violations.
    server_errors: broadcast::Sender<String>,
}

impl NatsBus {
    /// Connects to `url` (e.g. `nats://127.0.0.1:4222`) with the given credentials, in plain
    /// TCP (see [`NatsBus::connect_with`]).
    ///
    /// Fails if the server cannot be reached or refuses the credentials; once connected, the
    /// client reconnects by itself after a dropped connection.
    pub async fn connect(url: &str, auth: NatsAuth) -> Result<Self, WireError> {
        NatsBus::connect_with(url, auth, &NatsTls::Plain).await
    }

    /// Connects to one of `urls`, a comma-separated list of a cluster's servers (e.g.
    /// `tls://a:4222,tls://b:4222`), secured as `tls` says.
    ///
    /// Fails if no server can be reached, the CA file cannot be read, a server's certificate
    /// is not the CA's, or the credentials are refused. Once connected, the client moves to
    /// another server of the list (or one the cluster announced) when its server dies.
    pub async fn connect_with(
        urls: &str,
        auth: NatsAuth,
        tls: &NatsTls,
    ) -> Result<Self, WireError> {
        let servers: Vec<&str> = urls
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect();
        if servers.is_empty() {
            return Err(WireError::transport(
                "connect to NATS",
                format!("no server named in {urls:?}"),
            ));
        }
        let (server_errors, _) = broadcast::channel(SERVER_ERROR_BACKLOG);
        let sink = server_errors.clone();
        let name = match &auth {
            NatsAuth::UserPassword { user, .. } => format!("l3m {user}"),
            NatsAuth::Anonymous | NatsAuth::Token(_) => "l3m".to_owned(),
        };
        let mut options = match auth {
            NatsAuth::Anonymous => ConnectOptions::new(),
            NatsAuth::UserPassword { user, password } => {
                let prefix = inbox_prefix(&user);
                ConnectOptions::with_user_and_password(user, password).custom_inbox_prefix(prefix)
            }
            NatsAuth::Token(token) => ConnectOptions::with_token(token),
        }
        .name(name)
        .event_callback(move |event| {
            let sink = sink.clone();
            async move { report(event, &sink) }
        });
        if let NatsTls::SiteCa(ca) = tls {
            // Read it here so a wrong path is named as such, not as a failed handshake.
            std::fs::metadata(ca).map_err(|e| {
                WireError::transport(format!("read the site's CA {}", ca.display()), e)
            })?;
            options = options.require_tls(true).add_root_certificates(ca.clone());
        }
        let url = urls;
        let client = options
            .connect(servers)
            .await
            .map_err(|e| WireError::transport(format!("connect to {url}"), e))?;
        Ok(NatsBus {
            client,
            server_errors,
        })
    }

    /// Errors nats-server sent after the fact, as its text (e.g. ``Permissions Violation for
    /// Publish to "l3m.t.x"``). Only errors reported after this call are received. A client
    /// not allowed to publish under `_INBOX.` also sees the refusals of its own subscription
    /// barriers here (see `sync`); they are expected and harmless.
    pub fn server_errors(&self) -> broadcast::Receiver<String> {
        self.server_errors.subscribe()
    }

    /// Returns once nats-server has processed everything this connection sent before, so that
    /// a subscription is live at the server before `subscribe` or `serve` returns.
    ///
    /// async-nats's own `flush` only empties the socket buffer; the server reads each connection
    /// on its own, so another connection's publish could still overtake our SUB. The barrier is
    /// a request to a fresh subject under our own inbox: the server answers it in order, either
    /// with a no-responders status or, if our permissions forbid publishing there, with a
    /// permissions error naming the subject. Either answer proves the earlier commands were
    /// processed, so the barrier needs no permission beyond receiving replies on its own inbox
    /// prefix (`_INBOX.>` anonymously, [`inbox_prefix`] as a user).
    async fn sync(&self, op: impl FnOnce() -> String) -> Result<(), WireError> {
        let probe = format!("{}.sync", self.client.new_inbox());
        let mut errors = self.server_errors.subscribe();
        let refused = async {
            loop {
                match errors.recv().await {
                    Ok(text) if text.contains(&probe) => return,
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    // `self` holds the sender, so the channel cannot close under us.
                    Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
                }
            }
        };
        let answered = self.client.send_request(
            probe.clone(),
            async_nats::Request::new().timeout(Some(SYNC_WITHIN)),
        );
        tokio::select! {
            () = refused => Ok(()),
            result = answered => match result {
                Ok(_) => Ok(()),
                Err(e) if matches!(e.kind(), RequestErrorKind::NoResponders) => Ok(()),
                Err(e) => Err(WireError::transport(op(), e)),
            },
        }
    }

    fn to_message(message: async_nats::Message) -> BusMessage {
        BusMessage {
            subject: message.subject.to_string(),
            payload: message.payload,
            reply: message.reply.map(|r| r.to_string()),
        }
    }

    fn oversized(&self, actual: usize) -> WireError {
        WireError::Oversized {
            limit: self.client.server_info().max_payload,
            actual,
        }
    }
}

/// Routes one connection event: server errors to the broadcast (and the log), the rest to the log.
fn report(event: Event, sink: &broadcast::Sender<String>) {
    match event {
        Event::ServerError(error) => {
            let text = match error {
                async_nats::ServerError::Other(text) => text,
                other => other.to_string(),
            };
            tracing::warn!(error = text.as_str(), "nats-server reported an error");
            // Nobody listening is fine: the error is logged either way.
            let _ = sink.send(text);
        }
        other => tracing::debug!(event = %other, "nats connection event"),
    }
}

impl Bus for NatsBus {
    fn request<'a>(
        &'a self,
        subject: &'a str,
        payload: Bytes,
        timeout: Duration,
    ) -> BusFuture<'a, Bytes> {
        Box::pin(async move {
            check_publish(subject)?;
            let size = payload.len();
            let request = async_nats::Request::new()
                .payload(payload)
                .timeout(Some(timeout));
            match self.client.send_request(subject.to_owned(), request).await {
                Ok(message) => Ok(message.payload),
                Err(e) => Err(match e.kind() {
                    RequestErrorKind::TimedOut => WireError::Timeout {
                        subject: subject.to_owned(),
                        after: timeout,
                    },
                    RequestErrorKind::NoResponders => WireError::NoResponders {
                        subject: subject.to_owned(),
                    },
                    RequestErrorKind::MaxPayloadExceeded => self.oversized(size),
                    _ => WireError::transport(format!("request `{subject}`"), e),
                }),
            }
        })
    }

    fn gather<'a>(
        &'a self,
        subject: &'a str,
        payload: Bytes,
        window: Duration,
    ) -> BusFuture<'a, Vec<Bytes>> {
        Box::pin(async move {
            check_publish(subject)?;
            let size = payload.len();
            let inbox = self.client.new_inbox();
            let replies = self
                .client
                .subscribe(inbox.clone())
                .await
                .map_err(|e| WireError::transport(format!("subscribe to `{inbox}`"), e))?;
            self.client
                .publish_with_reply(subject.to_owned(), inbox, payload)
                .await
                .map_err(|e| match e.kind() {
                    PublishErrorKind::MaxPayloadExceeded => self.oversized(size),
                    _ => WireError::transport(format!("publish to `{subject}`"), e),
                })?;
            Ok(super::collect(replies.map(|m| m.payload), window).await)
        })
    }

    fn publish<'a>(&'a self, subject: &'a str, payload: Bytes) -> BusFuture<'a, ()> {
        Box::pin(async move {
            check_publish(subject)?;
            let size = payload.len();
            self.client
                .publish(subject.to_owned(), payload)
                .await
                .map_err(|e| match e.kind() {
                    PublishErrorKind::MaxPayloadExceeded => self.oversized(size),
                    _ => WireError::transport(format!("publish to `{subject}`"), e),
                })
        })
    }

    fn subscribe<'a>(&'a self, filter: &'a str) -> BusFuture<'a, MessageStream> {
        Box::pin(async move {
            let filter = Filter::parse(filter)?;
            let subscriber = self
                .client
                .subscribe(filter.as_str().to_owned())
                .await
                .map_err(|e| WireError::transport(format!("subscribe to `{filter}`"), e))?;
            self.sync(|| format!("confirm the subscription to `{filter}`"))
                .await?;
            Ok(subscriber.map(Self::to_message).boxed())
        })
    }

    fn serve<'a>(
        &'a self,
        filter: &'a str,
        queue_group: Option<&'a str>,
    ) -> BusFuture<'a, RequestStream> {
        Box::pin(async move {
            let filter = Filter::parse(filter)?;
            let subject = filter.as_str().to_owned();
            let subscriber = match queue_group {
                Some(group) => {
                    check_queue_group(group)?;
                    self.client.queue_subscribe(subject, group.to_owned()).await
                }
                None => self.client.subscribe(subject).await,
            }
            .map_err(|e| WireError::transport(format!("serve `{filter}`"), e))?;
            self.sync(|| format!("confirm serving `{filter}`")).await?;
            let bus: Arc<dyn Bus> = Arc::new(self.clone());
            let requests = subscriber
                .map(move |message| Request::new(Self::to_message(message), Arc::clone(&bus)));
            Ok(requests.boxed())
        })
    }

    fn flush(&self) -> BusFuture<'_, ()> {
        // The barrier's own request flushes the socket on the way.
        Box::pin(self.sync(|| "flush".to_owned()))
    }
}
