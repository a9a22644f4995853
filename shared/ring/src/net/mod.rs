//! The HTTP provider: GET and HEAD to the hosts a [`NetToken`] reaches, and nowhere else.
//!
//! [`fetch`] refuses — with a [`NetError`] naming the boundary — at three points, each using the
//! same rules (the token's [`HostPattern`](l3m_core::grant::HostPattern)s, see
//! [`NetToken::allows`]):
//! - **before the request**, on the parsed URL: only `http`/`https`; no userinfo
//!   (`http://listed.example@elsewhere/`); no trailing-dot host (host rules never have one, so
//!   it is refused rather than normalised); an IP literal only if the token lists exactly that
//!   literal; names compared case-insensitively after the URL parser's IDNA (punycode)
//!   encoding; a rule without `:port` opens only the scheme's default port, a rule with one
//!   opens that port only;
//! - **at connect**: the client resolves names only through a resolver that refuses every name
//!   no rule reaches, and uses no proxy (environment proxies are ignored);
//! - **at each redirect**: the target passes the same URL check, and at most
//!   [`MAX_REDIRECTS`] are followed.
//!
//! The body is read chunk by chunk and refused once it passes `max_bytes` (a `Content-Length`
//! above the limit is refused before any body is read), so nothing is buffered unbounded.
//! Request headers are limited to [`ALLOWED_HEADERS`]; `Host`, cookies and credentials cannot
//! be set. TLS is rustls with the webpki root store; each fetch builds its own client, so no
//! connection or check outlives the call that made it.
//!
//! Limitation: a listed name is trusted to resolve where its owner points it; the provider does
//! not refuse names that resolve to private or loopback addresses.

mod error;
mod guard;
mod scope;

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::tokens::NetToken;

pub use error::NetError;

/// The most redirects one fetch follows.
pub const MAX_REDIRECTS: usize = 5;

/// The request headers a tool may set (lowercase). Everything else — `host`, `cookie`,
/// `authorization`, proxies' headers — is refused.
pub const ALLOWED_HEADERS: &[&str] = &[
    "accept",
    "accept-language",
    "cache-control",
    "if-modified-since",
    "if-none-match",
    "range",
    "user-agent",
];

/// The HTTP methods the provider sends: only those that read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FetchMethod {
    /// `GET`: fetch the body.
    Get,
    /// `HEAD`: fetch the status and headers only.
    Head,
}

/// One fetch, as a tool asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    /// GET or HEAD.
    pub method: FetchMethod,
    /// An absolute `http` or `https` URL.
    pub url: String,
    /// Request headers, each named in [`ALLOWED_HEADERS`].
    pub headers: Vec<(String, String)>,
    /// The largest body accepted; a larger one is refused, not cut.
    pub max_bytes: usize,
    /// How long the whole fetch, body included, may take.
    pub timeout: Duration,
}

impl FetchRequest {
    /// A GET of `url` with no headers, a 10 MiB body limit and a 30 s timeout.
    pub fn get(url: impl Into<String>) -> Self {
        Self {
            method: FetchMethod::Get,
            url: url.into(),
            headers: Vec::new(),
            max_bytes: 10 << 20,
            timeout: Duration::from_secs(30),
        }
    }
}

/// What a fetch brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResponse {
    /// The HTTP status code.
    pub status: u16,
    /// The response headers, names lowercase, values decoded lossily as UTF-8.
    pub headers: Vec<(String, String)>,
    /// The body, at most the request's `max_bytes` (empty for HEAD).
    pub body: Vec<u8>,
    /// The URL that answered, after any redirects.
    pub final_url: String,
}

/// Fetches `request.url` if `token` reaches it, following only redirects it also reaches.
pub async fn fetch(token: &NetToken, request: &FetchRequest) -> Result<FetchResponse, NetError> {
    let url = scope::parse_allowed(token, &request.url)?;
    let headers = request_headers(&request.headers)?;
    let shown = url.as_str().to_string();
    let transport = |source: reqwest::Error| NetError::Transport {
        url: shown.clone(),
        source,
    };

    let rules = Arc::new(NetToken::new(token.hosts().clone()));
    let refusals = guard::Refusals::default();
    let client = reqwest::Client::builder()
        .no_proxy()
        .dns_resolver(Arc::new(guard::TokenResolver {
            token: Arc::clone(&rules),
            refusals: refusals.clone(),
        }))
        .redirect(guard::redirect_policy(rules, refusals.clone()))
        .referer(false)
        .timeout(request.timeout)
        .build()
        .map_err(transport)?;
    let method = match request.method {
        FetchMethod::Get => reqwest::Method::GET,
        FetchMethod::Head => reqwest::Method::HEAD,
    };
    let failed = |err: reqwest::Error| {
        refusals.take().unwrap_or_else(|| {
            if err.is_timeout() {
                NetError::TimedOut {
                    url: shown.clone(),
                    after: request.timeout,
                }
            } else {
                transport(err)
            }
        })
    };

    let mut response = client
        .request(method, url)
        .headers(headers)
        .send()
        .await
        .map_err(failed)?;
    let final_url = response.url().as_str().to_string();
    let too_large = || NetError::BodyTooLarge {
        url: final_url.clone(),
        limit: request.max_bytes,
    };
    if response
        .content_length()
        .is_some_and(|len| len > request.max_bytes as u64)
    {
        return Err(too_large());
    }
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(name, value)| {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            (name.as_str().to_string(), value)
        })
        .collect();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > request.max_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(FetchResponse {
        status,
        headers,
        body,
        final_url,
    })
}

/// Builds the request headers, refusing any name not in [`ALLOWED_HEADERS`] and any value that
/// is not a valid header value.
fn request_headers(asked: &[(String, String)]) -> Result<HeaderMap, NetError> {
    let mut map = HeaderMap::new();
    for (name, value) in asked {
        let refuse = |reason: String| NetError::Header {
            name: name.clone(),
            reason,
        };
        let lower = name.to_ascii_lowercase();
        if !ALLOWED_HEADERS.contains(&lower.as_str()) {
            return Err(refuse(format!("only {ALLOWED_HEADERS:?} may be set")));
        }
        let header = HeaderName::from_bytes(lower.as_bytes()).map_err(|e| refuse(e.to_string()))?;
        let value = HeaderValue::from_str(value).map_err(|e| refuse(e.to_string()))?;
        map.append(header, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowlisted_headers_with_valid_values_are_built() {
        let own = |n: &str, v: &str| (n.to_string(), v.to_string());
        let map =
            request_headers(&[own("Accept", "text/html"), own("range", "bytes=0-9")]).unwrap();
        assert_eq!(map.len(), 2);
        for bad in [
            own("Host", "evil"),
            own("cookie", "a=b"),
            own("accept", "a\nb"),
        ] {
            assert!(
                matches!(
                    request_headers(std::slice::from_ref(&bad)),
                    Err(NetError::Header { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
