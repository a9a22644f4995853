//! The one boundary between foreign input and the Log: everything a provider sends (reply
//! text, tool names and ids, arguments, error messages, stop reasons) and everything a tool or
//! a letter brings passes [`fit`] before it becomes a record.
//!
//! A record hubd refuses stops the sequencer, and one made of a model's text is refused again at
//! every wake: a crash loop that spends calls and never tells the model. So the writer holds
//! only core's [`Journaled`] records, which exist only for records that pass hubd's own rules
//! ([`l3m_core::log_rule`]); [`fit`] makes any record built from foreign text pass them:
//! - control characters are made visible (`\u{1b}`) in every free-text field (line breaks and
//!   tabs kept where a field is multi-line, none kept in a name), so no commit summary hubd
//!   writes from a record breaks its line;
//! - each field is bounded by its own cap (`caps`) with a note saying what was cut and how
//!   much there was — a tool name at [`MAX_NAME`], a provider's error at [`MAX_ERROR`], a tool
//!   output at [`MAX_TOOL_OUTPUT`], a letter at the model's cap on one result, its note naming
//!   the `read_letter` call that reads on ([`letter_text`]);
//! - whatever still does not fit one stored line has its largest field cut until it does.
//!
//! Doors before the record: a reply too large to store is refused whole ([`check_reply`]), a
//! tool output is cut to the model's cap with a note on how to read past the cut
//! ([`fit_output`]). [`fit`] fails only on the sequencer's own logic (a rewind that does not
//! point back, a tier that does not follow its footprint), never on content.
//!
//! # Layout
//! - `text`: control characters made visible; a field cut with a note.
//! - `reply`: the provider door.
//! - `output`: the tool door.

mod output;
mod reply;
mod text;

use std::borrow::Cow;

use l3m_core::log::{Disposition, EventSource, Record, RecordBody, Verdict};
use l3m_core::log_rule::{Journaled, Refused};
use l3m_core::mail::Letter;
use l3m_core::record_format::MAX_STORED_LINE;

pub use output::{MAX_TOOL_OUTPUT, fit_output};
pub use reply::{MAX_REPLY, check_reply};
pub use text::{Lines, cut, stored_len, visible};

/// The most bytes a name (a tool the model asked for, a provider's stop reason) keeps as
/// stored: real names are a few dozen bytes; an unknown one is echoed back in a refusal.
pub const MAX_NAME: usize = 512;

/// The most bytes a provider's error message (an HTTP body, a stream error, a parser's quote of
/// a malformed reply) keeps as stored: enough to read the provider's reason.
pub const MAX_ERROR: usize = 4096;

/// The most bytes a harness note (a reason, a summary of a change, a reviewer's words) keeps.
pub const MAX_NOTE: usize = 16 * 1024;

/// `record` made storable and admitted: control characters made visible, each field within its
/// cap, the whole within one stored line. Fails only when the record's own logic is wrong.
pub fn fit(mut record: Record) -> Result<Journaled, Refused> {
    caps(&mut record.body);
    // Each round cuts the largest field by at least the excess; a record's fields are few, so
    // a handful of rounds always ends (the bound is a guard, not a tuning).
    for _ in 0..16 {
        let len = record.to_line()?.len();
        if len <= MAX_STORED_LINE {
            break;
        }
        shrink(&mut record.body, len - MAX_STORED_LINE);
    }
    Journaled::new(record)
}

/// How to read on in a cut letter: the `read_letter` call, `{from_byte}` standing for the byte
/// where the cut falls ([`cut`] puts it in).
fn read_on(letter_id: &str) -> String {
    format!(
        "the whole letter stays in your inbox: read on with read_letter, id = {letter_id}, \
         from_byte = {{from_byte}}"
    )
}

/// A letter's text as its event journals it: [`Letter::as_read`], cut to `cap` bytes as stored
/// (the model's cap on one result, so no letter floods a small window) with a note naming the
/// `read_letter` call that reads on from where the cut falls.
pub fn letter_text(letter: &Letter, cap: usize) -> String {
    let mut text = letter.as_read();
    cut(
        &mut text,
        cap.min(MAX_TOOL_OUTPUT),
        "letter",
        &read_on(letter.id.as_str()),
    );
    text
}

/// One field of a record: its text, whether it keeps lines, its cap and how to get the rest.
struct Field<'a> {
    text: &'a mut String,
    lines: Lines,
    cap: usize,
    what: &'static str,
    how: Cow<'static, str>,
}

fn field<'a>(
    text: &'a mut String,
    lines: Lines,
    cap: usize,
    what: &'static str,
    how: impl Into<Cow<'static, str>>,
) -> Field<'a> {
    Field {
        text,
        lines,
        cap,
        what,
        how: how.into(),
    }
}

/// Every free-text field of `body`, with its cap.
fn fields(body: &mut RecordBody) -> Vec<Field<'_>> {
    const BIG: usize = MAX_STORED_LINE;
    let one = Lines::One;
    let kept = Lines::Kept;
    match body {
        RecordBody::SystemPrompt { text, .. } => {
            vec![field(
                text,
                kept,
                BIG,
                "system prompt",
                "shorten the persona",
            )]
        }
        RecordBody::UserLine { text, .. } => {
            vec![field(
                text,
                kept,
                MAX_TOOL_OUTPUT,
                "line",
                "send it in parts",
            )]
        }
        RecordBody::CallStarted {
            provider, model, ..
        } => vec![
            field(provider, one, MAX_NAME, "provider", ""),
            field(model, one, MAX_NAME, "model", ""),
        ],
        RecordBody::AssistantReply {
            text,
            tool_uses,
            stop_reason,
            ..
        } => {
            let mut out = vec![
                field(text, kept, BIG, "reply", "answer in smaller steps"),
                field(stop_reason, one, MAX_NAME, "stop reason", ""),
            ];
            out.extend(
                tool_uses
                    .iter_mut()
                    .map(|u| field(&mut u.name, one, MAX_NAME, "tool name", "")),
            );
            out
        }
        RecordBody::CallFailed { error, .. } => {
            vec![field(error, kept, MAX_ERROR, "error", "")]
        }
        RecordBody::ToolCall { name, .. } => vec![field(name, one, MAX_NAME, "tool name", "")],
        RecordBody::ToolResult {
            output, effects, ..
        } => {
            let mut out = vec![field(
                output,
                kept,
                MAX_TOOL_OUTPUT,
                "output",
                "ask for it in pieces (a line or byte range, a narrower search)",
            )];
            for e in effects.iter_mut() {
                out.push(field(&mut e.target, one, MAX_NOTE, "target", ""));
                if let Some(undo) = &mut e.undo {
                    out.push(field(undo, one, MAX_NOTE, "undo entry", ""));
                }
            }
            out
        }
        RecordBody::Event { text, source, .. } => {
            // A letter's text is `Letter::as_read`, which `read_letter` reads on in by byte;
            // `cut` puts the byte where the kept part ends in place of `{from_byte}`.
            let how: Cow<'static, str> = match source {
                EventSource::Letter { letter_id, .. } => read_on(letter_id).into(),
                _ => "".into(),
            };
            let mut out = vec![field(text, kept, MAX_TOOL_OUTPUT, "event", how)];
            match source {
                EventSource::Vigil { vigil: name } | EventSource::ProgramDone { program: name } => {
                    out.push(field(name, one, MAX_NAME, "name", ""));
                }
                EventSource::Letter {
                    letter_id,
                    in_reply_to,
                    ..
                } => {
                    out.push(field(letter_id, one, MAX_NAME, "letter id", ""));
                    if let Some(id) = in_reply_to {
                        out.push(field(id, one, MAX_NAME, "letter id", ""));
                    }
                }
                EventSource::ChildDone { .. } | EventSource::Deadline | EventSource::Notice => {}
            }
            out
        }
        RecordBody::HookDecision { disposition, .. } => match disposition {
            Disposition::Reply { text } => {
                vec![field(text, kept, MAX_TOOL_OUTPUT, "reply", "")]
            }
            Disposition::Defer { program } => vec![field(program, one, MAX_NAME, "program", "")],
            _ => vec![],
        },
        RecordBody::GrantChange {
            summary,
            grants_commit,
        } => vec![
            field(summary, kept, MAX_NOTE, "summary", ""),
            field(grants_commit, one, MAX_NAME, "commit", ""),
        ],
        RecordBody::BudgetChange { summary, .. } => {
            vec![field(summary, kept, MAX_NOTE, "summary", "")]
        }
        RecordBody::Review { verdict, by, .. } => {
            let mut out = vec![field(by, one, MAX_NAME, "reviewer", "")];
            match verdict {
                Verdict::Safe => {}
                Verdict::Unsafe {
                    reason,
                    alternative,
                } => {
                    out.push(field(reason, kept, MAX_NOTE, "reason", ""));
                    if let Some(alt) = alternative {
                        out.push(field(alt, kept, MAX_NOTE, "alternative", ""));
                    }
                }
                Verdict::Unclear { reason } => {
                    if let Some(reason) = reason {
                        out.push(field(reason, kept, MAX_NOTE, "reason", ""));
                    }
                }
            }
            out
        }
        RecordBody::Rewind { reason, .. } | RecordBody::Interrupted { reason, .. } => {
            vec![field(reason, kept, MAX_NOTE, "reason", "")]
        }
        RecordBody::Compaction { summary, .. } => {
            vec![field(summary, kept, MAX_TOOL_OUTPUT, "summary", "")]
        }
        RecordBody::ToolStarted { .. } | RecordBody::TurnEnd | RecordBody::OutOfFuel { .. } => {
            vec![]
        }
    }
}

/// Makes each field's control characters visible and cuts it to its own cap.
fn caps(body: &mut RecordBody) {
    for f in fields(body) {
        visible(f.text, f.lines);
        cut(f.text, f.cap, f.what, &f.how);
    }
}

/// Cuts the largest field by at least `excess` bytes as stored; when the bulk is not text (a
/// reply's arguments), the largest argument is replaced by a note, so the tool use fails with
/// a fixable error instead of the record failing.
fn shrink(body: &mut RecordBody, excess: usize) {
    let largest = fields(body)
        .into_iter()
        .max_by_key(|f| stored_len(f.text))
        .map(|f| {
            let len = stored_len(f.text);
            (len, f)
        });
    if let Some((len, f)) = largest
        && len > excess + text::NOTE_ROOM * 2
    {
        cut(f.text, len - excess - 1, f.what, &f.how);
        return;
    }
    if let RecordBody::AssistantReply { tool_uses, .. } = body
        && let Some(u) = tool_uses
            .iter_mut()
            .max_by_key(|u| u.input.to_string().len())
    {
        let len = u.input.to_string().len();
        u.input = serde_json::Value::String(format!(
            "(l3m) these arguments were cut: {len} bytes do not fit the Log; send them in \
             smaller calls"
        ));
    }
}

#[cfg(test)]
mod tests;
