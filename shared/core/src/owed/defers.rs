//! The defers a Log holds open, folded beside [`Owed`](super::Owed): a hook's `defer` decision
//! opens one, the `program-done` event that completes it closes it. The sequencer reads them at
//! boot like every other fold, and journals as failed each one a dead process left open, so a
//! deferred program runs at most once.

use std::collections::BTreeMap;

use crate::log::{Disposition, EventId, EventSource, Record, RecordBody};

/// A defer whose decision is journaled and whose completion is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenDefer {
    /// The seq of its `hook-decision`, which names its call and its completion.
    pub decision: u64,
    /// The program deferred to, without the `program_` prefix.
    pub program: String,
}

/// The defers the Log holds open, by the id their completion event will carry.
pub type OpenDefers = BTreeMap<EventId, OpenDefer>;

/// The id of the completion event of the defer decided at seq `decision`.
pub fn completion_id(decision: u64) -> Option<EventId> {
    EventId::new(format!("program-done-{decision}")).ok()
}

/// Folds one record into the open defers: a defer decision opens one, its completion closes it.
pub fn fold_defers(defers: &mut OpenDefers, record: &Record) {
    match &record.body {
        RecordBody::HookDecision {
            disposition: Disposition::Defer { program },
            ..
        } => {
            if let Some(id) = completion_id(record.seq) {
                defers.insert(
                    id,
                    OpenDefer {
                        decision: record.seq,
                        program: program.clone(),
                    },
                );
            }
        }
        RecordBody::Event {
            id,
            source: EventSource::ProgramDone { .. },
            ..
        } => {
            defers.remove(id);
        }
        _ => {}
    }
}
