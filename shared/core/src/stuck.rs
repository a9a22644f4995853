//! Whether an agent's last turn ended in a failure it cannot get past by itself, and what would
//! unstick it: the fold behind `stuck: <why>; <what to do>` in `l3m tree`, `l3m status` and
//! `l3m log`.
//!
//! The sequencer journals a model call that failed as `call-failed`, then closes the turn with
//! `turn-end` (or, after a crash, `interrupted`). A non-retryable failure is not tried again
//! until something new arrives, so an agent whose Log ends so sleeps for good; one whose retries
//! ran out waits the same way; one whose fuel ran out waits for a loan. The fold reads back from
//! the end over that bookkeeping to the last record that says what happened, so it needs only
//! a tail of the Log.
//!
//! [`Retries`] is the fold beside it that keeps such an agent cheap: once a turn ended in a
//! failure, each later wake spends one model call until a reply comes.

use crate::log::{FuelUnit, Record, RecordBody};

mod retries;

pub use retries::Retries;

/// The longest part of a provider's error [`Stuck::why`] quotes.
pub const REASON_CHARS: usize = 160;

/// Why an agent's last turn ended with it unable to go on by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stuck {
    /// Its last model call failed and the turn closed without a reply.
    CallFailed {
        /// The `call-failed` record.
        seq: u64,
        /// The provider's or the harness's words.
        error: String,
        /// Whether the failure was of a kind that may pass (its retries ran out).
        retryable: bool,
    },
    /// A unit of its fuel ran out.
    OutOfFuel {
        /// The `out-of-fuel` record.
        seq: u64,
        /// The unit.
        unit: FuelUnit,
    },
}

/// What a failed call's words point at, for the advice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// The provider refused the credential (401, 403, a bad key).
    Credential,
    /// The provider does not know the model (404, an unknown model).
    Model,
    /// The request or the reply was too large (a context over the window, a reply over the limit).
    TooLarge,
    /// A failure that may pass (overload, timeout), after the retries ran out.
    Transient,
    /// Anything else the provider refused.
    Other,
}

/// Records that close or account for a turn after what happened in it: the fold reads past them
/// (a budget change after spent fuel still counts, as a loan).
fn bookkeeping(body: &RecordBody) -> bool {
    matches!(
        body,
        RecordBody::TurnEnd | RecordBody::Interrupted { .. } | RecordBody::BudgetChange { .. }
    )
}

/// Whether the agent whose Log ends with `tail` is stuck, read from the last record that is not
/// bookkeeping: a failed call (any failure: the turn was closed after it, so no retry is owed)
/// or spent fuel. A retryable failure that is the very last record is not stuck: its retry is
/// still owed.
pub fn stuck(tail: &[Record]) -> Option<Stuck> {
    let last = tail.last()?;
    let telling = tail.iter().rev().find(|r| !bookkeeping(&r.body))?;
    match &telling.body {
        RecordBody::CallFailed {
            error, retryable, ..
        } if !*retryable || telling.seq != last.seq => Some(Stuck::CallFailed {
            seq: telling.seq,
            error: error.clone(),
            retryable: *retryable,
        }),
        // A budget change after spent fuel is a loan or a top-up: the agent may go on.
        RecordBody::OutOfFuel { unit }
            if !tail.iter().any(|r| {
                r.seq > telling.seq && matches!(r.body, RecordBody::BudgetChange { .. })
            }) =>
        {
            Some(Stuck::OutOfFuel {
                seq: telling.seq,
                unit: *unit,
            })
        }
        _ => None,
    }
}

/// What a failed call's words point at.
pub fn cause(error: &str, retryable: bool) -> Cause {
    let e = error.to_lowercase();
    let any = |words: &[&str]| words.iter().any(|w| e.contains(w));
    if any(&[
        "401",
        "403",
        "unauthori",
        "authentica",
        "api key",
        "api_key",
        "permission",
    ]) {
        Cause::Credential
    } else if any(&[
        "too long",
        "too large",
        "too many tokens",
        "context length",
        "context window",
        "maximum context",
        "exceeds",
        "413",
    ]) {
        Cause::TooLarge
    } else if any(&["404", "model not found", "unknown model", "no such model"]) {
        Cause::Model
    } else if retryable {
        Cause::Transient
    } else {
        Cause::Other
    }
}

impl Stuck {
    /// Why, in one line: the record and the provider's words, cut to [`REASON_CHARS`].
    pub fn why(&self) -> String {
        match self {
            Stuck::CallFailed {
                seq,
                error,
                retryable,
            } => {
                let mut reason: String = error.chars().take(REASON_CHARS).collect();
                if reason.len() < error.len() {
                    reason.push('…');
                }
                let gave_up = if *retryable { ", retries spent" } else { "" };
                format!("its last model call failed (record {seq}{gave_up}): {reason}")
            }
            Stuck::OutOfFuel { seq, unit } => {
                format!("out of fuel: its {unit} ran out (record {seq})")
            }
        }
    }

    /// What would unstick `agent`, as commands the human can run.
    pub fn remedy(&self, agent: &str) -> String {
        let wake = format!("then wake it with `l3m say {agent} ...`");
        match self {
            Stuck::OutOfFuel { .. } => {
                format!("lend it more fuel (its parent's grant), {wake}")
            }
            Stuck::CallFailed {
                error, retryable, ..
            } => match cause(error, *retryable) {
                Cause::Credential => {
                    format!("check the provider's API key (`l3m doctor`), {wake}")
                }
                Cause::Model => {
                    format!("check the model l3m.toml names for it (`l3m doctor`), {wake}")
                }
                Cause::TooLarge => format!(
                    "rewind it to before what grew too large (`l3m rewind {agent} --to SEQ`), or \
                     fork it from an earlier record (`l3m fork`)"
                ),
                Cause::Transient => {
                    format!("the provider may have recovered: wake it with `l3m say {agent} ...`")
                }
                Cause::Other => {
                    format!("fix what the provider refused (`l3m doctor`), {wake}")
                }
            },
        }
    }
}

#[cfg(test)]
mod tests;
