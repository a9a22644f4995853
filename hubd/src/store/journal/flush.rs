//! The flusher: one thread that makes the journal's frames durable for every writer waiting.
//!
//! A writer appends its frame, asks for it to be flushed and goes on with the work that does not
//! need it durable yet (naming its objects); only then does it wait. The flusher runs one
//! `fdatasync` for every frame written before it started, so writers that meet share it (group
//! commit), and a lone writer's file work overlaps its own `fdatasync` instead of following it.
//!
//! The waits are plain condition variables: the flusher sleeps until a position past what is
//! durable is wanted, and writers sleep until their frame's end is durable or the journal stops.

use std::sync::{Condvar, Mutex, PoisonError};

use super::{Shared, StoreError, lock};

/// What is durable and what is wanted, in journal positions (bytes over all segments).
#[derive(Debug, Default)]
pub(super) struct Flush {
    state: Mutex<Positions>,
    /// Wakes the flusher: a position past `durable` is wanted, or it should stop.
    wanted: Condvar,
    /// Wakes the writers: `durable` moved, or the journal stopped.
    flushed: Condvar,
}

#[derive(Debug, Default)]
struct Positions {
    /// Everything before this position is durable.
    durable: u64,
    /// The furthest position a writer waits for.
    wanted: u64,
    /// Set when the journal closes: the flusher finishes what is wanted and ends.
    stop: bool,
}

impl Shared {
    /// Asks the flusher to make everything up to `end` durable; does not wait.
    pub(super) fn request_flush(&self, end: u64) {
        let mut at = lock(&self.flush.state);
        if end <= at.wanted {
            return;
        }
        at.wanted = end;
        // Notified after the lock is released, so the flusher does not wake only to wait for it.
        drop(at);
        self.flush.wanted.notify_one();
    }

    /// Returns once everything up to `end` is durable, or the journal has stopped.
    pub(super) fn wait_flushed(&self, end: u64) -> Result<(), StoreError> {
        let mut at = lock(&self.flush.state);
        loop {
            if at.durable >= end {
                return Ok(());
            }
            self.check_not_broken()?;
            at = self
                .flush
                .flushed
                .wait(at)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Everything before this journal position is durable.
    #[cfg(test)]
    pub(super) fn durable_position(&self) -> u64 {
        lock(&self.flush.state).durable
    }

    /// Wakes every writer waiting in [`Shared::wait_flushed`], to see that the journal stopped.
    pub(super) fn wake_waiters(&self) {
        // Taking the lock orders this after any waiter's check of `broken`.
        let _at = lock(&self.flush.state);
        self.flush.flushed.notify_all();
    }

    /// Ends the flusher once what is wanted is durable.
    pub(super) fn stop_flusher(&self) {
        lock(&self.flush.state).stop = true;
        self.flush.wanted.notify_one();
    }

    /// The flusher thread's loop: waits for a position past what is durable, syncs, tells.
    pub(super) fn flush_frames(&self) {
        loop {
            {
                let mut at = lock(&self.flush.state);
                while at.wanted <= at.durable || self.broken.get().is_some() {
                    if at.stop {
                        return;
                    }
                    at = self
                        .flush
                        .wanted
                        .wait(at)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
            // A failure stops the journal (see `sync_data`), which wakes the writers.
            if let Ok(end) = self.sync_tail() {
                let mut at = lock(&self.flush.state);
                at.durable = at.durable.max(end);
                drop(at);
                self.flush.flushed.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::frame::tests::id;
    use super::super::{Change, Journal, JournalStop, Recovered, recover};
    use crate::store::StoreError;

    #[test]
    fn concurrent_writers_are_each_made_durable_and_read_back_in_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(Journal::start(dir.path(), Recovered::default()).unwrap());
        let writers: Vec<_> = (0..4u8)
            .map(|writer| {
                let journal = Arc::clone(&journal);
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let change = Change::Delete {
                            refname: "refs/l3m/x",
                            expected: id(writer),
                        };
                        let pending = journal.begin(&change).unwrap().unwrap();
                        let end = pending.end;
                        pending.durable().unwrap().applied();
                        assert!(journal.shared.durable_position() >= end);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        drop(Arc::into_inner(journal).expect("every writer is done"));
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.changes.len(), 100);
        assert_eq!(recovered.next_seq, 100);
    }

    #[test]
    fn a_stopped_journal_wakes_the_writers_waiting_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(Journal::start(dir.path(), Recovered::default()).unwrap());
        let waiter = {
            let journal = Arc::clone(&journal);
            // A position no frame reaches: only the stop can end this wait.
            std::thread::spawn(move || journal.shared.wait_flushed(u64::MAX))
        };
        journal.shared.stop(JournalStop::Sync);
        match waiter.join().unwrap() {
            Err(StoreError::JournalBroken { why, .. }) => assert_eq!(why, JournalStop::Sync),
            other => panic!("the waiter should learn the journal stopped, got {other:?}"),
        }
        let change = Change::Delete {
            refname: "refs/l3m/x",
            expected: id(1),
        };
        assert!(
            matches!(
                journal.begin(&change),
                Err(StoreError::JournalBroken { .. })
            ),
            "and no frame is written after"
        );
    }
}
