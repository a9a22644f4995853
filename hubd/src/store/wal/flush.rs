//! Making the WAL's frames durable: by the flusher thread, or on the writer's own thread.
//!
//! Every writer ends in [`Shared::flush_here`]: it waits for the sync running, if any, and runs
//! the next itself if that did not cover its frame. One `fdatasync` thus serves every frame
//! written before it started, so writers that meet share it (group commit), and only one runs
//! at a time.
//!
//! A write with work that does not need its frame durable yet (a plain ref's objects to name)
//! asks the flusher thread to start the sync first, does that work, then waits. A write with
//! nothing to do meanwhile (a chain append, whose objects the applier names after the reply)
//! syncs on its own thread: handing the `fdatasync` to another thread and being woken back
//! cost two wake-ups, 10–20% of a lone append in the store on a 2-vCPU guest. The flusher only
//! starts syncs early; no writer depends on it.
//!
//! The waits are plain condition variables: the flusher sleeps until a position past what is
//! durable is wanted, and writers sleep until their frame's end is durable, the sync running
//! has ended, or the WAL stops.

use std::sync::{Condvar, Mutex, PoisonError};

use super::{Shared, StoreError, lock};

/// What is durable and what is wanted, in WAL positions (bytes over all segments).
#[derive(Debug, Default)]
pub(super) struct Flush {
    state: Mutex<Positions>,
    /// Wakes the flusher: a position past `durable` is wanted, or it should stop.
    wanted: Condvar,
    /// Wakes the writers: `durable` moved, or the WAL stopped.
    flushed: Condvar,
}

#[derive(Debug, Default)]
struct Positions {
    /// Everything before this position is durable.
    durable: u64,
    /// The furthest position a writer waits for.
    wanted: u64,
    /// Set when the WAL closes: the flusher ends. Nothing waits on it: every writer syncs
    /// what the flusher has not ([`Shared::flush_here`]).
    stop: bool,
    /// Whether a sync is running (on the flusher or a writer's thread).
    syncing: bool,
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

    /// Returns once everything up to `end` is durable, or the WAL has stopped: waits for
    /// the sync running, if any, then syncs on this thread if that did not cover `end`. A
    /// writer that asked the flusher first usually finds its sync running or done; one that
    /// did not saves the hand-off to the flusher and back.
    pub(super) fn flush_here(&self, end: u64) -> Result<(), StoreError> {
        let mut at = lock(&self.flush.state);
        loop {
            if at.durable >= end {
                return Ok(());
            }
            self.check_not_broken()?;
            if at.syncing {
                at = self
                    .flush
                    .flushed
                    .wait(at)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            at.syncing = true;
            drop(at);
            self.sync_claimed()?;
            at = lock(&self.flush.state);
        }
    }

    /// Runs the sync this thread claimed by setting `syncing`, records what it made durable
    /// and wakes the writers, and the flusher, which may have waited for it with more wanted.
    fn sync_claimed(&self) -> Result<(), StoreError> {
        // A failure stops the WAL (see `sync_data`), which wakes the writers too.
        let synced = self.sync_tail();
        let mut at = lock(&self.flush.state);
        at.syncing = false;
        if let Ok(end) = synced {
            at.durable = at.durable.max(end);
        }
        drop(at);
        self.flush.flushed.notify_all();
        self.flush.wanted.notify_one();
        synced.map(drop)
    }

    /// Everything before this WAL position is durable.
    #[cfg(test)]
    pub(super) fn durable_position(&self) -> u64 {
        lock(&self.flush.state).durable
    }

    /// Wakes every writer waiting in [`Shared::flush_here`], to see that the WAL stopped.
    pub(super) fn wake_waiters(&self) {
        // Taking the lock orders this after any waiter's check of `broken`.
        let _at = lock(&self.flush.state);
        self.flush.flushed.notify_all();
    }

    /// Ends the flusher, after the sync it is running, if any.
    pub(super) fn stop_flusher(&self) {
        lock(&self.flush.state).stop = true;
        self.flush.wanted.notify_one();
    }

    /// The flusher thread's loop: waits for a position past what is durable, syncs, tells.
    pub(super) fn flush_frames(&self) {
        loop {
            {
                let mut at = lock(&self.flush.state);
                while at.wanted <= at.durable || at.syncing || self.broken.get().is_some() {
                    if at.stop {
                        return;
                    }
                    at = self
                        .flush
                        .wanted
                        .wait(at)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                at.syncing = true;
            }
            // A failure is the writers' to report.
            let _ = self.sync_claimed();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::frame::tests::id;
    use super::super::{Change, Recovered, Wal, WalStop, recover};
    use crate::store::StoreError;

    #[test]
    fn concurrent_writers_are_each_made_durable_and_read_back_in_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::start(dir.path(), Recovered::default()).unwrap());
        let writers: Vec<_> = (0..4u8)
            .map(|writer| {
                let wal = Arc::clone(&wal);
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        let change = Change::Delete {
                            refname: "refs/l3m/x",
                            expected: id(writer),
                        };
                        // Half the writers sync on their own thread, half through the flusher.
                        if writer % 2 == 0 {
                            wal.record(&change).unwrap().unwrap().applied();
                            continue;
                        }
                        let pending = wal.begin(&change).unwrap().unwrap();
                        let end = pending.end;
                        pending.durable().unwrap().applied();
                        assert!(wal.shared.durable_position() >= end);
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        drop(Arc::into_inner(wal).expect("every writer is done"));
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.changes.len(), 100);
        assert_eq!(recovered.next_seq, 100);
    }

    #[test]
    fn a_stopped_wal_wakes_the_writers_waiting_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(Wal::start(dir.path(), Recovered::default()).unwrap());
        // A sync that never ends, and a position no frame reaches: only the stop can end the
        // wait.
        super::lock(&wal.shared.flush.state).syncing = true;
        let waiter = {
            let wal = Arc::clone(&wal);
            std::thread::spawn(move || wal.shared.flush_here(u64::MAX))
        };
        wal.shared.stop(WalStop::Sync);
        match waiter.join().unwrap() {
            Err(StoreError::WalBroken { why, .. }) => assert_eq!(why, WalStop::Sync),
            other => panic!("the waiter should learn the WAL stopped, got {other:?}"),
        }
        let change = Change::Delete {
            refname: "refs/l3m/x",
            expected: id(1),
        };
        assert!(
            matches!(wal.begin(&change), Err(StoreError::WalBroken { .. })),
            "and no frame is written after"
        );
    }
}
