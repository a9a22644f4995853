//! deploy/nats.conf keeps each service to its own subjects, checked against a real nats-server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use l3m_wire::bus::{Bus, NatsAuth, NatsBus};
use l3m_wire::test_support::{NatsServer, server_reported};
use tokio::sync::broadcast;

/// The deployed file with its environment references replaced by test passwords.
fn config() -> String {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/nats.conf"))
        .unwrap();
    ["HUBD", "SEQUENCER", "CLI", "POSTMAN"]
        .iter()
        .fold(text, |text, user| {
            text.replace(
                &format!("${user}_NATS_PASSWORD"),
                &format!("{}-secret", user.to_lowercase()),
            )
        })
}

async fn connect(server: &NatsServer, user: &str) -> NatsBus {
    let auth = NatsAuth::UserPassword {
        user: user.to_owned(),
        password: format!("{user}-secret"),
    };
    NatsBus::connect(server.url(), auth).await.unwrap()
}

async fn reported(errors: &mut broadcast::Receiver<String>, needle: &str) -> String {
    server_reported(errors, needle, Duration::from_secs(20))
        .await
        .unwrap_or_else(|| panic!("the server never reported {needle:?}"))
}

#[tokio::test]
async fn the_sequencer_cannot_take_hubds_requests() {
    let server = NatsServer::start_with(&config()).unwrap();
    let sequencer = connect(&server, "sequencer").await;
    let mut errors = sequencer.server_errors();
    let _spy = sequencer
        .subscribe("l3m.main.hubd.append-log")
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Subscription").await;
    assert!(text.contains("l3m.main.hubd.append-log"), "{text}");
}

#[tokio::test]
async fn the_sequencer_cannot_publish_as_another_service() {
    let server = NatsServer::start_with(&config()).unwrap();
    let sequencer = connect(&server, "sequencer").await;
    let hubd = connect(&server, "hubd").await;
    let mut errors = sequencer.server_errors();
    let mut hubd_hears = hubd.subscribe("l3m.main.hubd.>").await.unwrap();
    // A forged ref announcement (hubd's to make) and a postman request are both refused.
    sequencer
        .publish("l3m.main.ref.log.alice", Bytes::new())
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Publish").await;
    assert!(text.contains("l3m.main.ref.log.alice"), "{text}");
    sequencer
        .publish("l3m.main.postman.carry", Bytes::new())
        .await
        .unwrap();
    let text = reported(&mut errors, "Permissions Violation for Publish").await;
    assert!(text.contains("l3m.main.postman.carry"), "{text}");
    // Its own subject family still works: hubd hears a request-shaped publish.
    sequencer
        .publish("l3m.main.hubd.fence", Bytes::new())
        .await
        .unwrap();
    use futures_util::StreamExt;
    let heard = tokio::time::timeout(Duration::from_secs(20), hubd_hears.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(heard.subject, "l3m.main.hubd.fence");
}
