//! What `l3m tree` asks of hubd as a hub grows (issue 41: `l3m tree` within 100 ms at 10,000
//! agents, from one request or a few whose cost does not grow with asleep agents beyond
//! listing them).
//!
//! A real nats-server and hubd (`hubd::test_support::TestHub`), the human's session, and N
//! asleep root agents, each with a short Log whose last turn failed for good (so every one is
//! stuck and its tail travels). At 10, 1,000 and 10,000 agents (as far as the run goes) it
//! times, as the median of a few rounds:
//! - `list-tree` (what `l3m tree`, `l3m status` and `l3m ls` ask now: one request per page of
//!   up to 4,096 agents, with the stuck part of each asleep agent's tail), the first time after
//!   the Logs were written (cold: hubd reads each tail once) and again (warm: no Log moved);
//! - the old way: `list-agents`, then two Log reads per asleep agent;
//! - the reference: one `list-agents` round trip, a plain listing of the same agents.
//!
//! and prints each against the reference, measured in the same run.
//!
//! Run: `cargo bench -p hubd --bench tree`. `L3M_BENCH_AGENTS` sets how many agents (default
//! 1,000; 10,000 is the goal); `L3M_BENCH_STUCK_EVERY=N` makes only every Nth agent
//! stuck (default 1, every one: the most a listing carries), the others' last turn ended well.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use hubd::test_support::TestHub;
use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, SpawnRequest};
use l3m_core::log::{CallId, Record, RecordBody};
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;

/// The counts the issue names.
const CHECKPOINTS: [usize; 3] = [10, 1_000, 10_000];

/// How many of each Log's last records `l3m tree` looks at.
const TAIL: u64 = 32;

/// Rounds per median (the old way at 10,000 agents takes seconds, so few).
const ROUNDS: usize = 3;

fn main() {
    let agents: usize = l3m_wire::test_support::env_number("L3M_BENCH_AGENTS", 1_000);
    let every: usize = l3m_wire::test_support::env_number("L3M_BENCH_STUCK_EVERY", 1).max(1);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let hub = TestHub::start(Grant::default(), "").await;
        let human = hub.human_client().await;
        println!(
            "tree: ms per listing (median of {ROUNDS}), and against one list-agents round trip; \
             every {every} agent(s) stuck"
        );
        let mut made = 0;
        for checkpoint in CHECKPOINTS.iter().copied().filter(|c| *c <= agents) {
            while made < checkpoint {
                grow(&hub, &human, made, made % every == 0).await;
                made += 1;
            }
            let cold = time_once(|| async {
                let page = human.list_tree(TAIL).await.unwrap();
                assert_eq!(page.stuck.len(), made.div_ceil(every), "the stuck agents");
            })
            .await;
            let warm = median(ROUNDS, || async {
                human.list_tree(TAIL).await.unwrap();
            })
            .await;
            let reference = median(ROUNDS, || async {
                human.list_agents().await.unwrap();
            })
            .await;
            let old = median(ROUNDS, || async { old_way(&human).await }).await;
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let x = |d: Duration| d.as_secs_f64() / reference.as_secs_f64();
            println!(
                "  agents {made:>6}: list-tree {:>7.1} ms ({:.2}x), cold {:>7.1} ms ({:.2}x); \
                 old way {:>8.1} ms ({:.1}x); list-agents {:>6.1} ms (1.00x)",
                ms(warm),
                x(warm),
                ms(cold),
                x(cold),
                ms(old),
                x(old),
                ms(reference),
            );
        }
    });
}

/// Spawns agent `n` and writes its Log: a failed call for good (when `stuck`) or a reply, then
/// the turn's end.
async fn grow(hub: &TestHub, human: &HubClient, n: usize, stuck: bool) {
    let name = AgentName::parse(&format!("a{n:05}")).unwrap();
    human
        .spawn(SpawnRequest::new(name.clone(), Grant::default()))
        .await
        .unwrap();
    let sequencer = hub
        .client(Duty::Sequencer {
            agent: name.clone(),
        })
        .await;
    let told = if stuck {
        RecordBody::CallFailed {
            call: CallId::new("c1").unwrap(),
            error: "400 invalid request: the model does not exist".into(),
            retryable: false,
        }
    } else {
        RecordBody::AssistantReply {
            call: CallId::new("c1").unwrap(),
            text: "done".into(),
            tool_uses: vec![],
            usage: Default::default(),
            stop_reason: "end_turn".into(),
        }
    };
    let records = [told, RecordBody::TurnEnd]
        .into_iter()
        .enumerate()
        .map(|(seq, body)| Record {
            seq: seq as u64,
            at_ms: 1,
            body,
        })
        .collect::<Vec<_>>();
    sequencer.append_log(&name, None, &records).await.unwrap();
}

/// What `l3m tree` did before `list-tree`: the listing, then the length and the tail of every
/// asleep agent's Log.
async fn old_way(human: &HubClient) {
    let tree = human.list_agents().await.unwrap();
    for a in tree.agents.iter().filter(|a| a.life == AgentLife::Asleep) {
        let name = AgentName::parse(&a.name).unwrap();
        let len = human.read_log(&name, 0, 0).await.unwrap().len;
        human
            .read_log_range(&name, len.saturating_sub(TAIL), len)
            .await
            .unwrap();
    }
}

async fn time_once<F, Fut>(f: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let started = Instant::now();
    f().await;
    started.elapsed()
}

async fn median<F, Fut>(rounds: usize, f: F) -> Duration
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        samples.push(time_once(&f).await);
    }
    samples.sort_unstable();
    samples[samples.len() / 2]
}
