//! Two hubs, each served by hubd over its own nats-server, each with a postman: a letter an
//! agent on north stages for `office:south agent:bob*` arrives in bob's inbox on south, with its
//! true origin, exactly once — also across a restart of north's postman, which resumes from the
//! office's durable cursor.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Pair, agent, airmail_to, letters, pin, spawn};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hubd::test_support::TestHub;
use l3m_core::duty::Duty;
use l3m_core::grant::Grant;
use l3m_core::mail::{InboxEntry, Letter};
use l3m_core::names::ServiceName;
use l3m_wire::client::HubClient;
use postman::carry::{self, Carrier, Peer};
use postman::identity::Identity;
use postman::link::{self, Limits, Office};
use tokio_util::sync::CancellationToken;

async fn postman_session(hub: &TestHub) -> HubClient {
    hub.client(Duty::Postman {
        service: ServiceName::parse("postman").unwrap(),
    })
    .await
}

/// A postman for hub `me`, carrying to `peer`, on `endpoint`.
async fn start_postman(
    hub: &TestHub,
    me: &str,
    identity: Identity,
    peer: Peer,
    endpoint: quinn::Endpoint,
) -> CancellationToken {
    let carrier = Arc::new(Carrier {
        hub: postman_session(hub).await,
        identity,
        me: me.into(),
        peers: vec![peer],
        limits: Limits::default(),
        poll: Duration::from_millis(100),
    });
    let stop = CancellationToken::new();
    let board = Arc::new(postman::status::Board::new(&carrier));
    tokio::spawn(carry::serve(carrier, board, endpoint, stop.clone()));
    stop
}

/// Polls `check` until it answers, or 30 s pass.
async fn eventually<T>(mut check: impl AsyncFnMut() -> Option<T>) -> Option<T> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_for(hub: &TestHub, whose: &str, n: usize) -> Vec<Letter> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let got = letters(hub, whose).await;
        if got.len() >= n || tokio::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_letter_crosses_to_another_hub_once_with_its_true_origin() {
    let north = TestHub::start(airmail_to("south"), "").await;
    let south = TestHub::start(airmail_to("north"), "").await;
    spawn(&north, "lead", airmail_to("south")).await;
    spawn(&south, "bob", Grant::default()).await;
    let (north_id, south_id) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
    );
    let office = |name: &str, id: &Identity| Office {
        name: name.into(),
        fingerprint: id.fingerprint(),
    };
    let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let limits = Limits::default();
    let north_ep = link::endpoint(
        &north_id,
        vec![office("south", &south_id)],
        loopback,
        &limits,
    )
    .unwrap();
    let south_ep = link::endpoint(
        &south_id,
        vec![office("north", &north_id)],
        loopback,
        &limits,
    )
    .unwrap();
    let (north_addr, south_addr) = (
        north_ep.local_addr().unwrap(),
        south_ep.local_addr().unwrap(),
    );
    pin(
        &north,
        "south",
        south_addr.port(),
        &south_id.fingerprint().to_string(),
    )
    .await;
    pin(
        &south,
        "north",
        north_addr.port(),
        &north_id.fingerprint().to_string(),
    )
    .await;

    let south_office = office("south", &south_id);
    let north_office = office("north", &north_id);
    let _south_postman = start_postman(
        &south,
        "south",
        south_id,
        Peer {
            office: north_office,
            addr: north_addr,
        },
        south_ep,
    )
    .await;
    let north_stop = start_postman(
        &north,
        "north",
        north_id.clone(),
        Peer {
            office: south_office.clone(),
            addr: south_addr,
        },
        north_ep,
    )
    .await;

    let lead = north
        .client(Duty::Sequencer {
            agent: agent("lead"),
        })
        .await;
    let staged = lead
        .stage_airmail("office:south agent:bob*", Some("hi"), "from north")
        .await
        .unwrap();
    let got = wait_for(&south, "bob", 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].id.to_string(), staged.letter);
    assert_eq!(got[0].from.render(), "office:north agent:lead*");
    assert_eq!(got[0].body, "from north");

    // North's postman restarts on a fresh endpoint: it resumes from the office's cursor, and
    // south's hubd delivers nothing twice; a later letter still arrives.
    north_stop.cancel();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let again = link::endpoint(&north_id, vec![south_office.clone()], loopback, &limits).unwrap();
    let _north_again = start_postman(
        &north,
        "north",
        north_id,
        Peer {
            office: south_office,
            addr: south_addr,
        },
        again,
    )
    .await;
    lead.stage_airmail("office:south agent:bob*", None, "second")
        .await
        .unwrap();
    let got = wait_for(&south, "bob", 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got_later = letters(&south, "bob").await;
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got_later.len(), 2, "nothing delivered twice: {got_later:?}");
    assert_eq!(got_later[1].body, "second");
    for hub in [&north, &south] {
        hubd::test_support::git_bare(&hub.git_dir(), &["fsck", "--strict"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_comes_back_as_a_receipt_and_an_undeliverable_letter_as_a_bounce() {
    let pair = Pair::start().await;
    let _north = pair.serve(true);
    let _south = pair.serve(false);
    let read = pair.stage("read me").await;
    let lost = pair
        .stage_to("office:south agent:nobody*", "to no one")
        .await;
    assert_eq!(pair.wait_for(1, 30).await.len(), 1);
    let bob = pair
        .south
        .client(Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    bob.mark_read(&read).await.unwrap();

    let inbox = async || {
        let human = pair.north.human_client().await;
        human.read_inbox(&agent("lead"), 0).await.unwrap().entries
    };
    let receipt = eventually(async || {
        inbox().await.into_iter().find_map(|e| match e {
            InboxEntry::Receipt(r) => Some(r),
            _ => None,
        })
    })
    .await
    .expect("the receipt came back to lead");
    assert_eq!(receipt.letter.as_str(), read);
    assert_eq!(receipt.office.as_str(), "south");
    assert_eq!(receipt.by.to_string(), "bob");
    let bounce = eventually(async || {
        letters(&pair.north, "lead")
            .await
            .into_iter()
            .find(|l| l.in_reply_to.as_ref().map(|id| id.as_str()) == Some(lost.as_str()))
    })
    .await
    .expect("the bounce came back to lead");
    assert!(bounce.body.contains("no agent nobody"), "{}", bounce.body);
    assert_eq!(bounce.from.render(), "office:south agent:nobody*");

    // Later rounds carry nothing twice.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let entries = inbox().await;
    let receipts = entries
        .iter()
        .filter(|e| matches!(e, InboxEntry::Receipt(_)))
        .count();
    assert_eq!((entries.len(), receipts), (2, 1), "{entries:?}");
    assert_eq!(pair.bob_letters().await.len(), 1);
    for hub in [&pair.north, &pair.south] {
        hubd::test_support::git_bare(&hub.git_dir(), &["fsck", "--strict"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postman_reports_each_links_state_backlog_and_a_probe() {
    use l3m_wire::postman::{LinkState, Probe, status};
    let pair = Pair::start().await;
    let _north = pair.serve(true);
    let mut south = pair.serve(false);
    let human = pair.north.human_client().await;
    let ask = async |probe: bool| {
        eventually(async || status(&human, probe, Duration::from_secs(15)).await.ok())
            .await
            .expect("north's postman answers")
            .expect("without an error")
    };
    let first = ask(false).await;
    assert_eq!(first.me, "north");
    assert_eq!(first.offices.len(), 1);
    pair.stage("one").await;
    pair.wait_for(1, 30).await;
    let up = eventually(async || {
        let s = ask(true).await;
        (s.offices[0].link == LinkState::Up).then_some(s)
    })
    .await
    .expect("the link is up");
    let south_link = &up.offices[0];
    assert_eq!((south_link.delivered, south_link.backlog), (1, 0));
    assert!(south_link.last_delivery_ms.is_some());
    assert_eq!(south_link.probe, Some(Probe::Welcomed));

    // South's postman gone: the letter waits, the link is down with a backlog, a probe fails.
    south.start_kill().unwrap();
    south.wait().await.unwrap();
    pair.stage("two").await;
    let down = eventually(async || {
        let s = ask(true).await;
        (s.offices[0].link == LinkState::Down).then_some(s)
    })
    .await
    .expect("the link is down");
    let south_link = &down.offices[0];
    assert_eq!(south_link.backlog, 1, "{south_link:?}");
    assert!(south_link.error.is_some());
    assert!(
        matches!(&south_link.probe, Some(Probe::Failed { .. })),
        "{south_link:?}"
    );
}
