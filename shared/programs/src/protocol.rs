//! The pipe between the sequencer and the evaluator: JSON lines, one message per line.
//!
//! # Format
//! The parent writes one request line on the child's stdin: a [`CheckRequest`] (for
//! `l3m-program check` and `check-hook`), a [`RunRequest`] (for `l3m-program run`) or a
//! [`HookRequest`] (for `l3m-program hook`). The child answers on its stdout with [`FromChild`]
//! lines: a hook's check ends with [`FromChild::HookChecked`], a hook's run with one
//! [`FromChild::Decided`] for the whole batch (a hook makes no calls). While running, each effect the program asks for is a
//! [`FromChild::Call`], to which the parent writes one [`Answer`] line; the last line is
//! [`FromChild::Checked`] or [`FromChild::Done`]. The child holds no token and no grant: a call
//! names a function and its arguments, and the parent answers it through the ring with the
//! tokens the grant minted, or refuses it.
//!
//! A serving evaluator (`l3m-program serve`) keeps its pipes for many calls of one program:
//! its first line is a [`CheckRequest`] naming the program, which it checks and loads once;
//! each later line is a [`CallRequest`], answered like a run (its [`FromChild::Call`]s, then
//! one [`FromChild::Done`]). A program refused at load is answered with that refusal for
//! every call.
//!
//! Every line is bounded ([`MAX_LINE`]); a longer one is a protocol error on either side.

use std::io::{BufRead, Read};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::decl::ProgramDecl;
use crate::rule::{LoadError, RunError};

/// The longest line either side accepts, in bytes (a source of [`crate::decl::MAX_SOURCE`]
/// escaped as JSON fits, and so does a fetched body of a few MiB).
pub const MAX_LINE: usize = 16 << 20;

/// Check a program's seal and type (the parent then checks its surface); or, as a serving
/// evaluator's first line, name the program it serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRequest {
    /// The file, as refusals name it.
    pub file: String,
    /// Its text.
    pub source: String,
}

/// Run a program's `main` on one input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// The file, as refusals name it.
    pub file: String,
    /// Its text (checked again by the child before it runs).
    pub source: String,
    /// The input the model gave.
    pub input: Value,
    /// How many statements the program may run.
    pub steps: u64,
}

/// One call of a served program's `main`, after the [`CheckRequest`] that named the program.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRequest {
    /// The input the model gave.
    pub input: Value,
    /// How many statements this call may run.
    pub steps: u64,
}

/// Run a hook's `on_event` on a batch of events, one evaluator for the batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookRequest {
    /// The hooks file, as refusals name it.
    pub file: String,
    /// Its text (checked again by the child before it runs).
    pub source: String,
    /// The events, as the hook sees them.
    pub events: Vec<Value>,
    /// How many statements each event's call may run.
    pub steps: u64,
}

/// A line from the evaluator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FromChild {
    /// The program asks for an effect; the parent answers with one [`Answer`] line.
    Call {
        /// The function, from [`crate::vocabulary::FUNCTIONS`].
        function: String,
        /// Its arguments, by parameter name.
        args: serde_json::Map<String, Value>,
    },
    /// The answer to a [`CheckRequest`].
    Checked {
        /// What the program declares, or why it was refused.
        result: Result<ProgramDecl, LoadError>,
    },
    /// The answer to a [`CheckRequest`] for a hooks file.
    HookChecked {
        /// Nothing, or why the hook was refused.
        result: Result<(), LoadError>,
    },
    /// The answer to a [`HookRequest`]: what `on_event` returned for each event, in order, or
    /// why the whole batch stopped (the hook was refused at load).
    Decided {
        /// One result per event, or the refusal.
        result: Result<Vec<Result<Value, RunError>>, RunError>,
    },
    /// The program finished or stopped.
    Done {
        /// What `main` returned, or why it stopped.
        result: Result<Value, RunError>,
    },
}

/// The parent's answer to a [`FromChild::Call`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Answer {
    /// The effect happened; this is its result.
    Ok {
        /// The result, as JSON.
        value: Value,
    },
    /// The effect was refused or failed; the program sees this as an error.
    Err {
        /// What the provider said.
        message: String,
    },
}

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The other side closed the pipe.
    #[error("the pipe closed")]
    Closed,
    /// A line longer than [`MAX_LINE`].
    #[error("a line longer than {MAX_LINE} bytes")]
    TooLong,
    /// Reading failed.
    #[error("reading the pipe: {0}")]
    Io(#[from] std::io::Error),
    /// The line is not the JSON expected.
    #[error("a line that is not the expected JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// Reads one line of at most [`MAX_LINE`] bytes and decodes it.
pub fn read_line<T: serde::de::DeserializeOwned>(input: &mut impl BufRead) -> Result<T, LineError> {
    let mut line = Vec::new();
    let limit = u64::try_from(MAX_LINE).unwrap_or(u64::MAX) + 1;
    let read = input.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if read == 0 {
        return Err(LineError::Closed);
    }
    if line.last() != Some(&b'\n') && line.len() > MAX_LINE {
        return Err(LineError::TooLong);
    }
    Ok(serde_json::from_slice(&line)?)
}

/// Writes `message` as one line and flushes it.
pub fn write_line(
    output: &mut impl std::io::Write,
    message: &impl Serialize,
) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    output.write_all(&line)?;
    output.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Rule;

    #[test]
    fn lines_round_trip_and_bad_lines_are_typed() {
        let mut buf = Vec::new();
        let done = FromChild::Done {
            result: Err(RunError {
                file: "f".into(),
                line: Some(2),
                rule: Rule::StepBudget,
                detail: "d".into(),
            }),
        };
        write_line(&mut buf, &done).unwrap();
        write_line(&mut buf, &Answer::Ok { value: Value::Null }).unwrap();
        let mut input = std::io::Cursor::new(buf);
        assert_eq!(read_line::<FromChild>(&mut input).unwrap(), done);
        assert_eq!(
            read_line::<Answer>(&mut input).unwrap(),
            Answer::Ok { value: Value::Null }
        );
        assert!(matches!(
            read_line::<Answer>(&mut input),
            Err(LineError::Closed)
        ));
        let mut junk = std::io::Cursor::new(b"{\"kind\":\"nope\"}\n".to_vec());
        assert!(matches!(
            read_line::<Answer>(&mut junk),
            Err(LineError::Json(_))
        ));
    }
}
