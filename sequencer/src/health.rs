//! The sequencer host's health answer (`l3m.<hub>.host.health`): how its waking goes, for
//! `l3m status` and an operator's probe ([`l3m_wire::health`]).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use l3m_wire::health::{Check, Health};
use l3m_wire::subjects::Service;

/// What one supervisor has done since it started: its health answer and its metrics.
#[derive(Debug, Default)]
pub struct HostMeter {
    started_ms: u64,
    woken: AtomicU64,
    failed: AtomicU64,
    last_failure: Mutex<Option<String>>,
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
        ]);
        Health::of(Service::Host, self.started_ms, vec![check], gauges)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
