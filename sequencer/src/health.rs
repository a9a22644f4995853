//! Health answers for `l3m status` and an operator's probe ([`l3m_wire::health`]): the
//! sequencer host's (`l3m.<hub>.host.health`: how its waking goes) and each running
//! sequencer's (`l3m.<hub>.sequencer.health`: its agent, its appends, its model calls).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use l3m_core::names::AgentName;
use l3m_daemon::metrics::{Shown, label_value, render_each};
use l3m_wire::health::{Check, Health};
use l3m_wire::subjects::Service;

/// What one supervisor has done since it started: its health answer and its metrics, and
/// what its agents' sequencers last answered when it asked them (`supervise`'s gathering).
#[derive(Debug, Default)]
pub struct HostMeter {
    started_ms: u64,
    woken: AtomicU64,
    failed: AtomicU64,
    last_failure: Mutex<Option<String>>,
    runs: Mutex<Vec<Health>>,
}

impl HostMeter {
    /// A meter of a supervisor starting now.
    pub fn new() -> HostMeter {
        HostMeter {
            started_ms: l3m_core::clock::now_ms(),
            ..HostMeter::default()
        }
    }

    fn last_failure(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.last_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A sequencer was started for an agent with mail.
    pub(crate) fn woke(&self) {
        self.woken.fetch_add(1, Ordering::Relaxed);
        *self.last_failure() = None;
    }

    /// Starting one, or checking whether to, failed with `error`.
    pub(crate) fn failed(&self, error: &str) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        *self.last_failure() = Some(error.to_owned());
    }

    /// The health answers of the sequencers running on this host now, one per agent.
    pub(crate) fn saw_runs(&self, runs: Vec<Health>) {
        *self.runs.lock().unwrap_or_else(PoisonError::into_inner) = runs;
    }

    /// The health answers last gathered from this host's sequencers.
    pub fn runs(&self) -> Vec<Health> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The health answer: well unless the last wake failed (and none succeeded since).
    pub fn health(&self) -> Health {
        let check = match &*self.last_failure() {
            None => Check {
                name: "waking".into(),
                ok: true,
                detail: "the last wake (if any) started its sequencer".into(),
            },
            Some(error) => Check {
                name: "waking".into(),
                ok: false,
                detail: format!("the last wake failed: {error}"),
            },
        };
        let gauges = BTreeMap::from([
            (
                "agents_woken_total".to_owned(),
                self.woken.load(Ordering::Relaxed),
            ),
            (
                "wake_failures_total".to_owned(),
                self.failed.load(Ordering::Relaxed),
            ),
            ("sequencers_running".to_owned(), self.runs().len() as u64),
        ]);
        Health::of(Service::Host, self.started_ms, vec![check], gauges)
    }
}

/// What a sequencer host's metrics endpoint shows: the host's own health answer, then the
/// families of its agents' sequencers, one sample per agent (`agent="…"`), as last gathered.
#[derive(Debug, Clone)]
pub struct HostShown(pub Arc<HostMeter>);

impl Shown for HostShown {
    fn health(&self) -> Option<Health> {
        Some(self.0.health())
    }

    fn more(&self, text: &mut String) {
        let runs = self.0.runs();
        let labelled: Vec<(String, &Health)> = (runs.iter())
            .map(|h| {
                let agent = h.agent.as_deref().unwrap_or("unknown");
                (format!("agent=\"{}\"", label_value(agent)), h)
            })
            .collect();
        render_each(text, &labelled);
    }
}

/// What one running sequencer has done since it booted: its health answer.
#[derive(Debug)]
pub(crate) struct RunMeter {
    agent: AgentName,
    started_ms: u64,
    appends: AtomicU64,
    records: AtomicU64,
    append_us: AtomicU64,
    running: AtomicU64,
    calls_failed: AtomicU64,
    last_call_failure: Mutex<Option<String>>,
}

impl RunMeter {
    /// A meter of `agent`'s sequencer booting now.
    pub(crate) fn new(agent: AgentName) -> RunMeter {
        RunMeter {
            agent,
            started_ms: l3m_core::clock::now_ms(),
            appends: AtomicU64::new(0),
            records: AtomicU64::new(0),
            append_us: AtomicU64::new(0),
            running: AtomicU64::new(0),
            calls_failed: AtomicU64::new(0),
            last_call_failure: Mutex::new(None),
        }
    }

    fn last_call_failure(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.last_call_failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One compare-and-swap appended `records` records and took `took`.
    pub(crate) fn appended(&self, records: usize, took: Duration) {
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.records.fetch_add(records as u64, Ordering::Relaxed);
        let us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.append_us.fetch_add(us, Ordering::Relaxed);
    }

    /// Model calls and tools running now.
    pub(crate) fn running(&self, activities: usize) {
        self.running.store(activities as u64, Ordering::Relaxed);
    }

    /// A model call ended without a reply (`error`), or with one (`None`).
    pub(crate) fn call_ended(&self, error: Option<&str>) {
        if error.is_some() {
            self.calls_failed.fetch_add(1, Ordering::Relaxed);
        }
        *self.last_call_failure() = error.map(str::to_owned);
    }

    /// The health answer: well unless its last model call failed (and none answered since);
    /// its agent named in the check; its appends, their records and time, what runs.
    pub fn health(&self) -> Health {
        let check = match &*self.last_call_failure() {
            None => Check {
                name: "model".into(),
                ok: true,
                detail: format!("{}: the last model call (if any) answered", self.agent),
            },
            Some(error) => Check {
                name: "model".into(),
                ok: false,
                detail: format!("{}: the last model call failed: {error}", self.agent),
            },
        };
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        let gauges = BTreeMap::from([
            ("appends_total".to_owned(), load(&self.appends)),
            ("records_appended_total".to_owned(), load(&self.records)),
            ("append_micros_total".to_owned(), load(&self.append_us)),
            ("activities_running".to_owned(), load(&self.running)),
            (
                "model_calls_failed_total".to_owned(),
                load(&self.calls_failed),
            ),
        ]);
        Health::of(Service::Sequencer, self.started_ms, vec![check], gauges).of_agent(&self.agent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_model_call_makes_the_sequencer_unwell_until_one_answers() {
        let meter = RunMeter::new(AgentName::parse("alice/main/worker").unwrap());
        meter.appended(3, Duration::from_micros(1500));
        meter.appended(1, Duration::from_micros(500));
        meter.running(2);
        let well = meter.health();
        assert!(well.ok(), "{well:?}");
        assert!(well.checks[0].detail.starts_with("alice/main/worker:"));
        assert_eq!(well.gauges["appends_total"], 2);
        assert_eq!(well.gauges["records_appended_total"], 4);
        assert_eq!(well.gauges["append_micros_total"], 2000);
        assert_eq!(well.gauges["activities_running"], 2);
        meter.call_ended(Some("429 too many requests"));
        let unwell = meter.health();
        assert!(!unwell.ok());
        assert!(unwell.checks[0].detail.contains("429"), "{unwell:?}");
        assert_eq!(unwell.gauges["model_calls_failed_total"], 1);
        meter.call_ended(None);
        assert!(meter.health().ok());
        assert_eq!(meter.health().gauges["model_calls_failed_total"], 1);
    }

    #[test]
    fn a_failed_wake_makes_the_host_unwell_until_the_next_one_succeeds() {
        let meter = HostMeter::new();
        assert!(meter.health().ok());
        meter.failed("no such binary");
        let unwell = meter.health();
        assert!(!unwell.ok());
        assert!(unwell.checks[0].detail.contains("no such binary"));
        meter.woke();
        let well = meter.health();
        assert!(well.ok());
        assert_eq!(well.gauges["agents_woken_total"], 1);
        assert_eq!(well.gauges["wake_failures_total"], 1);
        assert_eq!(well.service, "host");
    }
}
