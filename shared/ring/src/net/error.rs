//! Why the HTTP provider refused or failed a fetch; each refusal names the boundary that stopped it.

use std::time::Duration;

use l3m_core::axis::Axis;
use l3m_core::log::Refusal;

/// A fetch that did not happen, or stopped. Every refusal but the body limit is decided before a
/// byte is sent to the refused host.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The URL does not parse.
    #[error("`{url}` is not a URL: {source}")]
    Url {
        /// The URL as given.
        url: String,
        /// What the parser said.
        source: url::ParseError,
    },
    /// The scheme boundary: only `http` and `https` are fetched.
    #[error(
        "refused by the scheme boundary: `{url}` uses `{scheme}:`; only http and https are fetched"
    )]
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// The userinfo boundary: `user@host` hides the real host behind a listed-looking name.
    #[error(
        "refused by the userinfo boundary: `{url}` carries `user@` or a password before its host; write the URL without it"
    )]
    Userinfo {
        /// The URL.
        url: String,
    },
    /// The URL names no host at all.
    #[error("refused by the host boundary: `{url}` names no host")]
    NoHost {
        /// The URL.
        url: String,
    },
    /// The trailing-dot boundary: host rules never end in a dot, so `example.org.` matches none.
    #[error("refused by the trailing-dot boundary: host `{host}` in `{url}` ends with a dot; write `{}`", host.trim_end_matches('.'))]
    TrailingDot {
        /// The URL.
        url: String,
        /// Its host.
        host: String,
    },
    /// The host boundary: no rule of the token reaches this host on this port.
    #[error(
        "refused by the host boundary: `{host}` on port {} is not reached by the token's hosts {listed:?} (a rule without `:port` opens only the scheme's default port)",
        port.map_or_else(|| "default".to_string(), |p| p.to_string())
    )]
    HostNotListed {
        /// The URL.
        url: String,
        /// Its host (an IP literal as the URL parser normalised it).
        host: String,
        /// Its explicit port, if it names one other than the scheme's default.
        port: Option<u16>,
        /// The token's host rules.
        listed: Vec<String>,
    },
    /// The resolver boundary: a name reached the connector that no rule covers.
    #[error(
        "refused by the resolver boundary: `{host}` is not reached by the token's hosts {listed:?}"
    )]
    ResolveRefused {
        /// The name asked for.
        host: String,
        /// The token's host rules.
        listed: Vec<String>,
    },
    /// The redirect boundary: a redirect led to a URL the token does not reach.
    #[error("refused by the redirect boundary: `{from}` redirected to `{to}`: {reason}")]
    Redirect {
        /// The URL that answered with the redirect.
        from: String,
        /// Where it pointed.
        to: String,
        /// Why the target is refused.
        reason: Box<NetError>,
    },
    /// The redirect boundary: more redirects than [`super::MAX_REDIRECTS`].
    #[error("refused by the redirect boundary: `{url}` redirected more than {limit} times")]
    TooManyRedirects {
        /// The URL that would have been followed next.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// The header boundary: only a short list of request headers may be set.
    #[error("refused by the header boundary: header `{name}`: {reason}")]
    Header {
        /// The header name as given.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// The body boundary: the response is larger than the request's `max_bytes`.
    #[error(
        "refused by the body boundary: the body of `{url}` exceeds {limit} bytes; raise max_bytes or fetch less"
    )]
    BodyTooLarge {
        /// The final URL.
        url: String,
        /// The limit.
        limit: usize,
    },
    /// The time boundary: the fetch did not finish within its timeout.
    #[error("refused by the time boundary: `{url}` did not answer within {after:?}")]
    TimedOut {
        /// The URL.
        url: String,
        /// The timeout.
        after: Duration,
    },
    /// A listed name did not resolve.
    #[error("cannot resolve `{host}`: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// The connection or the HTTP exchange failed.
    #[error("fetching `{url}` failed: {source}")]
    Transport {
        /// The URL.
        url: String,
        /// The client's error.
        source: reqwest::Error,
    },
    /// The fetch could not be run: no thread or runtime to run it on.
    #[error("fetching `{url}` could not start: {source}")]
    Runtime {
        /// The URL.
        url: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl NetError {
    /// The boundary that refused, when this is a refusal (not a failure of the network).
    pub fn refusal(&self) -> Option<Refusal> {
        let boundary = match self {
            NetError::Scheme { .. } => "scheme",
            NetError::Userinfo { .. } => "userinfo",
            NetError::NoHost { .. } | NetError::HostNotListed { .. } => "host",
            NetError::TrailingDot { .. } => "trailing-dot",
            NetError::ResolveRefused { .. } => "resolver",
            NetError::Redirect { .. } | NetError::TooManyRedirects { .. } => "redirect",
            NetError::Header { .. } => "header",
            NetError::BodyTooLarge { .. } => "body",
            NetError::TimedOut { .. } => "time",
            _ => return None,
        };
        Some(Refusal::new(boundary, Some(Axis::Net)))
    }
}
