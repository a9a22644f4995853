//! Undo entries kept in memory.

use std::sync::Mutex;

use super::{EntryId, UndoEntry, UndoError, UndoStore};

/// An [`UndoStore`] in memory, for a process whose entries need not outlive it (examples,
/// tests, benchmarks of the providers alone). It keeps entries exactly as the hub's chain
/// would: ids increase from 1, and `entries` reads them oldest first.
#[derive(Debug, Default)]
pub struct MemoryUndo {
    entries: Mutex<Vec<UndoEntry>>,
    next: Mutex<u64>,
}

impl MemoryUndo {
    /// Every entry recorded, oldest first.
    pub fn entries(&self) -> Result<Vec<UndoEntry>, UndoError> {
        Ok(self
            .entries
            .lock()
            .map_err(|_| UndoError::Poisoned)?
            .clone())
    }
}

impl UndoStore for MemoryUndo {
    fn next_id(&self) -> Result<EntryId, UndoError> {
        let mut next = self.next.lock().map_err(|_| UndoError::Poisoned)?;
        *next += 1;
        Ok(EntryId(*next))
    }

    fn record(&self, entry: &UndoEntry) -> Result<(), UndoError> {
        self.entries
            .lock()
            .map_err(|_| UndoError::Poisoned)?
            .push(entry.clone());
        Ok(())
    }
}
