//! A service's metrics endpoint (`--metrics ADDR`): `GET /metrics` in Prometheus' text
//! exposition format, `GET /healthz` as the health answer in JSON (503 when a check fails).
//!
//! What it shows is the service's own health answer ([`Health`]), the one `l3m status` reads on
//! the bus, so the two never disagree: `l3m_<service>_start_time_seconds`, one
//! `l3m_<service>_check_ok{check="…"}` (1 or 0) per check, and one family per gauge,
//! `l3m_<service>_<gauge>` (a counter when the gauge's name ends in `_total`). A service may
//! add families of its own ([`Shown::more`]; hubd adds its per-operation counts). It serves
//! counts only, and listens where the operator says (loopback unless told otherwise), never on
//! the bus.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use l3m_wire::health::Health;
use tokio_util::sync::CancellationToken;

/// The flag every service takes for its metrics endpoint.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct MetricsArgs {
    /// Serve Prometheus metrics (`/metrics`) and the health answer (`/healthz`, JSON; 503 when
    /// a check fails) on this address, e.g. 127.0.0.1:9101. Off unless given; bind it to
    /// loopback unless a scraper on another host must reach it.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
}

/// What a service's endpoint shows.
pub trait Shown: Send + Sync + 'static {
    /// The service's health answer now; `None` once it is stopping.
    fn health(&self) -> Option<Health>;

    /// Families of its own to add after those of its health answer, each with its HELP and
    /// TYPE lines ([`family`]).
    fn more(&self, _text: &mut String) {}
}

impl<F: Fn() -> Health + Send + Sync + 'static> Shown for F {
    fn health(&self) -> Option<Health> {
        Some(self())
    }
}

/// Writes one metric family's HELP and TYPE lines.
pub fn family(text: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// `s` as a metric name's segment: anything but ASCII letters, digits and `_` becomes `_`.
pub fn name_segment(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// `s` as a label value: backslash, double quote and newline escaped.
pub fn label_value(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The exposition of `health`: its start time, one sample per check, one family per gauge.
pub fn render(health: &Health) -> String {
    let mut text = String::new();
    render_each(&mut text, &[(String::new(), health)]);
    text
}

/// The exposition of several processes of one service (a host's sequencers, one per agent):
/// the families of [`render`], each with one sample per process, labelled by its `labels`
/// (`agent="…"`, written inside the braces; empty for none). Families are named after the
/// first answer's service; every answer is expected to be of that service.
pub fn render_each(text: &mut String, answers: &[(String, &Health)]) {
    let Some((_, first)) = answers.first() else {
        return;
    };
    let prefix = format!("l3m_{}", name_segment(&first.service));
    let braced = |labels: &str, more: &str| {
        let joined: Vec<&str> = [labels, more]
            .into_iter()
            .filter(|l| !l.is_empty())
            .collect();
        if joined.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", joined.join(","))
        }
    };
    let name = format!("{prefix}_start_time_seconds");
    family(
        text,
        &name,
        "gauge",
        "When this process started (Unix time).",
    );
    for (labels, health) in answers {
        let at = health.started_ms as f64 / 1000.0;
        let _ = writeln!(text, "{name}{} {at}", braced(labels, ""));
    }
    let name = format!("{prefix}_check_ok");
    family(
        text,
        &name,
        "gauge",
        "Whether each check of the health answer passes (1) or fails (0).",
    );
    for (labels, health) in answers {
        for check in &health.checks {
            let check_label = format!("check=\"{}\"", label_value(&check.name));
            let _ = writeln!(
                text,
                "{name}{} {}",
                braced(labels, &check_label),
                u8::from(check.ok)
            );
        }
    }
    let gauges: std::collections::BTreeSet<&String> =
        answers.iter().flat_map(|(_, h)| h.gauges.keys()).collect();
    for gauge in gauges {
        let name = format!("{prefix}_{}", name_segment(gauge));
        let kind = if gauge.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        family(
            text,
            &name,
            kind,
            &format!("The health answer's `{gauge}` (docs/operators.md, Health)."),
        );
        for (labels, health) in answers {
            if let Some(value) = health.gauges.get(gauge) {
                let _ = writeln!(text, "{name}{} {value}", braced(labels, ""));
            }
        }
    }
}

/// Serves `/metrics` and `/healthz` for `shown` on `addr` until `shutdown`. Returns once the
/// listener is bound (so a bind error is the caller's) with the address it bound, serving on a
/// spawned task.
pub async fn serve(
    addr: SocketAddr,
    shown: impl Shown,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let shown: Arc<dyn Shown> = Arc::new(shown);
    let for_healthz = Arc::clone(&shown);
    let app = Router::new()
        .route(
            "/metrics",
            get(move || std::future::ready(metrics(shown.as_ref()))),
        )
        .route(
            "/healthz",
            get(move || std::future::ready(healthz(for_healthz.as_ref()))),
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

/// `GET path` of a metrics endpoint at `addr`, as an operator's probe makes it: the status
/// line and the body. Blocking; a probe (or a test) on another thread than the server's.
pub fn scrape(addr: SocketAddr, path: &str) -> std::io::Result<(String, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    stream.read_to_string(&mut text)?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no end of the answer's head"))?;
    let status = head.lines().next().unwrap_or_default().to_owned();
    Ok((status, body.to_owned()))
}

/// Serves `--metrics` when the flag is given; logs where. A bind error names the address.
pub async fn serve_if_asked(
    args: &MetricsArgs,
    shown: impl Shown,
    shutdown: CancellationToken,
) -> Result<(), String> {
    let Some(addr) = args.metrics else {
        return Ok(());
    };
    let bound = serve(addr, shown, shutdown)
        .await
        .map_err(|e| format!("serving metrics on {addr}: {e}"))?;
    tracing::info!(%bound, "metrics served");
    Ok(())
}

fn stopping() -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, "the service is stopping\n").into_response()
}

fn metrics(shown: &dyn Shown) -> Response {
    let Some(health) = shown.health() else {
        return stopping();
    };
    let mut text = render(&health);
    shown.more(&mut text);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

fn healthz(shown: &dyn Shown) -> Response {
    let Some(health) = shown.health() else {
        return stopping();
    };
    let status = if health.ok() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, axum::Json(health)).into_response()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use l3m_wire::health::Check;
    use l3m_wire::subjects::Service;

    use super::*;

    fn health() -> Health {
        Health::of(
            Service::Builder,
            1_700_000_000_500,
            vec![
                Check {
                    name: "engine".into(),
                    ok: true,
                    detail: "Docker answers".into(),
                },
                Check {
                    name: "odd \"name\"\n".into(),
                    ok: false,
                    detail: String::new(),
                },
            ],
            BTreeMap::from([
                ("stages_running".into(), 2),
                ("stages_total".into(), 9),
                ("odd-gauge".into(), 1),
            ]),
        )
    }

    /// Checks `text` is well-formed exposition: each family declared once, before its samples,
    /// and every sample `name{labels} number`.
    fn assert_well_formed(text: &str) {
        let mut declared = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let name = rest.split_whitespace().next().unwrap();
                assert!(!declared.contains(&name), "{name} declared twice");
                declared.push(name);
            } else if !line.starts_with('#') {
                let (series, value) = line.rsplit_once(' ').unwrap();
                assert!(value.parse::<f64>().is_ok(), "{line}");
                let name = series.split('{').next().unwrap();
                assert!(declared.contains(&name), "{name} sampled before its TYPE");
                assert!(
                    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn the_health_answer_becomes_one_family_per_gauge_and_a_sample_per_check() {
        let text = render(&health());
        assert_well_formed(&text);
        assert!(text.contains("l3m_builder_start_time_seconds 1700000000.5\n"));
        assert!(text.contains("l3m_builder_check_ok{check=\"engine\"} 1\n"));
        assert!(text.contains("l3m_builder_check_ok{check=\"odd \\\"name\\\"\\n\"} 0\n"));
        assert!(text.contains("# TYPE l3m_builder_stages_total counter\n"));
        assert!(text.contains("# TYPE l3m_builder_stages_running gauge\n"));
        assert!(text.contains("l3m_builder_stages_running 2\n"));
        assert!(text.contains("l3m_builder_odd_gauge 1\n"));
    }

    #[test]
    fn several_processes_share_each_family_with_a_labelled_sample_each() {
        let one = health().of_agent(&"alice/main");
        let mut two = health().of_agent(&"alice/main/w");
        two.gauges.remove("stages_running");
        let mut text = render(&Health::of(
            Service::Host,
            0,
            vec![],
            BTreeMap::from([("agents_woken_total".into(), 1)]),
        ));
        render_each(
            &mut text,
            &[
                ("agent=\"alice/main\"".into(), &one),
                ("agent=\"alice/main/w\"".into(), &two),
            ],
        );
        assert_well_formed(&text);
        assert!(text.contains("l3m_host_agents_woken_total 1\n"), "{text}");
        assert!(text.contains("l3m_builder_stages_total{agent=\"alice/main\"} 9\n"));
        assert!(text.contains("l3m_builder_stages_total{agent=\"alice/main/w\"} 9\n"));
        assert!(text.contains("l3m_builder_stages_running{agent=\"alice/main\"} 2\n"));
        assert!(!text.contains("l3m_builder_stages_running{agent=\"alice/main/w\"}"));
        assert!(text.contains("l3m_builder_check_ok{agent=\"alice/main\",check=\"engine\"} 1\n"));
        let mut none = String::new();
        render_each(&mut none, &[]);
        assert!(none.is_empty());
    }

    #[tokio::test]
    async fn the_endpoint_serves_metrics_and_a_failing_healthz_is_503() {
        let shutdown = CancellationToken::new();
        let bound = serve("127.0.0.1:0".parse().unwrap(), health, shutdown.clone())
            .await
            .unwrap();
        let get = |path: &'static str| async move {
            tokio::task::spawn_blocking(move || scrape(bound, path))
                .await
                .unwrap()
                .unwrap()
        };
        let (status, metrics) = get("/metrics").await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        assert!(
            metrics.contains("l3m_builder_stages_total 9\n"),
            "{metrics}"
        );
        let (status, healthz) = get("/healthz").await;
        assert!(status.starts_with("HTTP/1.1 503"), "{status}");
        assert!(healthz.contains("\"service\":\"builder\""), "{healthz}");
        shutdown.cancel();
    }
}
