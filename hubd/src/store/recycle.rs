//! The inodes a ref move replaces, kept to hold the next objects instead of being freed.
//!
//! Moving a ref the usual way (`rename(<ref>.lock, <ref>)`) frees the inode of the value it
//! replaces. On ext4 that is dear twice over: the rename itself forces the new file's blocks to
//! be allocated (`auto_da_alloc`) and evicts the old inode, about 250 µs of a 650 µs append;
//! and every inode created afterwards in that block group first walks past each inode freed in
//! the last seconds (`recently_deleted`), so creation slows down with the write rate.
//!
//! So the store moves a ref by swapping the lock and the ref (`RENAME_EXCHANGE`, about 30 µs)
//! and files the old value's inode here, under `hubd/recycle/`, where the next loose object
//! that needs a file takes it over: its bytes are rewritten and it is renamed into place. A
//! stream of appends then frees no inode at all.
//!
//! Only objects take recycled files, never ref locks: an object's name is its content's hash,
//! so a recycled file whose new bytes did not reach the disk before a crash is found and
//! rewritten by the WAL's replay, while a ref holding a stale value would look valid.
//!
//! A file is rewritten in place, so one with another name somewhere (a hard-linked backup of
//! the hub, as `cp -al` or rsnapshot make) is never reused: its name here is dropped and the
//! other copy keeps its bytes.

use std::fs::{self, File, Permissions};
use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{CWD, RenameFlags};

use super::StoreError;

/// How many recycled files are kept; beyond it a replaced value's inode is freed as usual.
const CAPACITY: usize = 1024;

/// hubd's folder of recycled files, inside `hub.git`.
pub(crate) const RECYCLE_DIR: &str = "hubd/recycle";

/// The recycled files, by name in [`RECYCLE_DIR`].
#[derive(Debug)]
pub(crate) struct Recycler {
    dir: PathBuf,
    kept: Mutex<Vec<PathBuf>>,
    next: AtomicU64,
}

/// A recycled file rewritten with an object's bytes, not yet named.
#[derive(Debug)]
pub(crate) struct Refilled {
    pub(crate) file: File,
    /// Where it is, in the recycle folder.
    pub(crate) at: PathBuf,
}

impl Recycler {
    /// Takes up the files a previous hubd left in `git_dir`'s recycle folder.
    pub(crate) fn open(git_dir: &Path) -> Result<Self, StoreError> {
        let dir = git_dir.join(RECYCLE_DIR);
        fs::create_dir_all(&dir).map_err(StoreError::io("create the directory", &dir))?;
        let mut kept = Vec::new();
        let mut next = 0;
        let entries = fs::read_dir(&dir).map_err(StoreError::io("list the directory", &dir))?;
        for entry in entries {
            let entry = entry.map_err(StoreError::io("list the directory", &dir))?;
            let number = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u64>().ok());
            match number {
                Some(number) if kept.len() < CAPACITY => {
                    next = next.max(number + 1);
                    kept.push(entry.path());
                }
                // Not one of ours, or more than are kept: nothing refers to it.
                _ => fs::remove_file(entry.path())
                    .map_err(StoreError::io("remove a spare file", &entry.path()))?,
            }
        }
        Ok(Self {
            dir,
            kept: Mutex::new(kept),
            next: AtomicU64::new(next),
        })
    }

    /// Files the inode named `path` (a ref's old value, just swapped out) for reuse.
    pub(crate) fn keep(&self, path: &Path) -> Result<(), StoreError> {
        let mut kept = self.lock_kept();
        if kept.len() >= CAPACITY {
            drop(kept);
            return fs::remove_file(path).map_err(StoreError::io("remove a replaced ref", path));
        }
        let at = self
            .dir
            .join(self.next.fetch_add(1, Ordering::Relaxed).to_string());
        fs::rename(path, &at).map_err(StoreError::io("recycle a replaced ref", path))?;
        kept.push(at);
        Ok(())
    }

    /// A recycled file holding exactly `bytes`, or `None` if none is kept.
    pub(crate) fn refill(&self, bytes: &[u8]) -> Result<Option<Refilled>, StoreError> {
        loop {
            let Some(at) = self.lock_kept().pop() else {
                return Ok(None);
            };
            match rewrite(&at, bytes) {
                Ok(Some(file)) => return Ok(Some(Refilled { file, at })),
                Ok(None) => {
                    // Linked elsewhere too: only our name goes, the inode and its bytes stay.
                    fs::remove_file(&at)
                        .map_err(StoreError::io("remove a shared recycled file", &at))?;
                }
                Err(err) => {
                    // Kept for the next try; the error is this write's.
                    self.give_back(at);
                    return Err(err);
                }
            }
        }
    }

    /// Returns a refilled file that was not used (its object already existed).
    pub(crate) fn give_back(&self, at: PathBuf) {
        self.lock_kept().push(at);
    }

    fn lock_kept(&self) -> MutexGuard<'_, Vec<PathBuf>> {
        // Every push and pop is whole, so a poisoned list is still consistent.
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Opens the file at `at` and makes `bytes` its whole content, leaving it read-only as git's
/// objects are; `None`, untouched, if the file has another name besides `at`.
fn rewrite(at: &Path, bytes: &[u8]) -> Result<Option<File>, StoreError> {
    let read_only = Permissions::from_mode(0o444);
    let written = || -> std::io::Result<Option<File>> {
        if fs::symlink_metadata(at)?.nlink() != 1 {
            return Ok(None);
        }
        fs::set_permissions(at, Permissions::from_mode(0o644))?;
        let mut file = fs::OpenOptions::new().write(true).open(at)?;
        if file.metadata()?.nlink() != 1 {
            // Linked between the two looks: leave it as it was.
            file.set_permissions(read_only.clone())?;
            return Ok(None);
        }
        file.write_all(bytes)?;
        file.set_len(bytes.len() as u64)?;
        file.set_permissions(read_only)?;
        Ok(Some(file))
    };
    written().map_err(StoreError::io("rewrite a recycled file", at))
}

/// Renames `from` to `to` unless `to` exists (`AlreadyExists`); `NotFound` if `to`'s folder
/// is missing.
pub(crate) fn rename_new(from: &Path, to: &Path) -> std::io::Result<()> {
    rustix::fs::renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE).map_err(Into::into)
}

/// Swaps the names `a` and `b`, both of which must exist (else `NotFound`).
pub(crate) fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    rustix::fs::renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(Into::into)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_inode_comes_back_holding_exactly_the_new_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let recycler = Recycler::open(dir.path()).unwrap();
        assert!(recycler.refill(b"x").unwrap().is_none(), "nothing kept yet");
        let old = dir.path().join("old");
        fs::write(&old, "a much longer old value than the new one\n").unwrap();
        fs::set_permissions(&old, Permissions::from_mode(0o444)).unwrap();
        let inode = fs::metadata(&old).unwrap().ino();
        recycler.keep(&old).unwrap();
        assert!(!old.exists());

        let refilled = recycler.refill(b"new").unwrap().unwrap();
        assert_eq!(fs::read(&refilled.at).unwrap(), b"new");
        assert_eq!(fs::metadata(&refilled.at).unwrap().ino(), inode);
        assert_eq!(
            fs::metadata(&refilled.at).unwrap().permissions().mode() & 0o777,
            0o444
        );
        let target = dir.path().join("object");
        rename_new(&refilled.at, &target).unwrap();
        fs::write(dir.path().join("other"), "").unwrap();
        let taken = rename_new(&dir.path().join("other"), &target).unwrap_err();
        assert_eq!(taken.kind(), std::io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn a_kept_file_linked_elsewhere_is_never_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let recycler = Recycler::open(dir.path()).unwrap();
        let (shared, alone) = (dir.path().join("shared"), dir.path().join("alone"));
        fs::write(&shared, "a backup's ref\n").unwrap();
        fs::write(&alone, "an old ref\n").unwrap();
        // Kept first, so taken last: the shared one is popped first.
        recycler.keep(&alone).unwrap();
        recycler.keep(&shared).unwrap();
        let backup = dir.path().join("backup");
        let kept_shared = dir.path().join(RECYCLE_DIR).join("1");
        fs::hard_link(&kept_shared, &backup).unwrap();

        let refilled = recycler.refill(b"object").unwrap().unwrap();
        assert_eq!(fs::read(&refilled.at).unwrap(), b"object");
        assert_ne!(refilled.at, kept_shared, "the shared file was skipped");
        assert_eq!(fs::read_to_string(&backup).unwrap(), "a backup's ref\n");
        assert!(!kept_shared.exists(), "only its name here is dropped");
        assert!(recycler.refill(b"more").unwrap().is_none());
    }

    #[test]
    fn a_reopened_recycler_takes_up_what_was_left_and_numbers_past_it() {
        let dir = tempfile::tempdir().unwrap();
        let recycler = Recycler::open(dir.path()).unwrap();
        for name in ["a", "b"] {
            let path = dir.path().join(name);
            fs::write(&path, name).unwrap();
            recycler.keep(&path).unwrap();
        }
        drop(recycler);
        fs::write(dir.path().join(RECYCLE_DIR).join("stray"), "").unwrap();
        let again = Recycler::open(dir.path()).unwrap();
        assert!(!dir.path().join(RECYCLE_DIR).join("stray").exists());
        let path = dir.path().join("c");
        fs::write(&path, "c").unwrap();
        again.keep(&path).unwrap();
        let mut names: Vec<_> = fs::read_dir(dir.path().join(RECYCLE_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["0", "1", "2"]);
    }

    #[test]
    fn an_exchange_swaps_and_needs_both_names() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        fs::write(&a, "A").unwrap();
        let missing = exchange(&a, &b).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound);
        fs::write(&b, "B").unwrap();
        exchange(&a, &b).unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "B");
        assert_eq!(fs::read_to_string(&b).unwrap(), "A");
    }
}
