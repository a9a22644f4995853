//! nats-server's per-user permissions, as l3m's deployment will use them: user `a` may publish
//! only to `l3m.t.hubd.>` and subscribe only to `_INBOX_a.>` (its replies, under its own prefix); user `b` may do
//! anything. A refused publish is reported by the server asynchronously (`-ERR 'Permissions
//! Violation ...'`), which [`NatsBus::server_errors`] surfaces; that it was not delivered is
//! shown by delivery order: a later, allowed message from `a` arrives first.
#![allow(clippy::unwrap_used, clippy::expect_used)] // helpers outside #[test] fns are test code too

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{PATIENCE, until_fences};
use futures_util::StreamExt;
use l3m_wire::WireError;
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::test_support::{NatsServer, server_reported};
use tokio::sync::broadcast;

const USERS: &str = r#"
authorization {
  users = [
    { user: a, password: a-secret,
      permissions: { publish: { allow: ["l3m.t.hubd.>"] }, subscribe: { allow: ["_INBOX_a.>"] } } }
    { user: b, password: b-secret }
  ]
}
"#;

fn user(name: &str) -> NatsAuth {
    NatsAuth::UserPassword {
        user: name.to_owned(),
        password: format!("{name}-secret"),
    }
}

async fn reported(errors: &mut broadcast::Receiver<String>, needle: &str) -> String {
    server_reported(errors, needle, PATIENCE)
        .await
        .unwrap_or_else(|| panic!("the server never reported {needle:?}"))
}

#[tokio::test]
async fn publish_outside_the_allowed_prefix_is_refused_and_not_delivered() {
    let server = NatsServer::start_with(USERS).unwrap();
    let a = NatsBus::connect(server.url(), user("a")).await.unwrap();
    let b = NatsBus::connect(server.url(), user("b")).await.unwrap();
    let mut errors = a.server_errors();
    let mut seen_by_b = b.subscribe("l3m.t.>").await.unwrap();

    // Accepted by the client (the server checks permissions), refused by the server.
    a.publish("l3m.t.sequencer.wake.alice", Bytes::new())
        .await
        .unwrap();
    a.publish("l3m.t.hubd.fence", Bytes::new()).await.unwrap();

    let before_fence = until_fences(&mut seen_by_b, &["l3m.t.hubd.fence"]).await;
    assert!(
        before_fence.is_empty(),
        "refused publish was delivered: {before_fence:?}"
    );
    let text = reported(&mut errors, "Permissions Violation for Publish").await;
    assert!(text.contains("l3m.t.sequencer.wake.alice"), "{text}");
}

#[tokio::test]
async fn subscription_outside_the_allowed_prefix_receives_nothing() {
    let server = NatsServer::start_with(USERS).unwrap();
    let a = NatsBus::connect(server.url(), user("a")).await.unwrap();
    let b = NatsBus::connect(server.url(), user("b")).await.unwrap();
    let mut errors = a.server_errors();
    let mut spy = a.subscribe("l3m.t.ref.>").await.unwrap();
    let text = reported(&mut errors, "Permissions Violation for Subscription").await;
    assert!(text.contains("l3m.t.ref.>"), "{text}");

    // `a` may still hear its own replies: `b` answers a request and then publishes a
    // notification; the reply arriving shows `b`'s later notification would have too.
    let mut served = b.serve("l3m.t.hubd.ping", None).await.unwrap();
    let answering = tokio::spawn(async move {
        let request = served.next().await.unwrap();
        request.respond(Bytes::from_static(b"pong")).await.unwrap();
    });
    b.publish("l3m.t.ref.log.alice", Bytes::new())
        .await
        .unwrap();
    b.flush().await.unwrap();
    let reply = a
        .request("l3m.t.hubd.ping", Bytes::new(), PATIENCE)
        .await
        .unwrap();
    assert_eq!(&reply[..], b"pong");
    answering.await.unwrap();
    // The refused subscription was never registered: the notification is not queued for it.
    assert!(
        futures_util::FutureExt::now_or_never(spy.next()).is_none(),
        "a refused subscription received a message"
    );
}

#[tokio::test]
async fn a_request_within_the_allowed_prefix_gets_its_reply() {
    let server = NatsServer::start_with(USERS).unwrap();
    let a = NatsBus::connect(server.url(), user("a")).await.unwrap();
    let b = NatsBus::connect(server.url(), user("b")).await.unwrap();
    let mut served = b.serve("l3m.t.hubd.>", Some("hubd")).await.unwrap();
    tokio::spawn(async move {
        while let Some(request) = served.next().await {
            let subject = request.subject.clone();
            request.respond(Bytes::from(subject)).await.unwrap();
        }
    });
    let reply = a
        .request("l3m.t.hubd.append", Bytes::new(), PATIENCE)
        .await
        .unwrap();
    assert_eq!(&reply[..], b"l3m.t.hubd.append");
}

#[tokio::test]
async fn wrong_password_is_a_transport_error_naming_authorization() {
    let server = NatsServer::start_with(USERS).unwrap();
    let wrong = NatsAuth::UserPassword {
        user: "a".into(),
        password: "guess".into(),
    };
    let err = tokio::time::timeout(
        Duration::from_secs(30),
        NatsBus::connect(server.url(), wrong),
    )
    .await
    .expect("a refused connection fails rather than retrying forever")
    .unwrap_err();
    assert!(
        matches!(&err, WireError::Transport { op, .. } if op.starts_with("connect to")),
        "{err}"
    );
    assert!(err.to_string().contains("authorization"), "{err}");
    // The cause is kept, not flattened into text.
    assert!(std::error::Error::source(&err).is_some());
}
