//! South's postman serves while a flood of connections that are not honest offices hits its
//! port — half-open connections that send a first flight and never another datagram, clients
//! with no certificate, clients with a self-signed certificate nobody pinned, and raw garbage
//! datagrams — and north's honest postman carries letters through it, its link made mid-flood.
//! Every honest letter arrives exactly once, south's postman stays up, and its threads and
//! memory stay bounded: half-open connections are held at most `Limits::max_incoming` at a
//! time, each at most the hello timeout.
//!
//! `L3M_FLOOD_HALF_OPEN` (default 1000) and `L3M_FLOOD_CLIENTS` (default 100, half with no
//! certificate, half with an unpinned one) set the flood's size.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use common::{Pair, attack, env_or, fingerprint, kill};
use postman::identity::{Fingerprint, Identity};
use postman::link::{self, Limits, Office};

/// A field of `/proc/<pid>/status` in kB (or a plain count, for `Threads`).
fn status(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_flood_neither_stops_honest_letters_nor_grows_the_postman() {
    let half = env_or("L3M_FLOOD_HALF_OPEN", 1000);
    let rest = env_or("L3M_FLOOD_CLIENTS", 100);
    let pair = Pair::start().await;
    let mut south = pair.serve(false);
    let mut north = pair.serve(true);
    let server: SocketAddr = ([127, 0, 0, 1], pair.south_port).into();
    let pid = south.id().unwrap();

    // Warm up: one letter across, so the baseline is a postman that has linked and delivered.
    let mut staged = BTreeSet::new();
    staged.insert(pair.stage("before the flood").await);
    assert_eq!(pair.wait_for(1, 30).await.len(), 1, "the warm-up letter");
    let (rss_before, threads_before) = (status(pid, "VmRSS"), status(pid, "Threads"));
    // North's link is made again during the flood.
    kill(&mut north).await;

    let south_office = Office {
        name: "south".into(),
        fingerprint: Fingerprint::parse(&fingerprint(&pair.south)).unwrap(),
    };
    let half_open = tokio::spawn(attack::half_open(server, half));
    let mut attackers = Vec::new();
    for i in 0..rest {
        let office = south_office.clone();
        attackers.push(tokio::spawn(async move {
            if i % 2 == 0 {
                // A certificate nobody pinned, properly made and presented.
                let mallory = Identity::generate("mallory").unwrap();
                let limits = Limits::default();
                let endpoint = link::endpoint(
                    &mallory,
                    vec![office.clone()],
                    "127.0.0.1:0".parse().unwrap(),
                    &limits,
                )
                .unwrap();
                link::connect(&endpoint, &mallory, "north", &office, server, &limits)
                    .await
                    .is_ok()
            } else {
                // No certificate at all: the handshake may finish, the first stream may not.
                let linked = attack::hello_without_certificate(server);
                tokio::time::timeout(Duration::from_secs(30), linked)
                    .await
                    .is_ok_and(|r| r.is_ok())
            }
        }));
    }
    let garbage = tokio::spawn(async move {
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        for i in 0..2000usize {
            let bytes: Vec<u8> = (0..(1 + i * 7 % 1400))
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    seed as u8
                })
                .collect();
            let _sent = socket.send_to(&bytes, server).await;
        }
    });

    // Honest letters, and north's postman back, while the flood is on.
    let _north = pair.serve(true);
    let mut peak_threads = threads_before;
    for i in 0..20 {
        staged.insert(pair.stage(&format!("during the flood {i}")).await);
        peak_threads = peak_threads.max(status(pid, "Threads"));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut admitted = 0;
    for attacker in attackers {
        admitted += usize::from(attacker.await.unwrap());
    }
    assert_eq!(admitted, 0, "a client that is no office got a welcome");
    garbage.await.unwrap();
    let _silent = half_open.await.unwrap();
    pair.assert_exactly_once(&staged, 60).await;
    assert!(south.try_wait().unwrap().is_none(), "south's postman died");
    let (rss_peak, threads_after) = (status(pid, "VmHWM"), status(pid, "Threads"));
    eprintln!(
        "south's postman: VmRSS {rss_before} kB before, peak {rss_peak} kB; threads {threads_before} before, peak {peak_threads}, {threads_after} after"
    );
    // Each held half-open connection costs some 24 kB: 1000 of them unbounded grew the postman
    // by 23 MB; held at most `max_incoming` at a time it grows by some 6 MB, however long the
    // flood.
    let growth = rss_peak.saturating_sub(rss_before);
    assert!(growth < 16 * 1024, "VmRSS grew by {growth} kB");
    assert!(
        peak_threads.max(threads_after) <= threads_before + 4,
        "threads grew from {threads_before} to {peak_threads}"
    );
}
