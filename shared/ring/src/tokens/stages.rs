//! The build and run tokens: the right to ask the builder for a build and the runner for a run.
//!
//! Neither token reaches a container itself: the sequencer's outlet asks hubd for a voucher and
//! sends the request on, and hubd and the builder check again. The tokens are the ring's own
//! check, before anything leaves the process: a build's source and lockfile lie within the
//! grant's write roots and every fetch host within its `net` axis (core's `grant_covers`, the
//! same rule hubd applies before it signs).

use std::collections::BTreeSet;

use l3m_core::build::{Cover, Uncovered, grant_covers};
use l3m_core::grant::{AcrPath, Grant, HostPattern};
use l3m_core::names::AgentName;

/// The `build` axis of a [`super::MintInput`]: whose builds, from which folders, reaching which
/// fetch hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildInput {
    /// The agent, whose ACR the source lies in.
    pub agent: AgentName,
    /// The folders a build may read as source or lockfile: the grant's write roots.
    pub sources: BTreeSet<AcrPath>,
    /// The hosts a fetch stage may reach: the grant's `net` axis.
    pub hosts: BTreeSet<HostPattern>,
}

/// The right to ask for builds of folders within the agent's write roots, fetching only from
/// its `net` hosts. Minted only when the grant confers `build`.
#[derive(Debug)]
pub struct BuildToken {
    agent: AgentName,
    /// The grant's build-relevant axes, so the check is core's own `grant_covers`.
    scope: Grant,
}

impl BuildToken {
    /// Made only by [`super::mint`].
    pub(crate) fn new(input: &BuildInput) -> Self {
        BuildToken {
            agent: input.agent.clone(),
            scope: Grant {
                files: input.sources.clone(),
                net: input.hosts.clone(),
                build: true,
                ..Grant::default()
            },
        }
    }

    /// Whether this token covers `cover` (a build), naming what it does not.
    pub fn check(&self, cover: &Cover) -> Result<(), Uncovered> {
        grant_covers(&self.scope, &self.agent, cover)
    }
}

/// The right to ask for runs of artifacts by digest. Minted only when the grant confers `run`;
/// it covers any digest, as the `run` axis does (the runner verifies the bytes).
#[derive(Debug)]
pub struct RunToken {
    agent: AgentName,
}

impl RunToken {
    /// Made only by [`super::mint`].
    pub(crate) fn new(agent: AgentName) -> Self {
        RunToken { agent }
    }

    /// The agent whose runs this token allows.
    pub fn agent(&self) -> &AgentName {
        &self.agent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token() -> BuildToken {
        BuildToken::new(&BuildInput {
            agent: AgentName::parse("alice").unwrap(),
            sources: BTreeSet::from([AcrPath::parse("workspace").unwrap()]),
            hosts: BTreeSet::from([HostPattern::parse("pkgs.test").unwrap()]),
        })
    }

    fn cover(source: &str, hosts: &[&str]) -> Cover {
        Cover::Build {
            source: AcrPath::parse(source).unwrap(),
            lockfile: None,
            hosts: hosts
                .iter()
                .map(|h| HostPattern::parse(h).unwrap())
                .collect(),
        }
    }

    #[test]
    fn covers_builds_within_the_roots_and_hosts_and_names_what_it_does_not() {
        let t = token();
        assert!(t.check(&cover("workspace/app", &["pkgs.test"])).is_ok());
        assert!(matches!(
            t.check(&cover("agent/notes", &[])),
            Err(Uncovered::Path { what: "source", .. })
        ));
        assert!(matches!(
            t.check(&cover("workspace/app", &["evil.test"])),
            Err(Uncovered::Host { host, .. }) if host == "evil.test"
        ));
    }
}
