//! The builder's fetch proxy (`builder::egress::parse_head`): the request head a build's
//! package manager sends, which the build's code controls entirely.

use builder::egress::{Forward, HeadError, parse_head};

use crate::harness::{self, Src};

/// Heads the proxy forwards, the seeds the mutations start from.
const SEEDS: &[&str] = &[
    "GET http://deb.debian.org/debian/dists/bookworm/InRelease HTTP/1.1\r\nHost: deb.debian.org\r\n\r\n",
    "CONNECT static.crates.io:443 HTTP/1.1\r\nHost: static.crates.io:443\r\n\r\n",
    "GET http://example.com HTTP/1.0\r\n\r\n",
];

/// Words of a request head that parsers split on.
const TOKENS: &[&str] = &[
    "http://",
    "https://",
    "CONNECT ",
    " HTTP/1.1",
    "\r\n",
    ":",
    ":99999",
    ":-1",
    "@",
    "[::1]",
    "/",
    " ",
    "\u{0130}",
    "xn--",
    "%2f",
];

/// `fuzz_fetch_proxy_request_head`: any head is forwarded to a host that is lowercase ASCII
/// letters, digits, dots and dashes, with a head no longer than the one received, or is a
/// typed refusal.
#[test]
fn fuzz_fetch_proxy_request_head() {
    harness::run("proxy-head", 50_000, 1024, |input| {
        let mut src = Src::new(input);
        let head = match src.below(4) {
            0 => input.to_vec(),
            _ => harness::mutate(src.pick(SEEDS).as_bytes(), &mut src, TOKENS),
        };
        match parse_head(&head) {
            Ok(Forward {
                host,
                port: _,
                head: upstream,
            }) => {
                assert!(!host.is_empty());
                assert!(
                    host.chars().all(|c| c.is_ascii_lowercase()
                        || c.is_ascii_digit()
                        || c == '.'
                        || c == '-'),
                    "host {host:?}"
                );
                if let Some(upstream) = upstream {
                    assert!(upstream.len() <= head.len(), "the head grew");
                }
            }
            Err(HeadError::Malformed(reason)) => assert!(!reason.is_empty()),
        }
    });
}
