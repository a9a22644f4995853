//! Links between two postmen over loopback QUIC, with real certificates: a pinned pair links
//! and each side knows the other's office; a wrong pin, a third hub's valid certificate, no
//! certificate at all and a hello claiming another office are each refused, naming why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;

use postman::identity::Identity;
use postman::link::{self, Limits, Link, LinkError, Office};
use tokio::sync::mpsc;

fn office(name: &str, identity: &Identity) -> Office {
    Office {
        name: name.into(),
        fingerprint: identity.fingerprint(),
    }
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A hub named `me` accepting links from `offices`; every accept's outcome arrives on the
/// receiver.
fn serve(
    identity: &Identity,
    me: &'static str,
    offices: Vec<Office>,
) -> (
    quinn::Endpoint,
    mpsc::UnboundedReceiver<Result<Link, LinkError>>,
) {
    let endpoint =
        link::endpoint(identity, offices.clone(), loopback(), &Limits::default()).unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    let accepting = endpoint.clone();
    tokio::spawn(async move {
        while let Some(incoming) = accepting.accept().await {
            let (tx, offices) = (tx.clone(), offices.clone());
            tokio::spawn(async move {
                let _sent = tx.send(link::accept(incoming, me, &offices, &Limits::default()).await);
            });
        }
    });
    (endpoint, rx)
}

/// A hub that only connects out, pinning `offices`.
fn client(identity: &Identity, offices: Vec<Office>) -> quinn::Endpoint {
    link::endpoint(identity, offices, loopback(), &Limits::default()).unwrap()
}

#[tokio::test]
async fn a_pinned_pair_links_and_each_side_knows_the_other() {
    let (north, south) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
    );
    let (server, mut accepted) = serve(&south, "south", vec![office("north", &north)]);
    let to_south = office("south", &south);
    let from = client(&north, vec![to_south.clone()]);
    let addr = server.local_addr().unwrap();
    let linked = link::connect(&from, &north, "north", &to_south, addr, &Limits::default())
        .await
        .unwrap();
    assert_eq!(linked.office, to_south);
    let there = accepted.recv().await.unwrap().unwrap();
    assert_eq!(there.office, office("north", &north));
    // The link carries streams both ways.
    let (mut send, _recv) = linked.connection.open_bi().await.unwrap();
    postman::frame::write(
        &mut send,
        &postman::frame::Frame::Refused {
            reason: "ping".into(),
        },
    )
    .await
    .unwrap();
    let (_send, mut recv) = there.connection.accept_bi().await.unwrap();
    assert!(matches!(
        postman::frame::read(&mut recv).await.unwrap(),
        postman::frame::Frame::Refused { reason } if reason == "ping"
    ));
}

#[tokio::test]
async fn a_server_whose_certificate_is_not_the_pinned_one_is_refused_naming_what_it_showed() {
    let (north, south, west) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
        Identity::generate("west").unwrap(),
    );
    let (server, _accepted) = serve(&south, "south", vec![office("north", &north)]);
    // North pins west's certificate for south.
    let wrong = office("south", &west);
    let from = client(&north, vec![wrong.clone()]);
    let err = link::connect(
        &from,
        &north,
        "north",
        &wrong,
        server.local_addr().unwrap(),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LinkError::Connect { .. }), "{text}");
    assert!(text.contains("office south"), "{text}");
    assert!(
        text.contains(&south.fingerprint().to_string()),
        "names the certificate seen: {text}"
    );
}

#[tokio::test]
async fn a_third_hubs_valid_certificate_is_refused_before_any_hello() {
    let (north, south, west) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
        Identity::generate("west").unwrap(),
    );
    let (server, mut accepted) = serve(&south, "south", vec![office("north", &north)]);
    let to_south = office("south", &south);
    // West pins south correctly, but south's settings do not list west.
    let from = client(&west, vec![to_south.clone()]);
    let err = link::connect(
        &from,
        &west,
        "north",
        &to_south,
        server.local_addr().unwrap(),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, LinkError::Connect { .. }), "{err}");
    let refused = accepted.recv().await.unwrap().unwrap_err();
    assert!(matches!(refused, LinkError::Connect { .. }), "{refused}");
}

#[tokio::test]
async fn a_hello_claiming_another_office_is_refused_and_the_peer_told_why() {
    let (north, south) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
    );
    let (server, mut accepted) = serve(&south, "south", vec![office("north", &north)]);
    let to_south = office("south", &south);
    let from = client(&north, vec![to_south.clone()]);
    let err = link::connect(
        &from,
        &north,
        "east",
        &to_south,
        server.local_addr().unwrap(),
        &Limits::default(),
    )
    .await
    .unwrap_err();
    match &err {
        LinkError::Refused { office, reason } => {
            assert_eq!(office, "south");
            assert!(reason.contains("claims to be office east"), "{reason}");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    let there = accepted.recv().await.unwrap().unwrap_err();
    assert!(
        matches!(&there, LinkError::Impostor { certified, claimed } if certified == "north" && claimed == "east"),
        "{there}"
    );
}

#[tokio::test]
async fn a_client_with_no_certificate_is_refused() {
    let (north, south) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
    );
    let (server, mut accepted) = serve(&south, "south", vec![office("north", &north)]);
    // A client that offers no certificate at all and takes any server's: whatever fails is
    // the server's refusal.
    let outcome = common::attack::hello_without_certificate(server.local_addr().unwrap()).await;
    assert!(
        outcome.is_err(),
        "a client without a certificate got a welcome"
    );
    let refused = accepted.recv().await.unwrap().unwrap_err();
    assert!(matches!(refused, LinkError::Connect { .. }), "{refused}");
}
