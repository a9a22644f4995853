//! Compaction at the window: before a call whose request would near the model's context
//! window, ask the model for a summary of the oldest span, journal it as a `compaction` record,
//! and only then start the call, on the compacted view.
//!
//! What is measured is core's ([`view_bytes`] of the view, plus the tools and notes the request
//! carries); the bytes become tokens through a [`TokenEstimate`] that every reply's reported
//! usage calibrates, so the estimate follows the model actually asked. The summary is asked
//! for off the writer (the pass never waits on the world); until it comes, no call starts. A
//! summary that fails becomes the harness's own short account of what was elided, so a
//! request over the window is never sent. An interrupt or a rewind drops a summary under way.

use l3m_core::view::{
    OldestSpan, TokenEstimate, View, Window, message_bytes, summary_request, view_bytes,
};

use super::*;

/// The writer's gauge of its requests: the estimate it calibrates, what the last request
/// measured, and the compaction under way.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    pub(crate) estimate: TokenEstimate,
    /// Measured bytes of the request of the last `call-started` (live or read at boot), to
    /// calibrate on its reply's usage.
    pub(crate) sent_bytes: u64,
    /// A summary asked for and not yet journaled.
    pub(crate) compacting: Option<OldestSpan>,
    /// The measured bytes of each message of the view last measured, and their sum: the view
    /// only appends or changes its last message between calls (unless reshaped), so measuring
    /// costs what changed, not the history.
    sizes: Vec<u64>,
    total: u64,
    /// A record reshaped the view (rewind, compaction, new epoch): measure it all again.
    pub(crate) stale: bool,
    /// A compaction was journaled since the last call started: the next call goes as it is,
    /// so a tail that alone nears the window costs one summary, never a summary per pass.
    pub(crate) compacted: bool,
    /// The smallest request (measured bytes) a provider refused as over its context window:
    /// whatever the configured window says, requests are kept well below it from then on.
    pub(crate) overflow: Option<u64>,
}

impl Gauge {
    /// `view`'s measure, [`view_bytes`], from what changed since the last call.
    fn view_size(&mut self, view: &View) -> u64 {
        if self.stale || view.messages.len() < self.sizes.len() {
            self.sizes.clear();
            self.total = 0;
            self.stale = false;
        }
        let keep = self.sizes.len().saturating_sub(1);
        for size in self.sizes.drain(keep..) {
            self.total -= size;
        }
        for message in &view.messages[keep..] {
            let size = message_bytes(message);
            self.sizes.push(size);
            self.total += size;
        }
        debug_assert_eq!(self.total + view.system.len() as u64, view_bytes(view));
        self.total + view.system.len() as u64
    }
}

/// A summary's outcome, back from the model.
#[derive(Debug)]
pub(crate) struct Summary {
    pub(crate) span: OldestSpan,
    pub(crate) text: Result<String, String>,
}

impl Session {
    /// The model's window as the session sees it.
    fn window(&self) -> Window {
        Window {
            tokens: u64::from(self.models.economy.context_window),
            reply: u64::from(self.limits.max_tokens),
        }
    }

    /// The measured bytes a request may take: what the window leaves for input, and, once a
    /// provider refused a request as too long, three quarters of that request at most.
    pub(super) fn input_bytes(&self) -> u64 {
        let window = self.gauge.estimate.bytes(self.window().input_budget());
        match self.gauge.overflow {
            Some(refused) => window.min(refused / 4 * 3),
            None => window,
        }
    }

    /// Learns from a request refused as too long (the last one sent): the next compaction
    /// check runs afresh against the smaller measure.
    pub(super) fn learn_overflow(&mut self) {
        let sent = self.gauge.sent_bytes.max(1);
        self.gauge.overflow = Some(self.gauge.overflow.map_or(sent, |o| o.min(sent)));
        self.gauge.compacted = false;
    }

    /// The measured bytes of what every request carries besides the view: tools and notes.
    pub(super) fn fixed_bytes(&self) -> u64 {
        let tools: u64 = self
            .specs
            .iter()
            .map(|t| (t.name.len() + t.description.len() + t.input_schema.to_string().len()) as u64)
            .sum();
        tools + self.models.primary.2.as_deref().map_or(0, str::len) as u64
    }

    /// The measured bytes of the request the next call would send.
    pub(super) fn request_bytes(&mut self) -> u64 {
        self.gauge.view_size(self.log.fold.view()) + self.fixed_bytes()
    }

    /// Calibrates the estimate on a reply's usage.
    pub(super) fn calibrate(&mut self, usage: &l3m_core::log::Usage) {
        let billed = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        self.gauge.estimate.observe(self.gauge.sent_bytes, billed);
    }

    /// Whether the pass must wait for a compaction instead of planning: one is under way, or a
    /// call is owed whose request would near the window and a span can be compacted (then one
    /// is started).
    pub(super) fn compaction_first(&mut self) -> bool {
        if self.gauge.compacting.is_some() {
            return true;
        }
        if self.gauge.compacted {
            return false;
        }
        let owed = &self.log.owed;
        if !owed.call_owed() || owed.fuel_short().is_some() {
            return false;
        }
        let window = self.window();
        let fixed = self.fixed_bytes();
        let measured = self.request_bytes();
        let overflows = self
            .gauge
            .overflow
            .is_some_and(|refused| measured > refused / 4 * 3 / 4 * 3);
        if !window.needs_compaction(self.gauge.estimate.tokens(measured)) && !overflows {
            return false;
        }
        let keep = self
            .gauge
            .estimate
            .bytes(window.keep())
            .min(self.input_bytes() / 3)
            .saturating_sub(fixed);
        let Some(span) = self.log.fold.oldest_span(keep) else {
            return false;
        };
        self.start_summary(span, window);
        true
    }

    fn start_summary(&mut self, span: OldestSpan, window: Window) {
        let summary_tokens = (window.input_budget() / 12).max(64);
        let room = self
            .gauge
            .estimate
            .bytes(window.input_budget().saturating_sub(summary_tokens))
            .min(self.input_bytes() / 4 * 3)
            .saturating_sub(2048);
        let messages = &self.log.fold.view().messages[..span.messages];
        let request = ModelRequest {
            model: self.models.primary.1.clone(),
            view: summary_request(messages, usize::try_from(room).unwrap_or(usize::MAX)),
            notes: None,
            tools: Vec::new(),
            max_tokens: u32::try_from(summary_tokens).unwrap_or(u32::MAX),
            call: match CallId::new(format!("compact-{}", self.log.owed.next_seq())) {
                Ok(call) => call,
                Err(_) => return,
            },
        };
        let elided: u64 = messages.iter().map(message_bytes).sum();
        let limit = usize::try_from(self.gauge.estimate.bytes(summary_tokens)).unwrap_or(0);
        let provider = Arc::clone(&self.models.primary.0);
        let tx = self.tx.clone();
        self.gauge.compacting = Some(span);
        tracing::info!(agent = %self.agent, from = span.from, to = span.to, "compacting");
        tokio::spawn(async move {
            let text = match provider.complete(&request).await {
                Ok(reply) if !reply.text.trim().is_empty() => Ok(cut(reply.text, limit)),
                Ok(_) => Err("the model answered with no summary".to_owned()),
                Err(e) => Err(e.to_string()),
            }
            .map_err(|e| {
                format!(
                    "(the model could not summarize: {e}) {} earlier messages ({elided} bytes) \
                     were elided; the full history stays in the Log",
                    span.messages
                )
            });
            let _closed = tx.send(Input::Summary(Summary { span, text }));
        });
    }

    /// Forgets the summary under way (an interrupt or a rewind): what comes back is dropped,
    /// and the next pass decides afresh.
    pub(super) fn drop_summary(&mut self) {
        self.gauge.compacting = None;
    }

    /// Journals a summary that came back (or the account that stands in for one).
    pub(super) fn summarized(&mut self, summary: Summary) {
        if self.gauge.compacting != Some(summary.span) {
            return;
        }
        self.gauge.compacting = None;
        self.gauge.compacted = true;
        let text = summary.text.unwrap_or_else(|account| account);
        self.signal_or_drop(Signal::Compact {
            from: summary.span.from,
            to: summary.span.to,
            summary: text,
        });
    }
}

/// `text` cut to about `limit` bytes at a character boundary.
fn cut(mut text: String, limit: usize) -> String {
    if text.len() > limit.max(64) {
        let mut at = limit.max(64);
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push_str(" [cut]");
    }
    text
}
