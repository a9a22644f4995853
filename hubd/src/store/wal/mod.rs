//! The write-ahead log: a durable write for the price of one `fdatasync`.
//!
//! A ref move is durable once its objects and its new value are on stable storage — not
//! necessarily as files under `hub.git`. So with the WAL a write of a plain ref goes, in
//! order, once it holds the ref's lock and has found the ref at its expected value (see `disk`):
//! 1. one *frame* (ref, expected value, new value, the compressed objects) appended to the
//!    current segment file and handed to the flusher thread, whose one `fdatasync` serves every
//!    writer waiting (group commit; see `flush`);
//! 2. while that runs, its objects written and named, which no ref reaches yet;
//! 3. once the frame is durable, the ref moved into place — with no further fsync.
//!
//! A chain append stops after its frame is durable ([`Wal::record`]), and is acknowledged
//! then: its expected value is the chain index's, which is current under the chain's lock, and
//! the applier names its objects and moves its ref after the reply (see `applier`).
//!
//! A frame that is in the WAL must also be applied: a later write of the same ref expects the
//! value this one leaves, and replay walks frames in order. So once a write has in the WAL its
//! frame, a failure to apply it stops the WAL ([`WalStop::Apply`]) exactly as a failed
//! `fdatasync` does: nothing more is acknowledged until hubd restarts and replays.
//!
//! Segments are preallocated and zero-filled before use, so step 1 overwrites blocks that
//! already exist: `fdatasync` then writes the data and flushes the disk cache, and never waits
//! on a filesystem WAL commit. That is the cost of the raw `write + fsync` floor, or less.
//!
//! After a crash, [`recover`] reads back every whole frame (each carries a CRC and the next
//! sequence number; the first torn or missing one ends the WAL) and the disk layer replays
//! them: each object is rewritten unless its file holds exactly its bytes, and each frame moves
//! its ref only where the ref is still at the frame's expected value, or torn. Frames of one
//! ref are in the WAL in the order their writes happened (under that ref's lock), so from
//! whatever prefix of the writes the disk kept, replay walks each ref forward to its last
//! acknowledged value; a write that was in the WAL but never acknowledged is completed, exactly
//! as if its reply had been lost. Nothing is assumed of the order in which the filesystem
//! writes `hub.git` back.
//!
//! A full segment is retired by a *checkpoint* on the background thread: once every frame in it
//! has been applied, `syncfs` makes `hub.git` durable, and the segment is deleted. So a frame
//! is dropped only after everything it describes is on disk as files. A stopped WAL retires
//! nothing: a frame it could not apply is replay's.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::fs::{CWD, Mode, OFlags};

use super::StoreError;
use super::barrier::sync_dir;

mod flush;
mod frame;

use flush::Flush;
pub(crate) use frame::{Change, Recorded};
use frame::{Frames, HEADER_BYTES, encode, frame};

/// The size of one segment. A frame that does not fit in an empty segment is not in the WAL;
/// the disk layer makes that write durable with its own barriers instead.
pub(crate) const SEGMENT_BYTES: u64 = 1 << 20;
const SEGMENT_SUFFIX: &str = ".seg";
/// How long the background thread waits before retrying a chore that failed.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// The WAL of one open hub.
#[derive(Debug)]
pub(crate) struct Wal {
    shared: Arc<Shared>,
    /// Keeps a spare segment ready and checkpoints full ones.
    background: Option<JoinHandle<()>>,
    /// Makes frames durable (see `flush`).
    flusher: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    dir: PathBuf,
    /// The sequence numbers of the frames written but not yet applied (or given up): a
    /// checkpoint waits until none older than the segments it retires is left.
    unapplied: Mutex<BTreeSet<u64>>,
    /// Wakes a checkpoint waiting on `unapplied`.
    settled: Condvar,
    tail: Mutex<Tail>,
    /// What the flusher thread has made durable and what it is asked for.
    flush: Flush,
    /// Set once the WAL can no longer be trusted to match `hub.git`: nothing more is
    /// acknowledged until hubd restarts and replays.
    broken: OnceLock<WalStop>,
    chores: Mutex<Chores>,
    wake: Condvar,
}

/// Why the WAL stopped accepting writes (see [`StoreError::WalBroken`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalStop {
    /// Writing a frame failed: bytes may have reached the segment, so no frame may follow.
    Write,
    /// An `fdatasync` failed: what reached the disk is unknown.
    Sync,
    /// A in the WAL write could not be applied to `hub.git`: replay must apply it before any
    /// later write of its ref.
    Apply,
}

impl std::fmt::Display for WalStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WalStop::Write => "a WAL frame could not be written",
            WalStop::Sync => "the WAL could not be made durable",
            WalStop::Apply => "a logged write could not be applied to hub.git",
        })
    }
}

/// The segment being written.
#[derive(Debug)]
struct Tail {
    file: Arc<File>,
    /// Where the next frame goes in `file`.
    offset: u64,
    /// Wal bytes written over all segments (the position of the next frame's end, less it).
    written: u64,
    /// Everything before this many WAL bytes is durable (up to the last segment switch).
    durable_at_switch: u64,
    /// The sequence number of `file`'s first frame, which names it.
    first_seq: u64,
    next_seq: u64,
}

/// Work for the background thread.
#[derive(Debug, Default)]
struct Chores {
    /// A zero-filled, fsynced, unnamed segment ready for the next switch.
    spare: Option<File>,
    /// Full segments whose frames are all written, waiting for a checkpoint.
    full: Vec<PathBuf>,
    stop: bool,
}

/// A frame written, its `fdatasync` requested but maybe not done: the write may name its
/// objects meanwhile, then waits with [`Pending::durable`] before it moves its ref.
///
/// Dropped without being made durable and applied, it stops the WAL ([`WalStop::Apply`]).
#[derive(Debug)]
#[must_use = "a logged frame must be applied, or the WAL stops"]
pub(crate) struct Pending {
    end: u64,
    logged: Logged,
}

impl Pending {
    /// Returns once the frame is durable; the write may then move its ref.
    pub(crate) fn durable(self) -> Result<Logged, StoreError> {
        let Pending { end, logged } = self;
        logged.shared.flush_here(end)?;
        Ok(logged)
    }
}

/// A frame written and durable; whoever holds it moves its ref (the write itself, or the
/// applier after the write was acknowledged), then calls [`Logged::applied`]. Until then a
/// checkpoint waits; dropped without it, the WAL stops ([`WalStop::Apply`]).
#[derive(Debug)]
#[must_use = "a logged frame must be applied, or the WAL stops"]
pub(crate) struct Logged {
    shared: Arc<Shared>,
    seq: u64,
    applied: bool,
}

impl Logged {
    /// The change is in `hub.git` (or can no longer be replayed over anything): the frame is
    /// settled.
    pub(crate) fn applied(mut self) {
        self.applied = true;
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if !self.applied {
            // Stopped first: a checkpoint woken by the settling below must not retire the
            // frame that replay still has to apply.
            self.shared.stop(WalStop::Apply);
        }
        lock(&self.shared.unapplied).remove(&self.seq);
        self.shared.settled.notify_all();
    }
}

impl Wal {
    /// Continues the WAL in `dir` after what `recovered` found there (and the caller has
    /// replayed): its replayed segments are retired by the first checkpoint, so opening a hub
    /// never waits for `hub.git` to reach the disk.
    pub(crate) fn start(dir: &Path, recovered: Recovered) -> Result<Wal, StoreError> {
        fs::create_dir_all(dir).map_err(StoreError::io("create the WAL folder", dir))?;
        remove_segments(dir, &recovered.unused)?;
        let next_seq = recovered.next_seq;
        let file = name_segment(dir, zeroed_segment(dir)?, next_seq)?;
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            unapplied: Mutex::new(BTreeSet::new()),
            settled: Condvar::new(),
            tail: Mutex::new(Tail {
                file: Arc::new(file),
                offset: 0,
                written: 0,
                durable_at_switch: 0,
                first_seq: next_seq,
                next_seq,
            }),
            flush: Flush::default(),
            broken: OnceLock::new(),
            chores: Mutex::new(Chores {
                full: recovered.replayed,
                ..Chores::default()
            }),
            wake: Condvar::new(),
        });
        let mut wal = Wal {
            shared,
            background: None,
            flusher: None,
        };
        // Should the second thread fail to start, dropping `WAL` stops the first.
        wal.background = Some(wal.spawn("hubd-wal", Shared::do_chores)?);
        wal.flusher = Some(wal.spawn("hubd-flusher", Shared::flush_frames)?);
        Ok(wal)
    }

    fn spawn(&self, name: &str, run: fn(&Shared)) -> Result<JoinHandle<()>, StoreError> {
        let shared = Arc::clone(&self.shared);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&shared))
            .map_err(StoreError::io("start a WAL thread for", &self.shared.dir))
    }

    /// Writes `change`'s frame and asks the flusher to make it durable, or returns `None` if
    /// the frame is larger than a segment.
    ///
    /// The caller must have checked that the ref is at the change's expected value, under its
    /// lock, and must not have moved the ref yet: it does so once [`Pending::durable`] returns.
    pub(crate) fn begin(&self, change: &Change<'_>) -> Result<Option<Pending>, StoreError> {
        let Some(pending) = self.write(change)? else {
            return Ok(None);
        };
        self.shared.request_flush(pending.end);
        Ok(Some(pending))
    }

    /// Whether the WAL has stopped taking writes, until hubd restarts and replays it.
    pub(crate) fn is_stopped(&self) -> bool {
        self.shared.broken.get().is_some()
    }

    /// [`Wal::begin`] and [`Pending::durable`] in one, for a write with nothing to do
    /// meanwhile: the `fdatasync` runs on the calling thread (see `flush`).
    pub(crate) fn record(&self, change: &Change<'_>) -> Result<Option<Logged>, StoreError> {
        let Some(Pending { end, logged }) = self.write(change)? else {
            return Ok(None);
        };
        self.shared.flush_here(end)?;
        Ok(Some(logged))
    }

    /// Writes `change`'s frame at the tail, unless it is larger than a segment.
    fn write(&self, change: &Change<'_>) -> Result<Option<Pending>, StoreError> {
        let payload = encode(change);
        if (HEADER_BYTES + payload.len()) as u64 > SEGMENT_BYTES {
            return Ok(None);
        }
        self.shared.check_not_broken()?;
        let (seq, end) = self.shared.append(&payload)?;
        Ok(Some(Pending {
            end,
            logged: Logged {
                shared: Arc::clone(&self.shared),
                seq,
                applied: false,
            },
        }))
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        lock(&self.shared.chores).stop = true;
        self.shared.wake.notify_all();
        self.shared.stop_flusher();
        // A thread that panicked has nothing left to clean up.
        for thread in [self.background.take(), self.flusher.take()]
            .into_iter()
            .flatten()
        {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn check_not_broken(&self) -> Result<(), StoreError> {
        match self.broken.get() {
            Some(why) => Err(StoreError::WalBroken {
                dir: self.dir.clone(),
                why: *why,
            }),
            None => Ok(()),
        }
    }

    /// Stops the WAL for `why` (the first reason stays) and wakes every writer waiting for
    /// the flusher, so that they report it.
    fn stop(&self, why: WalStop) {
        let first = self.broken.set(why).is_ok();
        if first {
            tracing::error!(dir = %self.dir.display(), %why, "the WAL stopped; restart hubd to replay it");
        }
        self.wake_waiters();
    }

    /// Writes one frame at the tail, switching segments first if it does not fit; returns its
    /// sequence number and the WAL position of its end.
    fn append(&self, payload: &[u8]) -> Result<(u64, u64), StoreError> {
        let mut tail = lock(&self.tail);
        let frame = frame(tail.next_seq, payload);
        if tail.offset + frame.len() as u64 > SEGMENT_BYTES {
            self.switch_segment(&mut tail)?;
        }
        let at = tail.offset;
        if let Err(source) = tail.file.write_all_at(&frame, at) {
            // Bytes may have reached the file; a later frame must not follow them.
            self.stop(WalStop::Write);
            return Err(StoreError::Io {
                op: "write a WAL frame to",
                path: self.dir.clone(),
                source,
            });
        }
        let seq = tail.next_seq;
        // Under the tail's lock, so that a checkpoint reading `next_seq` sees every older
        // frame either applied or here.
        lock(&self.unapplied).insert(seq);
        tail.offset += frame.len() as u64;
        tail.written += frame.len() as u64;
        tail.next_seq += 1;
        Ok((seq, tail.written))
    }

    /// Makes the full segment durable and continues in a new one (the spare, if ready).
    fn switch_segment(&self, tail: &mut MutexGuard<'_, Tail>) -> Result<(), StoreError> {
        self.sync_data(&tail.file)?;
        tail.durable_at_switch = tail.written;
        let spare = lock(&self.chores).spare.take();
        let spare = match spare {
            Some(file) => file,
            None => zeroed_segment(&self.dir)?,
        };
        let file = name_segment(&self.dir, spare, tail.next_seq)?;
        let full = segment_path(&self.dir, tail.first_seq);
        tail.file = Arc::new(file);
        tail.offset = 0;
        tail.first_seq = tail.next_seq;
        lock(&self.chores).full.push(full);
        self.wake.notify_all();
        Ok(())
    }

    /// Makes every frame written so far durable; returns the WAL position they end at.
    fn sync_tail(&self) -> Result<u64, StoreError> {
        let (file, written, durable_at_switch) = {
            let tail = lock(&self.tail);
            (Arc::clone(&tail.file), tail.written, tail.durable_at_switch)
        };
        // Frames of earlier segments were made durable when their segment was switched.
        if durable_at_switch < written {
            self.sync_data(&file)?;
        }
        Ok(written)
    }

    fn sync_data(&self, file: &File) -> Result<(), StoreError> {
        self.check_not_broken()?;
        file.sync_data().map_err(|source| {
            self.stop(WalStop::Sync);
            StoreError::Io {
                op: "fdatasync the WAL in",
                path: self.dir.clone(),
                source,
            }
        })
    }

    /// The background thread: keeps a spare segment ready and checkpoints full ones.
    fn do_chores(&self) {
        let mut failed = false;
        loop {
            let (need_spare, full) = {
                let mut chores = lock(&self.chores);
                if failed {
                    // Back off after a failure rather than retrying in a tight loop.
                    chores = self
                        .wake
                        .wait_timeout(chores, RETRY_AFTER_FAILURE)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    failed = false;
                }
                while !chores.stop && chores.spare.is_some() && chores.full.is_empty() {
                    chores = self
                        .wake
                        .wait(chores)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                if chores.stop {
                    return;
                }
                (chores.spare.is_none(), std::mem::take(&mut chores.full))
            };
            if need_spare {
                match zeroed_segment(&self.dir) {
                    Ok(file) => lock(&self.chores).spare = Some(file),
                    // Meanwhile a switch makes its own spare, and reports what fails.
                    Err(error) => {
                        tracing::warn!(%error, "could not prepare a WAL segment");
                        failed = true;
                    }
                }
            }
            if !full.is_empty()
                && let Err(error) = self.checkpoint(&full)
            {
                tracing::warn!(%error, "a WAL checkpoint failed; it will be retried");
                lock(&self.chores).full.extend(full);
                failed = true;
            }
        }
    }

    /// Waits until every frame in the WAL so far has been applied, makes `hub.git` durable, and
    /// deletes the `full` segments, whose frames are all older. A stopped WAL keeps them:
    /// some frame in them may not be applied, and only replay may retire it.
    fn checkpoint(&self, full: &[PathBuf]) -> Result<(), StoreError> {
        let logged = lock(&self.tail).next_seq;
        let mut unapplied = lock(&self.unapplied);
        while unapplied.first().is_some_and(|&seq| seq < logged) {
            unapplied = self
                .settled
                .wait(unapplied)
                .unwrap_or_else(PoisonError::into_inner);
        }
        drop(unapplied);
        self.check_not_broken()?;
        syncfs(&self.dir)?;
        remove_segments(&self.dir, full)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every guarded value is updated in whole steps, so a poisoned lock is still consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What [`recover`] found: the changes to replay, in order, and where they came from.
#[derive(Debug, Default)]
pub(crate) struct Recovered {
    /// Every whole frame, oldest first.
    pub(crate) changes: Vec<Recorded>,
    /// The sequence number the WAL continues with.
    pub(crate) next_seq: u64,
    /// The segments the changes came from: deleted only once `hub.git` is durable.
    replayed: Vec<PathBuf>,
    /// Segments holding nothing to replay (empty, or after the end of the WAL): deleted
    /// before anything is written, so that no later frame can hide behind them.
    unused: Vec<PathBuf>,
    /// The WAL folder they are in.
    dir: PathBuf,
}

impl Recovered {
    /// For a hub that writes without a WAL: makes `hub.git` durable (so nothing replayed
    /// is lost) and deletes every segment.
    pub(crate) fn retire(self) -> Result<(), StoreError> {
        if !self.replayed.is_empty() {
            syncfs(&self.dir)?;
        }
        remove_segments(&self.dir, self.replayed.iter().chain(&self.unused))
    }
}

/// Reads every whole frame of the segments in `dir`, oldest first, up to the first that is torn,
/// missing or out of sequence.
pub(crate) fn recover(dir: &Path) -> Result<Recovered, StoreError> {
    let mut recovered = Recovered {
        dir: dir.to_path_buf(),
        ..Recovered::default()
    };
    let mut ended = false;
    for path in segments(dir)? {
        if ended {
            recovered.unused.push(path);
            continue;
        }
        let bytes = fs::read(&path).map_err(StoreError::io("read the WAL segment", &path))?;
        let mut replayed_any = false;
        for (seq, change) in (Frames {
            bytes: &bytes,
            at: 0,
        }) {
            if !recovered.changes.is_empty() && seq != recovered.next_seq {
                ended = true;
                break;
            }
            recovered.next_seq = seq + 1;
            recovered.changes.push(change);
            replayed_any = true;
        }
        if replayed_any {
            recovered.replayed.push(path);
        } else {
            recovered.unused.push(path);
        }
    }
    Ok(recovered)
}

fn remove_segments<'a>(
    dir: &Path,
    segments: impl IntoIterator<Item = &'a PathBuf>,
) -> Result<(), StoreError> {
    let mut removed = false;
    for segment in segments {
        fs::remove_file(segment).map_err(StoreError::io("remove a WAL segment", segment))?;
        removed = true;
    }
    if removed {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The segment files in `dir`, oldest first.
fn segments(dir: &Path) -> Result<Vec<PathBuf>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(StoreError::io("list the WAL folder", dir)(error)),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(StoreError::io("list the WAL folder", dir))?;
        let name = entry.file_name();
        let seq = name
            .to_str()
            .and_then(|n| n.strip_suffix(SEGMENT_SUFFIX))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(seq) = seq {
            found.push((seq, entry.path()));
        }
    }
    found.sort();
    Ok(found.into_iter().map(|(_, path)| path).collect())
}

fn segment_path(dir: &Path, first_seq: u64) -> PathBuf {
    dir.join(format!("{first_seq:020}{SEGMENT_SUFFIX}"))
}

/// An unnamed file of [`SEGMENT_BYTES`] zeros, fsynced: its blocks exist, so writing frames
/// into it changes no metadata.
fn zeroed_segment(dir: &Path) -> Result<File, StoreError> {
    let file: File = rustix::fs::openat(
        CWD,
        dir,
        OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map(File::from)
    .map_err(|errno| StoreError::io("create a WAL segment in", dir)(errno.into()))?;
    let zeros = vec![0u8; 1 << 16];
    let mut at = 0;
    while at < SEGMENT_BYTES {
        file.write_all_at(&zeros, at)
            .map_err(StoreError::io("zero-fill a WAL segment in", dir))?;
        at += zeros.len() as u64;
    }
    file.sync_all()
        .map_err(StoreError::io("fsync a new wal segment in", dir))?;
    Ok(file)
}

/// Names the unnamed `file` as the segment starting at `first_seq`, durably.
fn name_segment(dir: &Path, file: File, first_seq: u64) -> Result<File, StoreError> {
    let path = segment_path(dir, first_seq);
    super::spare::link_into_place(&file, &path)
        .map_err(StoreError::io("name the WAL segment", &path))?;
    sync_dir(dir)?;
    Ok(file)
}

/// Makes everything written to the filesystem holding `dir` durable.
fn syncfs(dir: &Path) -> Result<(), StoreError> {
    let folder = File::open(dir).map_err(StoreError::io("open the WAL folder", dir))?;
    rustix::fs::syncfs(&folder)
        .map_err(|errno| StoreError::io("syncfs the filesystem of", dir)(errno.into()))
}

#[cfg(test)]
mod tests {
    use super::frame::tests::{id, segment_of};
    use super::*;
    use crate::store::Tip;
    use crate::store::object::{LooseObject, NewCommit};

    #[test]
    fn recovery_stops_at_a_gap_in_the_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let a = Recorded::Delete {
            refname: "refs/l3m/x".into(),
            expected: id(1),
        };
        fs::write(
            segment_path(dir.path(), 0),
            segment_of(&[a.clone(), a.clone()], 0),
        )
        .unwrap();
        fs::write(
            segment_path(dir.path(), 5),
            segment_of(std::slice::from_ref(&a), 5),
        )
        .unwrap();
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.changes, [a.clone(), a]);
        assert_eq!(recovered.next_seq, 2);
    }

    #[test]
    fn writes_fill_segments_and_a_checkpoint_retires_the_full_ones() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = Recovered {
            next_seq: 3,
            ..Recovered::default()
        };
        let wal = Wal::start(dir.path(), fresh).unwrap();
        let big = Recorded::Publish {
            refname: "refs/l3m/a/x/_/log".into(),
            expected: Tip::Absent,
            new: NewCommit {
                commit: id(9),
                objects: vec![LooseObject {
                    id: id(8),
                    compressed: vec![7; 100_000],
                }],
            },
        };
        for _ in 0..25 {
            wal.record(&big.as_change())
                .unwrap()
                .expect("a frame that fits")
                .applied();
        }
        // Ten frames fit in a segment, so 25 frames fill two and start a third; checkpoints
        // may have retired the full ones, never the third.
        drop(wal);
        let left = segments(dir.path()).unwrap();
        assert!((1..=3).contains(&left.len()), "{left:?}");
        let recovered = recover(dir.path()).unwrap();
        assert_eq!(recovered.next_seq, 28);
        assert!(recovered.changes.len() >= 5 && recovered.changes.iter().all(|c| *c == big));
        let huge = Recorded::Publish {
            refname: "refs/l3m/a/x/_/log".into(),
            expected: Tip::Absent,
            new: NewCommit {
                commit: id(9),
                objects: vec![LooseObject {
                    id: id(8),
                    compressed: vec![7; SEGMENT_BYTES as usize],
                }],
            },
        };
        let wal = Wal::start(dir.path(), recovered).unwrap();
        assert!(
            wal.record(&huge.as_change()).unwrap().is_none(),
            "too big to wal"
        );
        wait_for_one_segment(dir.path());
        let recovered = recover(dir.path()).unwrap();
        assert!(
            recovered.changes.is_empty(),
            "the first checkpoint retired them"
        );
        assert_eq!(recovered.next_seq, 0);
    }

    /// Waits (up to a minute: this is about a background thread, not speed) until the
    /// checkpoint has retired every segment but the one being written.
    fn wait_for_one_segment(dir: &Path) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while segments(dir).unwrap().len() != 1 {
            assert!(std::time::Instant::now() < deadline, "no checkpoint ran");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
