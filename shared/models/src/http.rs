//! The HTTP client both dialects share: one POST of a JSON body, its streamed reply, deadlines,
//! and retries that all carry one idempotency key.
//!
//! A dialect gives an [`Endpoint`] its URL and fixed headers (auth, version), then for each
//! request the rendered body and a fresh [`StreamDecoder`] per try. [`Endpoint::send`] posts,
//! turns a non-success status into [`ModelError::Status`] (with a body excerpt and the provider's
//! `retry-after`), feeds the body's server-sent events to the decoder until it says the reply is
//! complete, and retries a retryable failure after [`Backoff::delay`], up to
//! [`HttpTuning::max_retries`] times. A failure mid-stream retries the whole request: nothing of
//! a partial reply leaves this module.
//!
//! Deadlines: [`HttpTuning::timeout`] bounds one try from sending to the last byte;
//! [`HttpTuning::idle_timeout`] bounds the gap between two chunks of the body once the headers
//! are in (Anthropic sends `ping` events, so a healthy stream is never idle for long).
//!
//! # Layout
//! - [`HttpTuning`]: deadlines, retry budget, backoff and the [`Pause`] retries wait through.
//! - [`StreamDecoder`]: what a dialect implements to assemble a reply from events.
//! - [`Endpoint`]: the client, the URL and the retry loop.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::backoff::Backoff;
use crate::error::{BODY_EXCERPT_CHARS, ModelError, TimeoutKind, excerpt};
use crate::sse;
use crate::{ModelReply, ModelRequest};

/// The most bytes one reply may stream; a reply is text and tool inputs, far below this.
pub const MAX_REPLY_BYTES: usize = 64 * 1024 * 1024;
/// The most bytes of an error body read to make its excerpt.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// How retries wait. Behind a trait so tests can record the waits instead of sleeping them.
pub trait Pause: Send + Sync + fmt::Debug {
    /// Waits `delay`.
    fn pause(&self, delay: Duration) -> BoxFuture<'static, ()>;
}

/// Waits on tokio's timer.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioPause;

impl Pause for TokioPause {
    fn pause(&self, delay: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(delay))
    }
}

/// Deadlines and the retry policy of an endpoint.
#[derive(Debug, Clone)]
pub struct HttpTuning {
    /// The deadline of one try, from sending to the last byte.
    pub timeout: Duration,
    /// The longest gap between two chunks of a streamed body.
    pub idle_timeout: Duration,
    /// The deadline for making the connection.
    pub connect_timeout: Duration,
    /// How many times a retryable failure is tried again (0: one try only).
    pub max_retries: u32,
    /// The delays between tries.
    pub backoff: Backoff,
    /// How the delays are waited.
    pub pause: Arc<dyn Pause>,
}

impl Default for HttpTuning {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(90),
            connect_timeout: Duration::from_secs(20),
            max_retries: 3,
            backoff: Backoff::default(),
            pause: Arc::new(TokioPause),
        }
    }
}

/// What a dialect implements to turn a stream of events into a reply.
pub trait StreamDecoder: Send {
    /// Reads one event; `Ok(true)` once the reply is complete (no more events are read).
    fn event(&mut self, event: sse::Event) -> Result<bool, ModelError>;

    /// The reply. `complete` says whether [`Self::event`] reported the end, or the body ended
    /// first (some servers close without their final marker; the dialect decides).
    fn finish(self, complete: bool) -> Result<ModelReply, ModelError>;
}

/// One model endpoint: a client, a URL and the headers every request carries.
#[derive(Clone)]
pub struct Endpoint {
    /// The dialect's name, for errors and logs.
    provider: &'static str,
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    tuning: HttpTuning,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The headers hold the API key; they are not shown.
        f.debug_struct("Endpoint")
            .field("provider", &self.provider)
            .field("url", &self.url)
            .field("tuning", &self.tuning)
            .finish_non_exhaustive()
    }
}

/// A fixed header, built from configuration: a bad value is a configuration error.
pub(crate) fn header_pair(
    name: &'static str,
    value: &str,
    secret: bool,
) -> Result<(HeaderName, HeaderValue), ModelError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| {
        ModelError::config(format!(
            "the value for header {name} holds characters a header cannot carry"
        ))
    })?;
    value.set_sensitive(secret);
    Ok((HeaderName::from_static(name), value))
}

impl Endpoint {
    /// An endpoint of dialect `provider` posting to `url` with `headers` on every request.
    pub fn new(
        provider: &'static str,
        url: String,
        headers: HeaderMap,
        tuning: HttpTuning,
    ) -> Result<Self, ModelError> {
        reqwest::Url::parse(&url)
            .map_err(|e| ModelError::config(format!("base URL gives {url:?}, not a URL: {e}")))?;
        let client = reqwest::Client::builder()
            .connect_timeout(tuning.connect_timeout)
            .build()
            .map_err(|e| ModelError::config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            provider,
            client,
            url,
            headers,
            tuning,
        })
    }

    /// Posts `body` for `request` and assembles the streamed reply with a decoder from
    /// `decoder`, one fresh decoder per try, retrying retryable failures.
    pub async fn send<D: StreamDecoder, B: serde::Serialize + ?Sized>(
        &self,
        request: &ModelRequest,
        body: &B,
        decoder: impl Fn() -> D,
    ) -> Result<ModelReply, ModelError> {
        let key = request.idempotency_key();
        let bytes = serde_json::to_vec(body).map_err(|e| {
            ModelError::config(format!("the request body cannot be serialized: {e}"))
        })?;
        let mut retry = 0;
        tracing::debug!(provider = self.provider, url = %self.url, call = %request.call, "model request");
        loop {
            let error = match self.try_once(&key, bytes.clone(), decoder()).await {
                Ok(reply) => return Ok(reply),
                Err(error) => error,
            };
            if !error.retryable() || retry >= self.tuning.max_retries {
                return Err(error);
            }
            retry += 1;
            let delay = self.tuning.backoff.delay(retry, &key, error.retry_after());
            tracing::warn!(
                provider = self.provider, url = %self.url, call = %request.call, retry, ?delay, %error,
                "model request failed; trying again"
            );
            self.tuning.pause.pause(delay).await;
        }
    }

    async fn try_once<D: StreamDecoder>(
        &self,
        key: &str,
        body: Vec<u8>,
        decoder: D,
    ) -> Result<ModelReply, ModelError> {
        let work = async {
            let response = self
                .client
                .post(&self.url)
                .headers(self.headers.clone())
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "text/event-stream")
                .header("idempotency-key", key)
                .body(body)
                .send()
                .await
                .map_err(|e| self.transport(e))?;
            if !response.status().is_success() {
                return Err(self.status_error(response).await);
            }
            self.read_stream(response, decoder).await
        };
        tokio::time::timeout(self.tuning.timeout, work)
            .await
            .unwrap_or_else(|_| Err(self.timeout(TimeoutKind::Request, self.tuning.timeout)))
    }

    async fn read_stream<D: StreamDecoder>(
        &self,
        mut response: reqwest::Response,
        mut decoder: D,
    ) -> Result<ModelReply, ModelError> {
        let mut parser = sse::Parser::new();
        let mut total = 0usize;
        let mut saw_event = false;
        // The body's first bytes, as evidence when it turns out not to be an event stream
        // (a proxy's HTML page, a JSON error with status 200).
        let mut head = Vec::new();
        let bad_stream = |e: sse::SseError| ModelError::BadResponse {
            provider: self.provider,
            what: e.to_string(),
        };
        loop {
            let chunk = tokio::time::timeout(self.tuning.idle_timeout, response.chunk())
                .await
                .map_err(|_| self.timeout(TimeoutKind::Idle, self.tuning.idle_timeout))?
                .map_err(|e| self.transport(e))?;
            let Some(chunk) = chunk else { break };
            total += chunk.len();
            if total > MAX_REPLY_BYTES {
                return Err(ModelError::BadResponse {
                    provider: self.provider,
                    what: format!("the reply streamed more than {MAX_REPLY_BYTES} bytes"),
                });
            }
            if head.len() < BODY_EXCERPT_CHARS {
                let room = BODY_EXCERPT_CHARS - head.len();
                head.extend_from_slice(&chunk[..room.min(chunk.len())]);
            }
            for event in parser.feed(&chunk).map_err(bad_stream)? {
                saw_event = true;
                if decoder.event(event)? {
                    return decoder.finish(true);
                }
            }
        }
        if let Some(event) = parser.finish().map_err(bad_stream)? {
            saw_event = true;
            if decoder.event(event)? {
                return decoder.finish(true);
            }
        }
        match decoder.finish(false) {
            Err(ModelError::BadResponse { provider, what }) if !saw_event => {
                Err(ModelError::BadResponse {
                    provider,
                    what: format!(
                        "{what}; the body held no server-sent events: {:?}",
                        excerpt(&String::from_utf8_lossy(&head))
                    ),
                })
            }
            other => other,
        }
    }

    async fn status_error(&self, mut response: reqwest::Response) -> ModelError {
        let status = response.status().as_u16();
        let retry_after = retry_after(response.headers());
        let mut body = Vec::new();
        while body.len() < MAX_ERROR_BODY_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        ModelError::Status {
            status,
            url: self.url.clone(),
            body: excerpt(&String::from_utf8_lossy(&body)),
            retry_after,
        }
    }

    fn transport(&self, error: reqwest::Error) -> ModelError {
        let url = self.url.clone();
        // reqwest's Display is terse; its source chain says what actually broke.
        let mut detail = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            detail.push_str(": ");
            detail.push_str(&cause.to_string());
            source = cause.source();
        }
        if error.is_builder() {
            // A request we could not even build will not build on a retry either.
            ModelError::config(format!("cannot build the request to {url}: {detail}"))
        } else if error.is_timeout() {
            // No reqwest-level deadline is set but the connect one; ours are tokio timeouts.
            self.timeout(TimeoutKind::Connect, self.tuning.connect_timeout)
        } else if error.is_connect() {
            ModelError::Connect { url, detail }
        } else {
            ModelError::Transport { url, detail }
        }
    }

    fn timeout(&self, kind: TimeoutKind, after: Duration) -> ModelError {
        ModelError::Timeout {
            kind,
            after,
            url: self.url.clone(),
        }
    }
}

/// The wait a provider asks for: `retry-after-ms` (milliseconds, as OpenAI sends) or
/// `retry-after` in seconds. The HTTP-date form would need the clock and is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
    };
    if let Some(ms) = number("retry-after-ms") {
        return Duration::try_from_secs_f64(ms / 1000.0).ok();
    }
    Duration::try_from_secs_f64(number("retry-after")?).ok()
}

/// `base` with a trailing `/` or `/v1` removed, then `path` (which starts with `/v1/`), so both
/// `http://host:8000` and `http://host:8000/v1` name the same endpoint.
pub(crate) fn join_url(base: &str, path: &str) -> String {
    let base = base.trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    format!("{base}{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("7"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn join_url_accepts_bases_with_or_without_v1() {
        for base in [
            "http://h:1",
            "http://h:1/",
            "http://h:1/v1",
            "http://h:1/v1/",
        ] {
            assert_eq!(join_url(base, "/v1/messages"), "http://h:1/v1/messages");
        }
    }
}
