//! `l3m-containers`: the one container driver of the builder and the runner, over bollard.
//!
//! Both W^X processes start containers; neither may start one that is looser than its stage's
//! plan says. This crate is the single place that turns a checked [`Stage`] into an engine
//! request, so the two cannot drift apart: every container has all capabilities dropped,
//! `no-new-privileges`, a read-only root, a sized tmpfs `/tmp`, pids, memory and CPU limits,
//! the network its plan names (`none` unless a fetch), only the mounts its plan names (never
//! the Docker socket), runs as the driver's own uid, is labelled with its owner, and is killed
//! and removed at its deadline. Logs come back bounded. It also holds the content-addressed
//! artifact store both processes read, because hashing must be the same on both sides.
//!
//! **Must never** call the `docker` CLI, start a container from a plan the core's gate has not
//! admitted, or follow a symlink while hashing.
//!
//! # Layout
//! - [`spec`]: a stage and its bound host folders → the engine's create request (pure).
//! - [`driver`]: connecting (version negotiated), reaping, running a stage to its outcome.
//! - [`artifact`]: hashing a folder (blake3 over the core's manifest), storing and verifying.
//! - `service` (feature `service`): how the builder and the runner start and show their health.
//!
//! [`Stage`]: l3m_core::build::Stage
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod artifact;
pub mod driver;
#[cfg(feature = "service")]
pub mod service;
pub mod spec;
#[cfg(feature = "test-support")]
pub mod test_support;

pub use artifact::{ArtifactError, ArtifactStore, hash_tree, list_tree};
pub use driver::{Driver, DriverError};
pub use l3m_core::build::{StageExit, StageOutcome};
pub use spec::{
    Attachment, Binds, Identity, LABEL_OWNER, LABEL_SITE, LABEL_STAGE, SpecError, container_body,
};
