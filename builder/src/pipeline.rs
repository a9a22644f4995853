//! One build request, start to digest: the gates, each stage in its container, the hand-off.
//!
//! The plan passes the core's gate first, and every stage must be the builder's (fetch or
//! build): a run stage is refused before anything starts. Then the request's voucher: hubd
//! signed it for this source, lockfile and these fetch hosts, for an agent whose grant covers
//! them; the source and lockfile are the bundle uploaded under that same voucher, unpacked into
//! a scratch folder by rules that keep every entry inside it (`l3m_wire::build::bundle`), so
//! the builder reads no forest and may run on any host. A fetch writes a fresh cache folder,
//! which is stored by digest (like Nix's fixed-output fetches); the build mounts exactly that
//! stored, re-verified cache read-only, the source read-only, and writes one artifact folder,
//! stored by its blake3 digest. The first stage that fails ends the build.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use l3m_containers::{ArtifactError, ArtifactStore, Attachment, Binds, Driver, DriverError};
use l3m_core::build::{
    MountRole, Network, PlanRefusal, Stage, StageKind, StageOwner, build_within, check_plan,
    stage_allowed_for,
};
use l3m_wire::build::bundle::{BundleError, Unpacked, unpack};
use l3m_wire::build::gate::{Unvouched, VoucherGate};
use l3m_wire::build::{BuildReply, BuildRequest};
use l3m_wire::reply::{ErrorCode, RemoteError};

use crate::egress::{Egress, EgressError};
use crate::uploads::Uploads;

/// What the builder needs besides the engine: where artifacts go, and how listed fetch hosts
/// resolve.
#[derive(Debug, Clone)]
pub struct Config {
    /// The hub's artifact cache (sources are unpacked in its scratch folder too).
    pub store: ArtifactStore,
    /// Host names resolved before DNS (an air-gapped mirror, a test's package server).
    pub resolve: Arc<HashMap<String, SocketAddr>>,
}

/// Why a build request was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The plan broke a rule of the core's gate.
    #[error(transparent)]
    Plan(#[from] PlanRefusal),
    /// The request carries no good voucher for exactly this build.
    #[error(transparent)]
    Unvouched(#[from] Unvouched),
    /// The plan holds a stage the builder does not run.
    #[error("stage {stage}: the builder does not run {kind} stages (ask the runner, by digest)")]
    NotMyStage {
        /// The stage.
        stage: String,
        /// Its kind.
        kind: StageKind,
    },
    /// No whole source was uploaded under the request's voucher.
    #[error(
        "no source was uploaded under this request's voucher; send its bundle first \
         (builder.upload, chunk by chunk, with the same voucher)"
    )]
    NoSource,
    /// The uploaded source is not a bundle the builder unpacks.
    #[error(transparent)]
    Bundle(#[from] BundleError),
    /// A stage mounts something this request does not provide.
    #[error("stage {stage}: {reason}")]
    Missing {
        /// The stage.
        stage: String,
        /// What is missing.
        reason: String,
    },
    /// Storing or verifying an artifact failed.
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    /// The engine failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The fetch network could not be opened.
    #[error(transparent)]
    Egress(#[from] EgressError),
}

impl BuildError {
    /// The typed refusal a caller gets on the wire.
    pub fn to_remote(&self) -> RemoteError {
        let code = match self {
            BuildError::Unvouched(e) => return e.to_remote(),
            BuildError::Plan(_) | BuildError::NotMyStage { .. } => ErrorCode::Refused,
            BuildError::NoSource => ErrorCode::NotFound,
            BuildError::Bundle(BundleError::Io { .. }) => ErrorCode::Internal,
            BuildError::Bundle(_) | BuildError::Missing { .. } => ErrorCode::Invalid,
            BuildError::Artifact(ArtifactError::Missing { .. }) => ErrorCode::NotFound,
            BuildError::Artifact(ArtifactError::Changed { .. }) => ErrorCode::Refused,
            BuildError::Artifact(_) | BuildError::Driver(_) | BuildError::Egress(_) => {
                ErrorCode::Internal
            }
        };
        RemoteError::new(code, self.to_string())
    }
}

/// Carries out one build request, if `gate` takes its voucher, from the source `uploads` hold
/// for that voucher.
pub async fn build(
    driver: &Driver,
    config: &Config,
    gate: &VoucherGate,
    uploads: &Uploads,
    req: &BuildRequest,
) -> Result<BuildReply, BuildError> {
    check_plan(&req.plan)?;
    if let Some(s) = req
        .plan
        .stages
        .iter()
        .find(|s| !stage_allowed_for(StageOwner::Builder, s.kind))
    {
        return Err(BuildError::NotMyStage {
            stage: s.name.clone(),
            kind: s.kind,
        });
    }
    let voucher = gate
        .admit(req.vouched.as_ref(), |v| {
            build_within(&v.cover, &req.source, req.lockfile.as_deref(), &req.plan)
        })
        .await?;
    tracing::info!(agent = %voucher.agent, by = %voucher.by, source = %req.source, "build vouched");
    let bundle = uploads.take(&voucher.nonce).ok_or(BuildError::NoSource)?;
    let scratch = config.store.scratch("source")?;
    let built = from_bundle(driver, config, req, bundle, &scratch).await;
    if let Err(e) = std::fs::remove_dir_all(&scratch) {
        tracing::warn!(path = %scratch.display(), error = %e, "could not remove a build's source");
    }
    built
}

/// The stages of `req` over the source `bundle`, unpacked into `scratch`.
async fn from_bundle(
    driver: &Driver,
    config: &Config,
    req: &BuildRequest,
    bundle: Vec<u8>,
    scratch: &Path,
) -> Result<BuildReply, BuildError> {
    let into = scratch.to_owned();
    let unpacked = tokio::task::spawn_blocking(move || unpack(&bundle, &into))
        .await
        .map_err(|e| {
            BuildError::Bundle(BundleError::Malformed(format!("unpacking stopped: {e}")))
        })??;
    let Unpacked { source, lockfile } = unpacked;
    let lockfile = match (&req.lockfile, lockfile) {
        (Some(_), Some(folder)) => Some(folder),
        (None, _) => None,
        (Some(named), None) => {
            return Err(BuildError::Bundle(BundleError::Malformed(format!(
                "the request names the lockfile folder {named} and the bundle holds none"
            ))));
        }
    };
    let mut reply = BuildReply {
        stages: Vec::new(),
        cache: None,
        artifact: None,
    };
    for stage in &req.plan.stages {
        let output = config.store.scratch(stage.kind.as_str())?;
        let mut binds = Binds::new();
        for m in &stage.mounts {
            let host = match m.role {
                MountRole::Source => source.clone(),
                MountRole::Lockfile => lockfile.clone().ok_or_else(|| {
                    missing(stage, "it mounts a lockfile and the request names none")
                })?,
                MountRole::Cache if m.writable => output.clone(),
                MountRole::Cache => {
                    let digest = reply.cache.as_ref().ok_or_else(|| {
                        missing(stage, "it mounts a cache and no fetch before it made one")
                    })?;
                    config.store.verified(digest)?
                }
                MountRole::Artifact => output.clone(),
                MountRole::Out => return Err(missing(stage, "a builder stage has no out")),
            };
            binds.insert(m.role, host);
        }
        let outcome = run_one(driver, config, stage, &binds).await;
        let outcome = match outcome {
            Ok(o) => o,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&output);
                return Err(e);
            }
        };
        let ok = outcome.succeeded();
        reply.stages.push(outcome);
        if !ok {
            let _ = std::fs::remove_dir_all(&output);
            return Ok(reply);
        }
        let digest = config.store.put(&output)?;
        match stage.kind {
            StageKind::Fetch => reply.cache = Some(digest),
            StageKind::Build | StageKind::Run => reply.artifact = Some(digest),
        }
    }
    Ok(reply)
}

fn missing(stage: &Stage, reason: &str) -> BuildError {
    BuildError::Missing {
        stage: stage.name.clone(),
        reason: reason.to_owned(),
    }
}

/// Runs one stage, inside its fetch network if it has hosts.
async fn run_one(
    driver: &Driver,
    config: &Config,
    stage: &Stage,
    binds: &Binds,
) -> Result<l3m_core::build::StageOutcome, BuildError> {
    let Network::Hosts(hosts) = &stage.network else {
        return Ok(driver.run_stage(stage, binds, None).await?);
    };
    let egress = Egress::open(
        driver,
        &stage.name,
        hosts.clone(),
        Arc::clone(&config.resolve),
    )
    .await?;
    let attach = Attachment {
        network: egress.network.clone(),
        env: egress.env(),
    };
    let outcome = driver.run_stage(stage, binds, Some(&attach)).await;
    egress.close(driver).await?;
    Ok(outcome?)
}
