//! The network token: the hosts an agent may reach, each with the port it opens.
//!
//! A host rule is the grant's own [`HostPattern`] (`api.example.org` or `*.example.org`), so the
//! rules for what a host name is and what it matches exist once, in `l3m-core`. The token adds
//! only the port: `example.org` opens the scheme's default port (80 for `http`, 443 for
//! `https`), and `example.org:8443` opens port 8443 and no other.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use l3m_core::axis::Axis;
use l3m_core::grant::{GrantError, HostPattern, Within};

use super::{TokenError, narrow_set};

/// The right to reach the listed hosts, and only those. The HTTP provider checks every request's
/// host against it before connecting, again when it resolves the name, and at every redirect.
#[derive(Debug)]
pub struct NetToken {
    /// The host rules in their one written form (`example.org`, `*.cdn.org`, `x.org:8443`),
    /// each validated by [`parse_hosts`] when the token was made.
    hosts: BTreeSet<String>,
}

/// One host rule of a [`NetToken`]: a [`HostPattern`] and the port it opens (`None`: the
/// scheme's default port only).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct NetHost {
    /// Which host names the rule reaches.
    pattern: HostPattern,
    /// The one port opened; `None` opens only the URL scheme's default port.
    port: Option<u16>,
}

impl NetHost {
    /// Whether the rule reaches `host` on any port. An IP literal is reached only by a rule that
    /// lists exactly that literal, never through a `*.` pattern; names compare
    /// case-insensitively, as [`HostPattern::matches`] does.
    fn reaches_name(&self, host: &str) -> bool {
        if host.parse::<IpAddr>().is_ok() {
            matches!(&self.pattern, HostPattern::Exact(listed) if listed == host)
        } else {
            self.pattern.matches(host)
        }
    }

    /// Whether the rule reaches `host` on `port` (`None`: the URL names no port, so the scheme's
    /// default is used).
    fn reaches(&self, host: &str, port: Option<u16>) -> bool {
        self.port == port && self.reaches_name(host)
    }

    /// Whether everything `self` reaches, `held` reaches too (the narrowing order).
    fn within(&self, held: &NetHost) -> bool {
        self.port == held.port
            && match &self.pattern {
                HostPattern::Exact(host) => held.reaches_name(host),
                HostPattern::Subdomains(_) => self.pattern.within(&held.pattern),
            }
    }
}

impl fmt::Display for NetHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.port {
            Some(port) => write!(f, "{}:{port}", self.pattern),
            None => write!(f, "{}", self.pattern),
        }
    }
}

impl NetToken {
    /// Made only by [`super::mint`] and [`NetToken::narrow`].
    pub(crate) fn new(hosts: BTreeSet<String>) -> Self {
        Self { hosts }
    }

    /// The host rules this token holds, as written (`example.org`, `*.cdn.org`, `x.org:8443`).
    pub fn hosts(&self) -> &BTreeSet<String> {
        &self.hosts
    }

    /// The rules, parsed. Every element was validated when the token was made, so none is
    /// dropped here in practice; one that failed would reach nothing, never more.
    fn rules(&self) -> impl Iterator<Item = NetHost> + '_ {
        self.hosts.iter().filter_map(|h| parse_host(h).ok())
    }

    /// Whether some rule reaches `host` on `port` (`None`: the scheme's default port).
    pub fn allows(&self, host: &str, port: Option<u16>) -> bool {
        self.rules().any(|rule| rule.reaches(host, port))
    }

    /// Whether some rule reaches the name `host` on any port: the check made when a name is
    /// resolved, where the port is not known.
    pub fn allows_name(&self, host: &str) -> bool {
        self.rules().any(|rule| rule.reaches_name(host))
    }

    /// A token reaching only `hosts`, each of which this token must already reach on the same
    /// port.
    pub fn narrow(&self, hosts: &[&str]) -> Result<NetToken, TokenError> {
        let asked: BTreeSet<NetHost> = hosts
            .iter()
            .map(|h| parse_host(h))
            .collect::<Result<_, _>>()?;
        let held: BTreeSet<NetHost> = self.rules().collect();
        narrow_set(Axis::Net, &held, asked, |held, asked| asked.within(held))
            .map(|rules| Self::new(rules.iter().map(ToString::to_string).collect()))
    }
}

/// Checks host rules: a [`HostPattern`] with an optional `:port` from 1 to 65535. Returns each
/// rule in its one written form.
pub(super) fn parse_hosts<S: AsRef<str>>(hosts: &[S]) -> Result<BTreeSet<String>, TokenError> {
    hosts
        .iter()
        .map(|h| parse_host(h.as_ref()).map(|rule| rule.to_string()))
        .collect()
}

fn parse_host(host: &str) -> Result<NetHost, TokenError> {
    let refuse = |reason: &str| TokenError::Host {
        host: host.into(),
        reason: reason.to_owned(),
    };
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port)) => match port.parse::<u16>() {
            Ok(p) if p != 0 => (name, Some(p)),
            _ => return Err(refuse("the port must be a number from 1 to 65535")),
        },
        None => (host, None),
    };
    let pattern = HostPattern::parse(name).map_err(|e| match e {
        GrantError::BadHost { reason, .. } => refuse(&reason),
        other => refuse(&other.to_string()),
    })?;
    Ok(NetHost { pattern, port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(hosts: &[&str]) -> NetToken {
        NetToken::new(parse_hosts(hosts).unwrap())
    }

    #[test]
    fn hosts_are_grant_host_patterns_with_optional_port() {
        let ok = parse_hosts(&["example.org", "api.example.org:8443", "*.cdn.org"]).unwrap();
        assert_eq!(
            ok.iter().collect::<Vec<_>>(),
            ["*.cdn.org", "api.example.org:8443", "example.org"]
        );
        for bad in [
            "http://x", "x/y", "", "a..b", "x:0", "x:99999", "user@x", "x y", "X.org", "x.org.",
            "*", "[::1]", "x:",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allows_listed_hosts_case_insensitively_on_their_port_only() {
        let t = token(&["a.org", "b.org:8443", "*.c.org"]);
        assert!(t.allows("A.org", None) && !t.allows("a.org", Some(444)));
        assert!(t.allows("b.org", Some(8443)) && !t.allows("b.org", None));
        assert!(t.allows("x.Y.c.org", None) && !t.allows("c.org", None));
        assert!(!t.allows("d.org", None) && !t.allows("a.org.", None));
        assert!(t.allows_name("b.org") && !t.allows_name("d.org"));
    }

    #[test]
    fn ip_literals_are_reached_only_by_the_exact_literal() {
        let t = token(&["127.0.0.1:80", "*.0.0.2"]);
        assert!(t.allows("127.0.0.1", Some(80)));
        assert!(!t.allows_name("127.0.0.2") && !t.allows_name("127.0.0.3"));
        assert!(t.narrow(&["127.0.0.1:80"]).is_ok());
        assert!(t.narrow(&["127.0.0.2"]).is_err());
    }

    #[test]
    fn narrows_within_rules_and_refuses_widening() {
        let t = token(&["a.org", "*.b.org", "c.org:8080"]);
        let n = t.narrow(&["x.b.org", "*.y.b.org"]).unwrap();
        assert!(n.allows("x.b.org", None) && n.allows("z.y.b.org", None));
        assert!(!n.allows("a.org", None));
        for wider in ["b.org", "d.org", "c.org", "c.org:8081", "a.org:80"] {
            assert!(
                matches!(
                    t.narrow(&[wider]),
                    Err(TokenError::Widening {
                        axis: Axis::Net,
                        ..
                    })
                ),
                "{wider}"
            );
        }
    }
}
