//! A pool of unnamed files made ahead of time, so a write never waits on inode creation.
//!
//! Measured on the hub's ext4 disk, creating a file took from 10 µs to 600 µs (p50 of 300
//! creates, depending on what else used the disk), and a profile of a stream of appends spent
//! 70% of its CPU in ext4's search for a free inode (`find_inode_bit`, `recently_deleted`) —
//! more than a whole durable append costs otherwise. So a background thread keeps a few dozen files ready, created with `O_TMPFILE`:
//! an inode with no name in any directory. A write fills one and gives it its final name with
//! `linkat`, which, like `O_CREAT|O_EXCL`, fails if the name exists.
//!
//! Unnamed files have two more virtues: making them takes no directory lock, so the filler
//! never stalls a writer naming its files; and a process that dies leaves nothing behind, since
//! the kernel frees unnamed inodes when their last descriptor closes (or, after a machine
//! crash, when the filesystem is mounted again).
//!
//! Linux only, on a filesystem with `O_TMPFILE` (ext4, xfs, btrfs, tmpfs), with `/proc`
//! mounted. [`SparePool::start`] checks both and says so if either is missing.

use std::fs::File;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::fs::{AtFlags, CWD, Mode, OFlags};

use super::StoreError;

/// How many spares the background thread keeps ready (a chain append uses four).
const TARGET: usize = 64;
/// The filler is woken only when fewer spares than this are left, and then refills to
/// [`TARGET`]: fewer wake-ups, and no inode creation racing every single write.
const LOW_WATER: usize = TARGET / 2;
/// The filler thread's nice value (writers run at the process's own, normally 0).
const FILLER_NICE: i32 = 10;
/// How long the filler waits before trying again after failing to create a file.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(1);

/// The pool and its filler thread; dropping it stops the thread.
#[derive(Debug)]
pub(crate) struct SparePool {
    shared: Arc<Shared>,
    filler: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    /// The directory whose filesystem the files are made on.
    dir: PathBuf,
    ready: Mutex<Vec<File>>,
    /// Signalled when spares are taken, and on shutdown.
    wanted: Condvar,
    stop: AtomicBool,
}

impl SparePool {
    /// Starts keeping unnamed files ready on the filesystem of `dir`.
    pub(crate) fn start(dir: PathBuf) -> Result<Self, StoreError> {
        let shared = Arc::new(Shared {
            ready: Mutex::new(Vec::with_capacity(TARGET)),
            wanted: Condvar::new(),
            stop: AtomicBool::new(false),
            dir,
        });
        // Fail here, with a clear reason, rather than on the first write.
        let probe = shared.create()?;
        let proc_path = proc_fd_path(&probe);
        if !proc_path.exists() {
            return Err(StoreError::Io {
                op: "find an open file under /proc (the store names unnamed files through it)",
                path: proc_path,
                source: std::io::ErrorKind::NotFound.into(),
            });
        }
        shared.lock_ready().push(probe);
        let for_thread = Arc::clone(&shared);
        let filler = std::thread::Builder::new()
            .name("hubd-spares".into())
            .spawn(move || for_thread.fill_until_stopped())
            .map_err(StoreError::io(
                "start the spare-file thread for",
                &shared.dir,
            ))?;
        Ok(Self {
            shared,
            filler: Mutex::new(Some(filler)),
        })
    }

    /// An empty unnamed file from the pool, or a new one if the pool is empty.
    pub(crate) fn take(&self) -> Result<File, StoreError> {
        let (spare, left) = {
            let mut ready = self.shared.lock_ready();
            (ready.pop(), ready.len())
        };
        if left < LOW_WATER {
            self.shared.wanted.notify_one();
        }
        match spare {
            Some(file) => Ok(file),
            None => self.shared.create(),
        }
    }
}

/// Gives the unnamed `file` the name `target`; fails with `AlreadyExists` if it is taken and
/// with `NotFound` if its directory does not exist.
pub(crate) fn link_into_place(file: &File, target: &Path) -> std::io::Result<()> {
    rustix::fs::linkat(
        CWD,
        proc_fd_path(file),
        CWD,
        target,
        AtFlags::SYMLINK_FOLLOW,
    )
    .map_err(Into::into)
}

fn proc_fd_path(file: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
}

impl Drop for SparePool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Taking the lock orders the store above before the filler's next check.
        drop(self.shared.lock_ready());
        self.shared.wanted.notify_all();
        let handle = self
            .filler
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // A filler that panicked has nothing left to clean up.
            let _ = handle.join();
        }
    }
}

impl Shared {
    fn lock_ready(&self) -> MutexGuard<'_, Vec<File>> {
        // The vector stays consistent even if a holder panicked: every push is complete.
        self.ready.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn create(&self) -> Result<File, StoreError> {
        rustix::fs::openat(
            CWD,
            &self.dir,
            OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o444),
        )
        .map(File::from)
        .map_err(|errno| StoreError::Io {
            op: "create an unnamed file (O_TMPFILE) in",
            path: self.dir.clone(),
            source: errno.into(),
        })
    }

    fn fill_until_stopped(&self) {
        // Inode creation is CPU-heavy on a busy ext4 (it scans for free inodes); at a lower
        // priority the filler yields the CPU to writers. Best effort: a refusal changes nothing.
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), FILLER_NICE);
        let mut ready = self.lock_ready();
        loop {
            while ready.len() >= LOW_WATER && !self.stop.load(Ordering::SeqCst) {
                ready = self
                    .wanted
                    .wait(ready)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            // Refill all the way, then sleep until the writers have used up half.
            while ready.len() < TARGET && !self.stop.load(Ordering::SeqCst) {
                drop(ready);
                let created = self.create();
                ready = self.lock_ready();
                match created {
                    Ok(file) => ready.push(file),
                    Err(_) => {
                        // The writer that runs dry creates its own file and reports the error.
                        ready = self
                            .wanted
                            .wait_timeout(ready, RETRY_AFTER_FAILURE)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                }
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Seek as _, Write as _};

    #[test]
    fn spares_are_empty_unnamed_files_that_take_a_name_once() {
        let dir = tempfile::tempdir().unwrap();
        let pool = SparePool::start(dir.path().to_path_buf()).unwrap();
        let mut named = Vec::new();
        for i in 0..(TARGET + 5) {
            let mut file = pool.take().unwrap();
            assert_eq!(file.metadata().unwrap().len(), 0);
            file.write_all(format!("{i}").as_bytes()).unwrap();
            let target = dir.path().join(format!("f{i}"));
            link_into_place(&file, &target).unwrap();
            let taken = link_into_place(&file, &target).unwrap_err();
            assert_eq!(taken.kind(), std::io::ErrorKind::AlreadyExists);
            named.push((file, target));
        }
        for (i, (mut file, target)) in named.into_iter().enumerate() {
            assert_eq!(std::fs::read_to_string(&target).unwrap(), format!("{i}"));
            let mut again = String::new();
            file.rewind().unwrap();
            file.read_to_string(&mut again).unwrap();
            assert_eq!(again, format!("{i}"));
        }
        drop(pool);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            TARGET + 5,
            "only the named files are left"
        );
    }

    #[test]
    fn naming_into_a_missing_directory_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let pool = SparePool::start(dir.path().to_path_buf()).unwrap();
        let err = link_into_place(&pool.take().unwrap(), &dir.path().join("no/such")).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
