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
//! An [`UploadSource`] (`builder.upload`): `{ vouched, total, offset, bytes }` → an
//! [`Uploaded`] (`builder.uploaded`): `{ received, done }`: the [`bundle`] of the build's source
//! and lockfile folders, chunk by chunk in order, under the voucher of the build it is for (the
//! builder checks it, without taking it, on every chunk, and keeps the bundle for exactly that
//! voucher). Then a [`BuildRequest`] (`builder.build`): `{ plan, source, lockfile, vouched }` →
//! a [`BuildReply`] (`builder.build-reply`): `{ stages: [outcome], cache, artifact }`, built
//! from the bundle its voucher brought; `source` and `lockfile` name what was vouched.
//! A [`RunRequest`] (`runner.run`): `{ artifact, stage, vouched }` → a [`RunReply`]
//! (`runner.run-reply`): `{ outcome, out, listing }`. `vouched` is a
//! [`BuildVouched`]; a request without one is refused.

pub mod bundle;
pub mod gate;

use std::time::Duration;

use l3m_core::build::{ArtifactDigest, Plan, Stage, StageOutcome, TreeEntry};
use serde::{Deserialize, Serialize};

use crate::WireError;
use crate::bus::Bus;
use crate::envelope::{Limits, Message};
use crate::hubd::build_voucher::BuildVouched;
use crate::hubd::pack::CHUNK_BYTES;
use crate::reply::RemoteError;
use crate::subjects::{Operation, Service, Subjects};

/// The builder's op.
pub const OP_BUILD: &str = "build";
/// The builder's op that brings a build's source.
pub const OP_UPLOAD: &str = "upload";
/// The runner's op.
pub const OP_RUN: &str = "run";

/// Runs a plan's fetch and build stages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildRequest {
    /// The stages (fetch, then build); a run stage in it is refused.
    pub plan: Plan,
    /// The source folder, relative to the vouched agent's ACR: what the voucher must cover.
    /// Its bytes came before, uploaded under the same voucher.
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

/// Part of a build's source: the [`bundle`] of its folders, `bytes` from `offset` of `total`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadSource {
    /// hubd's voucher for the build this source is for, the same in every chunk.
    pub vouched: BuildVouched,
    /// The whole bundle's length in bytes, at most [`bundle::MAX_BUNDLE_BYTES`].
    pub total: u64,
    /// Where `bytes` start in the bundle.
    pub offset: u64,
    /// At most [`crate::hubd::pack::CHUNK_BYTES`] of it.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

impl Message for UploadSource {
    const KIND: &'static str = "builder.upload";
}

/// How far an upload got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uploaded {
    /// Bytes the builder holds for it.
    pub received: u64,
    /// Whether the whole bundle arrived.
    pub done: bool,
}

impl Message for Uploaded {
    const KIND: &'static str = "builder.uploaded";
}

/// How long one chunk of an upload is waited for.
const CHUNK_TIMEOUT: Duration = Duration::from_secs(30);

/// Uploads `bundle` to the builder of `subjects`' hub under `vouched`, chunk by chunk: what
/// comes before the build request with the same voucher. `Ok(Err(_))` is the builder's refusal.
pub async fn upload(
    bus: &dyn Bus,
    subjects: &Subjects,
    vouched: &BuildVouched,
    bundle: &[u8],
) -> Result<Result<(), RemoteError>, WireError> {
    let subject = subjects.request(Service::Builder, &Operation::parse(OP_UPLOAD)?);
    let total = bundle.len() as u64;
    let mut offset = 0usize;
    loop {
        let end = (offset + CHUNK_BYTES).min(bundle.len());
        let chunk = UploadSource {
            vouched: vouched.clone(),
            total,
            offset: offset as u64,
            bytes: bundle[offset..end].to_vec(),
        };
        let reply: Result<Uploaded, RemoteError> =
            crate::typed::call(bus, &subject, &chunk, CHUNK_TIMEOUT, &Limits::default()).await?;
        match reply {
            Ok(Uploaded { done: true, .. }) => return Ok(Ok(())),
            Ok(Uploaded { received, .. }) if received as usize == end && end < bundle.len() => {
                offset = end;
            }
            Ok(Uploaded { received, .. }) => {
                return Err(WireError::Malformed {
                    reason: format!(
                        "the builder holds {received} bytes of an upload of {total} after {end}"
                    ),
                });
            }
            Err(refused) => return Ok(Err(refused)),
        }
    }
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
