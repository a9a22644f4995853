//! hubd's health answer on the bus and its Prometheus endpoint, over a real nats-server and a
//! real HTTP listener: both move with what hubd holds and serves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::common::*;
use l3m_core::duty::Duty;
use l3m_wire::health;
use l3m_wire::subjects::Service;

async fn ask(f: &Fixture) -> health::Health {
    health::ask(
        f.bus.as_ref(),
        &f.subjects,
        Service::Hubd,
        Duration::from_secs(5),
    )
    .await
    .unwrap()
    .unwrap()
}

/// `GET path` from `addr`: the status line and the body.
fn get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    l3m_daemon::metrics::scrape(addr, path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_metrics_follow_what_hubd_holds_and_serves() {
    let f = Fixture::start().await;
    let before = ask(&f).await;
    assert_eq!(before.service, "hubd");
    assert!(before.ok(), "{before:?}");
    assert_eq!(before.pid, std::process::id(), "in-process hubd");
    assert_eq!(before.gauges["agents_live"], 0);
    assert_eq!(before.gauges["leases_held"], 0);

    let human = f.human().await;
    f.spawn(&human, "bob", root_grant()).await.unwrap();
    let seq = f
        .client(Duty::Sequencer {
            agent: agent("bob"),
        })
        .await;
    seq.acquire_lease(&agent("bob"), "host-a:1", Duration::from_secs(30))
        .await
        .unwrap();
    let after = ask(&f).await;
    assert_eq!(after.gauges["agents_live"], 1);
    assert_eq!(after.gauges["leases_held"], 1);
    assert!(after.gauges["sessions_open"] >= before.gauges["sessions_open"] + 2);
    assert!(after.gauges["requests_total"] > before.gauges["requests_total"]);

    let shutdown = tokio_util::sync::CancellationToken::new();
    let addr = l3m_daemon::metrics::serve(
        "127.0.0.1:0".parse().unwrap(),
        hubd::metrics::Endpoint::of(&f.hub.state()),
        shutdown.clone(),
    )
    .await
    .unwrap();
    let (status, body) = tokio::task::spawn_blocking(move || get(addr, "/metrics"))
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
    assert!(body.contains("l3m_hubd_leases_held 1\n"), "{body}");
    assert!(body.contains("l3m_hubd_agents_live 1\n"), "{body}");
    assert!(
        body.contains("l3m_hubd_check_ok{check=\"store\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("l3m_hubd_op_requests_total{op=\"spawn\"} 1\n"),
        "{body}"
    );
    assert!(
        body.contains("l3m_hubd_op_requests_total{op=\"acquire-lease\"} 1\n"),
        "{body}"
    );
    let (status, body) = tokio::task::spawn_blocking(move || get(addr, "/healthz"))
        .await
        .unwrap();
    assert!(status.contains("200"), "{status}");
    let answer: health::Health = serde_json::from_str(&body).unwrap();
    assert!(answer.ok());
    assert!(answer.checks.iter().any(|c| c.name == "store" && c.ok));
    let (status, _) = tokio::task::spawn_blocking(move || get(addr, "/nothing"))
        .await
        .unwrap();
    assert!(status.contains("404"), "{status}");
    shutdown.cancel();
}
