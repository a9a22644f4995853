//! Stages, mounts, networks and limits as plain data.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::grant::HostPattern;

/// Which of the three kinds of stage a stage is (DESIGN §8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StageKind {
    /// Reads only lockfiles, may reach listed hosts, sees no source; warms a cache.
    Fetch,
    /// Mounts source and cache read-only, no network; writes one artifact directory.
    Build,
    /// Mounts an artifact read-only by digest, no network; writes one fresh `out/`.
    Run,
}

impl StageKind {
    /// The kind's stable name, as refusals and labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            StageKind::Fetch => "fetch",
            StageKind::Build => "build",
            StageKind::Run => "run",
        }
    }

    /// Which process owns this kind of stage: fetch and build are the builder's, run the runner's.
    pub fn owner(self) -> StageOwner {
        match self {
            StageKind::Fetch | StageKind::Build => StageOwner::Builder,
            StageKind::Run => StageOwner::Runner,
        }
    }
}

impl fmt::Display for StageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The two processes that start containers; each owns one half of W^X.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StageOwner {
    /// Owns fetch and build: writes bytes, never runs them.
    Builder,
    /// Owns run: runs pinned bytes, never writes source or artifacts.
    Runner,
}

impl fmt::Display for StageOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StageOwner::Builder => "builder",
            StageOwner::Runner => "runner",
        })
    }
}

/// What a mount carries; the service binds each role to a host directory it prepared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MountRole {
    /// The lockfile or manifest a fetch reads: public by declaration.
    Lockfile,
    /// The dependency cache a fetch warms and a build reads (recorded by digest).
    Cache,
    /// The project's source: private input.
    Source,
    /// The artifact a build writes and a run reads by digest: derived from source, so private.
    Artifact,
    /// A run's fresh output directory.
    Out,
}

impl MountRole {
    /// Whether mounting this role means the stage has touched private input (source or what was
    /// made from it); after that, no stage may reach the network.
    pub fn is_private(self) -> bool {
        matches!(
            self,
            MountRole::Source | MountRole::Artifact | MountRole::Out
        )
    }

    /// The role's stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            MountRole::Lockfile => "lockfile",
            MountRole::Cache => "cache",
            MountRole::Source => "source",
            MountRole::Artifact => "artifact",
            MountRole::Out => "out",
        }
    }
}

impl fmt::Display for MountRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One mount of a stage: a role at a path inside the container, writable or not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// What the mount carries.
    pub role: MountRole,
    /// Where it appears in the container (absolute).
    pub target: String,
    /// Whether the stage may write it; every other path of the container is read-only.
    pub writable: bool,
}

/// The network a stage sits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "hosts", rename_all = "kebab-case")]
pub enum Network {
    /// No network at all (Docker's `none`).
    None,
    /// Only these hosts, through the builder's allowlisting proxy on an internal network.
    Hosts(Vec<HostPattern>),
}

impl Network {
    /// Whether the stage can reach anything.
    pub fn reaches_anything(&self) -> bool {
        matches!(self, Network::Hosts(_))
    }
}

/// Resource limits of one container; the driver turns each into an engine setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Memory (and memory+swap) ceiling, bytes.
    pub memory_bytes: u64,
    /// Most processes the container may hold at once.
    pub pids: u32,
    /// CPU share in billionths of a CPU.
    pub nano_cpus: u64,
    /// Size of the tmpfs `/tmp`, bytes.
    pub tmp_bytes: u64,
    /// Wall-clock deadline after which the container is killed and removed, milliseconds.
    pub deadline_ms: u64,
    /// Most bytes of stdout+stderr kept; the rest is counted and dropped.
    pub log_bytes: u64,
}

impl Default for Limits {
    /// Small enough for a test project, large enough for a compiler.
    fn default() -> Self {
        Limits {
            memory_bytes: 512 << 20,
            pids: 128,
            nano_cpus: 1_000_000_000,
            tmp_bytes: 64 << 20,
            deadline_ms: 120_000,
            log_bytes: 64 << 10,
        }
    }
}

/// One stage: a container to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// The stage's name within its plan (`fetch`, `build`, `test-run`, …), for refusals and logs.
    pub name: String,
    /// What kind of stage this is.
    pub kind: StageKind,
    /// The image, by the digest the hub's settings pin (`sha256:…`) or a local tag.
    pub image: String,
    /// The command and its arguments; never passed through a shell by the driver.
    pub command: Vec<String>,
    /// Working directory inside the container.
    pub workdir: String,
    /// The mounts; nothing else of the host is visible.
    pub mounts: Vec<Mount>,
    /// The network the stage sits on.
    pub network: Network,
    /// Resource limits and deadline.
    pub limits: Limits,
}

/// A build pipeline: stages in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The stages, run in this order.
    pub stages: Vec<Stage>,
}
