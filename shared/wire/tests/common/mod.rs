//! What the integration tests share: a harness that gives either bus, typed test messages, and
//! a way to show that a message was *not* delivered without waiting for time to pass.

#![allow(dead_code)] // each test binary uses its own part of this module
#![allow(clippy::unwrap_used, clippy::expect_used)] // a fixture that cannot be set up is a failed test

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use l3m_wire::bus::{Bus, LocalBus, MessageStream, NatsAuth, NatsBus};
use l3m_wire::envelope::Message;
use l3m_wire::test_support::NatsServer;
use serde::{Deserialize, Serialize};

/// A generous bound for things that must happen; hitting it fails the test, it is never the
/// thing being measured.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Either bus, so one suite can run against both.
pub enum Harness {
    /// In process: every "connection" is a clone of one bus.
    Local(LocalBus),
    /// A real nats-server: every connection is a new client.
    Nats(NatsServer),
}

impl Harness {
    pub fn local() -> Self {
        Harness::Local(LocalBus::new())
    }

    pub fn nats() -> Self {
        Harness::Nats(NatsServer::start().expect("start nats-server"))
    }

    /// A new connection to the harness's bus.
    pub async fn connect(&self) -> Arc<dyn Bus> {
        match self {
            Harness::Local(bus) => Arc::new(bus.clone()),
            Harness::Nats(server) => Arc::new(
                NatsBus::connect(server.url(), NatsAuth::Anonymous)
                    .await
                    .expect("connect to the test nats-server"),
            ),
        }
    }
}

/// A request used across the suites.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echo {
    /// Echoed back.
    pub text: String,
    /// How many times to repeat `text` in the answer.
    pub times: usize,
}

impl Message for Echo {
    const KIND: &'static str = "test.echo";
}

/// The answer to [`Echo`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Echoed {
    pub text: String,
    /// Which server answered.
    pub by: usize,
}

impl Message for Echoed {
    const KIND: &'static str = "test.echoed";
}

pub fn echo(text: &str) -> Echo {
    Echo {
        text: text.to_owned(),
        times: 1,
    }
}

/// Reads `stream` until every subject in `fences` has arrived, and returns the subjects seen
/// before, in order. Messages from one publisher arrive in order, so once a fence published
/// after some messages has arrived, whatever of those messages was going to arrive has arrived:
/// absence is shown by delivery order, not by waiting.
pub async fn until_fences(stream: &mut MessageStream, fences: &[&str]) -> Vec<String> {
    let mut pending: Vec<&str> = fences.to_vec();
    let mut seen = Vec::new();
    while !pending.is_empty() {
        let message = tokio::time::timeout(PATIENCE, stream.next())
            .await
            .unwrap_or_else(|_| panic!("fences {pending:?} never arrived; saw {seen:?}"))
            .expect("the subscription ended");
        match pending.iter().position(|f| *f == message.subject) {
            Some(i) => {
                pending.remove(i);
            }
            None => seen.push(message.subject),
        }
    }
    seen
}
