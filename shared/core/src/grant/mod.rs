//! Grants: what an entity may affect, axis by axis, and the gates that keep authority narrowing.
//!
//! A [`Grant`] lists, for every axis of DESIGN §4, the elements it confers (write roots, ref
//! prefixes, hosts, mail covers, …). Each axis has a containment order, and [`Grant::within`]
//! checks a grant against a bound axis by axis, naming the first axis (in [`Axis::ALL`] order) on
//! which it is wider. Nothing here ever clamps: a widening is refused and the refusal says where.
//!
//! Two gates use it:
//! - [`admit_spawn`]: a child's grant must lie within its parent's grant *expanded by the parent's
//!   own refs and mail* ([`Grant::expand_own`]), and its loan within what the parent has left.
//!   Root agents are spawned by a human through [`admit_root_spawn`].
//! - [`admit_regrant`]: an agent may change the grant of a strict descendant only, within its own
//!   expanded grant; it can never write its own grant or a human's.
//!
//! # Humans are the root
//! A human is registered in the ledger with a grant of its own: the ceiling of the root agents
//! that human spawns ([`admit_root_spawn`] checks the root's grant against it, unexpanded, and
//! lends fuel from outside the tree). A human *regrant* is unbounded: the human is the root of
//! trust, and the tree-wide bound (`descendant_bounded_by_root_grant`) deliberately stops where a
//! human's regrant enters the ledger. No agent-issued row can name a human as a subject, so no
//! agent can ever write a human's grant.
//!
//! # Spelling
//! Every element type has one string form and refuses any other rather than normalising it:
//! host names must already be lowercase (`GitHub.com` is refused with the lowercase spelling as
//! the fix), so a grant file has exactly one way to say each rule and a stored grant round-trips
//! byte for byte. Matching a *request* against a grant is case-insensitive where DNS is
//! ([`HostPattern::matches`]).
//!
//! # Policies carry their own examples
//! A [`GrantFile`] is a grant plus `allow`/`deny` [`Probe`]s that must hold when the file loads
//! ([`GrantFile::check`]), so a grant's author states what the rules are meant to mean and a typo
//! (`*.github.com` does not reach `github.com`) is caught before the grant is issued.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::axis::Axis;
use crate::budget::{Account, BudgetError, Fuel};
use crate::names::{
    AgentName, Entity, HumanName, OfficeName, PersonaName, ServiceName, check_segment,
};
use crate::refs;

/// Why a string is not a valid grant element, or why a grant file's example does not hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// A write root or ACR path broke a path rule.
    #[error("path {path:?} is not a valid ACR-relative path: {reason}")]
    BadPath {
        /// The path as given.
        path: String,
        /// What rule it broke.
        reason: String,
    },
    /// A ref prefix broke a ref-name rule.
    #[error("ref prefix {prefix:?} is invalid: {reason}")]
    BadRefPrefix {
        /// The prefix as given.
        prefix: String,
        /// What rule it broke.
        reason: String,
    },
    /// A remote name broke the remote-name rule.
    #[error(
        "remote name {remote:?} is invalid: {reason} (use letters, digits, '.', '_' and '-', \
         starting with a letter or digit)"
    )]
    BadRemote {
        /// The name as given.
        remote: String,
        /// What rule it broke.
        reason: String,
    },
    /// A host or host pattern broke a DNS-name rule.
    #[error("host {host:?} is invalid: {reason}")]
    BadHost {
        /// The host as given.
        host: String,
        /// What rule it broke.
        reason: String,
    },
    /// A mail cover is not one of the known forms.
    #[error(
        "mail cover {cover:?} is invalid: {reason} (write `subtree:AGENT`, `agent:AGENT`, \
         `human:NAME`, `svc:NAME` or `office:NAME`)"
    )]
    BadMailCover {
        /// The cover as given.
        cover: String,
        /// What was wrong with it.
        reason: String,
    },
    /// A wild class name broke the segment rule.
    #[error("wild class {class:?} is invalid: {reason}")]
    BadWildClass {
        /// The name as given.
        class: String,
        /// What rule it broke.
        reason: String,
    },
    /// An example in a grant file does not hold for the grant it accompanies.
    #[error(
        "example {index} of `{list}` ({probe}) does not hold: the grant {verdict} it; fix the \
         grant or the example"
    )]
    ExampleFails {
        /// Which list the example is in.
        list: ExampleList,
        /// Zero-based position in that list.
        index: usize,
        /// The example, rendered.
        probe: String,
        /// What the grant actually does with it (`refuses` or `allows`).
        verdict: &'static str,
    },
}

/// The containment order of one axis's elements: `a.within(b)` when everything `a` confers, `b`
/// confers too. Set-valued axes are contained when each element is within some bound element.
pub trait Within {
    /// Whether everything `self` confers is conferred by `bound`.
    fn within(&self, bound: &Self) -> bool;
}

mod elements;
mod file;
mod gates;

pub use elements::*;
pub use file::*;
pub use gates::*;

/// What an entity may affect, axis by axis (DESIGN §4). Budget is not part of it: fuel is lent
/// separately ([`Account`]).
///
/// Field names are the axis names, so a grant file reads `files = [...]`, `git-read = [...]`.
/// An axis left out of a grant file confers nothing, except the lifetime, which is then
/// unbounded: under an issuer with a deadline a grant must state its own (no deadline is ever
/// inherited or clamped). An unknown key is refused, so a misspelt axis is never silently ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Grant {
    /// Write roots, relative to the agent's ACR.
    pub files: BTreeSet<AcrPath>,
    /// Ref prefixes the agent may read.
    pub git_read: BTreeSet<RefPrefix>,
    /// Ref prefixes the agent may write.
    pub git_write: BTreeSet<RefPrefix>,
    /// Remotes the agent may push to, each with the ref prefixes allowed there.
    pub git_push: BTreeMap<RemoteName, BTreeSet<RefPrefix>>,
    /// Hosts the agent may reach.
    pub net: BTreeSet<HostPattern>,
    /// Whom the agent may write to.
    pub mail: BTreeSet<MailCover>,
    /// Whether and how the agent may spawn children.
    pub spawn: SpawnLevel,
    /// Offices the agent may stage airmail for.
    pub airmail: BTreeSet<OfficeName>,
    /// Whether the agent carries airmail between hubs (the postmaster's duty).
    pub postman: bool,
    /// Wild effect classes the agent may propose (reviewed before they run).
    pub wild: BTreeSet<WildClass>,
    /// Whether the agent may run build stages.
    pub build: bool,
    /// Whether the agent may run built artifacts.
    pub run: bool,
    /// Whether the agent may deliberate over other agents' wild calls.
    pub review: bool,
    /// How long the agent may live.
    pub lifetime: Lifetime,
}

/// A grant is wider than its bound: the first axis (in [`Axis::ALL`] order) on which it is, and
/// the element that is not covered. A widening is refused, never clamped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the grant is wider than its bound on axis `{axis}`: {detail}; narrow `{axis}` to lie \
     within the bound (a widening is refused, never clamped)"
)]
pub struct Widening {
    /// The axis on which the grant exceeds its bound.
    pub axis: Axis,
    /// What exceeds it, naming the offending element.
    pub detail: String,
}

/// Whether `item` lies within some element of `bound`.
fn any_within<T: Within>(bound: &BTreeSet<T>, item: &T) -> bool {
    bound.iter().any(|b| item.within(b))
}

/// The first element of `items` that lies within no element of `bound`, described.
fn set_excess<T: Within + fmt::Display + Ord>(
    what: &str,
    items: &BTreeSet<T>,
    bound: &BTreeSet<T>,
) -> Option<String> {
    let item = items.iter().find(|i| !any_within(bound, *i))?;
    let listed = if bound.is_empty() {
        "the bound lists none".to_owned()
    } else {
        let names: Vec<String> = bound.iter().map(ToString::to_string).collect();
        format!("the bound has {}", names.join(", "))
    };
    Some(format!("{what} `{item}` is not covered ({listed})"))
}

/// Describes a scalar axis that exceeds its bound.
fn scalar_excess<T: Within + fmt::Display>(what: &str, item: &T, bound: &T) -> Option<String> {
    (!item.within(bound)).then(|| format!("{what} `{item}` exceeds the bound's `{bound}`"))
}

impl Within for bool {
    fn within(&self, bound: &Self) -> bool {
        !*self || *bound
    }
}

impl Within for SpawnLevel {
    fn within(&self, bound: &Self) -> bool {
        self <= bound
    }
}

impl Grant {
    /// Checks that `self` confers nothing `bound` does not, axis by axis in [`Axis::ALL`] order;
    /// the refusal names the first axis that is wider and the offending element.
    pub fn within(&self, bound: &Grant) -> Result<(), Widening> {
        match Axis::ALL
            .into_iter()
            .find_map(|axis| self.excess_on(axis, bound).map(|d| (axis, d)))
        {
            Some((axis, detail)) => Err(Widening { axis, detail }),
            None => Ok(()),
        }
    }

    /// What `self` confers beyond `bound` on one axis, described, or `None` if it lies within.
    /// The budget axis is never part of a grant, so it is always within.
    pub fn excess_on(&self, axis: Axis, bound: &Grant) -> Option<String> {
        match axis {
            Axis::Files => set_excess("write root", &self.files, &bound.files),
            Axis::GitRead => set_excess("read prefix", &self.git_read, &bound.git_read),
            Axis::GitWrite => set_excess("write prefix", &self.git_write, &bound.git_write),
            Axis::GitPush => self.git_push.iter().find_map(|(remote, prefixes)| {
                let empty = BTreeSet::new();
                let allowed = bound.git_push.get(remote).unwrap_or(&empty);
                set_excess(&format!("push to remote `{remote}` of"), prefixes, allowed)
            }),
            Axis::Net => set_excess("host", &self.net, &bound.net),
            Axis::Mail => set_excess("mail cover", &self.mail, &bound.mail),
            Axis::Spawn => scalar_excess("spawn level", &self.spawn, &bound.spawn),
            Axis::Airmail => set_excess("office", &self.airmail, &bound.airmail),
            Axis::Postman => scalar_excess("postman", &self.postman, &bound.postman),
            Axis::Wild => set_excess("wild class", &self.wild, &bound.wild),
            Axis::Build => scalar_excess("build", &self.build, &bound.build),
            Axis::Run => scalar_excess("run", &self.run, &bound.run),
            Axis::Review => scalar_excess("review", &self.review, &bound.review),
            Axis::Lifetime => scalar_excess("lifetime", &self.lifetime, &bound.lifetime),
            Axis::Budget => None,
        }
    }

    /// The grant plus what `agent` may always hand its children of its own: reading its subtree
    /// of refs (`refs/l3m/a/<agent>/`), reading and writing its branches (`refs/heads/l3m/<agent>/`)
    /// and its default mail (its subtree and each ancestor's inbox). This is the bound a child of
    /// `agent` is checked against.
    pub fn expand_own(&self, agent: &AgentName) -> Grant {
        let mut expanded = self.clone();
        let branches = RefPrefix::from_layout(refs::branch_prefix(agent));
        expanded
            .git_read
            .insert(RefPrefix::from_layout(refs::subtree_prefix(agent)));
        expanded.git_read.insert(branches.clone());
        expanded.git_write.insert(branches);
        expanded.mail.extend(default_mail(agent));
        expanded
    }

    /// The grant expanded at each agent of `chain` in turn (e.g. a descendant's strict
    /// ancestors): the bound `descendant_bounded_by_root_grant` states over the tree.
    pub fn expand_own_all<'a>(&self, chain: impl IntoIterator<Item = &'a AgentName>) -> Grant {
        chain
            .into_iter()
            .fold(self.clone(), |grant, agent| grant.expand_own(agent))
    }

    /// Whether the grant allows one probe (see [`Probe`]).
    pub fn allows(&self, probe: &Probe) -> bool {
        match probe {
            Probe::File(path) => any_within(&self.files, path),
            Probe::GitRead(r) => any_within(&self.git_read, r),
            Probe::GitWrite(r) => any_within(&self.git_write, r),
            Probe::GitPush { remote, refname } => self
                .git_push
                .get(remote)
                .is_some_and(|prefixes| any_within(prefixes, refname)),
            Probe::Net(host) => any_within(&self.net, host),
            Probe::Mail(recipient) => self.mail.iter().any(|c| c.covers(recipient)),
            Probe::MailOffice(office) => self.mail.iter().any(|c| c.covers_office(office)),
            Probe::Spawn(level) => *level <= self.spawn,
            Probe::Airmail(office) => self.airmail.contains(office),
            Probe::Postman => self.postman,
            Probe::Wild(class) => self.wild.contains(class),
            Probe::Build => self.build,
            Probe::Run => self.run,
            Probe::Review => self.review,
            Probe::AliveAt(ms) => self.lifetime.is_alive_at(*ms),
        }
    }
}

#[cfg(test)]
mod tests;
