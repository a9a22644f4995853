//! Placing objects and moving refs in `hub.git`, durably and by compare-and-swap.
//!
//! gix encodes the objects and reads refs, but neither gix-odb nor gix-ref fsyncs anything, and
//! both create a fresh file per object and per lock on the write path. So this module places the
//! bytes itself, keeping git's on-disk protocol exactly. A new file is an unnamed spare (see
//! `spare`) or a recycled one (see `recycle`), named with `linkat` or `RENAME_NOREPLACE`, both
//! of which fail if the name is taken:
//!
//! 1. **Lock.** The new ref value is written into a spare named `<ref>.lock`: like git's
//!    `O_CREAT|O_EXCL`, this fails if any writer (git itself included) holds the lock. Under
//!    the lock the current value is read (loose or packed, through gix) and compared with the
//!    expected one; a mismatch is [`StoreError::Stale`] and the lock is removed, nothing the ref
//!    could reach having been written.
//! 2. **Objects.** Each loose object's bytes go into a file not yet named, and the file is
//!    named (an object already there is kept: same id, same bytes).
//! 3. **Durable.** [`Durability::Fsync`]: one WAL frame holding the ref, its expected and
//!    new value and the objects is written *before* step 2, and step 2 runs while the WAL's
//!    flusher makes it durable (see `WAL`); the write waits for it here.
//!    [`Durability::Barriers`]: the objects are fsynced together with the lock (`barrier`),
//!    and directories this write created have their parents fsynced.
//! 4. **Publish.** The lock takes the ref's place: swapped with it (`RENAME_EXCHANGE`), the
//!    old value's inode going to the recycler, or renamed where the ref is new.
//! 5. **Barrier 2** ([`Durability::Barriers`] only). The ref's directory is fsynced; only then does
//!    the write return `Ok`.
//!
//! A chain append with the WAL is split in two ([`Disk::stage`], [`Disk::apply`]): step 3
//! alone, acknowledged; then steps 1, 2 and 4, by the applier after the reply. Its
//! compare-and-swap is on the chain index (see `hub`), so the lock taken later finds the ref at
//! the expected value unless a writer outside hubd moved it, which stops the WAL.
//!
//! With the WAL nothing under `hub.git` is fsynced on the write path, and the filesystem
//! is trusted for nothing but `fdatasync` and `syncfs`: after a crash of the machine the newest
//! objects may be missing or torn and the newest refs old or torn, in any combination, and the
//! replay at the next open (or `hubd recover`) rewrites each in the WAL object whose bytes are
//! not exactly right and walks each in the WAL ref forward. Until that replay `hub.git` may not
//! pass `git fsck`; a crashed *process* leaves it whole, since every file is complete in the
//! page cache before it is named.
//!
//! With the barriers a crash at any point leaves the ref either at its old value or at a commit
//! whose objects are all on disk; at worst some unreachable objects and a stale lock remain,
//! which [`Hub::open`](super::Hub::open) and `git gc` clean up. A new name in an already
//! existing directory is made durable by the fsync of the file itself on logging
//! filesystems (ext4, xfs): the WAL commit that persists the file persists every namespace
//! operation before it. That is the one filesystem assumption the barriers make.
//!
//! # What was measured
//! `cargo bench -p hubd --bench store_append` (ext4 on virtio, 2 shared cores). With the
//! barriers, before the WAL: a durable append 0.75–0.95 ms at p50 on a quiet day,
//! 5.4–5.9× a raw `write + fsync` of the same bytes — two ordered barriers, each at least one
//! filesystem WAL commit, persisting four new files.
//!
//! With the WAL, what was left was CPU: a relaxed append (no fsync at all) cost 650 µs,
//! 1.4× the raw `fsync`. Half of it was the final `rename(<ref>.lock, <ref>)`: replacing a
//! file makes ext4 allocate the new one's blocks on the spot (`auto_da_alloc`) and evict the
//! old inode; and every inode freed that way slowed each later inode creation, which scans
//! past recently freed inodes. Swapping instead of replacing, and recycling the old inode for
//! the next object, took the relaxed append to 290–360 µs. Starting each file's writeback
//! before the frame (so that an ordered ext4 WAL would keep `hub.git` whole without replay)
//! cost another 650 µs and was dropped: the replay repairs what it would have protected, and
//! the disk this was measured on keeps no filesystem WAL at all. In a benchmark folder
//! away from recently deleted files (see `l3m_wire::test_support::bench_dir`), the WAL's
//! single-entry append then measured 0.54 ms at p50 against 0.25 ms for a raw `write + fsync`
//! of the same bytes in the same run (2.2×; 1.6× for batches of 16), 0.21 ms relaxed, and
//! 29× the git CLI's rate (25× for 16).
//!
//! Naming the objects while the WAL's flusher runs the `fdatasync` (instead of before the
//! frame) then took the in the WAL append to 0.48 ms at p50 against 0.33 ms for the raw
//! `write + fsync` (1.46×; 1.40× for batches of 16), in a run with 2.8% CPU steal. The gain is
//! smaller than the file work it hides because on this 2-vCPU guest the flusher is often woken
//! on the writer's CPU, and part of the device's time is taken from the guest's own CPUs.
//!
//! Acknowledging a chain append once its frame is durable, with the file work left to the
//! applier, then took the store's single-entry append to 1.08–1.19× the raw `write + fsync`
//! (0.93–0.98× for 16: the WAL overwrites preallocated blocks, the reference extends its
//! file), in runs with 0.2–9.8% CPU steal on a machine whose `fsync` costs 130–210 µs.
//!
//! What helped before, in order: spares made ahead of time (inode creation off the write path),
//! concurrent fsyncs (`barrier`), making the 256 fan-out directories once, and waking the
//! spare filler only in bursts at a lower priority.

use std::ffi::OsString;
use std::fs::{self, File};
use std::io::Write as _;
use std::path::{Path, PathBuf};

use gix::ObjectId;
use gix::refs::Target;
use gix::refs::transaction::{Change as RefChange, PreviousValue, RefEdit, RefLog};

use super::barrier::{Syncer, sync_dir, sync_parents_of};
use super::object::{LooseObject, NewCommit};
use super::recycle::{self, Recycler};
use super::spare::{SparePool, link_into_place};
use super::wal::{self, Change, Logged, Wal};
use super::{StoreError, Tip};

/// Whether an acknowledged write is on stable storage, and how it gets there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// A write returns only once it survives a crash of the machine: its WAL frame is made
    /// durable by one `fdatasync`, and its objects and ref reach `hub.git` without fsync, to
    /// be replayed from the WAL after a crash (see `WAL`).
    #[default]
    Fsync,
    /// A write returns only after its objects and then its ref are fsynced, with no WAL:
    /// `hub.git` is whole after a crash without any replay, at two to three times the cost.
    Barriers,
    /// The same writes and renames without any fsync: safe against a crashed process, not
    /// against a crashed machine. For tests and throwaway hubs.
    Relaxed,
}

impl Durability {
    /// Whether acknowledged writes survive a crash of the machine.
    pub fn is_durable(self) -> bool {
        self != Durability::Relaxed
    }
}

/// How this store makes writes durable (the resolved [`Durability`]).
#[derive(Debug)]
enum Mode {
    Relaxed,
    Barriers(Syncer),
    /// The WAL, and the barriers for a write too large for a WAL frame.
    Wal(Wal, Syncer),
}

/// The writing half of the store: where `hub.git` is, how durable writes are, and the spares.
#[derive(Debug)]
pub(crate) struct Disk {
    git_dir: PathBuf,
    objects_dir: PathBuf,
    mode: Mode,
    spares: SparePool,
    recycled: Recycler,
    /// How many WAL frames opening replayed.
    replayed: usize,
}

/// hubd's WAL folder inside `hub.git`.
const WAL_DIR: &str = "hubd/wal";
/// Where builds before the rename kept it; a WAL found there is moved, never left unreplayed.
const LEGACY_WAL_DIR: &str = "hubd/journal";

impl Disk {
    /// Starts writing into the bare repository at `git_dir`, first replaying what a crashed
    /// hubd in the WAL (`repo` tells which objects exist).
    ///
    /// All 256 fan-out directories of `objects/` are made here, once, so that no write pays
    /// for creating one (a directory is an inode too) and fsyncing its parent.
    pub(crate) fn new(
        git_dir: PathBuf,
        durability: Durability,
        repo: &gix::Repository,
    ) -> Result<Self, StoreError> {
        let objects_dir = git_dir.join("objects");
        let mut created = Vec::new();
        for fan_out in 0..=u8::MAX {
            create_dirs(&objects_dir.join(format!("{fan_out:02x}")), &mut created)?;
        }
        if durability.is_durable() {
            sync_parents_of(&created)?;
        }
        let mut disk = Self {
            spares: SparePool::start(objects_dir.clone())?,
            recycled: Recycler::open(&git_dir)?,
            replayed: 0,
            objects_dir,
            mode: Mode::Relaxed,
            git_dir,
        };
        let wal_dir = disk.git_dir.join(WAL_DIR);
        adopt_legacy_wal(&disk.git_dir.join(LEGACY_WAL_DIR), &wal_dir)?;
        let recovered = wal::recover(&wal_dir)?;
        if !recovered.changes.is_empty() {
            tracing::info!(
                frames = recovered.changes.len(),
                "replaying the WAL of a hubd that stopped without a checkpoint"
            );
        }
        for change in &recovered.changes {
            disk.replay(&repo.refs, repo, change)?;
        }
        disk.replayed = recovered.changes.len();
        disk.mode = if durability == Durability::Fsync {
            Mode::Wal(Wal::start(&wal_dir, recovered)?, Syncer::start()?)
        } else {
            // What was replayed had been acknowledged as durable: `retire` keeps that promise
            // before it drops the segments.
            recovered.retire()?;
            match durability {
                Durability::Relaxed => Mode::Relaxed,
                _ => Mode::Barriers(Syncer::start()?),
            }
        };
        Ok(disk)
    }

    /// Whether writes are made durable (anything but [`Durability::Relaxed`]).
    pub(crate) fn is_durable(&self) -> bool {
        !matches!(self.mode, Mode::Relaxed)
    }

    /// Whether the WAL has stopped taking writes (see [`StoreError::WalBroken`]).
    pub(crate) fn wal_stopped(&self) -> bool {
        match &self.mode {
            Mode::Wal(wal, _) => wal.is_stopped(),
            Mode::Relaxed | Mode::Barriers(_) => false,
        }
    }

    /// The bare repository this writes into.
    pub(crate) fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// How many in the WAL writes opening found and replayed (each applied or found done).
    pub(crate) fn replayed(&self) -> usize {
        self.replayed
    }

    /// Writes `new`'s objects and moves `refname` from `expected` to `new.commit`.
    pub(crate) fn publish(
        &self,
        refs: &gix::refs::file::Store,
        refname: &str,
        expected: Tip,
        new: &NewCommit,
    ) -> Result<(), StoreError> {
        let mut created_dirs = Vec::new();
        let (lock, ref_path) =
            self.lock_at(refs, refname, expected, new.commit, &mut created_dirs)?;
        match &self.mode {
            Mode::Relaxed => {
                self.place_objects(new, &mut created_dirs)?;
                lock.commit(&ref_path, &self.recycled)
            }
            Mode::Barriers(syncer) => {
                let filled = self.fill_objects(new)?;
                self.with_barriers(syncer, lock, &ref_path, filled, created_dirs)
            }
            Mode::Wal(wal, syncer) => {
                let change = Change::Publish {
                    refname,
                    expected,
                    new,
                };
                let Some(pending) = wal.begin(&change)? else {
                    let filled = self.fill_objects(new)?;
                    return self.with_barriers(syncer, lock, &ref_path, filled, created_dirs);
                };
                // While the frame's `fdatasync` runs, the objects go into place: no ref reaches
                // them yet, and a crash leaves them to replay or `git gc`. A failure from here
                // on drops `pending`, which stops the WAL (see `WAL`).
                self.place_objects(new, &mut created_dirs)?;
                let logged = pending.durable()?;
                lock.commit(&ref_path, &self.recycled)?;
                logged.applied();
                Ok(())
            }
        }
    }

    /// Logs the move of `refname` from `expected` to `new.commit` and returns once it is
    /// durable, leaving `hub.git` untouched: [`Disk::apply`] puts it there.
    ///
    /// For the writes of one process-wide writer who knows `expected` is current (the chain
    /// index, under the chain's lock): unlike [`Disk::publish`] no ref is locked or read, so a
    /// move in the WAL after this one may be staged before this one is applied. Moves must be
    /// applied in the order they were staged.
    pub(crate) fn stage(
        &self,
        refname: &str,
        expected: Tip,
        new: NewCommit,
    ) -> Result<Staged, StoreError> {
        let Mode::Wal(wal, _) = &self.mode else {
            return Ok(Staged::Direct(new));
        };
        let change = Change::Publish {
            refname,
            expected,
            new: &new,
        };
        match wal.record(&change)? {
            Some(logged) => Ok(Staged::Logged(Unapplied {
                refname: refname.to_owned(),
                expected,
                new,
                logged,
            })),
            None => Ok(Staged::Direct(new)),
        }
    }

    /// Puts a staged move into `hub.git`: steps 1, 2 and 4, the frame being durable already.
    ///
    /// A failure stops the WAL (the move was acknowledged; only replay may complete it).
    pub(crate) fn apply(
        &self,
        refs: &gix::refs::file::Store,
        unapplied: Unapplied,
    ) -> Result<(), StoreError> {
        let Unapplied {
            refname,
            expected,
            new,
            logged,
        } = unapplied;
        let mut created_dirs = Vec::new();
        // Stale only if a writer outside hubd moved the ref; replay decides what stays.
        let (lock, ref_path) =
            self.lock_at(refs, &refname, expected, new.commit, &mut created_dirs)?;
        self.place_objects(&new, &mut created_dirs)?;
        lock.commit(&ref_path, &self.recycled)?;
        logged.applied();
        Ok(())
    }

    /// Step 1 whole: takes `<ref>.lock` holding `new` and, under it, finds the ref at
    /// `expected` or reports [`StoreError::Stale`]; returns the lock and the ref's path.
    fn lock_at(
        &self,
        refs: &gix::refs::file::Store,
        refname: &str,
        expected: Tip,
        new: ObjectId,
        created_dirs: &mut Vec<PathBuf>,
    ) -> Result<(RefLock, PathBuf), StoreError> {
        let ref_path = self.git_dir.join(refname);
        let lock = self.lock_ref(refname, &ref_path, new, created_dirs)?;
        let actual = read_tip(refs, refname)?;
        if actual != expected {
            return Err(StoreError::Stale {
                refname: refname.to_owned(),
                expected,
                actual,
            });
        }
        Ok((lock, ref_path))
    }

    /// Step 2 without a barrier: `new`'s objects filled and named. An object found already
    /// there is kept as it is, unsynced: without a WAL nothing is fsynced, and with one the
    /// frame holds its bytes, which replay rewrites if a crash tears them before the next
    /// checkpoint's `syncfs`.
    fn place_objects(
        &self,
        new: &NewCommit,
        created_dirs: &mut Vec<PathBuf>,
    ) -> Result<(), StoreError> {
        for object in self.fill_objects(new)? {
            self.name_object(object, created_dirs)?;
        }
        Ok(())
    }

    /// Step 2, first half, for each of `new`'s objects.
    fn fill_objects(&self, new: &NewCommit) -> Result<Vec<Filled>, StoreError> {
        new.objects
            .iter()
            .map(|object| self.fill_object(object))
            .collect()
    }

    /// Steps 2–5 with both barriers: names the objects, fsyncs them with the lock, renames the
    /// lock over the ref and fsyncs its directory.
    fn with_barriers(
        &self,
        syncer: &Syncer,
        lock: RefLock,
        ref_path: &Path,
        filled: Vec<Filled>,
        mut created_dirs: Vec<PathBuf>,
    ) -> Result<(), StoreError> {
        let mut written = Vec::with_capacity(filled.len());
        for object in filled {
            written.push(self.name_object(object, &mut created_dirs)?);
        }
        let mut files: Vec<(&File, &Path)> =
            written.iter().map(|(f, p)| (f, p.as_path())).collect();
        files.push((&lock.file, &lock.path));
        syncer.sync_files(&files)?;
        sync_parents_of(&created_dirs)?;
        lock.commit(ref_path, &self.recycled)?;
        sync_dir(parent_of(ref_path)?)
    }

    /// Applies one recovered WAL frame if its ref is still where the frame found it.
    fn replay(
        &self,
        refs: &gix::refs::file::Store,
        repo: &gix::Repository,
        change: &wal::Recorded,
    ) -> Result<(), StoreError> {
        match change {
            wal::Recorded::Publish {
                refname,
                expected,
                new,
            } => {
                for object in &new.objects {
                    self.restore_object(object)?;
                }
                if !repo.has_object(new.commit) {
                    // A move to a commit written outside the store that did not survive: the
                    // ref keeps its older value, which is whole.
                    tracing::warn!(refname, commit = %new.commit, "not replaying a move to a commit that is gone");
                    return Ok(());
                }
                let ref_path = self.git_dir.join(refname);
                let at_expected = match read_tip(refs, refname) {
                    Ok(tip) => tip == *expected,
                    // A loose ref that does not parse was torn by the crash (its name reached
                    // the disk, its bytes did not): the WAL wrote it last, so it walks on.
                    Err(StoreError::Git { .. }) if ref_path.is_file() => {
                        tracing::warn!(refname, "replaying over a torn ref");
                        true
                    }
                    Err(err) => return Err(err),
                };
                if at_expected {
                    let lock = self.lock_ref(refname, &ref_path, new.commit, &mut Vec::new())?;
                    lock.commit(&ref_path, &self.recycled)?;
                }
                Ok(())
            }
            wal::Recorded::Delete { refname, expected } => {
                if read_tip(refs, refname)? == Tip::At(*expected) {
                    delete_ref(refs, refname, *expected)?;
                }
                Ok(())
            }
        }
    }

    /// Makes sure `object`'s file holds exactly its bytes.
    fn restore_object(&self, object: &LooseObject) -> Result<(), StoreError> {
        let path = self.object_path(object.id);
        match fs::read(&path) {
            Ok(bytes) if bytes == object.compressed => return Ok(()),
            Ok(_) => {
                fs::remove_file(&path).map_err(StoreError::io("remove a torn object", &path))?
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => return Err(StoreError::io("read a loose object", &path)(error)),
        }
        self.name_object(self.fill_object(object)?, &mut Vec::new())
            .map(drop)
    }

    /// Deletes `refname` if it is at `expected` (also a packed copy), durably.
    pub(crate) fn delete(
        &self,
        refs: &gix::refs::file::Store,
        refname: &str,
        expected: ObjectId,
    ) -> Result<(), StoreError> {
        let logged = match &self.mode {
            Mode::Wal(wal, _) => wal.record(&Change::Delete { refname, expected })?,
            Mode::Relaxed | Mode::Barriers(_) => None,
        };
        let was_logged = logged.is_some();
        let deleted = delete_ref(refs, refname, expected);
        // A delete lost to another writer settles its frame too: replay skips it unless the ref
        // comes back to `expected`, as if the delete had lost the race before logging.
        if let Some(logged) = logged
            && matches!(deleted, Ok(()) | Err(StoreError::Stale { .. }))
        {
            logged.applied();
        }
        deleted?;
        if !was_logged && matches!(self.mode, Mode::Barriers(_) | Mode::Wal(..)) {
            // Git removes the directories a delete leaves empty, so the removal is made durable
            // in the nearest directory that still exists.
            let path = self.git_dir.join(refname);
            let mut dir = parent_of(&path)?;
            while !dir.is_dir() && dir != self.git_dir {
                dir = parent_of(dir)?;
            }
            sync_dir(dir)?;
        }
        Ok(())
    }

    /// Step 1: a spare holding `new` named `<ref>.lock`, failing if the lock is held.
    fn lock_ref(
        &self,
        refname: &str,
        ref_path: &Path,
        new: ObjectId,
        created_dirs: &mut Vec<PathBuf>,
    ) -> Result<RefLock, StoreError> {
        let lock_path = lock_path_of(ref_path);
        let mut file = self.spares.take()?;
        file.write_all(format!("{new}\n").as_bytes())
            .map_err(StoreError::io("write a ref lock", &lock_path))?;
        match name_file(&file, &lock_path, created_dirs) {
            Ok(()) => Ok(RefLock {
                file,
                path: lock_path,
                committed: false,
            }),
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                Err(StoreError::RefLocked {
                    refname: refname.to_owned(),
                    lock: lock_path,
                })
            }
            Err(err) => Err(err),
        }
    }

    /// Step 2, first half: `object`'s bytes in a recycled file, else in an unnamed spare.
    fn fill_object(&self, object: &LooseObject) -> Result<Filled, StoreError> {
        let path = self.object_path(object.id);
        if let Some(refilled) = self.recycled.refill(&object.compressed)? {
            return Ok(Filled {
                file: refilled.file,
                path,
                recycled_at: Some(refilled.at),
            });
        }
        let mut file = self.spares.take()?;
        file.write_all(&object.compressed)
            .map_err(StoreError::io("write a loose object", &path))?;
        Ok(Filled {
            file,
            path,
            recycled_at: None,
        })
    }

    /// Step 2, second half: names a filled object, or finds it already there (same id, same
    /// content); returns the file under the name and its path, for a barrier to fsync (a
    /// crashed writer may have left one found there unsynced).
    fn name_object(
        &self,
        object: Filled,
        created_dirs: &mut Vec<PathBuf>,
    ) -> Result<(File, PathBuf), StoreError> {
        let Filled {
            file,
            path,
            recycled_at,
        } = object;
        let named = match &recycled_at {
            Some(at) => place(&path, created_dirs, || recycle::rename_new(at, &path)),
            None => name_file(&file, &path, created_dirs),
        };
        match named {
            Ok(()) => Ok((file, path)),
            Err(StoreError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                if let Some(at) = recycled_at {
                    self.recycled.give_back(at);
                }
                let existing =
                    File::open(&path).map_err(StoreError::io("open a loose object", &path))?;
                Ok((existing, path))
            }
            Err(err) => Err(err),
        }
    }

    fn object_path(&self, id: ObjectId) -> PathBuf {
        let hex = id.to_string();
        let (fan_out, rest) = hex.split_at(2);
        self.objects_dir.join(fan_out).join(rest)
    }
}

/// What [`Disk::stage`] did with a move.
#[derive(Debug)]
pub(crate) enum Staged {
    /// Durable in the WAL, not yet in `hub.git`.
    Logged(Unapplied),
    /// Not in the WAL (no WAL, or too large for a frame): the caller publishes it.
    Direct(NewCommit),
}

/// A move acknowledged as durable by its WAL frame, waiting for [`Disk::apply`].
///
/// Dropped without being applied, it stops the WAL (see [`Logged`]).
#[derive(Debug)]
pub(crate) struct Unapplied {
    refname: String,
    expected: Tip,
    new: NewCommit,
    logged: Logged,
}

/// An object's bytes in a file not yet under its name, and the name it will get.
#[derive(Debug)]
struct Filled {
    file: File,
    path: PathBuf,
    /// Where the file is if it is a recycled one; `None` for an unnamed spare.
    recycled_at: Option<PathBuf>,
}

/// Deletes `refname` at `expected` through a gix ref transaction, telling a lost
/// compare-and-swap from a failure.
fn delete_ref(
    refs: &gix::refs::file::Store,
    refname: &str,
    expected: ObjectId,
) -> Result<(), StoreError> {
    let edit = RefEdit {
        change: RefChange::Delete {
            expected: PreviousValue::MustExistAndMatch(Target::Object(expected)),
            log: RefLog::AndReference,
        },
        name: refname
            .try_into()
            .map_err(
                |err: gix::validate::reference::name::Error| StoreError::BadRefName {
                    refname: refname.to_owned(),
                    reason: err.to_string(),
                },
            )?,
        deref: false,
    };
    let fail = gix::lock::acquire::Fail::Immediately;
    let outcome = refs
        .transaction()
        .prepare([edit], fail, fail)
        .and_then(|transaction| transaction.commit(None));
    if let Err(err) = outcome {
        let actual = read_tip(refs, refname)?;
        if actual != Tip::At(expected) {
            return Err(StoreError::Stale {
                refname: refname.to_owned(),
                expected: Tip::At(expected),
                actual,
            });
        }
        return Err(StoreError::git(format!("delete the ref {refname}"))(err));
    }
    Ok(())
}

/// Reads where `refname` points now (loose or packed).
pub(crate) fn read_tip(refs: &gix::refs::file::Store, refname: &str) -> Result<Tip, StoreError> {
    let found = refs
        .try_find(refname)
        .map_err(StoreError::git(format!("read the ref {refname}")))?;
    match found.map(|reference| reference.target) {
        None => Ok(Tip::Absent),
        Some(Target::Object(id)) => Ok(Tip::At(id)),
        Some(Target::Symbolic(name)) => Err(StoreError::NotACommit {
            refname: refname.to_owned(),
            problem: format!("it is a symbolic ref to {}", name.as_bstr()),
        }),
    }
}

/// A held `<ref>.lock`; dropping it without [`RefLock::commit`] removes it.
#[derive(Debug)]
struct RefLock {
    file: File,
    path: PathBuf,
    committed: bool,
}

impl RefLock {
    /// Step 4: puts the lock in the ref's place. An existing ref is swapped with the lock, and
    /// its old value's inode recycled rather than freed (see `recycle`); a new ref, or a
    /// filesystem without `RENAME_EXCHANGE`, gets a plain rename.
    fn commit(mut self, ref_path: &Path, recycled: &Recycler) -> Result<(), StoreError> {
        let moved = StoreError::io("move the ref", ref_path);
        match recycle::exchange(&self.path, ref_path) {
            Ok(()) => {
                self.committed = true;
                // The ref has its new value; what is left under the lock's name is the old,
                // and it must not stay there, where it holds the lock.
                if let Err(err) = recycled.keep(&self.path) {
                    tracing::warn!(%err, "a replaced ref could not be recycled; removing it");
                    if fs::remove_file(&self.path).is_err() {
                        // The next write of this ref reports `RefLocked`, naming the file.
                        tracing::warn!(lock = %self.path.display(), "a stale ref lock is left");
                    }
                }
                Ok(())
            }
            Err(err) if exchange_unavailable(&err) => {
                fs::rename(&self.path, ref_path).map_err(moved)?;
                self.committed = true;
                Ok(())
            }
            Err(err) => Err(moved(err)),
        }
    }
}

/// Whether a failed `RENAME_EXCHANGE` means "rename instead": the ref does not exist yet
/// (`NotFound`, the lock being ours) or the filesystem cannot swap names.
fn exchange_unavailable(err: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        err.kind(),
        ErrorKind::NotFound | ErrorKind::InvalidInput | ErrorKind::Unsupported
    )
}

impl Drop for RefLock {
    fn drop(&mut self) {
        if !self.committed {
            // Nothing reachable was changed; a lock that cannot be removed is reported by the
            // next writer as `RefLocked` and cleaned up by `Hub::open`.
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// `mkdir -p dir`, recording each directory it created, outermost first.
pub(crate) fn create_dirs(dir: &Path, created: &mut Vec<PathBuf>) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dirs(parent, created)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => {
            created.push(dir.to_path_buf());
            Ok(())
        }
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(err) => Err(StoreError::io("create the directory", dir)(err)),
    }
}

/// Names the unnamed `file` `target`, creating `target`'s directories if they are missing.
fn name_file(
    file: &File,
    target: &Path,
    created_dirs: &mut Vec<PathBuf>,
) -> Result<(), StoreError> {
    place(target, created_dirs, || link_into_place(file, target))
}

/// Runs `name` (which gives a file the name `target`), once more after creating `target`'s
/// directories if they were missing.
fn place(
    target: &Path,
    created_dirs: &mut Vec<PathBuf>,
    name: impl Fn() -> std::io::Result<()>,
) -> Result<(), StoreError> {
    let io_err = StoreError::io("name a new file", target);
    match name() {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            create_dirs(parent_of(target)?, created_dirs)?;
            name().map_err(io_err)
        }
        other => other.map_err(io_err),
    }
}

fn lock_path_of(ref_path: &Path) -> PathBuf {
    let mut name = OsString::from(ref_path.as_os_str());
    name.push(".lock");
    PathBuf::from(name)
}

fn parent_of(path: &Path) -> Result<&Path, StoreError> {
    path.parent().ok_or_else(|| StoreError::BadRefName {
        refname: path.display().to_string(),
        reason: "a ref needs a parent directory".into(),
    })
}

/// Moves a WAL an older build left under its old folder name to `wal_dir`, so that its
/// acknowledged frames are replayed rather than forgotten after an upgrade.
fn adopt_legacy_wal(legacy: &Path, wal_dir: &Path) -> Result<(), StoreError> {
    if !legacy.is_dir() || wal_dir.exists() {
        return Ok(());
    }
    std::fs::rename(legacy, wal_dir)
        .map_err(StoreError::io("move the old journal folder to", wal_dir))?;
    sync_parents_of(&[wal_dir.to_path_buf()])
}
