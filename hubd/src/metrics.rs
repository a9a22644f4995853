//! hubd's Prometheus endpoint (`hubd serve --metrics ADDR`), served by [`l3m_daemon::metrics`]
//! like every service's: hubd's health answer (start time, the store's check, sessions open,
//! leases held, agents live, requests and refusals in all), and beside it hubd's own families,
//! per operation: requests answered, refused, and time spent answering.

use std::fmt::Write as _;
use std::sync::{Arc, Weak};

use l3m_daemon::metrics::{Shown, family};
use l3m_wire::health::Health;

use crate::service::{OpCount, State};

/// A per-operation counter family: its name, its help, and how to read it off a count.
type OpFamily = (&'static str, &'static str, fn(&OpCount) -> String);

/// Writes the per-operation families of `ops` (by operation name).
pub fn render_ops<'a>(
    text: &mut String,
    ops: impl Iterator<Item = (&'a str, &'a OpCount)> + Clone,
) {
    let per_op: [OpFamily; 3] = [
        (
            "l3m_hubd_op_requests_total",
            "Requests answered, by operation.",
            |c| c.requests.to_string(),
        ),
        (
            "l3m_hubd_op_refused_total",
            "Requests refused (any error reply), by operation.",
            |c| c.refused.to_string(),
        ),
        (
            "l3m_hubd_op_seconds_total",
            "Time spent answering, by operation.",
            |c| (c.busy_us as f64 / 1e6).to_string(),
        ),
    ];
    for (name, help, value) in per_op {
        family(text, name, "counter", help);
        for (op, count) in ops.clone() {
            let _ = writeln!(text, "{name}{{op=\"{op}\"}} {}", value(count));
        }
    }
}

/// What hubd's endpoint shows. Weak: the endpoint must not keep hubd's state alive past its
/// shutdown (its announcer ends only when the state is gone).
#[derive(Debug)]
pub struct Endpoint(Weak<State>);

impl Endpoint {
    /// The endpoint of `state`.
    pub fn of(state: &Arc<State>) -> Endpoint {
        Endpoint(Arc::downgrade(state))
    }
}

impl Shown for Endpoint {
    fn health(&self) -> Option<Health> {
        Some(self.0.upgrade()?.health())
    }

    fn more(&self, text: &mut String) {
        if let Some(state) = self.0.upgrade() {
            let ops = state.gauges().ops;
            render_ops(text, ops.iter().map(|(op, count)| (*op, count)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_operation_is_labelled_in_each_family() {
        let ops = [
            (
                "spawn",
                OpCount {
                    requests: 4,
                    refused: 1,
                    busy_us: 2_500_000,
                },
            ),
            (
                "read-log",
                OpCount {
                    requests: 9,
                    refused: 0,
                    busy_us: 10,
                },
            ),
        ];
        let mut text = String::new();
        render_ops(&mut text, ops.iter().map(|(op, count)| (*op, count)));
        assert!(text.contains("l3m_hubd_op_requests_total{op=\"spawn\"} 4\n"));
        assert!(text.contains("l3m_hubd_op_refused_total{op=\"spawn\"} 1\n"));
        assert!(text.contains("l3m_hubd_op_seconds_total{op=\"spawn\"} 2.5\n"));
        assert!(text.contains("l3m_hubd_op_requests_total{op=\"read-log\"} 9\n"));
        assert_eq!(text.matches("# TYPE ").count(), 3);
    }
}
