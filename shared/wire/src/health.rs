//! Health: every service answers "are you well, and how busy" on the bus, so an operator (and
//! `l3m status`) sees the whole site from one place.
//!
//! A service serves `Subjects::request(SERVICE, "health")`. Only NATS users allowed to publish
//! there can ask (the `cli` user of `deploy/nats.conf` may ask hubd and the postman); the
//! answer holds counts and this process's identity, never a capability, a letter or a record.
//!
//! # Format
//! A [`HealthRequest`] (`health`): `{}` → a [`Health`] (`health-reply`): `{ service, host,
//! pid, version, started_ms, now_ms, checks: [{ name, ok, detail }], gauges: { name: n } }`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bus::Bus;
use crate::envelope::{Limits, Message};
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
}

impl Health {
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
