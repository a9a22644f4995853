//! The network token: the hosts an agent may reach.

use std::collections::BTreeSet;

use l3m_core::axis::Axis;

use super::{TokenError, narrow_set};

/// The right to reach the listed hosts, and only those. The HTTP provider checks every request's
/// host against it before connecting.
#[derive(Debug)]
pub struct NetToken {
    /// Lowercase host names, each with an optional `:port`.
    hosts: BTreeSet<String>,
}

impl NetToken {
    /// Made only by [`super::mint`] and [`NetToken::narrow`].
    pub(crate) fn new(hosts: BTreeSet<String>) -> Self {
        Self { hosts }
    }

    /// The hosts this token reaches.
    pub fn hosts(&self) -> &BTreeSet<String> {
        &self.hosts
    }

    /// Whether `host` (case-insensitive, with its port if it has one) is listed.
    pub fn allows(&self, host: &str) -> bool {
        self.hosts.contains(&host.to_ascii_lowercase())
    }

    /// A token reaching only `hosts`, each of which this token must already reach.
    pub fn narrow(&self, hosts: &[&str]) -> Result<NetToken, TokenError> {
        let asked = parse_hosts(hosts)?;
        narrow_set(Axis::Net, &self.hosts, asked, |h, a| h == a).map(Self::new)
    }
}

/// Checks hosts: `[a-z0-9.-]+` with an optional numeric port, no scheme, path or empty label.
pub(super) fn parse_hosts<S: AsRef<str>>(hosts: &[S]) -> Result<BTreeSet<String>, TokenError> {
    hosts.iter().map(|h| parse_host(h.as_ref())).collect()
}

fn parse_host(host: &str) -> Result<String, TokenError> {
    let refuse = |reason| TokenError::Host {
        host: host.into(),
        reason,
    };
    let lower = host.to_ascii_lowercase();
    let (name, port) = match lower.rsplit_once(':') {
        Some((name, port)) => (name, Some(port)),
        None => (lower.as_str(), None),
    };
    if let Some(port) = port
        && port.parse::<u16>().map_or(true, |p| p == 0)
    {
        return Err(refuse("the port must be a number from 1 to 65535"));
    }
    if name.is_empty() || name.split('.').any(str::is_empty) {
        return Err(refuse(
            "a host name needs non-empty labels separated by dots",
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err(refuse(
            "only a host name is listed here: no scheme, path, user or spaces",
        ));
    }
    Ok(lower)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_plain_names_with_optional_port() {
        let ok = parse_hosts(&["Example.org", "api.example.org:8443"]).unwrap();
        assert!(ok.contains("example.org") && ok.contains("api.example.org:8443"));
        for bad in [
            "http://x", "x/y", "", "a..b", "x:0", "x:99999", "user@x", "x y",
        ] {
            assert!(parse_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allows_only_listed_hosts_and_narrows_within_them() {
        let t = NetToken::new(parse_hosts(&["a.org", "b.org"]).unwrap());
        assert!(t.allows("A.org") && !t.allows("c.org") && !t.allows("a.org:444"));
        let n = t.narrow(&["b.org"]).unwrap();
        assert!(n.allows("b.org") && !n.allows("a.org"));
        assert!(matches!(
            n.narrow(&["a.org"]),
            Err(TokenError::Widening {
                axis: Axis::Net,
                ..
            })
        ));
    }
}
