//! Health: every service answers "are you well, and how busy" on the bus, so an operator (and
//! `l3m status`) sees the whole site from one place.
//!
//! A service serves `Subjects::request(SERVICE, "health")`. Only NATS users allowed to publish
//! there can ask (the `cli` user of `deploy/nats.conf` may ask every service); the answer holds
//! counts and this process's identity, never a capability, a letter or a record.
//!
//! hubd is one process per hub, so [`ask`] takes its first answer. Other services may run as
//! several processes (a sequencer host per machine, a sequencer per running agent), each
//! answering on the same subject with no queue group ([`serve`]), and [`gather`] collects them
//! all within a window.
//!
//! # Format
//! A [`HealthRequest`] (`health`): `{}` → a [`Health`] (`health-reply`): `{ service, host,
//! pid, version, started_ms, now_ms, checks: [{ name, ok, detail }], gauges: { name: n } }`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use tokio_util::sync::CancellationToken;

use crate::bus::Bus;
use crate::envelope::{Limits, Message, encode};
use crate::error::WireError;
use crate::reply::RemoteError;
use crate::subjects::{Operation, Service, Subjects};

/// The health op's subject token.
pub const OP_HEALTH: &str = "health";

/// Asks a service how it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthRequest {}

impl Message for HealthRequest {
    const KIND: &'static str = "health";
}

/// One thing a service checked about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// What was checked (`store`, `bus`, ...).
    pub name: String,
    /// Whether it passed.
    pub ok: bool,
    /// What was found, for the operator.
    pub detail: String,
}

/// A service's answer: who it is, whether it is well, and its gauges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// The service (`hubd`, `postman`, ...).
    pub service: String,
    /// The host it runs on (its hostname).
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// Its version.
    pub version: String,
    /// When it started, in milliseconds since the Unix epoch.
    pub started_ms: u64,
    /// Its clock when it answered.
    pub now_ms: u64,
    /// What it checked; it is well when every check passed.
    pub checks: Vec<Check>,
    /// Its counts (`sessions_open`, `leases_held`, `requests_total`, ...).
    pub gauges: BTreeMap<String, u64>,
    /// The agent it runs, for a sequencer (one process per agent): how its host's metrics
    /// label its counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
}

impl Health {
    /// The answer of `service`, started at `started_ms`, from this process now (its version is
    /// the workspace's, which every l3m binary shares).
    pub fn of(
        service: Service,
        started_ms: u64,
        checks: Vec<Check>,
        gauges: BTreeMap<String, u64>,
    ) -> Health {
        let (host, pid) = this_process();
        Health {
            service: service.as_str().to_owned(),
            host,
            pid,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            started_ms,
            now_ms: l3m_core::clock::now_ms(),
            checks,
            gauges,
            agent: None,
        }
    }

    /// The same answer, naming the agent the process runs.
    pub fn of_agent(self, agent: &impl std::fmt::Display) -> Health {
        Health {
            agent: Some(agent.to_string()),
            ..self
        }
    }

    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }
}

impl Message for Health {
    const KIND: &'static str = "health-reply";
}

/// This process as a health answer names it: hostname and pid.
pub fn this_process() -> (String, u32) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    (host, std::process::id())
}

/// The subject `service` of the hub answers health on.
pub fn subject(subjects: &Subjects, service: Service) -> Result<String, WireError> {
    Ok(subjects.request(service, &Operation::parse(OP_HEALTH)?))
}

/// Asks `service` how it is. `Err` on the outer level: nobody answered (it is not running) or
/// the wire failed.
pub async fn ask(
    bus: &dyn Bus,
    subjects: &Subjects,
    service: Service,
    timeout: Duration,
) -> Result<Result<Health, RemoteError>, WireError> {
    crate::typed::call(
        bus,
        &subject(subjects, service)?,
        &HealthRequest {},
        timeout,
        &Limits::default(),
    )
    .await
}

/// Asks every process of `service` how it is, and takes the answers that come within `window`.
/// An answer that does not open is left out (and logged): one broken process must not hide the
/// others.
pub async fn gather(
    bus: &dyn Bus,
    subjects: &Subjects,
    service: Service,
    window: Duration,
) -> Result<Vec<Health>, WireError> {
    let limits = Limits::default();
    let answers = bus
        .gather(
            &subject(subjects, service)?,
            encode(&HealthRequest {}, &limits)?,
            window,
        )
        .await?;
    let mut healths: Vec<Health> = answers
        .iter()
        .filter_map(
            |bytes| match crate::reply::decode_reply::<Health>(bytes, &limits) {
                Ok(Ok(health)) => Some(health),
                Ok(Err(refused)) => {
                    tracing::warn!(%service, error = %refused, "a health request was refused");
                    None
                }
                Err(e) => {
                    tracing::warn!(%service, error = %e, "a health answer does not open");
                    None
                }
            },
        )
        .collect();
    healths.sort_by(|a, b| (&a.host, a.pid).cmp(&(&b.host, b.pid)));
    Ok(healths)
}

/// Answers `service`'s health requests with what `report` says at the time, until `shutdown`;
/// with no queue group, so every process of the service answers a [`gather`].
pub async fn serve(
    bus: &dyn Bus,
    subjects: &Subjects,
    service: Service,
    report: impl Fn() -> Health + Send + Sync + 'static,
    shutdown: CancellationToken,
) -> Result<(), WireError> {
    bind(bus, subjects, service, report, shutdown).await?.await;
    Ok(())
}

/// [`serve`] in two steps: subscribes now (so a request sent once this returns is heard) and
/// gives back the future that answers until `shutdown`.
pub async fn bind(
    bus: &dyn Bus,
    subjects: &Subjects,
    service: Service,
    report: impl Fn() -> Health + Send + Sync + 'static,
    shutdown: CancellationToken,
) -> Result<impl std::future::Future<Output = ()> + Send + 'static, WireError> {
    let server = crate::typed::TypedServer::<HealthRequest, Health>::bind(
        bus,
        &subject(subjects, service)?,
        crate::typed::ServeOptions::default(),
    )
    .await?;
    let report = std::sync::Arc::new(report);
    Ok(server.run(
        move |_| {
            let report = std::sync::Arc::clone(&report);
            async move { Ok(report()) }
        },
        shutdown,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::LocalBus;
    use crate::subjects::HubId;

    #[tokio::test]
    async fn gather_hears_every_process_of_a_service_and_ask_the_first() {
        let bus = LocalBus::new();
        let subjects = Subjects::new(HubId::parse("t").unwrap());
        let shutdown = CancellationToken::new();
        for gauge in [1, 2, 3] {
            let report = move || {
                Health::of(
                    Service::Host,
                    7,
                    vec![Check {
                        name: "bus".into(),
                        ok: gauge != 2,
                        detail: String::new(),
                    }],
                    BTreeMap::from([("agents_running".to_owned(), gauge)]),
                )
            };
            let (bus, subjects, shutdown) = (bus.clone(), subjects.clone(), shutdown.clone());
            tokio::spawn(
                async move { serve(&bus, &subjects, Service::Host, report, shutdown).await },
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let all = gather(&bus, &subjects, Service::Host, Duration::from_millis(300))
            .await
            .unwrap();
        let mut seen: Vec<u64> = all.iter().map(|h| h.gauges["agents_running"]).collect();
        seen.sort_unstable();
        assert_eq!(seen, [1, 2, 3]);
        assert_eq!(all.iter().filter(|h| !h.ok()).count(), 1);
        assert!(all.iter().all(|h| h.service == "host" && h.started_ms == 7));
        let one = ask(&bus, &subjects, Service::Host, Duration::from_secs(1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(one.service, "host");
        let none = gather(&bus, &subjects, Service::Runner, Duration::from_millis(50))
            .await
            .unwrap();
        assert!(none.is_empty());
        shutdown.cancel();
    }
}
