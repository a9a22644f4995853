//! How hubd is: its health answer on the bus ([`l3m_wire::health`]) and the per-operation
//! counts behind it and behind the Prometheus endpoint ([`crate::metrics`]).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use l3m_wire::health::{Check, Health};
use l3m_wire::subjects::Service;

use super::state::State;

/// What one operation has served since hubd started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpCount {
    /// Requests answered (accepted or refused).
    pub requests: u64,
    /// Of those, refused (any error reply).
    pub refused: u64,
    /// Time spent answering them, in microseconds.
    pub busy_us: u64,
}

/// The per-operation counts of one hubd process.
#[derive(Debug, Default)]
pub struct Meter {
    ops: Mutex<BTreeMap<&'static str, OpCount>>,
}

impl Meter {
    /// Counts one answer of `op` that took `took`.
    pub fn record(&self, op: &'static str, took: Duration, refused: bool) {
        let mut ops = self.ops.lock().unwrap_or_else(PoisonError::into_inner);
        let count = ops.entry(op).or_default();
        count.requests += 1;
        count.refused += u64::from(refused);
        count.busy_us += u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    }

    /// Every operation's counts so far, by name.
    pub fn snapshot(&self) -> BTreeMap<&'static str, OpCount> {
        self.ops
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// What one hubd process is and holds now: the gauges its health answer and its metrics show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gauges {
    /// Sessions open.
    pub sessions_open: u64,
    /// Leases in force (agents some sequencer runs).
    pub leases_held: u64,
    /// Agents alive in the ledger.
    pub agents_live: u64,
    /// Per operation.
    pub ops: BTreeMap<&'static str, OpCount>,
}

impl State {
    /// This process's gauges now.
    pub fn gauges(&self) -> Gauges {
        let now = Instant::now();
        Gauges {
            sessions_open: self.sessions().open_count() as u64,
            leases_held: self.leases().read(|t| t.held(now)) as u64,
            agents_live: self.live_agent_count() as u64,
            ops: self.meter().snapshot(),
        }
    }

    /// hubd's health answer: whether its store answers, and its gauges.
    pub fn health(&self) -> Health {
        let ledger = l3m_core::refs::LEDGER;
        let read = self.hub().len(ledger).and_then(|len| {
            self.hub()
                .read_range(ledger, len.saturating_sub(1), len)
                .map(|_| len)
        });
        let store = match read {
            Ok(rows) => Check {
                name: "store".into(),
                ok: true,
                detail: format!("the ledger's last row reads back from hub.git ({rows} rows)"),
            },
            Err(e) => Check {
                name: "store".into(),
                ok: false,
                detail: format!("hub.git does not answer: {e}"),
            },
        };
        let gauges = self.gauges();
        let totals = gauges
            .ops
            .values()
            .fold(OpCount::default(), |a, c| OpCount {
                requests: a.requests + c.requests,
                refused: a.refused + c.refused,
                busy_us: a.busy_us + c.busy_us,
            });
        Health::of(
            Service::Hubd,
            self.started_ms(),
            vec![store],
            BTreeMap::from([
                ("sessions_open".into(), gauges.sessions_open),
                ("leases_held".into(), gauges.leases_held),
                ("agents_live".into(), gauges.agents_live),
                ("requests_total".into(), totals.requests),
                ("refused_total".into(), totals.refused),
            ]),
        )
    }
}
