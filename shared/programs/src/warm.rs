//! A warm evaluator: one `l3m-program serve` process that has checked and loaded one program
//! and answers its calls one after another, so a call costs a request line, the program's own
//! effects and a `Done` line instead of a process start, a check and a load.
//!
//! A [`Warm`] is used by one call at a time and consumed by it: [`Warm::call`] hands it back
//! only when the process may serve another call. It does not after any call that did not end
//! in a `Done` with a result (its deadline, a kernel limit, a crash, a protocol error): the
//! process is killed and reaped, and the next call starts a fresh one. Nor after a call that
//! ended in an error: the interpreter stopped it somewhere in its code (a step budget tripped,
//! an error unwinding through a builtin), and a fresh process costs one start only on failing
//! calls, which is cheaper than having to trust that no stop leaves anything behind. Nor after
//! [`SERVED_CALLS`] calls, which the evaluator's lifetime CPU limit is sized for.

use std::time::Instant;

use serde_json::{Map, Value};

use crate::limits::SERVED_CALLS;
use crate::process::{Evaluator, Running, parent_stop};
use crate::protocol::{Answer, CallRequest, CheckRequest, FromChild};
use crate::rule::{Rule, RunError};

/// A serving evaluator, its program loaded (or refused: then every call reports the refusal).
pub(crate) struct Warm {
    running: Running,
    /// Calls answered so far.
    served: u64,
}

impl std::fmt::Debug for Warm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Warm")
            .field("pid", &self.running.pid())
            .field("served", &self.served)
            .finish()
    }
}

impl Warm {
    /// Starts `l3m-program serve` and names the program `file` with its `source`; the check
    /// and load run while the first call is sent, within its deadline.
    pub(crate) fn start(evaluator: &Evaluator, file: &str, source: &str) -> Result<Self, RunError> {
        let mut running = Running::start(evaluator, "serve", file)?;
        let named = CheckRequest {
            file: file.to_owned(),
            source: source.to_owned(),
        };
        // A failed send means the child is gone; the first call reads how it ended.
        let _ = running.send(&named);
        Ok(Self { running, served: 0 })
    }

    /// The process id of the evaluator.
    pub(crate) fn pid(&self) -> u32 {
        self.running.pid()
    }

    /// Whether the evaluator can take a call: it has not ended while it waited.
    pub(crate) fn alive(&mut self) -> bool {
        !self.running.exited()
    }

    /// Runs one call of `file`'s program on `request`, answering each effect it asks for with
    /// `answer`, until `until`. Returns the call's result and the evaluator when
    /// it may serve the next call (see the module's doc); otherwise it is killed and reaped.
    pub(crate) fn call(
        mut self,
        file: &str,
        request: &CallRequest,
        until: Instant,
        mut answer: impl FnMut(&str, &Map<String, Value>) -> Answer,
    ) -> (Result<Value, RunError>, Option<Self>) {
        // A failed send means the child is gone; its end is read below.
        let _ = self.running.send(request);
        loop {
            match self.running.next(until) {
                Ok(FromChild::Call { function, args }) => {
                    let reply = answer(&function, &args);
                    let _ = self.running.send(&reply);
                }
                Ok(FromChild::Done { result }) => {
                    self.served += 1;
                    let keep = result.is_ok() && self.served < SERVED_CALLS;
                    return (result, keep.then_some(self));
                }
                Ok(
                    other @ (FromChild::Checked { .. }
                    | FromChild::HookChecked { .. }
                    | FromChild::Decided { .. }),
                ) => {
                    let detail = format!("the evaluator answered a call with {other:?}");
                    return (Err(parent_stop(file, Rule::Evaluator, detail)), None);
                }
                Err(why) => return (Err(self.running.stop(file, why)), None),
            }
        }
    }
}
