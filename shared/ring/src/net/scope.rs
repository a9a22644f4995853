//! The pure URL check: whether a token reaches a URL, decided before anything is sent. The same
//! check runs on the first URL and on every redirect target.

use url::{Host, Url};

use super::NetError;
use crate::tokens::NetToken;

/// Parses `text` and checks it against `token`.
pub(super) fn parse_allowed(token: &NetToken, text: &str) -> Result<Url, NetError> {
    let url = Url::parse(text).map_err(|source| NetError::Url {
        url: text.into(),
        source,
    })?;
    check(token, &url)?;
    Ok(url)
}

/// Refuses, in this order: a scheme other than http(s); userinfo; no host; a trailing dot; a
/// host (or IP literal) and port no rule reaches. Hosts arrive lowercased and IDNA-encoded
/// (punycode) from the URL parser, and IPv4 literals normalised (`0x7f.1` is `127.0.0.1`).
pub(super) fn check(token: &NetToken, url: &Url) -> Result<(), NetError> {
    let shown = || url.as_str().to_string();
    if !matches!(url.scheme(), "http" | "https") {
        return Err(NetError::Scheme {
            url: shown(),
            scheme: url.scheme().into(),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(NetError::Userinfo { url: shown() });
    }
    let host = match url.host() {
        None => return Err(NetError::NoHost { url: shown() }),
        Some(Host::Domain(d)) if d.ends_with('.') => {
            return Err(NetError::TrailingDot {
                url: shown(),
                host: d.into(),
            });
        }
        Some(Host::Domain(d)) => d.to_string(),
        Some(Host::Ipv4(ip)) => ip.to_string(),
        Some(Host::Ipv6(ip)) => format!("[{ip}]"),
    };
    if token.allows(&host, url.port()) {
        Ok(())
    } else {
        Err(NetError::HostNotListed {
            url: shown(),
            host,
            port: url.port(),
            listed: token.hosts().iter().cloned().collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{MintInput, mint};

    fn token(hosts: &[&str]) -> NetToken {
        let input = MintInput {
            net: Some(hosts.iter().map(|h| h.to_string()).collect()),
            ..MintInput::default()
        };
        mint(&input, cap_std::ambient_authority())
            .unwrap()
            .net
            .unwrap()
    }

    fn verdict(t: &NetToken, url: &str) -> Result<Url, NetError> {
        parse_allowed(t, url)
    }

    #[test]
    fn listed_hosts_pass_in_any_case_and_idna_form() {
        let t = token(&["example.org", "xn--bcher-kva.example", "127.0.0.1:8080"]);
        assert!(verdict(&t, "https://EXAMPLE.org/a?b").is_ok());
        assert!(
            verdict(&t, "http://example.org:80/").is_ok(),
            "default port"
        );
        assert!(verdict(&t, "http://Bücher.example/").is_ok());
        assert!(
            verdict(&t, "http://0x7f.0.0.1:8080/").is_ok(),
            "normalised IPv4"
        );
    }

    #[test]
    fn each_trick_is_refused_by_its_boundary() {
        let t = token(&["example.org", "localhost:8080"]);
        type Expect = fn(&NetError) -> bool;
        let cases: [(&str, Expect); 9] = [
            ("ftp://example.org/", |e| {
                matches!(e, NetError::Scheme { .. })
            }),
            ("file:///etc/passwd", |e| {
                matches!(e, NetError::Scheme { .. })
            }),
            ("http://example.org@127.0.0.2/", |e| {
                matches!(e, NetError::Userinfo { .. })
            }),
            ("http://u:p@example.org/", |e| {
                matches!(e, NetError::Userinfo { .. })
            }),
            ("http://example.org./", |e| {
                matches!(e, NetError::TrailingDot { .. })
            }),
            ("http://example.org:8443/", |e| {
                matches!(
                    e,
                    NetError::HostNotListed {
                        port: Some(8443),
                        ..
                    }
                )
            }),
            ("http://localhost/", |e| {
                matches!(e, NetError::HostNotListed { port: None, .. })
            }),
            ("http://[::1]:8080/", |e| {
                matches!(e, NetError::HostNotListed { .. })
            }),
            ("not a url", |e| matches!(e, NetError::Url { .. })),
        ];
        for (url, expected) in cases {
            let err = verdict(&t, url).unwrap_err();
            assert!(expected(&err), "{url}: {err}");
        }
    }
}
