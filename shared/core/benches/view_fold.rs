//! How the view fold scales with the length of a Log.
//!
//! Builds realistic Logs of 1k, 10k and 100k records (user lines, model calls, replies with tool
//! uses, admissions, starts and results, events with hook decisions, grant and budget changes,
//! turn ends, and a compaction of older turns every 40 turns) and measures:
//! - `full_fold/N`: [`view`] over all N records;
//! - `advance_one/N`: [`ViewFold::advance`] by one more ordinary record on a fold already
//!   advanced over N records. Measured over chunks of N/10 records, each on a fold freshly
//!   advanced over the N records (untimed), so the fold stays within 10% of N. (A clone of a
//!   fold would be cheaper to make but is not what a sequencer holds: its vectors have no room
//!   to grow, so its first push would copy the whole fold.)
//!
//! After the criterion groups, a final step measures the same per-record advance cost itself
//! (the least of 15 interleaved rounds per size) and prints the ratio between 100k and 1k; the
//! target is at most 1.5 (O(1) per record).
//!
//! Run: `cargo bench -p l3m-core --bench view_fold` (add `-- --warm-up-time 1
//! --measurement-time 3` for a quicker run).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use l3m_core::budget::Fuel;
use l3m_core::effects::{EffectClass, Footprint};
use l3m_core::log::{
    CallId, Disposition, EventId, EventSource, Log, Record, RecordBody, ToolUse, ToolUseId, Usage,
};
use l3m_core::names::Entity;
use l3m_core::view::{ViewFold, view};

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];

/// Building a fixture can only fail on a bad id or name, which would be a bug here.
type Fixture<T> = Result<T, Box<dyn std::error::Error>>;

/// Writes a plausible session, turn by turn, into a checked Log.
struct Session {
    log: Log,
    rng: u64,
    ids: u64,
    turns: u64,
    /// Where recent turns began, for compactions of older ones.
    turn_starts: Vec<u64>,
    compact: bool,
    human: Entity,
    reviewer: Entity,
}

impl Session {
    fn new(compact: bool) -> Fixture<Self> {
        let mut s = Self {
            log: Log::new(),
            rng: 0x9e37_79b9_7f4a_7c15,
            ids: 0,
            turns: 0,
            turn_starts: Vec::new(),
            compact,
            human: Entity::parse("human:alice")?,
            reviewer: Entity::parse("alice/main/reviewer")?,
        };
        s.push(RecordBody::SystemPrompt {
            text: "You are a careful engineer working in a Git repository. ".repeat(20),
            continues: false,
        })?;
        Ok(s)
    }

    /// A small xorshift generator: the same Log on every run.
    fn roll(&mut self, n: u64) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng % n
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.ids += 1;
        format!("{prefix}{}", self.ids)
    }

    fn push(&mut self, body: RecordBody) -> Fixture<()> {
        self.log
            .append(1_700_000_000_000 + self.log.next_seq(), body)?;
        Ok(())
    }

    fn call(&mut self, tools: u64) -> Fixture<()> {
        let call = CallId::new(self.fresh("call_"))?;
        self.push(RecordBody::CallStarted {
            call: call.clone(),
            provider: "anthropic".into(),
            model: "claude".into(),
            attempt: 1,
            fallback_of: None,
        })?;
        let mut uses = Vec::new();
        for _ in 0..tools {
            uses.push(ToolUse {
                id: ToolUseId::new(self.fresh("toolu_"))?,
                name: "read_file".into(),
                input: serde_json::json!({ "path": "src/lib.rs", "lines": [1, 80] }),
            });
        }
        self.push(RecordBody::AssistantReply {
            call,
            text: "Let me look at the module and then make the change. ".repeat(3),
            tool_uses: uses.clone(),
            usage: Usage {
                input_tokens: 1200,
                output_tokens: 300,
                cache_read_tokens: 9000,
                cache_write_tokens: 0,
            },
            stop_reason: if tools > 0 { "tool_use" } else { "end_turn" }.into(),
        })?;
        for u in uses {
            self.push(RecordBody::ToolCall {
                id: u.id.clone(),
                name: u.name.clone(),
                tier: Footprint::of([EffectClass::FsRead]).tier(),
                footprint: Footprint::of([EffectClass::FsRead]),
            })?;
            self.push(RecordBody::ToolStarted { id: u.id.clone() })?;
            self.push(RecordBody::ToolResult {
                id: u.id,
                output: "fn main() { println!(\"hello\"); }\n".repeat(8),
                is_error: false,
                effects: vec![],
                refusal: None,
            })?;
        }
        Ok(())
    }

    fn turn(&mut self) -> Fixture<()> {
        self.turns += 1;
        self.turn_starts.push(self.log.next_seq());
        if self.roll(10) == 0 {
            let id = EventId::new(self.fresh("ev_"))?;
            let letter_id = self.fresh("letter_");
            self.push(RecordBody::Event {
                id: id.clone(),
                source: EventSource::Letter {
                    letter_id,
                    from: self.reviewer.clone(),
                    in_reply_to: None,
                },
                text: "The CI run on your branch finished: 3 tests failed.".into(),
            })?;
            let disposition = if self.roll(2) == 0 {
                Disposition::Show
            } else {
                Disposition::Dismiss
            };
            self.push(RecordBody::HookDecision {
                event: id,
                disposition,
            })?;
        }
        match self.roll(50) {
            0 => self.push(RecordBody::GrantChange {
                summary: "net: api.github.com removed".into(),
                grants_commit: "4f2a9c1".into(),
            })?,
            1 => self.push(RecordBody::BudgetChange {
                left: Fuel {
                    model_calls: 400,
                    bytes: 1 << 30,
                    wakes: 10,
                },
                summary: "parent lent 200 calls".into(),
            })?,
            _ => {}
        }
        self.push(RecordBody::UserLine {
            from: self.human.clone(),
            text: "Please fix the failing test in the parser module.".into(),
        })?;
        let rounds = self.roll(3);
        for _ in 0..rounds {
            let tools = 1 + self.roll(3);
            self.call(tools)?;
        }
        self.call(0)?;
        self.push(RecordBody::TurnEnd)?;
        if self.compact && self.turns.is_multiple_of(40) && self.turn_starts.len() >= 40 {
            let starts = &self.turn_starts[self.turn_starts.len() - 40..];
            let (from, to) = (starts[0], starts[20] - 1);
            self.push(RecordBody::Compaction {
                from,
                to,
                summary: "Earlier: read the parser, found an off-by-one, fixed two tests.".into(),
            })?;
        }
        Ok(())
    }

    /// The first `n` records of a session, and (without compactions) the `extra` ordinary
    /// records that follow them.
    fn records(n: usize, extra: usize) -> Fixture<(Vec<Record>, Vec<Record>)> {
        let mut s = Self::new(true)?;
        while s.log.records().len() < n {
            s.turn()?;
        }
        s.compact = false;
        while s.log.records().len() < n + extra {
            s.turn()?;
        }
        let mut all = s.log.records().to_vec();
        all.truncate(n + extra);
        let tail = all.split_off(n);
        Ok((all, tail))
    }
}

fn fold_of(records: &[Record]) -> ViewFold {
    let mut fold = ViewFold::new();
    for r in records {
        fold.advance(r);
    }
    fold
}

/// How many records to advance from one copy of the fold at `n`.
fn chunk(n: usize) -> usize {
    (n / 10).max(100)
}

/// Time to advance `total` records of `tail`, in chunks, each on a fold freshly advanced over
/// `head` (untimed).
fn time_advances(head: &[Record], tail: &[Record], total: u64) -> Duration {
    let mut timed = Duration::ZERO;
    let mut left = total;
    while left > 0 {
        let take = left.min(tail.len() as u64);
        let mut fold = fold_of(head);
        let start = Instant::now();
        for r in &tail[..take as usize] {
            fold.advance(r);
        }
        timed += start.elapsed();
        black_box(fold.view());
        left -= take;
    }
    timed
}

/// A Log of `n` records, and the ordinary records that would follow it.
struct Workload {
    n: usize,
    head: Vec<Record>,
    tail: Vec<Record>,
}

fn workloads() -> Option<Vec<Workload>> {
    let mut out = Vec::new();
    for n in SIZES {
        match Session::records(n, chunk(n)) {
            Ok((head, tail)) => out.push(Workload { n, head, tail }),
            Err(e) => {
                eprintln!("view_fold: could not build a {n}-record Log: {e}");
                return None;
            }
        }
    }
    Some(out)
}

fn benches_view(c: &mut Criterion) {
    let Some(loads) = workloads() else { return };
    let mut full = c.benchmark_group("full_fold");
    // A 100k fold takes tens of milliseconds; ten samples keep the run short.
    full.sample_size(10);
    for Workload { n, head, .. } in &loads {
        full.throughput(Throughput::Elements(*n as u64));
        full.bench_with_input(BenchmarkId::from_parameter(n), head, |b, records| {
            b.iter(|| view(black_box(records)))
        });
    }
    full.finish();
    let mut one = c.benchmark_group("advance_one");
    for Workload { n, head, tail } in &loads {
        one.throughput(Throughput::Elements(1));
        one.bench_with_input(BenchmarkId::from_parameter(n), tail, |b, tail| {
            b.iter_custom(|iters| time_advances(head, tail, iters))
        });
    }
    one.finish();
}

criterion_group!(benches, benches_view);

/// The per-record advance cost at each size, measured directly: the least of 15 rounds of at
/// least 20k records each, the sizes taking turns round by round. Other processes on the machine
/// only ever add time, so the least round is the steadiest estimate, and taking turns spreads
/// their load over every size alike.
fn print_ratio() {
    let Some(loads) = workloads() else { return };
    let mut best = vec![f64::INFINITY; loads.len()];
    for _ in 0..15 {
        for (k, w) in loads.iter().enumerate() {
            let records = (20_000 / w.tail.len()).max(1) * w.tail.len();
            let timed = time_advances(&w.head, &w.tail, records as u64);
            best[k] = best[k].min(timed.as_nanos() as f64 / records as f64);
        }
    }
    let figures: Vec<String> = loads
        .iter()
        .zip(&best)
        .map(|(w, ns)| format!("{}: {ns:.0} ns/record", w.n))
        .collect();
    if let (Some(small), Some(large)) = (best.first(), best.last()) {
        println!(
            "view_fold: incremental advance per record ({}); 100k/1k ratio = {:.2} (target <= 1.5)",
            figures.join(", "),
            large / small
        );
    }
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo bench` passes `--bench`; a test-mode run (`cargo test --benches`) skips the ratio.
    if std::env::args().any(|a| a == "--bench") {
        print_ratio();
    }
}
