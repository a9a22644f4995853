//! What a build or run voucher covers, whether a grant covers it, and whether a request stays
//! within it.
//!
//! The builder and the runner hold no grant and open no session: they must not trust whoever
//! may publish on their subjects. So a request carries hubd's signed word ([`Cover`] inside a
//! voucher) that the requesting agent's grant covers this build or run. hubd decides with
//! [`grant_covers`] before it signs; the builder and the runner decide with [`build_within`] and
//! [`run_within`] that the request asks for nothing the voucher does not name.
//!
//! ```
//! use std::collections::BTreeSet;
//! use l3m_core::build::authority::{Cover, grant_covers};
//! use l3m_core::grant::{AcrPath, Grant};
//! use l3m_core::names::AgentName;
//!
//! let agent = AgentName::parse("alice")?;
//! let mut grant = Grant::default();
//! grant.files.insert(AcrPath::parse("workspace")?);
//! let cover = Cover::Build {
//!     source: AcrPath::parse("workspace/app")?,
//!     lockfile: None,
//!     hosts: BTreeSet::new(),
//! };
//! assert!(grant_covers(&grant, &agent, &cover).is_err(), "no `build` axis");
//! grant.build = true;
//! assert!(grant_covers(&grant, &agent, &cover).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::digest::ArtifactDigest;
use super::plan::{Network, Plan};
use crate::axis::Axis;
use crate::grant::{AcrPath, Grant, HostPattern, Probe, Within};
use crate::names::AgentName;

/// What one voucher lets its agent ask of the builder or the runner, exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "axis", rename_all = "kebab-case")]
pub enum Cover {
    /// A build (its fetch and build stages) of one source folder.
    Build {
        /// The source folder, relative to the agent's ACR.
        source: AcrPath,
        /// The lockfile folder a fetch may read, relative to the agent's ACR.
        lockfile: Option<AcrPath>,
        /// Every host a fetch stage may reach; none for a build without a fetch.
        hosts: BTreeSet<HostPattern>,
    },
    /// One run of one artifact.
    Run {
        /// The artifact, by digest.
        artifact: ArtifactDigest,
    },
}

impl Cover {
    /// The cover a build of `source` by `plan` asks for: its source, lockfile folder, and every
    /// host a stage of the plan reaches. The one place a plan's hosts become a cover, so what
    /// an agent's sequencer asks hubd to vouch for is exactly what the builder will check.
    pub fn of_build(source: AcrPath, lockfile: Option<AcrPath>, plan: &Plan) -> Cover {
        let hosts = plan
            .stages
            .iter()
            .flat_map(|s| match &s.network {
                Network::Hosts(h) => h.clone(),
                Network::None => Vec::new(),
            })
            .collect();
        Cover::Build {
            source,
            lockfile,
            hosts,
        }
    }

    /// The grant axis the cover needs.
    pub fn axis(&self) -> Axis {
        match self {
            Cover::Build { .. } => Axis::Build,
            Cover::Run { .. } => Axis::Run,
        }
    }
}

impl fmt::Display for Cover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cover::Build { source, .. } => write!(f, "a build of {source}"),
            Cover::Run { artifact } => write!(f, "a run of {}", artifact.as_str()),
        }
    }
}

/// Why a cover or a request was refused; each names what is not covered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Uncovered {
    /// The grant does not confer the axis.
    #[error("{agent}'s grant does not confer `{axis}`; ask its issuer for it")]
    Axis {
        /// The agent.
        agent: String,
        /// The axis it lacks.
        axis: Axis,
    },
    /// A folder lies outside every write root of the grant.
    #[error(
        "{what} `{path}` lies outside {agent}'s write roots (`files`); build from a folder it may write"
    )]
    Path {
        /// `source` or `lockfile`.
        what: &'static str,
        /// The folder, relative to the ACR.
        path: String,
        /// The agent.
        agent: String,
    },
    /// A fetch host is not on the grant's `net` axis.
    #[error("fetch host `{host}` is not on {agent}'s `net` axis")]
    Host {
        /// The host pattern.
        host: String,
        /// The agent.
        agent: String,
    },
    /// The request asks for something else than the voucher names.
    #[error(
        "the voucher covers {vouched}, not {asked}; ask hubd for a voucher for this request (hubd.vouch-build)"
    )]
    Elsewhere {
        /// What the voucher names.
        vouched: String,
        /// What the request asks.
        asked: String,
    },
}

/// hubd's decision before it signs: `grant` (the agent's own, from the ledger) confers the
/// cover's axis; a build's source and lockfile lie within its write roots and each fetch host
/// within its `net` axis.
pub fn grant_covers(grant: &Grant, agent: &AgentName, cover: &Cover) -> Result<(), Uncovered> {
    let probe = match cover {
        Cover::Build { .. } => Probe::Build,
        Cover::Run { .. } => Probe::Run,
    };
    if !grant.allows(&probe) {
        return Err(Uncovered::Axis {
            agent: agent.to_string(),
            axis: cover.axis(),
        });
    }
    let Cover::Build {
        source,
        lockfile,
        hosts,
    } = cover
    else {
        return Ok(());
    };
    for (what, path) in
        std::iter::once(("source", source)).chain(lockfile.iter().map(|l| ("lockfile", l)))
    {
        if !grant.allows(&Probe::File(path.clone())) {
            return Err(Uncovered::Path {
                what,
                path: path.to_string(),
                agent: agent.to_string(),
            });
        }
    }
    if let Some(host) = hosts
        .iter()
        .find(|h| !grant.allows(&Probe::Net((*h).clone())))
    {
        return Err(Uncovered::Host {
            host: host.to_string(),
            agent: agent.to_string(),
        });
    }
    Ok(())
}

/// The builder's decision: the request builds exactly the vouched source with the vouched
/// lockfile, and every host a stage of `plan` reaches lies within a vouched host.
pub fn build_within(
    cover: &Cover,
    source: &str,
    lockfile: Option<&str>,
    plan: &Plan,
) -> Result<(), Uncovered> {
    let elsewhere = |asked: String| Uncovered::Elsewhere {
        vouched: cover.to_string(),
        asked,
    };
    let Cover::Build {
        source: vouched_source,
        lockfile: vouched_lockfile,
        hosts,
    } = cover
    else {
        return Err(elsewhere(format!("a build of {source}")));
    };
    if vouched_source.as_str() != source {
        return Err(elsewhere(format!("a build of {source}")));
    }
    if vouched_lockfile.as_ref().map(AcrPath::as_str) != lockfile {
        return Err(elsewhere(format!(
            "a build reading the lockfile folder {}",
            lockfile.unwrap_or("(none)")
        )));
    }
    for stage in &plan.stages {
        let Network::Hosts(reached) = &stage.network else {
            continue;
        };
        if let Some(host) = reached
            .iter()
            .find(|h| !hosts.iter().any(|bound| h.within(bound)))
        {
            return Err(elsewhere(format!(
                "stage {} reaching {host} (the voucher lists {})",
                stage.name,
                list(hosts)
            )));
        }
    }
    Ok(())
}

/// The runner's decision: the request runs exactly the vouched artifact.
pub fn run_within(cover: &Cover, artifact: &ArtifactDigest) -> Result<(), Uncovered> {
    match cover {
        Cover::Run { artifact: vouched } if vouched == artifact => Ok(()),
        _ => Err(Uncovered::Elsewhere {
            vouched: cover.to_string(),
            asked: format!("a run of {}", artifact.as_str()),
        }),
    }
}

fn list(hosts: &BTreeSet<HostPattern>) -> String {
    if hosts.is_empty() {
        return "none".into();
    }
    hosts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
