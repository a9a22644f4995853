//! What the builder and the runner share as processes: how each starts (the bus, hubd's build
//! policy, the engine, the images it may use, the reap of what a killed predecessor left) and
//! how each shows it is well (its health answer on the bus and its metrics).
//!
//! The two differ only in their duty ([`StageOwner`]); everything else about being a W^X
//! service is here once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use l3m_core::build::StageOwner;
use l3m_core::clock::SystemClock;
use l3m_wire::WireError;
use l3m_wire::build::gate::VoucherGate;
use l3m_wire::bus::{Bus, NatsArgs};
use l3m_wire::health::{Check, Health};
use l3m_wire::subjects::{HubId, Service, Subjects};
use tokio_util::sync::CancellationToken;

use crate::{Driver, Identity};

/// How often a running service asks the engine whether it answers, for its health answer.
const ENGINE_EVERY: Duration = Duration::from_secs(10);

/// A started builder or runner, ready to serve its duty.
#[derive(Debug)]
pub struct Started {
    /// Its bus, as its own NATS user.
    pub bus: Arc<dyn Bus>,
    /// Its hub's subjects.
    pub subjects: Subjects,
    /// The gate that takes only hubd's vouchers, with hubd's key already learnt.
    pub gate: Arc<VoucherGate>,
    /// The engine, pinned to the images it may use, with what a predecessor left removed.
    pub driver: Driver,
    /// Where the driver's pins come from, to follow the hub's settings per request.
    pub pins: Pins,
}

/// The images a builder or runner may use: those its operator named at start and those the
/// hub's settings pin (`[builds] images`) as hubd reads them now, so a change to the settings
/// reaches the next request with no restart, and an image unpinned there stops running.
#[derive(Debug, Clone)]
pub struct Pins {
    /// Named by the operator (`--image`); kept whatever the settings say.
    fixed: Vec<String>,
    /// Asks hubd for its build policy.
    gate: Arc<VoucherGate>,
}

impl Pins {
    /// Pins the operator's `fixed` images and whatever `gate`'s hubd pins at each
    /// [`Pins::follow`].
    pub fn new(fixed: Vec<String>, gate: Arc<VoucherGate>) -> Pins {
        Pins { fixed, gate }
    }

    /// Re-reads the settings' pins from hubd and gives `driver` (and its clones) the fixed ones
    /// and those. If hubd does not answer, the pins stay as they were, with a warning: the
    /// request goes on under the last pins read, never under none.
    pub async fn follow(&self, driver: &Driver) {
        match self.gate.policy().await {
            Ok(policy) => driver.repin(self.fixed.iter().cloned().chain(policy.images).collect()),
            Err(error) => {
                tracing::warn!(%error, "could not re-read the pinned images; keeping the last ones");
            }
        }
    }
}

/// Starts the service of `owner` for the hub `hub_id`: connects to NATS as `nats` says, learns
/// hubd's build policy (its voucher key and pinned images, so hubd must be up), connects to the
/// engine, allows only `images` and the policy's pins (any local image when both are empty;
/// [`Pins::follow`] keeps the policy's part current),
/// and removes every container and network a killed predecessor left.
pub async fn start(
    owner: StageOwner,
    hub_id: &str,
    nats: &NatsArgs,
    images: Vec<String>,
) -> Result<Started, String> {
    let hub = HubId::parse(hub_id).map_err(|e| e.to_string())?;
    let bus: Arc<dyn Bus> = Arc::new(nats.connect().await.map_err(|e| e.to_string())?);
    let subjects = Subjects::new(hub.clone());
    let gate = Arc::new(VoucherGate::new(
        Arc::clone(&bus),
        subjects.clone(),
        Arc::new(SystemClock),
    ));
    let policy = gate
        .policy()
        .await
        .map_err(|e| format!("asking hubd for the build policy (is hubd running?): {e}"))?;
    let driver = Driver::connect(Identity::of_this_process(owner, hub.as_str()))
        .await
        .map_err(|e| e.to_string())?;
    let pins = Pins::new(images, Arc::clone(&gate));
    let images: BTreeSet<String> = pins.fixed.iter().cloned().chain(policy.images).collect();
    if !images.is_empty() {
        tracing::info!(
            ?images,
            "only these images may run (the settings' pins are re-read per request)"
        );
    }
    driver.repin(images);
    let reaped = driver.reap().await.map_err(|e| e.to_string())?;
    tracing::info!(reaped, "removed what a previous {owner} left");
    Ok(Started {
        bus,
        subjects,
        gate,
        driver,
        pins,
    })
}

/// The health service of each duty.
fn service_of(owner: StageOwner) -> Service {
    match owner {
        StageOwner::Builder => Service::Builder,
        StageOwner::Runner => Service::Runner,
    }
}

/// What one builder or runner has done and how its engine answers: the counts behind its
/// health answer and its metrics.
#[derive(Debug)]
pub struct Meter {
    owner: StageOwner,
    started_ms: u64,
    running: AtomicU64,
    answered: AtomicU64,
    refused: AtomicU64,
    engine: Mutex<Check>,
}

impl Meter {
    /// A meter for a service of `owner` starting now; the engine is unknown until first asked.
    pub fn new(owner: StageOwner) -> Meter {
        Meter {
            owner,
            started_ms: l3m_core::clock::now_ms(),
            running: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            engine: Mutex::new(Check {
                name: "engine".into(),
                ok: true,
                detail: "not asked yet".into(),
            }),
        }
    }

    /// Counts one request from now until the returned guard is dropped; [`Taken::refused`]
    /// counts it as refused.
    pub fn take(self: &Arc<Self>) -> Taken {
        self.running.fetch_add(1, Ordering::Relaxed);
        Taken {
            meter: Arc::clone(self),
        }
    }

    /// Asks the engine whether it answers and keeps the answer for the health check.
    pub async fn ask_engine(&self, driver: &Driver) {
        let check = match driver.docker().ping().await {
            Ok(_) => Check {
                name: "engine".into(),
                ok: true,
                detail: "the Docker engine answers".into(),
            },
            Err(e) => Check {
                name: "engine".into(),
                ok: false,
                detail: format!("the Docker engine does not answer: {e}"),
            },
        };
        *self.engine.lock().unwrap_or_else(PoisonError::into_inner) = check;
    }

    /// The health answer now: the engine's check, and the requests taken, refused and running.
    pub fn health(&self) -> Health {
        let engine = self
            .engine
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Health::of(
            service_of(self.owner),
            self.started_ms,
            vec![engine],
            BTreeMap::from([
                (
                    "requests_running".into(),
                    self.running.load(Ordering::Relaxed),
                ),
                (
                    "requests_total".into(),
                    self.answered.load(Ordering::Relaxed),
                ),
                ("refused_total".into(), self.refused.load(Ordering::Relaxed)),
            ]),
        )
    }

    /// Answers health requests on the bus and asks the engine every few seconds, until
    /// `shutdown`. Returns once the health subject is live, with the task doing both.
    pub async fn serve(
        self: &Arc<Self>,
        bus: &dyn Bus,
        subjects: &Subjects,
        driver: Driver,
        shutdown: CancellationToken,
    ) -> Result<tokio::task::JoinHandle<()>, WireError> {
        self.ask_engine(&driver).await;
        let report = Arc::clone(self);
        let answering = l3m_wire::health::bind(
            bus,
            subjects,
            service_of(self.owner),
            move || report.health(),
            shutdown.clone(),
        )
        .await?;
        let meter = Arc::clone(self);
        Ok(tokio::spawn(async move {
            let watching = async {
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(ENGINE_EVERY) => meter.ask_engine(&driver).await,
                    }
                }
            };
            tokio::join!(answering, watching);
        }))
    }
}

/// A builder or runner serving: the task answering its duty and its health, and its meter
/// (for its metrics endpoint).
#[derive(Debug)]
pub struct Serving {
    /// Ends after `shutdown`, once the requests under way are answered.
    pub task: tokio::task::JoinHandle<()>,
    /// What it has done, as its health answer shows.
    pub meter: Arc<Meter>,
}

/// One request being served; counted as answered when dropped.
#[derive(Debug)]
pub struct Taken {
    meter: Arc<Meter>,
}

impl Taken {
    /// Counts the request as refused too (any error reply, an unvouched request or a failed
    /// stage's engine error alike).
    pub fn refused(&self) {
        self.meter.refused.fetch_add(1, Ordering::Relaxed);
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        self.meter.running.fetch_sub(1, Ordering::Relaxed);
        self.meter.answered.fetch_add(1, Ordering::Relaxed);
    }
}
