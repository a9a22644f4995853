//! Harness overhead per turn: from a model reply's arrival to the next model request being
//! sent, with a zero-latency provider, at Log lengths 10 and 10,000 (pre-filled through hubd).
//!
//! Each reply asks for the `now` tool, so one measured interval is: journal the reply, admit
//! and start the tool, run it, journal its result, plan the next call, append it, build the
//! request. The 10,000-record figure is compared with the 10-record one measured in the same
//! run; targets: ratio <= 1.5 and p50 <= 2 ms.
//!
//! Run: `cargo bench -p sequencer --bench turn_overhead`.
//!
//! For profiling (e.g. under `valgrind --tool=callgrind`, where wall time means nothing):
//! `TURN_OVERHEAD_ONLY=<len>` measures one round at that Log length only, and
//! `TURN_OVERHEAD_SAMPLES=<n>` sets the samples per round (default 120). Two runs that differ
//! only in samples give, by difference, the cost of one turn without the setup's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use hubd::test_support::TestHub;
use l3m_core::budget::Fuel;
use l3m_core::duty::Duty;
use l3m_core::grant::SpawnRequest;
use l3m_core::log::{CallId, Record, RecordBody, ToolUse, ToolUseId, Usage};
use l3m_core::names::{AgentName, Entity, HumanName};
use l3m_wire::client::HubClient;
use sequencer::model::{ModelError, ModelReply, ModelRequest, Provider};
use sequencer::{AgentRun, Config, ProviderFactory, run_agent};
use tokio_util::sync::CancellationToken;

const SAMPLES: usize = 120;
const WARMUP: usize = 20;

/// Answers at once with a `now` tool use, stamping when each request arrived and each reply
/// left; stops the turn after `samples` (and the warm-up).
#[derive(Debug)]
struct Stamping {
    samples: usize,
    stamps: Mutex<Vec<(Instant, Instant)>>,
}

impl Provider for Stamping {
    fn name(&self) -> &str {
        "bench"
    }

    fn complete<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelReply, ModelError>> {
        let arrived = Instant::now();
        Box::pin(async move {
            let mut stamps = self.stamps.lock().unwrap();
            if stamps.len() >= self.samples + WARMUP {
                return Err(ModelError::Config {
                    what: "the benchmark has enough samples".into(),
                });
            }
            let id = ToolUseId::new(format!("{}-0", request.call)).unwrap();
            let reply = ModelReply {
                text: "tick".into(),
                tool_uses: vec![ToolUse {
                    id,
                    name: "now".into(),
                    input: serde_json::json!({}),
                }],
                usage: Usage::default(),
                stop_reason: "tool_use".into(),
            };
            stamps.push((arrived, Instant::now()));
            Ok(reply)
        })
    }
}

/// `len` records of an ordinary past conversation: prompt, then lines, calls, replies, ends.
fn prefill(len: usize) -> Vec<Record> {
    let from = Entity::parse("human:alice").unwrap();
    (0..len)
        .map(|i| {
            let call = CallId::new(format!("old{}", i / 4)).unwrap();
            let body = match (i, i % 4) {
                (0, _) => RecordBody::SystemPrompt {
                    text: "bench".into(),
                    continues: false,
                },
                (_, 1) => RecordBody::UserLine {
                    from: from.clone(),
                    text: format!("question {i}: what is the state of things?"),
                },
                (_, 2) => RecordBody::CallStarted {
                    call,
                    provider: "bench".into(),
                    model: "m".into(),
                    attempt: 1,
                    fallback_of: None,
                },
                (_, 3) => RecordBody::AssistantReply {
                    call,
                    text: format!("answer {i}: all is well, nothing needs doing"),
                    tool_uses: vec![],
                    usage: Usage::default(),
                    stop_reason: "end_turn".into(),
                },
                _ => RecordBody::TurnEnd,
            };
            Record {
                seq: i as u64,
                at_ms: 0,
                body,
            }
        })
        .collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// p50 and p99 of the harness interval, and the p50 of one bare append round trip to hubd at
/// the same Log length (the reference: a turn needs two appends, one before the tool starts
/// and one before the call is sent).
async fn measure(len: usize) -> (Duration, Duration, Duration) {
    let dir = l3m_wire::test_support::bench_dir(&std::env::temp_dir()).unwrap();
    let bound = toml::from_str("files = [\"workspace\"]").unwrap();
    let hub = TestHub::start_in(dir, bound, "").await;
    let root = hub.root();
    let open = |duty: Duty| {
        let credential = hub.key_for(&duty);
        let (bus, hub_id) = (Arc::clone(&hub.bus), hub.hub_id.clone());
        async move { HubClient::open(bus, hub_id, &credential, duty).await }
    };
    let human = open(Duty::Human {
        human: HumanName::parse("alice").unwrap(),
    })
    .await
    .unwrap();
    let agent = AgentName::parse("bench").unwrap();
    human
        .spawn(SpawnRequest {
            child: agent.clone(),
            grant: toml::from_str("files = [\"workspace\"]").unwrap(),
            loan: Fuel {
                model_calls: 1_000_000,
                bytes: u64::MAX / 2,
                wakes: 10,
            },
            driven: false,
            persona: None,
            fork: None,
        })
        .await
        .unwrap();
    let seq_client = open(Duty::Sequencer {
        agent: agent.clone(),
    })
    .await
    .unwrap();
    let mut tip = None;
    for chunk in prefill(len).chunks(400) {
        tip = Some(
            seq_client
                .append_log(&agent, tip.as_deref(), chunk)
                .await
                .unwrap()
                .tip,
        );
    }
    let provider = Arc::new(Stamping {
        samples: std::env::var("TURN_OVERHEAD_SAMPLES").map_or(SAMPLES, |s| s.parse().unwrap()),
        stamps: Mutex::default(),
    });
    let p = Arc::clone(&provider);
    let factory: ProviderFactory = Arc::new(move |_: &str| {
        let p: Arc<dyn Provider> = p.clone();
        Ok(p)
    });
    let config = Config::parse(
        "default_model = \"b\"\n[models.b]\nprovider = \"bench\"\n[sequencer]\nidle_exit_secs = 1\n",
    )
    .unwrap();
    human.send_letter("bench", None, "go").await.unwrap();
    let run = AgentRun {
        forest: root.join("forest"),
        agent: agent.clone(),
        client: seq_client.clone(),
        config,
        provider_factory: factory,
        holder: "bench".into(),
    };
    run_agent(run, CancellationToken::new()).await.unwrap();
    let read = seq_client.read_log_from(&agent, 0).await.unwrap();
    let (mut next, mut tip) = (read.len, read.tip);
    let mut appends = Vec::new();
    for _ in 0..60 {
        let record = Record {
            seq: next,
            at_ms: 0,
            body: RecordBody::TurnEnd,
        };
        let t = Instant::now();
        tip = Some(
            seq_client
                .append_log(&agent, tip.as_deref(), &[record])
                .await
                .unwrap()
                .tip,
        );
        appends.push(t.elapsed());
        next += 1;
    }
    appends.sort();
    drop(hub);
    let stamps = provider.stamps.lock().unwrap().clone();
    let mut gaps: Vec<Duration> = stamps
        .windows(2)
        .skip(WARMUP)
        .map(|w| w[1].0.duration_since(w[0].1))
        .collect();
    gaps.sort();
    (
        percentile(&gaps, 0.5),
        percentile(&gaps, 0.99),
        percentile(&appends, 0.5),
    )
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Ok(len) = std::env::var("TURN_OVERHEAD_ONLY") {
        let (p50, p99, append) = rt.block_on(measure(len.parse().unwrap()));
        println!(
            "turn overhead, Log of {len} records: p50 {p50:?}  p99 {p99:?}  (one bare hubd append: p50 {append:?})"
        );
        return;
    }
    // Interleaved rounds, so load from elsewhere on the machine hits both lengths alike; the
    // round with the median p50 at each length is reported.
    let mut small = Vec::new();
    let mut big = Vec::new();
    for round in 0..3 {
        small.push(rt.block_on(measure(10)));
        big.push(rt.block_on(measure(10_000)));
        println!(
            "round {round}: p50 at 10 = {:?}, p50 at 10,000 = {:?}",
            small[round].0, big[round].0
        );
    }
    small.sort();
    big.sort();
    let (p50_small, p99_small, append_small) = small[1];
    let (p50_big, p99_big, append_big) = big[1];
    println!(
        "turn overhead, Log of 10 records:     p50 {p50_small:?}  p99 {p99_small:?}  (one bare hubd append: p50 {append_small:?})"
    );
    println!(
        "turn overhead, Log of 10,000 records: p50 {p50_big:?}  p99 {p99_big:?}  (one bare hubd append: p50 {append_big:?})"
    );
    let own = |total: Duration, append: Duration| total.saturating_sub(append * 2);
    println!(
        "harness's own share (p50 less two bare appends): {:?} at 10, {:?} at 10,000",
        own(p50_small, append_small),
        own(p50_big, append_big)
    );
    println!(
        "ratio 10k/10 at p50: {:.2} (target <= 1.5); p50 at 10: {:?} (target <= 2 ms)",
        p50_big.as_secs_f64() / p50_small.as_secs_f64(),
        p50_small
    );
}
