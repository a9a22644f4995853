//! The economy of a request: what a view will cost in tokens, when it must be compacted, and
//! which oldest span a compaction summarizes.
//!
//! The sequencer measures the view it would send (its JSON, [`view_bytes`]) and turns bytes
//! into tokens with a [`TokenEstimate`] calibrated by the usage each reply reports, so the
//! estimate follows the dialect and tokenizer of the model actually asked. Past three quarters
//! of what the [`Window`] leaves for input it asks the model for a summary of
//! [`ViewFold::oldest_span`], journals it as a `compaction` record, and the view shows the
//! summary instead of the span. The Log keeps every record, so `l3m log`, replay, rewind and
//! fork still see the whole history.

use super::*;

/// Bytes per token assumed before any usage is reported: fewer than real tokenizers average on
/// prose and code (about four), so the first estimates err high, never low.
pub const UNCALIBRATED_BYTES_PER_TOKEN: u64 = 3;

/// The most measured bytes one token is ever taken to stand for, whatever usage is reported: a
/// provider that under-reports (a prompt of one token) would otherwise switch compaction off and
/// let requests grow past the window. Real tokenizers average about four bytes of prose a token.
pub const MAX_BYTES_PER_TOKEN: u64 = 4;

/// Tokens per measured byte, learnt from the usage the provider reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenEstimate {
    /// Measured request bytes of the calls observed.
    bytes: u64,
    /// The input tokens the provider billed for them (full, cache read and cache write).
    tokens: u64,
}

impl TokenEstimate {
    /// Notes that a request measuring `bytes` was billed `input_tokens`; a report of zero
    /// (providers that count nothing) teaches nothing.
    pub fn observe(&mut self, bytes: u64, input_tokens: u64) {
        if bytes > 0 && input_tokens > 0 {
            self.bytes = self.bytes.saturating_add(bytes);
            self.tokens = self.tokens.saturating_add(input_tokens);
        }
    }

    /// The tokens `bytes` will cost: the observed rate plus an eighth for safety, or
    /// [`UNCALIBRATED_BYTES_PER_TOKEN`] before any observation; never fewer than one token per
    /// [`MAX_BYTES_PER_TOKEN`] bytes, so reported usage can raise the estimate, never sink it
    /// below the bytes' own measure.
    pub fn tokens(&self, bytes: u64) -> u64 {
        let raw = if self.bytes == 0 {
            bytes.div_ceil(UNCALIBRATED_BYTES_PER_TOKEN)
        } else {
            let scaled = u128::from(bytes) * u128::from(self.tokens);
            u64::try_from(scaled.div_ceil(u128::from(self.bytes))).unwrap_or(u64::MAX)
        };
        raw.saturating_add(raw / 8)
            .max(bytes.div_ceil(MAX_BYTES_PER_TOKEN))
    }

    /// The bytes that cost at most `tokens` (the inverse of [`TokenEstimate::tokens`], rounded
    /// down), for sizing what may be sent.
    pub fn bytes(&self, tokens: u64) -> u64 {
        let tokens = tokens.saturating_mul(8) / 9;
        let calibrated = if self.tokens == 0 {
            tokens.saturating_mul(UNCALIBRATED_BYTES_PER_TOKEN)
        } else {
            let scaled = u128::from(tokens) * u128::from(self.bytes) / u128::from(self.tokens);
            u64::try_from(scaled).unwrap_or(u64::MAX)
        };
        calibrated.min(tokens.saturating_mul(MAX_BYTES_PER_TOKEN))
    }
}

/// A model's context window and the reply it must leave room for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The model's context window, in tokens.
    pub tokens: u64,
    /// The reply's budget (`max_tokens`), which shares the window with the request.
    pub reply: u64,
}

impl Window {
    /// The tokens a request may use: the window less the reply's room.
    pub fn input_budget(&self) -> u64 {
        self.tokens.saturating_sub(self.reply)
    }

    /// Whether a request estimated at `tokens` must first be compacted: past three quarters of
    /// the input budget, so one more step (a capped tool result, a reply) still fits.
    pub fn needs_compaction(&self, tokens: u64) -> bool {
        tokens > self.input_budget() / 4 * 3
    }

    /// The tokens the tail a compaction keeps may use: a third of the input budget.
    pub fn keep(&self) -> u64 {
        self.input_budget() / 3
    }
}

/// The measured size of a view: its JSON, the same measure for every dialect (the estimate's
/// calibration absorbs how each dialect renders it).
pub fn view_bytes(view: &View) -> u64 {
    view.system.len() as u64 + view.messages.iter().map(message_bytes).sum::<u64>()
}

/// The measured size of one message.
pub fn message_bytes(message: &Message) -> u64 {
    serde_json::to_vec(message).map_or(0, |v| v.len() as u64)
}

/// The oldest span of a view a compaction would summarize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OldestSpan {
    /// First record of the span.
    pub from: u64,
    /// Last record of the span.
    pub to: u64,
    /// How many of the view's first messages it covers: what the summary must stand for.
    pub messages: usize,
}

impl ViewFold {
    /// The text parts of the view's user turns, each with the seq of the record it came from,
    /// so a fold can tell the user's lines from the harness's narration by record kind.
    pub fn texts_by_origin(&self) -> impl Iterator<Item = (u64, &str)> {
        self.now
            .view
            .messages
            .iter()
            .zip(&self.now.origins)
            .flat_map(|(message, origins)| match message {
                Message::User { content } => content
                    .iter()
                    .zip(&origins.seqs)
                    .filter_map(|(part, seq)| match part {
                        Part::Text { text } => Some((*seq, text.as_str())),
                        Part::ToolResult { .. } => None,
                    })
                    .collect::<Vec<_>>(),
                Message::Assistant { .. } => Vec::new(),
            })
    }

    /// The oldest span to compact so that the messages after it measure at most `keep_bytes`
    /// (or as few as can be kept, when even the last exchange is larger): from the view's first
    /// message up to just before an assistant reply, so a tool use and its results are never
    /// parted and the tail from that reply on (with the last message, the one a call answers)
    /// stays exactly as it was. `None` when no assistant reply follows the first message.
    pub fn oldest_span(&self, keep_bytes: u64) -> Option<OldestSpan> {
        let messages = &self.now.view.messages;
        let origins = &self.now.origins;
        // An element shown out of record order (an event shown when its decision came) can
        // sit after records newer than it: the span must end before the oldest record the
        // kept tail shows, or the stretch would reach into the tail.
        let mut tail = 0u64;
        let mut tail_min = u64::MAX;
        let mut best = None;
        for k in (1..messages.len()).rev() {
            tail = tail.saturating_add(message_bytes(&messages[k]));
            tail_min = origins[k].seqs.iter().copied().fold(tail_min, u64::min);
            let to = origins[k - 1].peak.min(tail_min.saturating_sub(1));
            // A summary's origin is its compaction, newer than what it was shown before: the
            // span starts at the oldest record anything before the cut came from.
            let from = origins[..k]
                .iter()
                .flat_map(|o| o.seqs.iter().copied())
                .min()
                .unwrap_or(u64::MAX);
            if !matches!(messages[k], Message::Assistant { .. }) || to < from {
                continue;
            }
            if best.is_some() && tail > keep_bytes {
                break;
            }
            best = Some(OldestSpan {
                from,
                to,
                messages: k,
            });
        }
        best
    }
}

/// The request a compaction sends: `messages` (the span) as a plain transcript, cut to
/// `max_bytes` by eliding its middle, and what the summary must keep.
pub fn summary_request(messages: &[Message], max_bytes: usize) -> View {
    let mut transcript = String::new();
    for message in messages {
        match message {
            Message::User { content } => {
                for part in content {
                    match part {
                        Part::Text { text } => transcript.push_str(&format!("[user] {text}\n")),
                        Part::ToolResult {
                            id,
                            output,
                            is_error,
                        } => {
                            let kind = if *is_error { "error" } else { "result" };
                            transcript.push_str(&format!("[{kind} {id}] {output}\n"));
                        }
                    }
                }
            }
            Message::Assistant { text, tool_uses } => {
                if !text.is_empty() {
                    transcript.push_str(&format!("[assistant] {text}\n"));
                }
                for u in tool_uses {
                    transcript.push_str(&format!("[call {} {}] {}\n", u.id, u.name, u.input));
                }
            }
        }
    }
    View {
        system: narrate::SUMMARIZE.to_owned(),
        messages: vec![Message::User {
            content: vec![Part::Text {
                text: elide_middle(&transcript, max_bytes),
            }],
        }],
    }
}

/// `text` cut to at most `max` bytes by replacing its middle with a marker, at character
/// boundaries.
fn elide_middle(text: &str, max: usize) -> String {
    const MARK: &str = "\n[... elided ...]\n";
    if text.len() <= max {
        return text.to_owned();
    }
    let room = max.saturating_sub(MARK.len()) / 2;
    let head = floor_boundary(text, room);
    let tail = ceil_boundary(text, text.len() - room);
    format!("{}{MARK}{}", &text[..head], &text[tail..])
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}
