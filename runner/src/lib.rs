//! `runner`: runs a built artifact by digest in a sealed container.
//!
//! The runner owns the execute half of W^X builds (DESIGN §8). It serves one request,
//! `runner.run` ([`l3m_wire::build`]): an artifact named by its blake3 digest and one run
//! stage, with hubd's voucher that the agent's grant covers a run of exactly that artifact
//! ([`l3m_wire::build::gate`]). It copies the stored artifact to a private folder and hashes the copy — a changed
//! byte is a refusal, not a run, and the bytes mounted are the bytes checked — mounts it
//! read-only with no network, and gives the stage one fresh `out/` as
//! its only writable place. The `out/` is stored by digest like an artifact and comes back as
//! that digest and a listing.
//!
//! **Must never** fetch or build (such stages are refused before anything starts), run
//! without a voucher, write an artifact or source, or ask any service but hubd's build policy
//! (its NATS user cannot).

use std::sync::Arc;

use l3m_containers::service::{Meter, Pins, Serving};
use l3m_containers::{ArtifactError, ArtifactStore, Binds, Driver, DriverError, artifact};
use l3m_core::build::{
    MountRole, Plan, PlanRefusal, StageKind, StageOwner, check_plan, run_within,
};
use l3m_wire::WireError;
use l3m_wire::build::gate::{Unvouched, VoucherGate};
use l3m_wire::build::{OP_RUN, RunReply, RunRequest};
use l3m_wire::bus::Bus;
use l3m_wire::reply::{ErrorCode, RemoteError};
use l3m_wire::subjects::{Operation, Service, Subjects};
use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
use tokio_util::sync::CancellationToken;

/// Why a run request was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The stage broke a rule of the core's gate.
    #[error(transparent)]
    Plan(#[from] PlanRefusal),
    /// The request carries no good voucher for a run of exactly this artifact.
    #[error(transparent)]
    Unvouched(#[from] Unvouched),
    /// The stage is not a run stage.
    #[error("stage {stage}: the runner does not run {kind} stages (ask the builder)")]
    NotMyStage {
        /// The stage.
        stage: String,
        /// Its kind.
        kind: StageKind,
    },
    /// The artifact is missing, or its bytes no longer hash to its digest.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// The engine failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
}

impl RunError {
    /// The typed refusal a caller gets on the wire.
    pub fn to_remote(&self) -> RemoteError {
        let code = match self {
            RunError::Unvouched(e) => return e.to_remote(),
            RunError::Plan(_) | RunError::NotMyStage { .. } => ErrorCode::Refused,
            RunError::Artifact(ArtifactError::Changed { .. }) => ErrorCode::Refused,
            RunError::Artifact(ArtifactError::Missing { .. }) => ErrorCode::NotFound,
            RunError::Artifact(_) | RunError::Driver(_) => ErrorCode::Internal,
        };
        RemoteError::new(code, self.to_string())
    }
}

/// Carries out one run request against the artifact cache `store`, if `gate` takes its voucher.
pub async fn run(
    driver: &Driver,
    store: &ArtifactStore,
    gate: &VoucherGate,
    req: &RunRequest,
) -> Result<RunReply, RunError> {
    let stage = &req.stage;
    if stage.kind != StageKind::Run {
        return Err(RunError::NotMyStage {
            stage: stage.name.clone(),
            kind: stage.kind,
        });
    }
    check_plan(&Plan {
        stages: vec![stage.clone()],
    })?;
    let voucher = gate
        .admit(req.vouched.as_ref(), |v| {
            run_within(&v.cover, &req.artifact)
        })
        .await?;
    tracing::info!(agent = %voucher.agent, by = %voucher.by, artifact = %req.artifact.as_str(), "run vouched");
    let artifact = store.checked_copy(&req.artifact)?;
    let out = match store.scratch("out") {
        Ok(out) => out,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&artifact);
            return Err(e.into());
        }
    };
    let binds = Binds::from([
        (MountRole::Artifact, artifact.clone()),
        (MountRole::Out, out.clone()),
    ]);
    let outcome = driver.run_stage(stage, &binds, None).await;
    let _ = std::fs::remove_dir_all(&artifact);
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&out);
            return Err(e.into());
        }
    };
    let digest = store.put(&out)?;
    let listing = artifact::list_tree(&store.path_of(&digest))?;
    Ok(RunReply {
        outcome,
        out: digest,
        listing,
    })
}

/// Subscribes to the run op of `subjects`' hub and serves it until `shutdown`, taking only
/// requests whose voucher `gate` admits (with `pins`, the driver's pins re-read from hubd first),
/// and answers the runner's health requests; returns
/// once both subscriptions are live.
pub async fn serve(
    bus: &dyn Bus,
    subjects: &Subjects,
    driver: Driver,
    store: ArtifactStore,
    gate: Arc<VoucherGate>,
    pins: Option<Pins>,
    shutdown: CancellationToken,
) -> Result<Serving, WireError> {
    let subject = subjects.request(Service::Runner, &Operation::parse(OP_RUN)?);
    let options = ServeOptions {
        max_in_flight: 2,
        ..ServeOptions::default()
    };
    let server = TypedServer::<RunRequest, RunReply>::bind(bus, &subject, options).await?;
    let meter = Arc::new(Meter::new(StageOwner::Runner));
    let health = meter
        .serve(bus, subjects, driver.clone(), shutdown.clone())
        .await?;
    let state = Arc::new((driver, store, gate, pins, Arc::clone(&meter)));
    let running = server.run(
        move |req: TypedRequest<RunRequest>| {
            let state = Arc::clone(&state);
            async move {
                let (driver, store, gate, pins, meter) = &*state;
                let taken = meter.take();
                if let Some(pins) = pins {
                    pins.follow(driver).await;
                }
                run(driver, store, gate, &req.body).await.map_err(|e| {
                    taken.refused();
                    tracing::info!(error = %e, "run refused");
                    e.to_remote()
                })
            }
        },
        shutdown,
    );
    let task = tokio::spawn(async move {
        running.await;
        let _ = health.await;
    });
    Ok(Serving { task, meter })
}
