//! Ref moves announced off the reply path, in the order they happened.
//!
//! A writer's reply used to wait for the [`RefMoved`] publish before it went out: about 75 µs,
//! and a second message ahead of the reply on the connection. Now a handler only queues the
//! announcement (no await) and one task publishes the queue in order, so the reply leaves
//! first. Each announcement is read from the store (where the ref is now) when it is queued,
//! under one lock, so the queue never says a ref went back: a subscriber's last message for a
//! ref is always its newest state. Git already holds every fact announced, so a publish that
//! fails is logged, not returned; a subscriber that misses one re-reads the ref. For the same
//! reason the queue is bounded: while the bus takes nothing (NATS down), writes go on and the
//! announcements beyond [`QUEUE`] are dropped with a warning rather than held in memory.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use l3m_core::names::AgentName;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::bus::Bus;
use l3m_wire::envelope::{Limits, encode};
use l3m_wire::hubd::notify::RefMoved;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::gate::tip_hex;
use super::state::{Moved, State};
use crate::store::RefKind;

/// How many announcements wait for the bus at most.
const QUEUE: usize = 4096;

/// The queue of announcements, and the order they are made in.
#[derive(Debug)]
pub(super) struct Announcer {
    queue: Mutex<mpsc::Sender<(String, Bytes)>>,
}

impl Announcer {
    /// Starts the task that publishes on `bus`; it ends once the announcer is dropped and its
    /// queue is empty.
    pub(super) fn start(bus: Arc<dyn Bus>) -> (Announcer, JoinHandle<()>) {
        let (queue, mut queued) = mpsc::channel::<(String, Bytes)>(QUEUE);
        let publishing = tokio::spawn(async move {
            while let Some((subject, bytes)) = queued.recv().await {
                if let Err(error) = bus.publish(&subject, bytes).await {
                    tracing::warn!(subject, %error, "could not announce a ref move");
                }
            }
        });
        let announcer = Announcer {
            queue: Mutex::new(queue),
        };
        (announcer, publishing)
    }

    /// Queues where each of `moved` is now.
    pub(super) fn announce(&self, state: &State, moved: &[Moved]) {
        // Held while reading and queueing, so that queue order is the order of the reads.
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        for (which, agent) in moved {
            let subject = state.subjects().ref_changed(*which, agent);
            match encode(&moved_now(state, *which, agent), &Limits::default()) {
                // The task ends only after the announcer is dropped, so only `Full` can fail.
                Ok(bytes) => {
                    if queue.try_send((subject, bytes)).is_err() {
                        tracing::warn!(
                            refname = refs::agent_ref(agent, *which),
                            "the bus is not keeping up; a ref move goes unannounced"
                        );
                    }
                }
                Err(error) => tracing::warn!(subject, %error, "could not encode a ref move"),
            }
        }
    }
}

/// Where `agent`'s `which` ref is now, and its length if it is a chain.
fn moved_now(state: &State, which: AgentRef, agent: &AgentName) -> RefMoved {
    let refname = refs::agent_ref(agent, which);
    let tip = state.hub().tip(&refname).ok().and_then(tip_hex);
    let is_chain = crate::store::classify(&refname).is_ok_and(|k| k == RefKind::Chain);
    let len = if is_chain && tip.is_some() {
        state.hub().len(&refname).ok()
    } else {
        None
    };
    RefMoved { refname, tip, len }
}
