//! [`LocalBus`]: the whole bus inside one process, for the CLI's embedded single-process mode.
//!
//! It keeps the same contract as [`NatsBus`](super::NatsBus): NATS subject syntax and wildcard
//! matching ([`Filter`]), queue groups (round-robin over the members that can take the message),
//! no-responders, timeouts, and reply subjects under `_INBOX.`. Delivery is synchronous: when
//! `publish` returns, the message is in every matching subscriber's queue. Like nats-server, a
//! subscriber whose queue is full is a slow consumer and the message is dropped for it (with a
//! warning), so one stuck subscriber can never block a publisher.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::{Bus, BusFuture, BusMessage, MessageStream, Request, RequestStream};
use crate::error::WireError;
use crate::subjects::{Filter, INBOX_PREFIX, check_publish, check_queue_group};

/// How many undelivered messages one subscription holds before it counts as a slow consumer;
/// the same default as async-nats's `subscription_capacity`.
pub const DEFAULT_CAPACITY: usize = 65_536;

/// An in-process bus. Clones share the same subscriptions, like clients of one nats-server.
#[derive(Debug, Clone)]
pub struct LocalBus {
    /// The shared routing table; subscriptions hold only a weak reference to it.
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Every live subscription.
    routes: Mutex<Routes>,
    /// Source of subscription ids and inbox names.
    next_id: AtomicU64,
    /// Queue capacity of each new subscription.
    capacity: usize,
}

#[derive(Debug, Default)]
struct Routes {
    subs: Vec<Subscription>,
    /// How many messages have been offered to queue groups: the rotation that spreads a group's
    /// messages over its members (exact round-robin for one group, a fair spread for several).
    turn: usize,
}

#[derive(Debug)]
struct Subscription {
    id: u64,
    filter: Filter,
    queue_group: Option<String>,
    tx: mpsc::Sender<BusMessage>,
}

/// What became of one offer of a message to one subscriber.
enum Offer {
    Taken,
    Full,
    Gone,
}

impl Subscription {
    fn offer(&self, message: &BusMessage) -> Offer {
        match self.tx.try_send(message.clone()) {
            Ok(()) => Offer::Taken,
            Err(mpsc::error::TrySendError::Full(_)) => Offer::Full,
            Err(mpsc::error::TrySendError::Closed(_)) => Offer::Gone,
        }
    }
}

impl Default for LocalBus {
    fn default() -> Self {
        Self::new()
    }
}

impl LocalBus {
    /// A new, empty bus with [`DEFAULT_CAPACITY`] per subscription.
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }

    /// A new, empty bus whose subscriptions each hold up to `capacity` undelivered messages
    /// (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        LocalBus {
            inner: Arc::new(Inner {
                routes: Mutex::new(Routes::default()),
                next_id: AtomicU64::new(1),
                capacity: capacity.max(1),
            }),
        }
    }

    fn add(&self, filter: Filter, queue_group: Option<String>) -> LocalSubscription {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(self.inner.capacity);
        self.inner.routes().subs.push(Subscription {
            id,
            filter,
            queue_group,
            tx,
        });
        LocalSubscription {
            rx,
            id,
            inner: Arc::downgrade(&self.inner),
        }
    }

    /// Delivers `message` to every plain subscriber and one member of each queue group; returns
    /// whether any subscription matched at all (the no-responders test).
    fn route(&self, message: BusMessage) -> bool {
        let mut routes = self.inner.routes();
        let Routes { subs, turn } = &mut *routes;
        let mut matched = false;
        let mut groups: HashMap<(&str, &str), Vec<&Subscription>> = HashMap::new();
        let mut gone = Vec::new();
        for sub in subs.iter() {
            if !sub.filter.matches(&message.subject) {
                continue;
            }
            matched = true;
            match &sub.queue_group {
                Some(group) => groups
                    .entry((sub.filter.as_str(), group.as_str()))
                    .or_default()
                    .push(sub),
                None => match sub.offer(&message) {
                    Offer::Taken => {}
                    Offer::Full => slow_consumer(sub, &message),
                    Offer::Gone => gone.push(sub.id),
                },
            }
        }
        for members in groups.into_values() {
            let start = *turn;
            *turn = turn.wrapping_add(1);
            // Starting at this turn's member, the first one with room takes the message.
            let rotation = (0..members.len()).map(|step| members[(start + step) % members.len()]);
            let mut taken = false;
            for sub in rotation {
                match sub.offer(&message) {
                    Offer::Taken => {
                        taken = true;
                        break;
                    }
                    Offer::Full => {}
                    Offer::Gone => gone.push(sub.id),
                }
            }
            if let (false, Some(first)) = (taken, members.first()) {
                slow_consumer(first, &message);
            }
        }
        subs.retain(|s| !gone.contains(&s.id));
        matched
    }

    fn publish_checked(&self, subject: &str, payload: Bytes, reply: Option<String>) -> bool {
        self.route(BusMessage {
            subject: subject.to_owned(),
            payload,
            reply,
        })
    }
}

fn slow_consumer(sub: &Subscription, message: &BusMessage) {
    tracing::warn!(
        filter = sub.filter.as_str(),
        subject = message.subject.as_str(),
        "local bus: slow consumer, message dropped"
    );
}

impl Inner {
    /// The routing table. A poisoned lock is recovered: every critical section leaves the table
    /// consistent, so a panic elsewhere never makes the bus unusable.
    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One subscription's queue; dropping it removes the subscription from the bus.
struct LocalSubscription {
    rx: mpsc::Receiver<BusMessage>,
    id: u64,
    inner: Weak<Inner>,
}

impl Stream for LocalSubscription {
    type Item = BusMessage;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<BusMessage>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for LocalSubscription {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.routes().subs.retain(|s| s.id != self.id);
        }
    }
}

impl Bus for LocalBus {
    fn request<'a>(
        &'a self,
        subject: &'a str,
        payload: Bytes,
        timeout: Duration,
    ) -> BusFuture<'a, Bytes> {
        Box::pin(async move {
            check_publish(subject)?;
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let inbox = format!("{INBOX_PREFIX}.local.{id}");
            let mut replies = self.add(Filter::parse(&inbox)?, None);
            if !self.publish_checked(subject, payload, Some(inbox)) {
                return Err(WireError::NoResponders {
                    subject: subject.to_owned(),
                });
            }
            match tokio::time::timeout(timeout, replies.next()).await {
                Ok(Some(reply)) => Ok(reply.payload),
                // The inbox stays in the table while `self` lives, so its queue cannot end
                // first; if it did, no answer could come either way.
                Ok(None) | Err(_) => Err(WireError::Timeout {
                    subject: subject.to_owned(),
                    after: timeout,
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
            let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
            let inbox = format!("{INBOX_PREFIX}.local.{id}");
            let replies = self.add(Filter::parse(&inbox)?, None);
            if !self.publish_checked(subject, payload, Some(inbox)) {
                return Ok(Vec::new());
            }
            Ok(super::collect(replies.map(|m| m.payload), window).await)
        })
    }

    fn publish<'a>(&'a self, subject: &'a str, payload: Bytes) -> BusFuture<'a, ()> {
        Box::pin(async move {
            check_publish(subject)?;
            self.publish_checked(subject, payload, None);
            Ok(())
        })
    }

    fn subscribe<'a>(&'a self, filter: &'a str) -> BusFuture<'a, MessageStream> {
        Box::pin(async move {
            let filter = Filter::parse(filter)?;
            Ok(self.add(filter, None).boxed())
        })
    }

    fn serve<'a>(
        &'a self,
        filter: &'a str,
        queue_group: Option<&'a str>,
    ) -> BusFuture<'a, RequestStream> {
        Box::pin(async move {
            let filter = Filter::parse(filter)?;
            if let Some(group) = queue_group {
                check_queue_group(group)?;
            }
            let subscription = self.add(filter, queue_group.map(str::to_owned));
            // The stream holds the bus only weakly, so dropping every LocalBus ends it.
            let weak = Arc::downgrade(&self.inner);
            let requests = subscription.filter_map(move |message| {
                let bus = weak.upgrade().map(|inner| LocalBus { inner });
                async move { bus.map(|bus| Request::new(message, Arc::new(bus))) }
            });
            Ok(requests.boxed())
        })
    }

    fn flush(&self) -> BusFuture<'_, ()> {
        // Delivery is synchronous: everything published is already in its subscribers' queues.
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use futures_util::FutureExt;

    use super::*;

    #[tokio::test]
    async fn a_full_subscriber_loses_the_message_and_never_blocks_the_publisher() {
        let bus = LocalBus::with_capacity(1);
        let mut slow = bus.subscribe("a").await.unwrap();
        bus.publish("a", Bytes::from_static(b"1")).await.unwrap();
        bus.publish("a", Bytes::from_static(b"2")).await.unwrap();
        assert_eq!(slow.next().await.unwrap().payload, "1");
        assert!(
            slow.next().now_or_never().is_none(),
            "the second was dropped"
        );
    }

    #[tokio::test]
    async fn a_full_group_member_is_skipped_for_one_with_room() {
        let bus = LocalBus::with_capacity(1);
        let mut first = bus.serve("a", Some("g")).await.unwrap();
        let mut second = bus.serve("a", Some("g")).await.unwrap();
        for n in 0..2u8 {
            bus.publish("a", Bytes::from(vec![n])).await.unwrap();
        }
        // Both queues are now full; a third message finds no room and is dropped.
        bus.publish("a", Bytes::from_static(b"x")).await.unwrap();
        let got = [first.next().await.unwrap(), second.next().await.unwrap()];
        let mut payloads: Vec<_> = got.iter().map(|r| r.payload.clone()).collect();
        payloads.sort();
        assert_eq!(payloads, [Bytes::from(vec![0]), Bytes::from(vec![1])]);
        assert!(first.next().now_or_never().is_none());
        assert!(second.next().now_or_never().is_none());
    }

    #[tokio::test]
    async fn dropping_a_stream_removes_its_subscription() {
        let bus = LocalBus::new();
        let requests = bus.serve("a", None).await.unwrap();
        drop(requests);
        let err = bus
            .request("a", Bytes::new(), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert!(matches!(err, WireError::NoResponders { .. }), "{err}");
    }

    #[tokio::test]
    async fn dropping_every_handle_ends_the_streams() {
        let bus = LocalBus::new();
        let mut messages = bus.subscribe("a").await.unwrap();
        let mut requests = bus.serve("b", None).await.unwrap();
        drop(bus);
        assert!(messages.next().await.is_none());
        assert!(requests.next().await.is_none());
    }
}
