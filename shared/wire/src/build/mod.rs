//! Requests to the builder (fetch and build stages) and the runner (run stages).
//!
//! The builder serves `Subjects::request(Service::Builder, "build")`, the runner
//! `Subjects::request(Service::Runner, "run")`. deploy/nats.conf lets the builder's NATS user
//! serve only the first and the runner's only the second, and neither may publish a request to
//! anyone: the builder cannot ask for a run, the runner cannot ask for a build, and neither can
//! reach hubd to write a ref. Artifacts never travel in a message: only their blake3 digests do.
//!
//!
//! Neither trusts its caller: each request carries hubd's voucher
//! ([`crate::hubd::build_voucher`]) that the agent's grant covers it, and [`gate`] checks it
//! before anything starts.
//!
//! # Format
//! A [`BuildRequest`] (`builder.build`): `{ plan, source, lockfile, vouched }` → a
//! [`BuildReply`] (`builder.build-reply`): `{ stages: [outcome], cache, artifact }`.
//! A [`RunRequest`] (`runner.run`): `{ artifact, stage, vouched }` → a [`RunReply`]
//! (`runner.run-reply`): `{ outcome, out, listing }`. `vouched` is a
//! [`BuildVouched`]; a request without one is refused.

pub mod gate;

use l3m_core::build::{ArtifactDigest, Plan, Stage, StageOutcome, TreeEntry};
use serde::{Deserialize, Serialize};

use crate::envelope::Message;
use crate::hubd::build_voucher::BuildVouched;

/// The builder's op.
pub const OP_BUILD: &str = "build";
/// The runner's op.
pub const OP_RUN: &str = "run";

/// Runs a plan's fetch and build stages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRequest {
    /// The stages (fetch, then build); a run stage in it is refused.
    pub plan: Plan,
    /// The source folder, relative to the vouched agent's ACR (which the builder finds under
    /// its source root, a host's forest).
    pub source: String,
    /// The folder of lockfiles a fetch may read, relative to the same ACR; the fetch never
    /// sees anything else of the source.
    pub lockfile: Option<String>,
    /// hubd's voucher for exactly this build.
    pub vouched: Option<BuildVouched>,
}

impl Message for BuildRequest {
    const KIND: &'static str = "builder.build";
}

/// What a build came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildReply {
    /// Each stage that ran, in order; a failed stage is the last.
    pub stages: Vec<StageOutcome>,
    /// The fetched cache's digest, which the build mounted read-only.
    pub cache: Option<ArtifactDigest>,
    /// The artifact's digest, if every stage succeeded.
    pub artifact: Option<ArtifactDigest>,
}

impl Message for BuildReply {
    const KIND: &'static str = "builder.build-reply";
}

/// Runs an artifact, named by digest only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The artifact, as the build reported it; the runner re-hashes before mounting.
    pub artifact: ArtifactDigest,
    /// The run stage; any other kind is refused.
    pub stage: Stage,
    /// hubd's voucher for a run of exactly this artifact.
    pub vouched: Option<BuildVouched>,
}

impl Message for RunRequest {
    const KIND: &'static str = "runner.run";
}

/// What a run came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReply {
    /// How the stage ended.
    pub outcome: StageOutcome,
    /// The digest of the run's `out/`, stored in the cache like an artifact.
    pub out: ArtifactDigest,
    /// What `out/` holds.
    pub listing: Vec<TreeEntry>,
}

impl Message for RunReply {
    const KIND: &'static str = "runner.run-reply";
}
