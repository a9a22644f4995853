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

/// The two lists of examples in a grant file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExampleList {
    /// Examples the grant must allow.
    Allow,
    /// Examples the grant must refuse.
    Deny,
}

impl fmt::Display for ExampleList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExampleList::Allow => "allow",
            ExampleList::Deny => "deny",
        })
    }
}

/// The containment order of one axis's elements: `a.within(b)` when everything `a` confers, `b`
/// confers too. Set-valued axes are contained when each element is within some bound element.
pub trait Within {
    /// Whether everything `self` confers is conferred by `bound`.
    fn within(&self, bound: &Self) -> bool;
}

/// Gives a validated element type its one string form for serde and `str::parse`.
macro_rules! string_form {
    ($ty:ident) => {
        impl TryFrom<String> for $ty {
            type Error = GrantError;
            fn try_from(s: String) -> Result<Self, GrantError> {
                Self::parse(&s)
            }
        }

        impl From<$ty> for String {
            fn from(v: $ty) -> String {
                v.to_string()
            }
        }

        impl std::str::FromStr for $ty {
            type Err = GrantError;
            fn from_str(s: &str) -> Result<Self, GrantError> {
                Self::parse(s)
            }
        }
    };
}

/// A path relative to an agent's context root, such as `workspace/src`: a write root, or a path
/// written under one.
///
/// Valid paths are relative, have no empty, `.` or `..` components, no backslash or control
/// characters, and never name the harness's `.l3m` directory or anything under it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AcrPath(String);

/// Longest ACR-relative path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_LEN: usize = 4096;

impl AcrPath {
    /// Parses and validates a path; the error names the rule it broke.
    pub fn parse(s: &str) -> Result<Self, GrantError> {
        let bad = |reason: &str| GrantError::BadPath {
            path: s.to_owned(),
            reason: reason.to_owned(),
        };
        if s.is_empty() {
            return Err(bad("it is empty"));
        }
        if s.starts_with('/') {
            return Err(bad(
                "it is absolute; write it relative to the ACR, e.g. `workspace`",
            ));
        }
        if s.len() > MAX_PATH_LEN {
            return Err(bad("it is longer than 4096 bytes"));
        }
        if let Some(c) = s.chars().find(|c| c.is_control() || *c == '\\') {
            return Err(bad(&format!("{c:?} is not allowed in a path")));
        }
        for (index, component) in s.split('/').enumerate() {
            match component {
                "" => return Err(bad("it has an empty component (a doubled or trailing '/')")),
                "." => return Err(bad("it has a `.` component")),
                ".." => return Err(bad("it has a `..` component")),
                c if index == 0 && c.eq_ignore_ascii_case(".l3m") => {
                    return Err(bad("`.l3m` belongs to the harness; no grant reaches it"));
                }
                _ => {}
            }
        }
        Ok(AcrPath(s.to_owned()))
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `self` is `root` or lies under it, component by component (so `workspace/srcx`
    /// is not under `workspace/src`).
    pub fn is_at_or_under(&self, root: &AcrPath) -> bool {
        self.0 == root.0
            || (self.0.starts_with(&root.0) && self.0.as_bytes().get(root.0.len()) == Some(&b'/'))
    }
}

impl Within for AcrPath {
    fn within(&self, bound: &Self) -> bool {
        self.is_at_or_under(bound)
    }
}

impl fmt::Display for AcrPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_form!(AcrPath);

/// A ref name or ref-name prefix such as `refs/heads/l3m/alice/`.
///
/// A prefix ending in `/` confers every ref that starts with it; one that does not confers
/// exactly that ref. Valid prefixes start with `refs/` and follow Git's ref-name rules: no `..`,
/// `@{`, whitespace, control characters or any of `~^:?*[\`, no empty component, no component
/// starting with `.` or ending with `.lock`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RefPrefix(String);

impl RefPrefix {
    /// Parses and validates a ref name or prefix; the error names the rule it broke.
    pub fn parse(s: &str) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::BadRefPrefix {
            prefix: s.to_owned(),
            reason,
        };
        let Some(rest) = s.strip_prefix("refs/") else {
            return Err(bad("it must start with `refs/`".into()));
        };
        if s.contains("..") {
            return Err(bad("it contains `..`".into()));
        }
        if s.contains("@{") {
            return Err(bad("it contains `@{`".into()));
        }
        if let Some(c) = s
            .chars()
            .find(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(*c))
        {
            return Err(bad(format!("{c:?} is not allowed in a ref name")));
        }
        if !rest.is_empty() {
            let body = rest.strip_suffix('/').unwrap_or(rest);
            for component in body.split('/') {
                if component.is_empty() {
                    return Err(bad("it has an empty component (`//`)".into()));
                }
                if component.starts_with('.') {
                    return Err(bad(format!("component {component:?} starts with `.`")));
                }
                if component.ends_with(".lock") {
                    return Err(bad(format!("component {component:?} ends with `.lock`")));
                }
            }
            if body.ends_with('.') {
                return Err(bad("it ends with `.`".into()));
            }
        }
        Ok(RefPrefix(s.to_owned()))
    }

    /// A prefix built from a ref-layout function, whose output is valid by construction for any
    /// valid agent name (pinned by a test).
    fn from_layout(prefix: String) -> Self {
        RefPrefix(prefix)
    }

    /// The prefix as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether this confers every ref under it (it ends with `/`) rather than one ref.
    pub fn is_prefix(&self) -> bool {
        self.0.ends_with('/')
    }

    /// Whether this confers the ref `name`.
    pub fn matches(&self, name: &str) -> bool {
        if self.is_prefix() {
            name.starts_with(&self.0)
        } else {
            name == self.0
        }
    }
}

impl Within for RefPrefix {
    fn within(&self, bound: &Self) -> bool {
        // Everything `self` confers starts with `self`, so it is enough that `bound` confers
        // `self`'s own spelling, read as a prefix when `bound` is one.
        if bound.is_prefix() {
            self.0.starts_with(&bound.0)
        } else {
            self == bound
        }
    }
}

impl fmt::Display for RefPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_form!(RefPrefix);

/// The name of a Git remote an agent may push to, such as `origin`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RemoteName(String);

impl RemoteName {
    /// Parses and validates a remote name: ASCII letters, digits, `.`, `_` and `-`, starting
    /// with a letter or digit, at most 100 bytes, never ending in `.lock`.
    pub fn parse(s: &str) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::BadRemote {
            remote: s.to_owned(),
            reason,
        };
        match s.chars().next() {
            None => return Err(bad("it is empty".into())),
            Some(c) if !c.is_ascii_alphanumeric() => {
                return Err(bad(format!("it starts with {c:?}")));
            }
            Some(_) => {}
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(bad(format!("{c:?} is not allowed")));
        }
        if s.len() > 100 {
            return Err(bad("it is longer than 100 bytes".into()));
        }
        if s.contains("..") || s.ends_with(".lock") {
            return Err(bad("it contains `..` or ends with `.lock`".into()));
        }
        Ok(RemoteName(s.to_owned()))
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RemoteName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_form!(RemoteName);

/// A network host rule: one host, or every subdomain of a domain.
///
/// Written `api.github.com` or `*.github.com`. `*.github.com` matches subdomains at any depth
/// (`a.github.com`, `a.b.github.com`) but not `github.com` itself; list both to reach both.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum HostPattern {
    /// Exactly this host.
    Exact(String),
    /// Every host with at least one more label in front of this domain.
    Subdomains(String),
}

/// Longest DNS name, in bytes.
const MAX_HOST_LEN: usize = 253;

/// Checks a lowercase DNS name: labels of 1–63 bytes of `a-z0-9-`, not starting or ending with
/// `-`, at most 253 bytes, no trailing dot, no userinfo, port or URL parts.
fn check_host(host: &str) -> Result<(), String> {
    if host.is_empty() {
        return Err("it is empty".into());
    }
    if host.contains('@') {
        return Err("it has userinfo (`user@`); write only the host".into());
    }
    if host.contains('/') {
        return Err("it looks like a URL; write only the host".into());
    }
    if host.contains(':') {
        return Err("ports and IPv6 literals are not host rules; write only the host".into());
    }
    if host.ends_with('.') {
        return Err(format!(
            "it has a trailing dot; write {:?}",
            host.trim_end_matches('.')
        ));
    }
    if host.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(format!(
            "host rules are lowercase; write {:?}",
            host.to_ascii_lowercase()
        ));
    }
    if host.contains('*') {
        return Err("`*` is allowed only as a whole first label, as in `*.example.com`".into());
    }
    if host.len() > MAX_HOST_LEN {
        return Err(format!("it is longer than {MAX_HOST_LEN} bytes"));
    }
    for label in host.split('.') {
        if label.is_empty() {
            return Err("it has an empty label (`..` or a leading dot)".into());
        }
        if label.len() > 63 {
            return Err(format!("label {label:?} is longer than 63 bytes"));
        }
        if let Some(c) = label
            .chars()
            .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
        {
            return Err(format!("{c:?} is not allowed in a host name"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("label {label:?} starts or ends with '-'"));
        }
    }
    Ok(())
}

impl HostPattern {
    /// Parses `host` or `*.domain`; a bare `*` is refused (list the hosts instead).
    pub fn parse(s: &str) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::BadHost {
            host: s.to_owned(),
            reason,
        };
        if s == "*" {
            return Err(bad(
                "a bare `*` would reach every host; list hosts or `*.domain` patterns".into(),
            ));
        }
        match s.strip_prefix("*.") {
            Some(domain) => check_host(domain)
                .map(|()| HostPattern::Subdomains(domain.to_owned()))
                .map_err(bad),
            None => check_host(s)
                .map(|()| HostPattern::Exact(s.to_owned()))
                .map_err(bad),
        }
    }

    /// Whether a request to `host` is allowed by this rule. DNS names are case-insensitive, so
    /// the request's host is compared in lowercase; a trailing dot is not stripped.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.to_ascii_lowercase();
        match self {
            HostPattern::Exact(h) => host == *h,
            HostPattern::Subdomains(domain) => host
                .strip_suffix(domain.as_str())
                .and_then(|front| front.strip_suffix('.'))
                .is_some_and(|front| !front.is_empty()),
        }
    }
}

impl Within for HostPattern {
    fn within(&self, bound: &Self) -> bool {
        match (self, bound) {
            (HostPattern::Exact(h), _) => bound.matches(h),
            (HostPattern::Subdomains(a), HostPattern::Subdomains(b)) => a == b || bound.matches(a),
            (HostPattern::Subdomains(_), HostPattern::Exact(_)) => false,
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Subdomains(d) => write!(f, "*.{d}"),
        }
    }
}

string_form!(HostPattern);

/// Whom an agent may write to: one element of the mail axis.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum MailCover {
    /// This agent and every agent below it (`subtree:alice/main`).
    Subtree(AgentName),
    /// This one agent's inbox (`agent:alice`).
    Agent(AgentName),
    /// A registered human (`human:bob`).
    Human(HumanName),
    /// A service (`svc:postmaster`).
    Service(ServiceName),
    /// Any recipient at another hub (`office:bob`); staging such a letter also needs the airmail
    /// axis for that office.
    Office(OfficeName),
}

impl MailCover {
    /// Parses `subtree:AGENT`, `agent:AGENT`, `human:NAME`, `svc:NAME` or `office:NAME`.
    pub fn parse(s: &str) -> Result<Self, GrantError> {
        let bad = |reason: String| GrantError::BadMailCover {
            cover: s.to_owned(),
            reason,
        };
        let Some((kind, name)) = s.split_once(':') else {
            return Err(bad("it has no kind prefix".into()));
        };
        let named = |e: crate::names::NameError| bad(e.to_string());
        match kind {
            "subtree" => AgentName::parse(name)
                .map(MailCover::Subtree)
                .map_err(named),
            "agent" => AgentName::parse(name).map(MailCover::Agent).map_err(named),
            "human" => HumanName::parse(name).map(MailCover::Human).map_err(named),
            "svc" => ServiceName::parse(name)
                .map(MailCover::Service)
                .map_err(named),
            "office" => OfficeName::parse(name)
                .map(MailCover::Office)
                .map_err(named),
            other => Err(bad(format!("{other:?} is not a kind of recipient"))),
        }
    }

    /// Whether this cover lets the holder write to `recipient` on this hub.
    pub fn covers(&self, recipient: &Entity) -> bool {
        match (self, recipient) {
            (MailCover::Subtree(root), Entity::Agent(a)) => a.is_within(root),
            (MailCover::Agent(x), Entity::Agent(a)) => a == x,
            (MailCover::Human(h), Entity::Human(r)) => h == r,
            (MailCover::Service(s), Entity::Service(r)) => s == r,
            _ => false,
        }
    }

    /// Whether this cover lets the holder address recipients at `office`.
    pub fn covers_office(&self, office: &OfficeName) -> bool {
        matches!(self, MailCover::Office(o) if o == office)
    }
}

impl Within for MailCover {
    fn within(&self, bound: &Self) -> bool {
        match (self, bound) {
            (MailCover::Subtree(x) | MailCover::Agent(x), MailCover::Subtree(y)) => x.is_within(y),
            (MailCover::Agent(x), MailCover::Agent(y)) => x == y,
            (MailCover::Human(a), MailCover::Human(b)) => a == b,
            (MailCover::Service(a), MailCover::Service(b)) => a == b,
            (MailCover::Office(a), MailCover::Office(b)) => a == b,
            _ => false,
        }
    }
}

impl fmt::Display for MailCover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MailCover::Subtree(a) => write!(f, "subtree:{a}"),
            MailCover::Agent(a) => write!(f, "agent:{a}"),
            MailCover::Human(h) => write!(f, "human:{h}"),
            MailCover::Service(s) => write!(f, "svc:{s}"),
            MailCover::Office(o) => write!(f, "office:{o}"),
        }
    }
}

string_form!(MailCover);

/// The default mail axis of `agent` (DESIGN §4): its own subtree and each ancestor's inbox, so
/// siblings cannot mail each other unless a grant says so.
pub fn default_mail(agent: &AgentName) -> BTreeSet<MailCover> {
    std::iter::once(MailCover::Subtree(agent.clone()))
        .chain(agent.ancestors().map(MailCover::Agent))
        .collect()
}

impl Within for OfficeName {
    fn within(&self, bound: &Self) -> bool {
        self == bound
    }
}

/// The name of a wild effect class an agent may propose, such as `shell` or `aws`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct WildClass(String);

impl WildClass {
    /// Parses a class name; it follows the name-segment rule `[a-z][a-z0-9-]{0,62}`.
    pub fn parse(s: &str) -> Result<Self, GrantError> {
        check_segment(s)
            .map(|()| WildClass(s.to_owned()))
            .map_err(|fault| GrantError::BadWildClass {
                class: s.to_owned(),
                reason: if s.is_empty() {
                    "it is empty".to_owned()
                } else {
                    fault.to_string()
                },
            })
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Within for WildClass {
    fn within(&self, bound: &Self) -> bool {
        self == bound
    }
}

impl fmt::Display for WildClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

string_form!(WildClass);

/// How far an agent may spawn: ordered, so a child's level must be at most its parent's.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum SpawnLevel {
    /// No children at all.
    #[default]
    Off,
    /// Only driven children, retired when the call that started them returns.
    Drive,
    /// Children that persist beyond the call that started them.
    Persist,
}

impl fmt::Display for SpawnLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpawnLevel::Off => "off",
            SpawnLevel::Drive => "drive",
            SpawnLevel::Persist => "persist",
        })
    }
}

/// How long an agent may live. An earlier deadline is narrower.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Lifetime {
    /// No deadline.
    #[default]
    Unbounded,
    /// Alive strictly before this instant, in milliseconds since the Unix epoch.
    Until(u64),
}

impl Lifetime {
    /// Whether an agent with this lifetime may still be alive at `now_ms`.
    pub fn is_alive_at(&self, now_ms: u64) -> bool {
        match self {
            Lifetime::Unbounded => true,
            Lifetime::Until(deadline) => now_ms < *deadline,
        }
    }
}

impl Within for Lifetime {
    fn within(&self, bound: &Self) -> bool {
        match (self, bound) {
            (_, Lifetime::Unbounded) => true,
            (Lifetime::Unbounded, Lifetime::Until(_)) => false,
            (Lifetime::Until(a), Lifetime::Until(b)) => a <= b,
        }
    }
}

impl fmt::Display for Lifetime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Lifetime::Unbounded => f.write_str("unbounded"),
            Lifetime::Until(ms) => write!(f, "until {ms} ms"),
        }
    }
}

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

/// One concrete thing a grant may or may not allow: the vocabulary of a grant file's examples.
///
/// Written in a grant file as a one-key table, e.g. `{ net = "api.github.com" }`,
/// `{ file = "workspace/src/lib.rs" }`, `{ git-push = { remote = "origin", refname =
/// "refs/heads/l3m/alice/x" } }`, `{ mail = "human:bob" }`, or a bare string for the yes/no axes
/// (`"build"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Probe {
    /// Writing this ACR-relative path.
    File(AcrPath),
    /// Reading this ref (or every ref under this prefix).
    GitRead(RefPrefix),
    /// Writing this ref (or every ref under this prefix).
    GitWrite(RefPrefix),
    /// Pushing this ref (or every ref under this prefix) to this remote.
    GitPush {
        /// The remote.
        remote: RemoteName,
        /// The ref or prefix pushed.
        refname: RefPrefix,
    },
    /// Reaching this host (or every host this pattern matches).
    Net(HostPattern),
    /// Writing to this recipient on this hub.
    Mail(Entity),
    /// Writing to recipients at this office.
    MailOffice(OfficeName),
    /// Spawning at this level.
    Spawn(SpawnLevel),
    /// Staging airmail for this office.
    Airmail(OfficeName),
    /// Carrying airmail.
    Postman,
    /// Proposing a call of this wild class.
    Wild(WildClass),
    /// Running build stages.
    Build,
    /// Running built artifacts.
    Run,
    /// Reviewing wild calls.
    Review,
    /// Being alive at this instant (ms since the Unix epoch).
    AliveAt(u64),
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::File(p) => write!(f, "write {p}"),
            Probe::GitRead(r) => write!(f, "read {r}"),
            Probe::GitWrite(r) => write!(f, "write {r}"),
            Probe::GitPush { remote, refname } => write!(f, "push {refname} to {remote}"),
            Probe::Net(h) => write!(f, "reach {h}"),
            Probe::Mail(e) => write!(f, "mail {e}"),
            Probe::MailOffice(o) => write!(f, "mail office:{o}"),
            Probe::Spawn(l) => write!(f, "spawn at level {l}"),
            Probe::Airmail(o) => write!(f, "stage airmail for {o}"),
            Probe::Postman => f.write_str("carry airmail"),
            Probe::Wild(c) => write!(f, "propose wild class {c}"),
            Probe::Build => f.write_str("build"),
            Probe::Run => f.write_str("run"),
            Probe::Review => f.write_str("review"),
            Probe::AliveAt(ms) => write!(f, "be alive at {ms} ms"),
        }
    }
}

/// The examples a grant file carries: what it must allow and what it must refuse.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Examples {
    /// Probes the grant must allow.
    pub allow: Vec<Probe>,
    /// Probes the grant must refuse.
    pub deny: Vec<Probe>,
}

/// A grant as a human or parent writes it: the grant and the examples that pin its meaning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GrantFile {
    /// The grant to issue.
    pub grant: Grant,
    /// Examples checked by [`GrantFile::check`] when the file loads.
    #[serde(default)]
    pub examples: Examples,
}

impl GrantFile {
    /// Checks every example; the error names the first that does not hold.
    pub fn check(&self) -> Result<(), GrantError> {
        let lists = [
            (ExampleList::Allow, &self.examples.allow, true),
            (ExampleList::Deny, &self.examples.deny, false),
        ];
        for (list, probes, want) in lists {
            if let Some((index, probe)) = probes
                .iter()
                .enumerate()
                .find(|(_, p)| self.grant.allows(p) != want)
            {
                return Err(GrantError::ExampleFails {
                    list,
                    index,
                    probe: probe.to_string(),
                    verdict: if want { "refuses" } else { "allows" },
                });
            }
        }
        Ok(())
    }
}

/// A parent's request to start a child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SpawnRequest {
    /// The child's name: the parent's name plus one segment.
    pub child: AgentName,
    /// The grant asked for the child.
    pub grant: Grant,
    /// The fuel lent to the child out of the parent's account.
    pub loan: Fuel,
    /// Whether the child is driven: retired when the call that started it returns.
    pub driven: bool,
    /// The persona the child wears, if any.
    pub persona: Option<PersonaName>,
}

/// An admitted spawn: the accounts to record for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// The parent's account after lending the loan; `None` when a human spawned a root agent
    /// (humans lend from outside the tree).
    pub parent_account: Option<Account>,
    /// The child's fresh account: the whole loan left.
    pub child_account: Account,
}

/// Why a spawn was refused. Each message says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnRefusal {
    /// The child's name is not the parent's name plus one segment.
    #[error(
        "{child} is not a direct child of {parent}: a child's name is its parent's plus one \
         segment; name it `{parent}/<segment>`"
    )]
    NotAChild {
        /// The parent.
        parent: AgentName,
        /// The name asked for.
        child: AgentName,
    },
    /// A human may spawn only root agents (one segment).
    #[error(
        "{child} is not a root agent, so a human cannot spawn it directly; spawn its root first \
         and have its parent spawn it"
    )]
    NotARoot {
        /// The name asked for.
        child: AgentName,
    },
    /// The parent's spawn axis is off.
    #[error(
        "{parent} may not spawn (its spawn axis is `off`); ask its issuer for `drive` or `persist`"
    )]
    SpawnOff {
        /// The parent.
        parent: AgentName,
    },
    /// A drive parent asked for a child that would outlive the call.
    #[error(
        "{parent} has spawn level `drive`, so it may start only driven children (retired when \
         the call that started them returns); set `driven`, or ask its issuer for `persist`"
    )]
    DriveOnly {
        /// The parent.
        parent: AgentName,
    },
    /// The child's grant is wider than the parent's expanded grant.
    #[error("{0}")]
    Widening(#[from] Widening),
    /// The loan is larger than what the parent has left; `error` names the unit.
    #[error("{parent} cannot lend this loan: {error}")]
    Overdraft {
        /// The parent.
        parent: AgentName,
        /// The account's refusal ([`BudgetError::Overdraft`]), naming the unit that ran short.
        #[source]
        error: BudgetError,
    },
}

impl SpawnRefusal {
    /// The axis the spawn was refused on, if it was refused on one (a bad name is not an axis).
    pub fn axis(&self) -> Option<Axis> {
        match self {
            SpawnRefusal::NotAChild { .. } | SpawnRefusal::NotARoot { .. } => None,
            SpawnRefusal::SpawnOff { .. } | SpawnRefusal::DriveOnly { .. } => Some(Axis::Spawn),
            SpawnRefusal::Widening(w) => Some(w.axis),
            SpawnRefusal::Overdraft { .. } => Some(Axis::Budget),
        }
    }
}

/// The spawn gate for an agent parent: admits `req` only if the child's name is the parent's
/// plus one segment, the parent may spawn at all (and only driven children if its level is
/// `drive`), every axis of the child's grant lies within `parent_grant.expand_own(parent)`, and
/// the loan fits in what `parent_account` has left. Nothing is clamped.
pub fn admit_spawn(
    parent: &AgentName,
    parent_grant: &Grant,
    parent_account: &Account,
    req: &SpawnRequest,
) -> Result<Admission, SpawnRefusal> {
    if req.child.parent().as_ref() != Some(parent) {
        return Err(SpawnRefusal::NotAChild {
            parent: parent.clone(),
            child: req.child.clone(),
        });
    }
    match parent_grant.spawn {
        SpawnLevel::Off => {
            return Err(SpawnRefusal::SpawnOff {
                parent: parent.clone(),
            });
        }
        SpawnLevel::Drive if !req.driven => {
            return Err(SpawnRefusal::DriveOnly {
                parent: parent.clone(),
            });
        }
        SpawnLevel::Drive | SpawnLevel::Persist => {}
    }
    req.grant.within(&parent_grant.expand_own(parent))?;
    let mut account = parent_account.clone();
    account
        .lend(req.loan)
        .map_err(|error| SpawnRefusal::Overdraft {
            parent: parent.clone(),
            error,
        })?;
    Ok(Admission {
        parent_account: Some(account),
        child_account: Account::new(req.loan),
    })
}

/// The spawn gate for a human starting a root agent: the child must be a root (one segment) and
/// its grant within the human's registered grant. The human's grant is not expanded (a human has
/// no agent refs) and the loan is not checked: humans lend fuel from outside the tree.
pub fn admit_root_spawn(
    human_grant: &Grant,
    req: &SpawnRequest,
) -> Result<Admission, SpawnRefusal> {
    if req.child.depth() != 1 {
        return Err(SpawnRefusal::NotARoot {
            child: req.child.clone(),
        });
    }
    req.grant.within(human_grant)?;
    Ok(Admission {
        parent_account: None,
        child_account: Account::new(req.loan),
    })
}

/// Why a regrant was refused. Each message says what to do next.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegrantRefusal {
    /// An agent tried to write its own grant.
    #[error(
        "{agent} cannot change its own grant: a grant is written by its issuer, never by the \
         entity; ask its parent or a human"
    )]
    OwnGrant {
        /// The agent.
        agent: AgentName,
    },
    /// An agent tried to regrant an agent that is not its strict descendant.
    #[error(
        "{issuer} may regrant only its own descendants, and {subject} is not one; ask an \
         ancestor of {subject} or a human"
    )]
    NotAnAncestor {
        /// The issuer.
        issuer: AgentName,
        /// The subject.
        subject: AgentName,
    },
    /// The issuing agent's grant is unknown (it is not live in the ledger).
    #[error("{issuer} holds no grant (it is not a live agent), so it cannot issue one")]
    IssuerWithoutGrant {
        /// The issuer.
        issuer: AgentName,
    },
    /// Services issue no grants.
    #[error("svc:{service} is a service; services never issue grants (ask a human)")]
    ServiceIssuer {
        /// The service.
        service: ServiceName,
    },
    /// The new grant is wider than the issuer's expanded grant.
    #[error("{0}")]
    Widening(#[from] Widening),
}

/// The regrant gate: an agent issuer must be a strict ancestor of `subject` and `new` must lie
/// within the issuer's grant expanded at the issuer (the same bound a child spawned by the issuer
/// meets). A human issuer is unbounded: humans are the root of trust (see the module docs).
/// `issuer_grant` is the issuer's current grant; it is ignored for a human.
pub fn admit_regrant(
    issuer: &Entity,
    issuer_grant: Option<&Grant>,
    subject: &AgentName,
    new: &Grant,
) -> Result<(), RegrantRefusal> {
    let issuer = match issuer {
        Entity::Human(_) => return Ok(()),
        Entity::Service(service) => {
            return Err(RegrantRefusal::ServiceIssuer {
                service: service.clone(),
            });
        }
        Entity::Agent(agent) => agent,
    };
    if issuer == subject {
        return Err(RegrantRefusal::OwnGrant {
            agent: issuer.clone(),
        });
    }
    if !subject.is_descendant_of(issuer) {
        return Err(RegrantRefusal::NotAnAncestor {
            issuer: issuer.clone(),
            subject: subject.clone(),
        });
    }
    let Some(issuer_grant) = issuer_grant else {
        return Err(RegrantRefusal::IssuerWithoutGrant {
            issuer: issuer.clone(),
        });
    };
    new.within(&issuer_grant.expand_own(issuer))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::FuelUnit;

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    fn path(s: &str) -> AcrPath {
        AcrPath::parse(s).unwrap()
    }

    fn prefix(s: &str) -> RefPrefix {
        RefPrefix::parse(s).unwrap()
    }

    fn host(s: &str) -> HostPattern {
        HostPattern::parse(s).unwrap()
    }

    fn reason_of(e: GrantError) -> String {
        e.to_string()
    }

    #[test]
    fn bad_paths_are_refused_with_the_rule() {
        for (bad, rule) in [
            ("", "empty"),
            ("/workspace", "absolute"),
            ("workspace/../x", "`..`"),
            ("..", "`..`"),
            ("./workspace", "`.` component"),
            ("workspace//src", "empty component"),
            ("workspace/", "empty component"),
            (".l3m", "harness"),
            (".l3m/tokens", "harness"),
            (".L3M/tokens", "harness"),
            ("workspace\\x", "'\\\\'"),
            ("work\nspace", "'\\n'"),
        ] {
            let err = AcrPath::parse(bad).unwrap_err();
            assert!(
                matches!(&err, GrantError::BadPath { path, .. } if path == bad),
                "{bad:?}: {err}"
            );
            assert!(
                reason_of(err).contains(rule),
                "{bad:?} should mention {rule}"
            );
        }
        assert!(AcrPath::parse(&"a/".repeat(2100)).is_err());
        // `.l3m` is the harness's only at the ACR root.
        assert!(AcrPath::parse("workspace/.l3m").is_ok());
        assert!(AcrPath::parse(".l3mx").is_ok());
    }

    #[test]
    fn roots_contain_component_wise() {
        assert!(path("workspace/src").is_at_or_under(&path("workspace")));
        assert!(path("workspace/src").is_at_or_under(&path("workspace/src")));
        assert!(!path("workspace/srcx").is_at_or_under(&path("workspace/src")));
        assert!(!path("workspace").is_at_or_under(&path("workspace/src")));
        assert!(!path("agent").is_at_or_under(&path("workspace")));
    }

    #[test]
    fn bad_ref_prefixes_are_refused_with_the_rule() {
        for (bad, rule) in [
            ("heads/main", "start with `refs/`"),
            ("refs/heads/../x", "`..`"),
            ("refs/heads/a b", "' '"),
            ("refs/heads/a\tb", "'\\t'"),
            ("refs/heads/a\u{7f}", "'\\u{7f}'"),
            ("refs/heads/a~1", "'~'"),
            ("refs/heads/a^", "'^'"),
            ("refs/heads/a:b", "':'"),
            ("refs/heads/*", "'*'"),
            ("refs/heads/x@{1}", "`@{`"),
            ("refs//heads", "empty component"),
            ("refs/heads/.hidden", "starts with `.`"),
            ("refs/heads/main.lock", "`.lock`"),
            ("refs/heads/main.", "ends with `.`"),
        ] {
            let err = RefPrefix::parse(bad).unwrap_err();
            assert!(
                matches!(&err, GrantError::BadRefPrefix { prefix, .. } if prefix == bad),
                "{bad:?}: {err}"
            );
            assert!(
                reason_of(err).contains(rule),
                "{bad:?} should mention {rule}"
            );
        }
        assert!(RefPrefix::parse("refs/").is_ok());
        assert!(RefPrefix::parse("refs/heads/main").is_ok());
    }

    #[test]
    fn ref_prefixes_contain_at_slash_boundaries() {
        let heads = prefix("refs/heads/");
        assert!(prefix("refs/heads/main").within(&heads));
        assert!(prefix("refs/heads/l3m/").within(&heads));
        assert!(!prefix("refs/headsx/main").within(&heads));
        assert!(!prefix("refs/heads").within(&heads));
        // An exact ref confers only itself.
        let main = prefix("refs/heads/main");
        assert!(main.within(&main));
        assert!(!prefix("refs/heads/main/x").within(&main));
        assert!(!prefix("refs/heads/mainline").within(&main));
        assert!(heads.matches("refs/heads/x") && !main.matches("refs/heads/mainx"));
    }

    #[test]
    fn layout_prefixes_are_valid_ref_prefixes() {
        for name in ["alice", "alice/main/worker-2"] {
            let a = agent(name);
            for p in [refs::subtree_prefix(&a), refs::branch_prefix(&a)] {
                assert_eq!(RefPrefix::parse(&p).unwrap(), RefPrefix::from_layout(p));
            }
        }
    }

    #[test]
    fn bad_remotes_are_refused() {
        for bad in ["", "-x", ".x", "a b", "a/b", "a..b", "origin.lock"] {
            assert!(
                matches!(RemoteName::parse(bad), Err(GrantError::BadRemote { remote, .. }) if remote == bad),
                "{bad:?}"
            );
        }
        assert!(RemoteName::parse(&"o".repeat(101)).is_err());
        assert!(RemoteName::parse("my_Remote-2.x").is_ok());
    }

    #[test]
    fn bad_hosts_are_refused_with_the_rule() {
        for (bad, rule) in [
            ("", "empty"),
            ("*", "bare `*`"),
            ("example.com.", "trailing dot"),
            ("user@example.com", "userinfo"),
            ("https://example.com", "URL"),
            ("example.com:443", "ports"),
            ("[::1]", "ports"),
            ("GitHub.com", "\"github.com\""),
            ("a.*.example.com", "whole first label"),
            ("*example.com", "whole first label"),
            ("*.*.example.com", "whole first label"),
            ("a..example.com", "empty label"),
            (".example.com", "empty label"),
            ("-a.example.com", "'-'"),
            ("a_b.example.com", "'_'"),
            ("*.", "empty"),
        ] {
            let err = HostPattern::parse(bad).unwrap_err();
            assert!(
                matches!(&err, GrantError::BadHost { host, .. } if host == bad),
                "{bad:?}: {err}"
            );
            assert!(
                reason_of(err).contains(rule),
                "{bad:?} should mention {rule}"
            );
        }
        assert!(HostPattern::parse(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(HostPattern::parse(&["a"; 130].join(".")).is_err());
        assert!(HostPattern::parse("localhost").is_ok());
        assert!(HostPattern::parse("127.0.0.1").is_ok());
    }

    #[test]
    fn host_patterns_match_and_contain() {
        let any = host("*.example.com");
        assert!(any.matches("a.example.com") && any.matches("a.b.example.com"));
        assert!(
            any.matches("A.Example.COM"),
            "requests compare case-insensitively"
        );
        assert!(!any.matches("example.com") && !any.matches("aexample.com"));
        assert!(host("a.example.com").within(&any));
        assert!(host("*.x.example.com").within(&any));
        assert!(any.within(&any));
        assert!(!any.within(&host("a.example.com")));
        assert!(!host("*.example.com").within(&host("*.x.example.com")));
        assert!(!host("example.com").within(&any));
        assert!(!host("a.example.org").within(&host("a.example.com")));
    }

    #[test]
    fn mail_covers_parse_cover_and_contain() {
        let sub = MailCover::parse("subtree:alice/main").unwrap();
        assert!(sub.covers(&Entity::parse("alice/main").unwrap()));
        assert!(sub.covers(&Entity::parse("alice/main/w").unwrap()));
        assert!(!sub.covers(&Entity::parse("alice/mainx").unwrap()));
        assert!(!sub.covers(&Entity::parse("alice").unwrap()));
        let bob = MailCover::parse("human:bob").unwrap();
        assert!(bob.covers(&Entity::parse("human:bob").unwrap()));
        assert!(!bob.covers(&Entity::parse("svc:bob").unwrap()));
        let office = MailCover::parse("office:far").unwrap();
        assert!(office.covers_office(&OfficeName::parse("far").unwrap()));
        assert!(!office.covers(&Entity::parse("far").unwrap()));

        let leaf = MailCover::parse("agent:alice/main/w").unwrap();
        assert!(leaf.within(&sub));
        assert!(
            MailCover::parse("subtree:alice/main/w")
                .unwrap()
                .within(&sub)
        );
        assert!(!sub.within(&MailCover::parse("agent:alice/main").unwrap()));
        assert!(!sub.within(&MailCover::parse("subtree:alice/main/w").unwrap()));

        for bad in ["alice", "robot:x", "agent:Alice", "subtree:", "office:a/b"] {
            assert!(
                matches!(MailCover::parse(bad), Err(GrantError::BadMailCover { cover, .. }) if cover == bad),
                "{bad:?}"
            );
        }
        for s in ["subtree:a/b", "agent:a", "human:h", "svc:s", "office:o"] {
            assert_eq!(MailCover::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn default_mail_is_own_subtree_and_ancestor_inboxes() {
        let mail = default_mail(&agent("alice/main/w"));
        let want: BTreeSet<MailCover> = ["subtree:alice/main/w", "agent:alice/main", "agent:alice"]
            .into_iter()
            .map(|s| MailCover::parse(s).unwrap())
            .collect();
        assert_eq!(mail, want);
        let sibling = Entity::parse("alice/main/v").unwrap();
        assert!(
            !mail.iter().any(|c| c.covers(&sibling)),
            "siblings cannot mail each other"
        );
    }

    #[test]
    fn bad_wild_classes_are_refused() {
        for bad in ["", "Shell", "1x", "a b"] {
            assert!(
                matches!(WildClass::parse(bad), Err(GrantError::BadWildClass { class, .. }) if class == bad),
                "{bad:?}"
            );
        }
        assert!(WildClass::parse("aws").is_ok());
    }

    #[test]
    fn lifetimes_order_by_deadline() {
        assert!(Lifetime::Until(5).within(&Lifetime::Until(5)));
        assert!(Lifetime::Until(4).within(&Lifetime::Until(5)));
        assert!(!Lifetime::Until(6).within(&Lifetime::Until(5)));
        assert!(Lifetime::Until(6).within(&Lifetime::Unbounded));
        assert!(!Lifetime::Unbounded.within(&Lifetime::Until(5)));
        assert!(Lifetime::Until(5).is_alive_at(4) && !Lifetime::Until(5).is_alive_at(5));
    }

    fn sample_grant() -> Grant {
        let mut g = Grant {
            files: [path("workspace")].into(),
            git_read: [prefix("refs/heads/")].into(),
            git_write: [prefix("refs/heads/l3m/alice/")].into(),
            net: [host("*.github.com")].into(),
            mail: [MailCover::parse("human:bob").unwrap()].into(),
            spawn: SpawnLevel::Drive,
            airmail: [OfficeName::parse("far").unwrap()].into(),
            wild: [WildClass::parse("shell").unwrap()].into(),
            build: true,
            lifetime: Lifetime::Until(1_000),
            ..Grant::default()
        };
        g.git_push.insert(
            RemoteName::parse("origin").unwrap(),
            [prefix("refs/heads/l3m/alice/")].into(),
        );
        g
    }

    #[test]
    fn within_names_the_first_wider_axis_and_the_element() {
        let bound = sample_grant();
        assert_eq!(bound.within(&bound), Ok(()));
        assert_eq!(Grant::default().within(&Grant::default()), Ok(()));

        let mut g = bound.clone();
        g.net.insert(host("evil.example"));
        g.run = true;
        let w = g.within(&bound).unwrap_err();
        assert_eq!(w.axis, Axis::Net, "net comes before run in Axis::ALL");
        assert!(w.detail.contains("evil.example"), "{}", w.detail);
        assert!(w.to_string().contains("`net`"), "{w}");

        let mut g = bound.clone();
        g.files.insert(path("workspacex"));
        let w = g.within(&bound).unwrap_err();
        assert_eq!(w.axis, Axis::Files);
        assert!(w.detail.contains("workspacex"), "{}", w.detail);

        let mut g = bound.clone();
        g.git_push.insert(
            RemoteName::parse("upstream").unwrap(),
            [prefix("refs/heads/main")].into(),
        );
        let w = g.within(&bound).unwrap_err();
        assert_eq!(w.axis, Axis::GitPush);
        assert!(w.detail.contains("upstream") && w.detail.contains("refs/heads/main"));

        let mut g = bound.clone();
        g.spawn = SpawnLevel::Persist;
        let w = g.within(&bound).unwrap_err();
        assert_eq!(w.axis, Axis::Spawn);
        assert!(
            w.detail.contains("persist") && w.detail.contains("drive"),
            "{}",
            w.detail
        );

        let mut g = bound.clone();
        g.lifetime = Lifetime::Unbounded;
        assert_eq!(g.within(&bound).unwrap_err().axis, Axis::Lifetime);
    }

    #[test]
    fn expand_own_adds_own_refs_and_mail() {
        let a = agent("alice/main");
        let g = Grant::default().expand_own(&a);
        assert!(g.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/main/_/log"))));
        assert!(g.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/main/w/_/log"))));
        assert!(!g.allows(&Probe::GitWrite(prefix("refs/l3m/a/alice/main/_/log"))));
        assert!(g.allows(&Probe::GitWrite(prefix("refs/heads/l3m/alice/main/_/work"))));
        assert!(!g.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/_/log"))));
        assert!(g.allows(&Probe::Mail(Entity::parse("alice").unwrap())));
        assert!(g.allows(&Probe::Mail(Entity::parse("alice/main/w").unwrap())));
        assert!(!g.allows(&Probe::Mail(Entity::parse("alice/other").unwrap())));
        let chain = [agent("alice/main"), agent("alice")];
        let all = Grant::default().expand_own_all(&chain);
        assert!(all.allows(&Probe::GitRead(prefix("refs/l3m/a/alice/x/_/log"))));
    }

    #[test]
    fn grants_serialise_with_axis_names_and_refuse_unknown_keys() {
        let g = sample_grant();
        let json = serde_json::to_value(&g).unwrap();
        for axis in Axis::ALL.into_iter().filter(|a| *a != Axis::Budget) {
            assert!(json.get(axis.as_str()).is_some(), "missing key {axis}");
        }
        assert_eq!(json["net"][0], "*.github.com");
        assert_eq!(json["lifetime"]["until"], 1_000);
        let back: Grant = serde_json::from_value(json).unwrap();
        assert_eq!(back, g);

        let sparse: Grant = serde_json::from_str(r#"{"files":["workspace"]}"#).unwrap();
        assert_eq!(sparse.spawn, SpawnLevel::Off);
        assert_eq!(sparse.lifetime, Lifetime::Unbounded);
        let err = serde_json::from_str::<Grant>(r#"{"fiels":["workspace"]}"#).unwrap_err();
        assert!(err.to_string().contains("fiels"), "{err}");
        let err = serde_json::from_str::<Grant>(r#"{"net":["GitHub.com"]}"#).unwrap_err();
        assert!(err.to_string().contains("github.com"), "{err}");
    }

    #[test]
    fn grant_file_examples_are_checked() {
        let file: GrantFile = serde_json::from_str(
            r#"{
                "grant": {"files": ["workspace"], "net": ["*.github.com"], "build": true,
                          "git-push": {"origin": ["refs/heads/l3m/alice/"]}},
                "examples": {
                    "allow": [{"net": "api.github.com"}, {"file": "workspace/src/lib.rs"}, "build",
                              {"git-push": {"remote": "origin", "refname": "refs/heads/l3m/alice/x"}}],
                    "deny": [{"net": "github.com"}, {"file": "agent/persona.md"}, "run",
                             {"mail": "human:bob"}, {"spawn": "drive"}]
                }
            }"#,
        )
        .unwrap();
        assert_eq!(file.check(), Ok(()));

        let mut wrong = file.clone();
        wrong.examples.allow.push(Probe::Net(host("github.com")));
        let err = wrong.check().unwrap_err();
        assert!(
            matches!(
                &err,
                GrantError::ExampleFails {
                    list: ExampleList::Allow,
                    index: 4,
                    verdict: "refuses",
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("reach github.com"), "{err}");

        let mut wrong = file;
        wrong.examples.deny.push(Probe::Build);
        let err = wrong.check().unwrap_err();
        assert!(matches!(
            err,
            GrantError::ExampleFails {
                list: ExampleList::Deny,
                index: 5,
                verdict: "allows",
                ..
            }
        ));
        assert!(serde_json::from_str::<GrantFile>(r#"{"grant": {}, "exmaples": {}}"#).is_err());
    }

    /// Confers nothing, with the same deadline as [`sample_grant`] (an omitted lifetime is
    /// unbounded, which no grant with a deadline contains).
    fn nothing() -> Grant {
        Grant {
            lifetime: Lifetime::Until(1_000),
            ..Grant::default()
        }
    }

    fn request(child: &str, grant: Grant, loan: Fuel, driven: bool) -> SpawnRequest {
        SpawnRequest {
            child: agent(child),
            grant,
            loan,
            driven,
            persona: None,
        }
    }

    fn fuel(model_calls: u64, bytes: u64, wakes: u64) -> Fuel {
        Fuel {
            model_calls,
            bytes,
            wakes,
        }
    }

    #[test]
    fn spawn_refusals_name_the_problem_and_the_fix() {
        let parent = agent("alice");
        let mut pg = sample_grant();
        pg.spawn = SpawnLevel::Persist;
        let account = Account::new(fuel(10, 100, 1));
        let ok = request("alice/w", nothing(), fuel(5, 50, 1), false);
        let admitted = admit_spawn(&parent, &pg, &account, &ok).unwrap();
        assert_eq!(admitted.child_account, Account::new(fuel(5, 50, 1)));
        assert_eq!(admitted.parent_account.unwrap().left(), fuel(5, 50, 0));

        let grandchild = request("alice/w/x", nothing(), Fuel::ZERO, false);
        let err = admit_spawn(&parent, &pg, &account, &grandchild).unwrap_err();
        assert!(matches!(err, SpawnRefusal::NotAChild { .. }) && err.axis().is_none());
        assert!(err.to_string().contains("alice/<segment>"), "{err}");

        let mut off = pg.clone();
        off.spawn = SpawnLevel::Off;
        let err = admit_spawn(&parent, &off, &account, &ok).unwrap_err();
        assert_eq!(err.axis(), Some(Axis::Spawn));
        assert!(err.to_string().contains("`drive` or `persist`"), "{err}");

        let mut drive = pg.clone();
        drive.spawn = SpawnLevel::Drive;
        let err = admit_spawn(&parent, &drive, &account, &ok).unwrap_err();
        assert!(matches!(err, SpawnRefusal::DriveOnly { .. }), "{err}");
        assert!(err.to_string().contains("set `driven`"), "{err}");
        let driven = request("alice/w", nothing(), Fuel::ZERO, true);
        assert!(admit_spawn(&parent, &drive, &account, &driven).is_ok());

        let mut wide = ok.clone();
        wide.grant.net.insert(host("evil.example"));
        let err = admit_spawn(&parent, &pg, &account, &wide).unwrap_err();
        assert_eq!(err.axis(), Some(Axis::Net));
        assert!(err.to_string().contains("evil.example"), "{err}");

        let greedy = request("alice/w", nothing(), fuel(5, 101, 9), false);
        let err = admit_spawn(&parent, &pg, &account, &greedy).unwrap_err();
        assert_eq!(err.axis(), Some(Axis::Budget));
        match &err {
            SpawnRefusal::Overdraft { error, .. } => {
                assert_eq!(
                    error.unit(),
                    FuelUnit::Bytes,
                    "bytes is the first unit short"
                );
            }
            other => panic!("expected an overdraft, got {other}"),
        }
        let text = err.to_string();
        assert!(text.contains("101 bytes") && text.contains("100"), "{text}");
    }

    #[test]
    fn root_spawns_are_roots_within_the_human_grant() {
        let human = sample_grant();
        let root = request("alice", nothing(), fuel(1_000, 0, 0), false);
        let admitted = admit_root_spawn(&human, &root).unwrap();
        assert_eq!(admitted.parent_account, None);
        assert_eq!(admitted.child_account.left(), fuel(1_000, 0, 0));
        let deep = request("alice/w", nothing(), Fuel::ZERO, false);
        let err = admit_root_spawn(&human, &deep).unwrap_err();
        assert!(matches!(err, SpawnRefusal::NotARoot { .. }), "{err}");
        let mut wide = root;
        wide.grant.run = true;
        assert_eq!(
            admit_root_spawn(&human, &wide).unwrap_err().axis(),
            Some(Axis::Run)
        );
    }

    #[test]
    fn regrant_refusals_name_the_problem() {
        let issuer = Entity::parse("alice").unwrap();
        let g = sample_grant();
        let child = agent("alice/w");
        assert_eq!(admit_regrant(&issuer, Some(&g), &child, &g), Ok(()));
        let own = nothing().expand_own(&agent("alice"));
        assert_eq!(admit_regrant(&issuer, Some(&g), &child, &own), Ok(()));

        let err = admit_regrant(&issuer, Some(&g), &agent("alice"), &g).unwrap_err();
        assert!(matches!(err, RegrantRefusal::OwnGrant { .. }), "{err}");
        assert!(err.to_string().contains("never by the entity"), "{err}");
        let err = admit_regrant(&issuer, Some(&g), &agent("bob/w"), &g).unwrap_err();
        assert!(matches!(err, RegrantRefusal::NotAnAncestor { .. }), "{err}");
        let err = admit_regrant(
            &Entity::parse("alice/w").unwrap(),
            Some(&g),
            &agent("alice"),
            &g,
        )
        .unwrap_err();
        assert!(matches!(err, RegrantRefusal::NotAnAncestor { .. }), "{err}");
        let err = admit_regrant(&issuer, None, &child, &g).unwrap_err();
        assert!(
            matches!(err, RegrantRefusal::IssuerWithoutGrant { .. }),
            "{err}"
        );
        let err = admit_regrant(
            &Entity::parse("svc:postmaster").unwrap(),
            Some(&g),
            &child,
            &g,
        )
        .unwrap_err();
        assert!(matches!(err, RegrantRefusal::ServiceIssuer { .. }), "{err}");

        let mut wide = g.clone();
        wide.review = true;
        let err = admit_regrant(&issuer, Some(&g), &child, &wide).unwrap_err();
        assert!(
            matches!(&err, RegrantRefusal::Widening(w) if w.axis == Axis::Review),
            "{err}"
        );

        let human = Entity::parse("human:alice").unwrap();
        assert_eq!(admit_regrant(&human, None, &agent("alice"), &wide), Ok(()));
    }
}
