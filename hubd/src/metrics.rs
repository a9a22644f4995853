//! hubd's Prometheus endpoint (`hubd serve --metrics ADDR`): `GET /metrics` in the text
//! exposition format, `GET /healthz` as the health answer in JSON. It serves counts only, and
//! listens where the operator says (loopback unless told otherwise), never on the bus.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use crate::service::{Gauges, OpCount, State};

/// A per-operation counter family: its name, its help, and how to read it off a count.
type OpFamily = (&'static str, &'static str, fn(&OpCount) -> String);

/// Writes one metric family's HELP and TYPE lines.
fn head(text: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// The exposition of `gauges` for a process started at `started_ms`: request counts, refusals
/// and time spent per operation, and what hubd holds now.
pub fn render(gauges: &Gauges, started_ms: u64) -> String {
    let mut text = String::new();
    head(
        &mut text,
        "l3m_hubd_start_time_seconds",
        "gauge",
        "When this hubd process loaded the hub (Unix time).",
    );
    let _ = writeln!(
        text,
        "l3m_hubd_start_time_seconds {}",
        started_ms as f64 / 1000.0
    );
    for (name, help, value) in [
        (
            "l3m_hubd_sessions_open",
            "Sessions open now.",
            gauges.sessions_open,
        ),
        (
            "l3m_hubd_leases_held",
            "Leases in force now (agents a sequencer runs).",
            gauges.leases_held,
        ),
        (
            "l3m_hubd_agents_live",
            "Agents alive in the ledger.",
            gauges.agents_live,
        ),
    ] {
        head(&mut text, name, "gauge", help);
        let _ = writeln!(text, "{name} {value}");
    }
    let per_op: [OpFamily; 3] = [
        (
            "l3m_hubd_requests_total",
            "Requests answered, by operation.",
            |c| c.requests.to_string(),
        ),
        (
            "l3m_hubd_refused_total",
            "Requests refused (any error reply), by operation.",
            |c| c.refused.to_string(),
        ),
        (
            "l3m_hubd_request_seconds_total",
            "Time spent answering, by operation.",
            |c| (c.busy_us as f64 / 1e6).to_string(),
        ),
    ];
    for (name, help, value) in per_op {
        head(&mut text, name, "counter", help);
        for (op, count) in &gauges.ops {
            let _ = writeln!(text, "{name}{{op=\"{op}\"}} {}", value(count));
        }
    }
    text
}

/// Serves `/metrics` and `/healthz` for `state` on `addr` until `shutdown`. Returns once the
/// listener is bound (so a bind error is the caller's), serving on a spawned task.
pub async fn serve(
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    // Weak: the endpoint must not keep hubd's state alive past its shutdown (its announcer
    // ends only when the state is gone).
    let state = Arc::downgrade(&state);
    let metrics_state = Weak::clone(&state);
    let gone = || (StatusCode::SERVICE_UNAVAILABLE, "hubd is stopping\n").into_response();
    let app = Router::new()
        .route(
            "/metrics",
            get(move || {
                let state = metrics_state.upgrade();
                async move {
                    let Some(state) = state else { return gone() };
                    let gauges = state.gauges();
                    (
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        render(&gauges, state.started_ms()),
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/healthz",
            get(move || {
                let state = state.upgrade();
                async move {
                    let Some(state) = state else { return gone() };
                    let health = state.health();
                    let status = if health.ok() {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    };
                    (status, axum::Json(health)).into_response()
                }
            }),
        );
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await;
        if let Err(error) = served {
            tracing::warn!(%error, "the metrics endpoint stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_declared_once_and_each_op_is_labelled() {
        let gauges = Gauges {
            sessions_open: 3,
            leases_held: 1,
            agents_live: 7,
            ops: [
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
            ]
            .into_iter()
            .collect(),
        };
        let text = render(&gauges, 1_700_000_000_500);
        assert!(text.contains("l3m_hubd_start_time_seconds 1700000000.5\n"));
        assert!(text.contains("l3m_hubd_sessions_open 3\n"));
        assert!(text.contains("l3m_hubd_agents_live 7\n"));
        assert!(text.contains("l3m_hubd_requests_total{op=\"spawn\"} 4\n"));
        assert!(text.contains("l3m_hubd_refused_total{op=\"spawn\"} 1\n"));
        assert!(text.contains("l3m_hubd_request_seconds_total{op=\"spawn\"} 2.5\n"));
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let name = line.split_whitespace().nth(2).unwrap();
            assert_eq!(
                text.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{name}"
            );
        }
        // Every sample line is `name{labels} value` with a number for value.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit_once(' ').unwrap().1;
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
