//! The elements of each grant axis, each with one validated string form and a containment order.

use super::*;

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

crate::string_form!(AcrPath, GrantError);

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
    pub(super) fn from_layout(prefix: String) -> Self {
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

crate::string_form!(RefPrefix, GrantError);

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

crate::string_form!(RemoteName, GrantError);

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

crate::string_form!(HostPattern, GrantError);

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

crate::string_form!(MailCover, GrantError);

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

crate::string_form!(WildClass, GrantError);

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
