//! What the next model call is charged, folded beside [`Owed`](super::Owed): the bytes of the
//! records journaled since the last call started. Each byte journaled is charged to exactly one
//! call (or is still owed by the next).

use crate::log::RecordBody;

/// Bytes of the records journaled since the last call started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallCharge(u64);

impl CallCharge {
    /// Folds one record journaled as a line of `line_bytes` bytes: a call's start begins a new
    /// charge (its own line is the call's, not the next one's); any other record adds its
    /// bytes.
    pub fn journaled(&mut self, body: &RecordBody, line_bytes: u64) {
        if matches!(body, RecordBody::CallStarted { .. }) {
            self.0 = 0;
        } else {
            self.0 = self.0.saturating_add(line_bytes);
        }
    }

    /// The bytes the next call is charged.
    pub fn bytes(self) -> u64 {
        self.0
    }
}
