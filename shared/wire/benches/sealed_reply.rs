//! What sealing a reply costs ([`l3m_wire::sealed_reply`]): sealing and opening hubd's answer
//! against encoding and decoding the same answer in clear, for a small answer (one append's),
//! a Log page of 16 KiB and one of 512 KiB (the largest page hubd sends).
//!
//! Each figure is the median of many rounds of encode-then-decode (plain) or seal-then-open
//! (sealed) of one `hubd.log-range` reply; the ratio is sealed over plain.
//!
//! Run: `cargo bench -p l3m-wire --bench sealed_reply`. `L3M_BENCH_ITERS` sets the rounds per
//! size (default 400).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use l3m_wire::credential::Ephemeral;
use l3m_wire::envelope::Limits;
use l3m_wire::hubd::log::LogRange;
use l3m_wire::reply::{Reply, decode_reply, encode_reply};

const ASKED: &str = "hubd.read-log";

fn page(bytes: usize) -> Reply<LogRange> {
    let line = format!("{{\"v\":1,\"seq\":0,\"text\":\"{}\"}}", "x".repeat(200));
    Ok(LogRange {
        records: vec![line; bytes.div_ceil(230).max(1)],
        from: 0,
        len: 1,
        tip: Some("0".repeat(40)),
    })
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let iters: usize = std::env::var("L3M_BENCH_ITERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(400);
    let (client, hub) = (
        Ephemeral::generate().unwrap(),
        Ephemeral::generate().unwrap(),
    );
    let client_key = client.with_hub(&hub.public);
    let hub_key = hub.with_client(&client.public).unwrap();
    let limits = Limits::default();
    println!(
        "{:<12} {:>12} {:>12} {:>7}",
        "reply", "plain", "sealed", "ratio"
    );
    for (name, bytes) in [
        ("small", 64),
        ("16 KiB", 16 * 1024),
        ("512 KiB", 512 * 1024),
    ] {
        let reply = page(bytes);
        let (mut plain, mut sealed) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
        for n in 0..iters as u64 {
            // Alternate, so a burst of load on the machine hits both alike.
            let began = Instant::now();
            let bytes = encode_reply(&reply, &limits).unwrap();
            black_box(decode_reply::<LogRange>(&bytes, &limits).unwrap().unwrap());
            plain.push(began.elapsed());
            let began = Instant::now();
            let bytes = hub_key.reply().seal(n, ASKED, &reply, &limits).unwrap();
            black_box(
                client_key
                    .reply()
                    .open::<LogRange>(("cap", n, ASKED), None, &bytes, &limits)
                    .unwrap()
                    .unwrap(),
            );
            sealed.push(began.elapsed());
        }
        let (plain, sealed) = (median(plain), median(sealed));
        println!(
            "{name:<12} {:>10.1}us {:>10.1}us {:>6.2}x",
            plain.as_secs_f64() * 1e6,
            sealed.as_secs_f64() * 1e6,
            sealed.as_secs_f64() / plain.as_secs_f64()
        );
    }
}
