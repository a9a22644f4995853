//! How spawning scales with the number of agents a hub holds (issue 17: a hub must hold 10,000
//! agents with spawn cost flat in their number, `l3m tree` within 100 ms and hubd within
//! 200 MB).
//!
//! A real nats-server and hubd (`hubd::test_support::TestHub`, durability as the test hub's,
//! hubd in this process), and the human's session spawning root agents one after another,
//! each timed from request to reply. At 100, 1,000 and 10,000 agents (as far as the run goes)
//! it prints the p50 of the last 100 spawns against the p50 of the first 100, measured in the
//! same run (1.0× is flat), the time of one `list-agents` (what `l3m tree` asks), and this
//! process's resident memory, which holds hubd and the bench's client (an upper bound on
//! hubd's). A spawn forks two branches and writes the ledger and the grant; it makes no
//! checkout (a sequencer keeps the ACR as its own clone), so nothing in it grows with the
//! count of agents but the ledger's fold.
//!
//! Run: `cargo bench -p hubd --bench spawn`. `L3M_BENCH_AGENTS` sets how many agents (default
//! 1,000; 10,000 is the goal).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use hubd::test_support::TestHub;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::names::AgentName;

/// Spawns per sample: each p50 is over this many.
const BLOCK: usize = 100;

/// The counts the issue names.
const CHECKPOINTS: [usize; 3] = [100, 1_000, 10_000];

fn main() {
    let agents: usize = l3m_wire::test_support::env_number("L3M_BENCH_AGENTS", 1_000).max(BLOCK);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let hub = TestHub::start(Grant::default(), "").await;
        let human = hub.human_client().await;
        let mut block: Vec<Duration> = Vec::with_capacity(BLOCK);
        let mut first = None;
        println!("spawn: p50 of the last {BLOCK} spawns against the first {BLOCK} (1.0x is flat)");
        for n in 0..agents {
            let request = SpawnRequest::new(AgentName::parse(&format!("a{n:05}")).unwrap(), Grant::default());
            let started = Instant::now();
            human.spawn(request).await.unwrap();
            block.push(started.elapsed());
            if block.len() < BLOCK {
                continue;
            }
            let p50 = median(&mut block);
            block.clear();
            let first = *first.get_or_insert(p50);
            let count = n + 1;
            if CHECKPOINTS.contains(&count) || count == agents {
                let asked = Instant::now();
                let tree = human.list_agents().await.unwrap();
                let tree_ms = asked.elapsed().as_secs_f64() * 1e3;
                println!(
                    "  agents {count:>6}: spawn p50 {:>6.2} ms ({:.2}x)  tree of {} {:>6.1} ms  memory {:>6.1} MB",
                    p50.as_secs_f64() * 1e3,
                    p50.as_secs_f64() / first.as_secs_f64(),
                    tree.agents.len(),
                    tree_ms,
                    resident_mb(),
                );
            }
        }
    });
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples[samples.len() / 2]
}

/// This process's resident set, from `/proc/self/status` (0 where there is none).
fn resident_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}
