//! The harness's neutral wording for what it tells the model.

use super::{EventSource, Fuel};

/// Model calls left at or below which every budget change is narrated.
pub const LOW_CALLS: u64 = 3;

/// Bytes left below which every budget change is narrated.
pub const LOW_BYTES: u64 = 64 * 1024;

/// Whether a budget change matters to the model, so the view narrates it: fuel was raised
/// (a regrant, a new loan), or what is left is low or gone. The charge of an ordinary call
/// matters to nobody, and is never narrated. `before` is the last budget the view saw.
pub fn budget_matters(before: Option<&Fuel>, left: &Fuel) -> bool {
    let raised = before.is_some_and(|b| {
        left.model_calls > b.model_calls || left.bytes > b.bytes || left.wakes > b.wakes
    });
    raised || left.model_calls <= LOW_CALLS || left.bytes < LOW_BYTES
}

pub const NO_RESULT: &str = "(l3m) no result was recorded for this tool use";
pub const REWOUND: &str =
    "(l3m) the conversation was rewound to before this tool use finished; it was not run again";

pub fn interrupted(reason: &str) -> String {
    format!("(l3m) interrupted before this tool use finished: {reason}")
}

/// The short, stable id the model is shown for the letter journaled at `seq`: `L` and the
/// seq, never the letter's 64-character id. Stable because a record's seq never changes; the
/// harness maps it back through the Log (the record at that seq names the letter).
pub fn letter_short_id(seq: u64) -> String {
    format!("L{seq}")
}

pub fn event(seq: u64, source: &EventSource, text: &str) -> String {
    match source {
        EventSource::Letter { from, .. } => {
            format!("(l3m) letter {} from {from}: {text}", letter_short_id(seq))
        }
        EventSource::Vigil { vigil } => format!("(l3m) vigil {vigil} fired: {text}"),
        EventSource::ChildDone { child } => format!("(l3m) child {child} is done: {text}"),
        EventSource::ProgramDone { program } => {
            format!("(l3m) program {program} finished: {text}")
        }
        EventSource::Deadline => format!("(l3m) deadline reached: {text}"),
        EventSource::Notice => format!("(l3m) notice: {text}"),
    }
}

pub fn grants(summary: &str) -> String {
    format!("(l3m) your grants changed: {summary}")
}

pub fn budget(summary: &str, left: &Fuel) -> String {
    format!("(l3m) your budget changed: {summary} (left: {left})")
}

pub fn summary(summary: &str) -> String {
    format!("(l3m) summary of earlier conversation: {summary}")
}

pub const SUMMARIZE: &str = "(l3m) You are summarizing the oldest part of an agent's conversation so \
it fits the model's context window. Write a compact summary that keeps what the agent needs to go \
on: the task and who asked, decisions made, files and refs touched, facts learnt, and what was \
left to do. Answer with the summary only.";
