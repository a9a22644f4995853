//! Airmail on loopback, end to end: letters per second sustained, and p50/p99 latency from
//! `stage_airmail` returning on north to the letter being in bob's inbox on south (read in a
//! tight loop), through two real `postman serve` processes; beside two references measured in
//! the same run: a bare QUIC round trip of the same payload over a `postman::link` link, and a
//! local letter through hubd (sent, then read back). Each figure is also printed as a ratio
//! against its reference. Nothing here asserts wall time.
//!
//! A second airmail run stages letters one at a time, each once the one before arrived: the
//! latency on an idle link, which the burst's queueing hides.
//!
//! `L3M_BENCH_LETTERS` (default 500) sets N (the paced run takes at most 100); `L3M_BENCH_POLL_MS` the postmen's `--poll-ms`
//! (default 1000, the shipping default). Run: `cargo bench -p postman --bench airmail`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Pair, agent, env_or};
use l3m_core::mail::InboxEntry;
use postman::frame::{self, Frame};
use postman::identity::Identity;
use postman::link::{self, Limits, Office};

/// Latencies, sorted, and how long the whole run took.
struct Run {
    latencies: Vec<Duration>,
    took: Duration,
    lost: usize,
}

impl Run {
    fn new(mut latencies: Vec<Duration>, took: Duration, lost: usize) -> Run {
        latencies.sort();
        Run {
            latencies,
            took,
            lost,
        }
    }

    fn pct(&self, p: usize) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let i = (self.latencies.len() * p / 100).min(self.latencies.len() - 1);
        self.latencies[i]
    }

    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.took.as_secs_f64()
    }

    fn print(&self, name: &str, reference: Option<&Run>) {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        print!(
            "{name:<22} {:>9.1} /s   p50 {:>8.2} ms   p99 {:>8.2} ms   lost {}",
            self.rate(),
            ms(self.pct(50)),
            ms(self.pct(99)),
            self.lost
        );
        if let Some(r) = reference {
            print!(
                "   (x{:.3} rate, x{:.1} p50, x{:.1} p99 vs reference)",
                self.rate() / r.rate(),
                ms(self.pct(50)) / ms(r.pct(50)),
                ms(self.pct(99)) / ms(r.pct(99)),
            );
        }
        println!();
    }
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(bench());
}

async fn bench() {
    let n = env_or("L3M_BENCH_LETTERS", 500);
    let pair = Pair::start().await;
    // The postmen's outbox poll: the shipping default unless `L3M_BENCH_POLL_MS` says.
    let poll = env_or("L3M_BENCH_POLL_MS", 1000).to_string();
    let _south = pair.serve_with(false, &["--poll-ms", &poll]);
    let _north = pair.serve_with(true, &["--poll-ms", &poll]);
    // Warm up: both postmen up and linked, one letter across.
    pair.stage("warm-up").await;
    let warm = pair.wait_for(1, 60).await;
    assert_eq!(warm.len(), 1, "the warm-up letter did not arrive");
    let payload = InboxEntry::Letter(Box::new(warm[0].clone()))
        .to_line()
        .unwrap();

    let airmail = airmail(&pair, n).await;
    let paced = one_at_a_time(&pair, n.min(100)).await;
    let quic = quic_round_trips(&payload, n).await;
    let local = local_letters(&pair, n).await;
    println!(
        "airmail bench: {n} letters, payload {} bytes, postmen polling every {poll} ms",
        payload.len()
    );
    quic.print("quic round trip", None);
    local.print("local letter (hubd)", None);
    airmail.print("airmail vs quic", Some(&quic));
    airmail.print("airmail vs local", Some(&local));
    paced.print("one at a time vs local", Some(&local));
}

/// Letters staged one at a time, each only once the one before arrived: the latency of a
/// letter on an idle link, with no queue ahead of it.
async fn one_at_a_time(pair: &Pair, n: usize) -> Run {
    let reader = pair.south.human_client().await;
    let bob = agent("bob");
    let mut next = reader.read_inbox(&bob, 0).await.unwrap().len;
    let mut latencies = Vec::with_capacity(n);
    let mut lost = 0;
    let start = Instant::now();
    for i in 0..n {
        let id = pair.stage(&format!("paced letter {i}")).await;
        let began = Instant::now();
        let deadline = began + Duration::from_secs(10);
        let arrived = loop {
            let read = reader.read_inbox(&bob, next).await.unwrap();
            next = read.len;
            let there = read
                .entries
                .iter()
                .any(|e| matches!(e, InboxEntry::Letter(l) if l.id.to_string() == id));
            if there || Instant::now() > deadline {
                break there;
            }
        };
        if arrived {
            latencies.push(began.elapsed());
        } else {
            lost += 1;
        }
    }
    Run::new(latencies, start.elapsed(), lost)
}

/// N letters staged by lead on north as fast as it can; each one's time from its staging
/// returning to its arrival in bob's inbox on south.
async fn airmail(pair: &Pair, n: usize) -> Run {
    let reader = pair.south.human_client().await;
    let bob = agent("bob");
    let from = reader.read_inbox(&bob, 0).await.unwrap().len;
    let staged: Arc<std::sync::Mutex<HashMap<String, Instant>>> = Arc::default();
    let start = Instant::now();
    let reading = {
        let staged = Arc::clone(&staged);
        tokio::spawn(async move {
            let mut next = from;
            let mut arrived: HashMap<String, Instant> = HashMap::new();
            let deadline = Instant::now() + Duration::from_secs(120 + n as u64 / 10);
            while arrived.len() < n && Instant::now() < deadline {
                let read = reader.read_inbox(&bob, next).await.unwrap();
                let now = Instant::now();
                next = read.len;
                for entry in read.entries {
                    if let InboxEntry::Letter(letter) = entry {
                        arrived.insert(letter.id.to_string(), now);
                    }
                }
            }
            let staged = staged.lock().unwrap();
            let latencies: Vec<Duration> = arrived
                .iter()
                .filter_map(|(id, at)| Some(at.saturating_duration_since(*staged.get(id)?)))
                .collect();
            (latencies, arrived.values().max().copied())
        })
    };
    for i in 0..n {
        let id = pair.stage(&format!("bench letter {i}")).await;
        staged.lock().unwrap().insert(id, Instant::now());
    }
    let staging = start.elapsed();
    let (latencies, last) = reading.await.unwrap();
    let took = last.map_or(staging, |l| l - start);
    println!(
        "staging alone: {:.1} letters/s ({n} in {staging:?})",
        n as f64 / staging.as_secs_f64()
    );
    let lost = n - latencies.len();
    Run::new(latencies, took, lost)
}

/// N round trips of `payload` over a bare link: open a stream, write the letters frame, read
/// the answer (the far side answers at once, holding nothing).
async fn quic_round_trips(payload: &str, n: usize) -> Run {
    let (north, south) = (
        Identity::generate("north").unwrap(),
        Identity::generate("south").unwrap(),
    );
    let office = |name: &str, id: &Identity| Office {
        name: name.into(),
        fingerprint: id.fingerprint(),
    };
    let limits = Limits::default();
    let loopback = "127.0.0.1:0".parse().unwrap();
    let server = link::endpoint(&south, vec![office("north", &north)], loopback, &limits).unwrap();
    let addr = server.local_addr().unwrap();
    let offices = vec![office("north", &north)];
    tokio::spawn(async move {
        while let Some(incoming) = server.accept().await {
            let offices = offices.clone();
            tokio::spawn(async move {
                let link = link::accept(incoming, "south", &offices, &Limits::default())
                    .await
                    .unwrap();
                while let Ok((mut send, mut recv)) = link.connection.accept_bi().await {
                    let Ok(Frame::Letters { letters }) = frame::read(&mut recv).await else {
                        return;
                    };
                    let answer = Frame::Delivered {
                        delivered: vec![letters.len().to_string()],
                        already: vec![],
                        bounced: vec![],
                        refused: vec![],
                    };
                    frame::write(&mut send, &answer).await.unwrap();
                    let _finished = send.finish();
                }
            });
        }
    });
    let to_south = office("south", &south);
    let client = link::endpoint(&north, vec![to_south.clone()], loopback, &limits).unwrap();
    let linked = link::connect(&client, &north, "north", &to_south, addr, &limits)
        .await
        .unwrap();
    let mut latencies = Vec::with_capacity(n);
    let start = Instant::now();
    for _ in 0..n {
        let began = Instant::now();
        let (mut send, mut recv) = linked.connection.open_bi().await.unwrap();
        let letters = vec![payload.to_owned()];
        frame::write(&mut send, &Frame::Letters { letters })
            .await
            .unwrap();
        let _finished = send.finish();
        let answer = frame::read(&mut recv).await.unwrap();
        assert!(matches!(answer, Frame::Delivered { .. }), "{answer:?}");
        latencies.push(began.elapsed());
    }
    Run::new(latencies, start.elapsed(), 0)
}

/// N local letters through south's hubd: the human sends bob a letter, then reads it back.
async fn local_letters(pair: &Pair, n: usize) -> Run {
    let human = pair.south.human_client().await;
    let bob = agent("bob");
    let mut next = human.read_inbox(&bob, 0).await.unwrap().len;
    let mut latencies = Vec::with_capacity(n);
    let mut lost = 0;
    let start = Instant::now();
    for i in 0..n {
        let began = Instant::now();
        let sent = human
            .send_letter("agent:bob*", None, &format!("local letter {i}"))
            .await
            .unwrap();
        let read = human.read_inbox(&bob, next).await.unwrap();
        next = read.len;
        let there = read
            .entries
            .iter()
            .any(|e| matches!(e, InboxEntry::Letter(l) if l.id.to_string() == sent.letter));
        if there {
            latencies.push(began.elapsed());
        } else {
            lost += 1;
        }
    }
    Run::new(latencies, start.elapsed(), lost)
}
