//! The journal as a local file in the harness's `.l3m/`, written only through the ring.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt, OpenOptionsMaybeDirExt};
use cap_std::AmbientAuthority;
use cap_std::fs::{Dir, File, OpenOptions};
use l3m_core::record_format::{from_line, to_line};

use super::{EntryId, JournalError, UndoEntry, UndoJournal, codec};
use crate::path::HARNESS_DIR;

/// The journal file's name inside `.l3m/`.
pub const JOURNAL_FILE: &str = "undo.journal";

/// An append-only, checksummed, fsynced-per-record undo journal at `<acr>/.l3m/undo.journal`.
/// Opening it cuts a torn tail left by a crash, so every later append follows a sound record.
#[derive(Debug)]
pub struct LocalJournal {
    /// The open journal and its sound length, behind one lock: one append at a time.
    state: Mutex<Appender>,
    /// The file's path, for messages.
    path: PathBuf,
    /// The id the next entry gets.
    next: AtomicU64,
}

#[derive(Debug)]
struct Appender {
    file: File,
    /// Length of the sound prefix; a failed append is cut back to it.
    len: u64,
}

impl LocalJournal {
    /// Opens (creating if needed) the journal of the ACR at `acr`. The ambient authority is the
    /// harness's: tools never hold a journal, only the `&dyn UndoJournal` a provider call takes.
    pub fn open(acr: &Path, ambient: AmbientAuthority) -> Result<Self, JournalError> {
        let path = acr.join(HARNESS_DIR).join(JOURNAL_FILE);
        let io = |op| {
            let path = path.clone();
            move |source| JournalError::Io { path, op, source }
        };
        let acr_dir = Dir::open_ambient_dir(acr, ambient).map_err(io("open the ACR"))?;
        let created = match acr_dir.create_dir(HARNESS_DIR) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(io("create .l3m/")(e)),
        };
        if created {
            sync_dir(&acr_dir).map_err(io("sync the ACR"))?;
        }
        let harness = acr_dir
            .open_dir_nofollow(HARNESS_DIR)
            .map_err(io("open .l3m/ (it must be a directory, not a link)"))?;
        let mut file = harness
            .open_with(
                JOURNAL_FILE,
                OpenOptions::new()
                    .read(true)
                    .append(true)
                    .create(true)
                    .follow(FollowSymlinks::No),
            )
            .map_err(io("open"))?;
        sync_dir(&harness).map_err(io("sync .l3m/"))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(io("read"))?;
        let (entries, good_len) = decode_entries(&bytes)?;
        if good_len < bytes.len() as u64 {
            file.set_len(good_len).map_err(io("cut the torn tail"))?;
            file.sync_all()
                .map_err(io("sync after cutting the torn tail"))?;
        }
        let next = entries.last().map_or(1, |e| e.id.0.saturating_add(1));
        Ok(Self {
            state: Mutex::new(Appender {
                file,
                len: good_len,
            }),
            path,
            next: AtomicU64::new(next),
        })
    }

    /// The journal file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry recorded, oldest first. A torn tail is not an entry; damage is an error.
    pub fn entries(&self) -> Result<Vec<UndoEntry>, JournalError> {
        let mut state = self.lock()?;
        let mut bytes = Vec::new();
        state
            .file
            .seek(SeekFrom::Start(0))
            .and_then(|_| state.file.read_to_end(&mut bytes))
            .map_err(|source| self.io("read", source))?;
        decode_entries(&bytes).map(|(entries, _)| entries)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Appender>, JournalError> {
        self.state.lock().map_err(|_| JournalError::Poisoned {
            path: self.path.clone(),
        })
    }

    fn io(&self, op: &'static str, source: std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.path.clone(),
            op,
            source,
        }
    }
}

impl UndoJournal for LocalJournal {
    fn next_id(&self) -> Result<EntryId, JournalError> {
        Ok(EntryId(self.next.fetch_add(1, Ordering::Relaxed)))
    }

    fn record(&self, entry: &UndoEntry) -> Result<(), JournalError> {
        let line = to_line(entry).map_err(JournalError::Encode)?;
        let record = codec::encode(line.as_bytes())?;
        let mut state = self.lock()?;
        let appended = state
            .file
            .write_all(&record)
            .and_then(|()| state.file.sync_data());
        match appended {
            Ok(()) => {
                state.len += record.len() as u64;
                Ok(())
            }
            Err(source) => {
                // Cut a partial record now, so the next append follows a sound one; if even
                // that fails, the next open cuts it as a torn tail.
                let _cut = state.file.set_len(state.len);
                Err(self.io("append", source))
            }
        }
    }
}

/// Decodes framed records into entries, with the sound length.
fn decode_entries(bytes: &[u8]) -> Result<(Vec<UndoEntry>, u64), JournalError> {
    let frames = codec::decode(bytes)?;
    let entries = frames
        .payloads
        .iter()
        .map(|(offset, payload)| {
            let decode = |source| JournalError::Decode {
                offset: *offset,
                source,
            };
            let text = std::str::from_utf8(payload).map_err(|e| {
                decode(l3m_core::record_format::LineError::Malformed {
                    line: 1,
                    reason: e.to_string(),
                })
            })?;
            from_line(text, 1).map_err(decode)
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries, frames.good_len))
}

/// Makes a directory's entries durable (a new file or subdirectory in it survives a crash).
/// (cap-std holds directories as `O_PATH` handles, which cannot be synced, so `.` is reopened.)
fn sync_dir(dir: &Dir) -> std::io::Result<()> {
    dir.open_with(".", OpenOptions::new().read(true).maybe_dir(true))?
        .sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Prior, Undo};
    use crate::path::RelPath;
    use cap_std::ambient_authority;

    fn entry(j: &LocalJournal, path: &str) -> UndoEntry {
        UndoEntry {
            id: j.next_id().unwrap(),
            undo: Undo::Path {
                path: RelPath::parse(path).unwrap(),
                prior: Prior::File {
                    bytes: path.as_bytes().to_vec(),
                    mode: 0o644,
                },
            },
            at_ms: 1,
        }
    }

    #[test]
    fn entries_survive_reopening_and_ids_continue() {
        let acr = tempfile::tempdir().unwrap();
        let j = LocalJournal::open(acr.path(), ambient_authority()).unwrap();
        let (a, b) = (entry(&j, "workspace/a"), entry(&j, "workspace/b"));
        j.record(&a).unwrap();
        j.record(&b).unwrap();
        drop(j);
        let j = LocalJournal::open(acr.path(), ambient_authority()).unwrap();
        assert_eq!(j.entries().unwrap(), [a, b.clone()]);
        assert_eq!(j.next_id().unwrap(), EntryId(b.id.0 + 1));
    }

    #[test]
    fn a_torn_tail_is_cut_at_open_and_later_appends_read_back() {
        let acr = tempfile::tempdir().unwrap();
        let j = LocalJournal::open(acr.path(), ambient_authority()).unwrap();
        let a = entry(&j, "workspace/a");
        j.record(&a).unwrap();
        let sound = std::fs::metadata(j.path()).unwrap().len();
        let torn = entry(&j, "workspace/torn");
        j.record(&torn).unwrap();
        let path = j.path().to_path_buf();
        drop(j);
        // A crash mid-append: the second record is only partly on disk.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(sound + 10).unwrap();
        let j = LocalJournal::open(acr.path(), ambient_authority()).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), sound);
        assert_eq!(j.entries().unwrap(), std::slice::from_ref(&a));
        let c = entry(&j, "workspace/c");
        j.record(&c).unwrap();
        assert_eq!(j.entries().unwrap(), [a, c]);
    }

    #[test]
    fn damage_before_the_end_is_refused_not_skipped() {
        let acr = tempfile::tempdir().unwrap();
        let j = LocalJournal::open(acr.path(), ambient_authority()).unwrap();
        j.record(&entry(&j, "workspace/a")).unwrap();
        j.record(&entry(&j, "workspace/b")).unwrap();
        let path = j.path().to_path_buf();
        drop(j);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[codec::HEADER_LEN + 3] ^= 0x20;
        std::fs::write(&path, &bytes).unwrap();
        let err = LocalJournal::open(acr.path(), ambient_authority()).unwrap_err();
        assert!(
            matches!(err, JournalError::Corrupt { offset: 0, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_symlinked_harness_dir_is_refused() {
        let acr = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), acr.path().join(".l3m")).unwrap();
        let err = LocalJournal::open(acr.path(), ambient_authority()).unwrap_err();
        assert!(matches!(err, JournalError::Io { .. }), "{err}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }
}
