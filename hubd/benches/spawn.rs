//! How spawning scales with the number of agents a hub holds (issue 17: a hub must hold 10,000
//! agents with spawn cost flat in their number).
//!
//! A real nats-server and hubd (`hubd::test_support::TestHub`, durability as the test hub's),
//! and the human's session spawning root agents one after another, each timed from request
//! to reply. The figure is each block of 100 spawns' mean against the first block's, measured
//! in the same run: 1.0× is flat. Today an agent's ACR is a set of `git worktree add`s of
//! hub.git, and git checks every existing worktree at each add, so the ratio grows with the
//! count; sequencer hosts with their own clones are the fix (docs/guarantees.md, Known gaps).
//!
//! Run: `cargo bench -p hubd --bench spawn`. `L3M_BENCH_AGENTS` sets how many agents (default
//! 1,000: a few minutes on a 2-core machine; 10,000 is the goal).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use hubd::test_support::TestHub;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::names::AgentName;

/// Spawns per block: the unit each figure is the mean over.
const BLOCK: usize = 100;

fn main() {
    let agents: usize = std::env::var("L3M_BENCH_AGENTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
        .max(2 * BLOCK);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let hub = TestHub::start(Grant::default(), "").await;
        let human = hub.human_client().await;
        let mut blocks: Vec<Duration> = Vec::new();
        let mut block = Duration::ZERO;
        for n in 0..agents {
            let request = SpawnRequest {
                child: AgentName::parse(&format!("a{n:05}")).unwrap(),
                grant: Grant::default(),
                loan: Default::default(),
                driven: false,
                persona: None,
                fork: None,
            };
            let started = Instant::now();
            human.spawn(request).await.unwrap();
            block += started.elapsed();
            if (n + 1) % BLOCK == 0 {
                blocks.push(block / BLOCK as u32);
                block = Duration::ZERO;
            }
        }
        let first = blocks[0];
        println!("spawn: mean per block of {BLOCK}, against the first block (1.0x is flat)");
        for (i, mean) in blocks.iter().enumerate() {
            let shown = i == 0 || (i + 1) % (blocks.len() / 10).max(1) == 0;
            if shown {
                println!(
                    "  agents {:>6}..{:<6} {:>8.1} ms  {:.2}x",
                    i * BLOCK,
                    (i + 1) * BLOCK,
                    mean.as_secs_f64() * 1e3,
                    mean.as_secs_f64() / first.as_secs_f64()
                );
            }
        }
        let total: Duration = blocks.iter().map(|b| *b * BLOCK as u32).sum();
        println!(
            "  all {agents}: mean {:.1} ms; last block {:.2}x the first",
            total.as_secs_f64() * 1e3 / agents as f64,
            blocks.last().unwrap().as_secs_f64() / first.as_secs_f64()
        );
    });
}
