//! The workload and its history: the human (a session from this process, as a person's `l3m`
//! would open) sends letters with unique bodies (`chaos op N`) to `crew` (whom no one runs:
//! the plain write path) and to `crew/hand` (run on the sequencer host, which wakes it for
//! each letter). Each operation is recorded with its invocation, its outcome and its value.

use std::time::Duration;

use l3m_wire::client::HubClient;

use super::site::{Site, agent, human};

/// How an operation ended, as the client saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// hubd acknowledged it: it must be in the hub exactly once.
    Ok,
    /// The client gave up or got an error: it may be in the hub once, or not at all.
    Unknown,
}

/// One operation of the history.
#[derive(Debug, Clone)]
pub struct Op {
    /// Its number, which its value carries.
    pub n: u64,
    /// The inbox it wrote to (an agent's name).
    pub to: String,
    /// When it was invoked and when it completed, in ms since the workload began.
    pub invoked_ms: u64,
    pub completed_ms: u64,
    pub outcome: Outcome,
    /// The error the client saw, when it did not end Ok.
    pub error: Option<String>,
}

/// The unique body of operation `n`.
pub fn value(n: u64) -> String {
    format!("chaos op {n}")
}

/// The operation number a letter body carries, if it is one of the workload's.
pub fn op_of(body: &str) -> Option<u64> {
    body.strip_prefix("chaos op ")?.parse().ok()
}

/// The inboxes the workload writes to.
pub const TARGETS: [&str; 2] = ["crew", "crew/hand"];

/// How long one operation may take before the client gives up on it (its outcome unknown).
const PATIENCE: Duration = Duration::from_secs(6);

/// The workload under way: its session (none after a failed operation), its history.
pub struct Workload<'a> {
    site: &'a Site,
    start: tokio::time::Instant,
    client: Option<HubClient>,
    /// Every operation so far, in the order invoked.
    pub history: Vec<Op>,
}

impl<'a> Workload<'a> {
    /// A workload on `site`, its clock starting now.
    pub fn new(site: &'a Site) -> Workload<'a> {
        Workload {
            site,
            start: tokio::time::Instant::now(),
            client: None,
            history: Vec::new(),
        }
    }

    /// Sends the next letter, to the targets in turn, and records it; after an operation that
    /// did not end Ok, the next opens a new session (retrying while hubd is away).
    pub async fn step(&mut self) -> &Op {
        let human = match self.client.take() {
            Some(human) => human,
            None => self.site.client(human()).await,
        };
        let n = self.history.len() as u64;
        let to = TARGETS[n as usize % TARGETS.len()];
        let address = l3m_core::mail::Address::for_agent(agent(to)).render();
        let invoked_ms = self.start.elapsed().as_millis() as u64;
        let body = value(n);
        let sent = tokio::time::timeout(PATIENCE, human.send_letter(&address, None, &body));
        let (outcome, error) = match sent.await {
            Ok(Ok(_)) => (Outcome::Ok, None),
            Ok(Err(e)) => (Outcome::Unknown, Some(e.to_string())),
            Err(_) => (
                Outcome::Unknown,
                Some(format!("no answer within {PATIENCE:?}")),
            ),
        };
        if outcome == Outcome::Ok {
            self.client = Some(human);
        }
        self.history.push(Op {
            n,
            to: to.to_owned(),
            invoked_ms,
            completed_ms: self.start.elapsed().as_millis() as u64,
            outcome,
            error,
        });
        self.history.last().unwrap()
    }

    /// Steps `gap` apart until `stop` is set; returns the history.
    pub async fn run(mut self, gap: Duration, stop: &std::sync::atomic::AtomicBool) -> Vec<Op> {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            self.step().await;
            tokio::time::sleep(gap).await;
        }
        self.history
    }
}

/// The history as lines a person can read (and a script can parse): one JSON object per op.
pub fn render(history: &[Op]) -> String {
    let mut out = String::new();
    for op in history {
        let line = serde_json::json!({
            "op": op.n,
            "f": "send_letter",
            "to": op.to,
            "value": value(op.n),
            "invoked_ms": op.invoked_ms,
            "completed_ms": op.completed_ms,
            "outcome": match op.outcome { Outcome::Ok => "ok", Outcome::Unknown => "unknown" },
            "error": op.error,
        });
        out.push_str(&line.to_string());
        out.push('\n');
    }
    out
}
