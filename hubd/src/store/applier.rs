//! The applier: puts chain appends into `hub.git` after they were acknowledged.
//!
//! With the WAL a chain append is durable once its frame is (see `WAL`), so
//! [`Hub::append`](super::Hub::append) returns then and hands the rest — naming its objects,
//! moving its ref — to this thread, which runs only on a CPU nothing else wants, so that the
//! reply goes out first. On a 2-vCPU machine that file work was a third of an append's round
//! trip through hubd; it now overlaps the next request's network hops and `fdatasync`.
//!
//! Moves are applied one at a time in the order they were handed over, which for one chain is
//! the order of its appends (handed over under the chain's lock). Everything in the store that
//! reads `hub.git`, and every write but a chain append, first [`Applier::settle`]s: it waits
//! until every move handed over before it is applied. So hubd never reads `hub.git` behind what
//! it acknowledged; plain `git` may, for the moment an apply takes. Dropping the hub drains the
//! queue; a hubd killed before leaves the frames for replay at the next open.
//!
//! A thread that must wait for moves (to settle, or for room in a full queue) applies them
//! itself, at its own priority: on a machine kept busy by other work the idle-class thread may
//! hardly run, and then the waiters do its work instead of waiting on it.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

use super::StoreError;
use super::disk::{Disk, Unapplied};

/// How many moves may wait; an append finding the queue full applies moves itself until
/// there is room, so `hub.git` never falls further behind than this.
const MAX_WAITING: usize = 64;

/// The applier thread and its queue; dropping it applies what is queued and stops the thread.
#[derive(Debug)]
pub(crate) struct Applier {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
}

/// The moves waiting, and what applies them.
#[derive(Debug)]
struct Queue {
    disk: Arc<Disk>,
    refs: gix::refs::file::Store,
    state: Mutex<State>,
    /// Wakes the applier thread: a move was handed over or finished, or it should stop.
    handed: Condvar,
    /// Wakes those waiting for moves to be applied, or for the next move to be free to take.
    applied: Condvar,
}

#[derive(Debug, Default)]
struct State {
    waiting: VecDeque<Unapplied>,
    /// Whether some thread is applying a move now (only one may, to keep the order).
    applying: bool,
    /// Moves handed over since the start, and how many of them are done (applied or failed).
    handed_over: u64,
    done: u64,
    stop: bool,
}

impl Applier {
    /// Starts the thread that applies moves to `disk`, reading refs through `refs`.
    pub(crate) fn start(
        disk: Arc<Disk>,
        refs: gix::refs::file::Store,
    ) -> Result<Applier, StoreError> {
        let git_dir = disk.git_dir().to_path_buf();
        let queue = Arc::new(Queue::new(disk, refs));
        let thread = {
            let queue = Arc::clone(&queue);
            std::thread::Builder::new()
                .name("hubd-applier".into())
                .spawn(move || queue.apply_until_stopped())
                .map_err(StoreError::io("start the applier thread for", &git_dir))?
        };
        Ok(Applier {
            queue,
            thread: Some(thread),
        })
    }

    /// Queues `move_` to be applied after every move handed over before it.
    pub(crate) fn hand_over(&self, move_: Unapplied) {
        let mut state = self.queue.lock();
        while state.waiting.len() >= MAX_WAITING {
            state = self.queue.help(state);
        }
        state.waiting.push_back(move_);
        state.handed_over += 1;
        drop(state);
        self.queue.handed.notify_one();
    }

    /// Returns once every move handed over so far is applied (or has failed, which stopped
    /// the WAL).
    pub(crate) fn settle(&self) {
        let mut state = self.queue.lock();
        let target = state.handed_over;
        while state.done < target {
            state = self.queue.help(state);
        }
    }
}

impl Drop for Applier {
    fn drop(&mut self) {
        self.queue.lock().stop = true;
        self.queue.handed.notify_one();
        if let Some(thread) = self.thread.take() {
            // A thread that panicked has nothing left to apply; replay has the frames.
            let _ = thread.join();
        }
    }
}

impl Queue {
    fn new(disk: Arc<Disk>, refs: gix::refs::file::Store) -> Queue {
        Queue {
            disk,
            refs,
            state: Mutex::new(State::default()),
            handed: Condvar::new(),
            applied: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is updated in whole steps, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next move, if no other thread is applying one; the caller must then [`Queue::apply`]
    /// it.
    fn take(state: &mut State) -> Option<Unapplied> {
        if state.applying {
            return None;
        }
        let move_ = state.waiting.pop_front()?;
        state.applying = true;
        Some(move_)
    }

    /// Applies a move [`Queue::take`] gave out, then lets the next one be taken.
    fn apply(&self, move_: Unapplied) {
        if let Err(error) = self.disk.apply(&self.refs, move_) {
            // The failed move stopped the WAL, which says so; this says which move.
            tracing::error!(%error, "an acknowledged append could not be applied to hub.git");
        }
        let mut state = self.lock();
        state.applying = false;
        state.done += 1;
        drop(state);
        self.applied.notify_all();
        self.handed.notify_one();
    }

    /// One step of waiting for moves: applies the next here if it is free, else waits for the
    /// one being applied.
    fn help<'a>(&'a self, mut state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        match Queue::take(&mut state) {
            Some(move_) => {
                drop(state);
                self.apply(move_);
                self.lock()
            }
            None => self
                .applied
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// The thread: applies moves in order until told to stop with none waiting.
    fn apply_until_stopped(&self) {
        run_only_when_idle();
        loop {
            let move_ = {
                let mut state = self.lock();
                loop {
                    if let Some(move_) = Queue::take(&mut state) {
                        break move_;
                    }
                    if state.stop && state.waiting.is_empty() {
                        return;
                    }
                    state = self
                        .handed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            };
            self.apply(move_);
        }
    }
}

/// Puts the calling thread under `SCHED_IDLE`: it runs only on a CPU nothing else wants, and
/// its wake-up never preempts the thread that woke it. A lower nice value is not enough: woken
/// by an append, a nice-19 applier still took the CPU from the reply (140 µs at p50 on a
/// 2-vCPU guest). Best effort: if refused, the applier runs at the normal priority.
fn run_only_when_idle() {
    use thread_priority::{
        NormalThreadSchedulePolicy, ThreadPriority, ThreadSchedulePolicy,
        set_thread_priority_and_policy, thread_native_id,
    };
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    if let Err(error) =
        set_thread_priority_and_policy(thread_native_id(), ThreadPriority::Min, idle)
    {
        tracing::debug!(?error, "the applier could not be put under SCHED_IDLE");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::Tip;
    use super::super::disk::{Disk, Durability, Staged, read_tip};
    use super::super::input::records_blob;
    use super::super::object::chain_commit;
    use super::{Applier, MAX_WAITING, Queue};

    /// With no applier thread at all, appends past a full queue and a settle still complete:
    /// the waiters apply the moves themselves, in order.
    #[test]
    fn waiters_apply_the_moves_when_the_applier_thread_does_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("hub.git");
        let repo = gix::init_bare(&git_dir).unwrap();
        let disk = Arc::new(Disk::new(git_dir, Durability::Fsync, &repo).unwrap());
        let applier = Applier {
            queue: Arc::new(Queue::new(Arc::clone(&disk), repo.refs.clone())),
            thread: None,
        };
        let log = "refs/l3m/a/alice/_/log";
        let mut tip = Tip::Absent;
        for n in 0..2 * MAX_WAITING {
            let records = records_blob(log, &[format!(r#"{{"n":{n}}}"#)]).unwrap();
            let time = gix::date::Time {
                seconds: 0,
                offset: 0,
            };
            let (new, _) = chain_commit(tip, &records, format!("entry {n}"), time).unwrap();
            let commit = new.commit;
            let Staged::Logged(move_) = disk.stage(log, tip, new).unwrap() else {
                panic!("a small append is logged");
            };
            applier.hand_over(move_);
            tip = Tip::At(commit);
        }
        assert!(
            read_tip(&repo.refs, log).unwrap() != Tip::Absent,
            "a full queue made the appender apply moves"
        );
        applier.settle();
        assert_eq!(read_tip(&repo.refs, log).unwrap(), tip);
    }
}
