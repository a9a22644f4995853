//! The build and run classes: the ring checks the token, then hands the request to the outlet
//! the sequencer plugs in, which asks hubd for a voucher and the builder or the runner for the
//! stages (each of which checks the voucher again before anything starts).

use std::sync::Arc;

use l3m_core::axis::Axis;
use l3m_core::build::{
    ArtifactDigest, BlessError, Blessing, Cover, Plan, Stage, StageOutcome, TameError, TreeEntry,
    Uncovered,
};
use l3m_core::grant::AcrPath;
use l3m_core::log::Refusal;

use super::{HubOutlet, OutletError};
use crate::tokens::{BuildToken, RunToken};

/// A build as a tool asks for it: the plan (fetch and build stages), the source folder and the
/// lockfile folder, both relative to the agent's ACR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildAsk {
    /// The stages, fetch first.
    pub plan: Plan,
    /// The source folder the build stage mounts read-only.
    pub source: AcrPath,
    /// The folder of lockfiles the fetch stage mounts, if the plan fetches.
    pub lockfile: Option<AcrPath>,
}

/// What a build came to, as the builder reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    /// Each stage that ran, in order; a failed stage is the last.
    pub stages: Vec<StageOutcome>,
    /// The artifact's digest, if every stage succeeded.
    pub artifact: Option<ArtifactDigest>,
}

/// What a run came to, as the runner reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// How the stage ended.
    pub outcome: StageOutcome,
    /// The digest of the run's `out/`.
    pub out: ArtifactDigest,
    /// What `out/` holds.
    pub listing: Vec<TreeEntry>,
}

/// Why a build or a run was not carried out (a stage that ran and failed is an outcome, not this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StageError {
    /// The build boundary: the token does not cover the source, lockfile or a fetch host.
    #[error("refused by the build boundary: {0}")]
    Uncovered(#[from] Uncovered),
    /// hubd would not vouch for it or tell its blessing, or could not be reached.
    #[error("hubd: {0}")]
    Hub(OutletError),
    /// The builder or the runner refused the request (its voucher, plan or artifact check).
    #[error("the {service} refused ({code}): {reason}")]
    Refused {
        /// `builder` or `runner`.
        service: &'static str,
        /// Its error code.
        code: String,
        /// Its message, naming what was wrong.
        reason: String,
    },
    /// The builder or the runner is not running, or did not answer before the deadline.
    #[error("the {service} could not be reached: {reason}")]
    Unreachable {
        /// `builder` or `runner`.
        service: &'static str,
        /// What failed (no responders, a timeout after so many seconds, …).
        reason: String,
    },
    /// The blessing boundary: no human blessed the target for this agent, and its Makefile is
    /// not tame make, which the harness could lower without one.
    #[error(
        "refused by the blessing boundary: target {target:?} is not blessed for this agent, and \
         {makefile} is not tame make ({why}); a human may bless the target (`l3m bless AGENT \
         {target}`), or keep the Makefile tame: rules whose targets lie under build/, recipes \
         that run {tools} with plain relative arguments and no shell or make syntax",
        tools = l3m_core::build::TAME_TOOLS.join(", ")
    )]
    NotTame {
        /// The target asked for.
        target: String,
        /// The Makefile read, relative to the ACR.
        makefile: String,
        /// Why lowering refused it, naming the line.
        why: TameError,
    },
    /// The blessing boundary: the target is not plain, or the pinned bytes changed.
    #[error("refused by the blessing boundary: {0}")]
    Blessing(#[from] BlessError),
    /// No outlet was plugged into this session's effects.
    #[error(transparent)]
    Outlet(#[from] OutletError),
}

impl StageError {
    /// The boundary that refused, when the request was refused rather than failed.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            StageError::Uncovered(_) => Some(Refusal::new("build", Some(Axis::Build))),
            StageError::NotTame { .. } | StageError::Blessing(_) => {
                Some(Refusal::new("blessing", Some(Axis::Build)))
            }
            StageError::Hub(e) | StageError::Outlet(e) => e.refusal(),
            StageError::Refused { service, .. } => Some(Refusal::new(service, None)),
            StageError::Unreachable { .. } => None,
        }
    }
}

/// Builds through the outlet, after the build token's check (the `build` class).
pub trait Build: Send + Sync {
    /// Asks the builder for `ask`'s stages; returns their outcomes and the artifact's digest.
    fn build(&self, ask: &BuildAsk) -> Result<Built, StageError>;
    /// What a human pinned for this agent's runs of `target` (`refs/l3m/blessings/...`), if
    /// anything: the pin a blessed `make` checks the bytes against before it builds.
    fn blessing(&self, target: &str) -> Result<Option<Blessing>, StageError>;
}

/// Runs by digest through the outlet (the `run` class).
pub trait Run: Send + Sync {
    /// Asks the runner to run `stage` over the artifact `artifact` names.
    fn run(&self, artifact: &ArtifactDigest, stage: &Stage) -> Result<Ran, StageError>;
}

/// Builds, after the build token's check.
pub(super) struct BuildProvider {
    /// The session's build token.
    pub(super) token: BuildToken,
    /// Where covered builds go.
    pub(super) outlet: Option<Arc<dyn HubOutlet>>,
}

impl Build for BuildProvider {
    fn build(&self, ask: &BuildAsk) -> Result<Built, StageError> {
        let cover = Cover::of_build(ask.source.clone(), ask.lockfile.clone(), &ask.plan);
        self.token.check(&cover)?;
        let outlet = self.outlet.as_deref().ok_or(OutletError::Absent)?;
        outlet.build(ask)
    }

    fn blessing(&self, target: &str) -> Result<Option<Blessing>, StageError> {
        l3m_core::build::check_target(target)?;
        let outlet = self.outlet.as_deref().ok_or(OutletError::Absent)?;
        outlet.blessing(target)
    }
}

/// Runs, with the run token held.
pub(super) struct RunProvider {
    /// The session's run token.
    pub(super) token: RunToken,
    /// Where runs go.
    pub(super) outlet: Option<Arc<dyn HubOutlet>>,
}

impl Run for RunProvider {
    fn run(&self, artifact: &ArtifactDigest, stage: &Stage) -> Result<Ran, StageError> {
        tracing::debug!(agent = %self.token.agent(), artifact = artifact.as_str(), "run asked");
        let outlet = self.outlet.as_deref().ok_or(OutletError::Absent)?;
        outlet.run(artifact, stage)
    }
}
