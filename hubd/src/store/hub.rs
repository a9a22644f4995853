//! [`Hub`]: an open hub, its chain indexes, and every read and write the store offers.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use gix::ObjectId;
use l3m_core::refs::SETTINGS;
use l3m_core::refs::paths::HUB_GIT;

use super::applier::Applier;
use super::disk::{Disk, Durability, Staged, read_tip};
use super::index::ChainIndex;
use super::input::{commit_message, file_tree, records_blob};
use super::layout::{self, INITIAL_SETTINGS, SETTINGS_FILE};
use super::object::{NewCommit, chain_commit, files_commit, merge_files_commit};
use super::read::{count_lines, read_object, resync_chain};
use super::refname::{RefKind, classify};
use super::{StoreError, Tip};

/// Where commit times come from.
///
/// The store reads the system clock here, at the shell, unless told otherwise; tests pass a
/// fixed time so object ids repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitTime {
    /// The system clock, in whole seconds, UTC.
    #[default]
    System,
    /// This many seconds since the Unix epoch, for every commit.
    Fixed(i64),
}

/// How a hub is created or opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HubOptions {
    /// Whether writes are fsynced before they are acknowledged.
    pub durability: Durability,
    /// Where commit times come from.
    pub commit_time: CommitTime,
}

/// What a successful [`Hub::append`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The new commit, the chain's new tip.
    pub commit: ObjectId,
    /// Sequence number of the first entry appended.
    pub first_seq: u64,
    /// Number of entries in the chain after the append.
    pub len: u64,
}

impl Appended {
    /// The chain's new tip, to pass as the expected tip of the next append.
    pub fn tip(&self) -> Tip {
        Tip::At(self.commit)
    }
}

/// Per-ref state, made on first use. Its mutex serializes writers of that ref in this process.
#[derive(Debug)]
struct Slots<T> {
    map: RwLock<HashMap<String, Arc<Mutex<T>>>>,
}

impl<T: Default> Slots<T> {
    fn new(map: HashMap<String, Arc<Mutex<T>>>) -> Self {
        Self {
            map: RwLock::new(map),
        }
    }

    fn get(&self, refname: &str) -> Arc<Mutex<T>> {
        if let Some(slot) = self
            .map
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(refname)
        {
            return Arc::clone(slot);
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(map.entry(refname.to_owned()).or_default())
    }
}

fn lock<T>(slot: &Mutex<T>) -> MutexGuard<'_, T> {
    // A slot is replaced whole, never left half-updated, so a poisoned lock is still usable.
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An open hub: the only writer of its `hub.git`.
///
/// `Hub` is `Send + Sync`. Writes to one ref are serialized by that ref's lock and settled by
/// compare-and-swap; writes to different refs run in parallel.
pub struct Hub {
    root: PathBuf,
    repo: gix::ThreadSafeRepository,
    /// Applies in the WAL chain appends after they are acknowledged. Declared before `disk`
    /// and the process lock, so that dropping the hub drains it first.
    applier: Applier,
    disk: Arc<Disk>,
    commit_time: CommitTime,
    /// The index of every chain, equal to what a walk of `hub.git` finds once settled.
    chains: Slots<ChainIndex>,
    /// Writer locks of plain refs.
    plain: Slots<()>,
    /// Holds the hub's `flock` for as long as the hub is open.
    _process_lock: File,
}

/// `Hub` is shared by reference across threads; keep it that way.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<Hub>();
};

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("root", &self.root)
            .field("disk", &self.disk)
            .field("commit_time", &self.commit_time)
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// Creates a hub at `root` (absent or an empty directory): a bare `hub.git`, `forest/`,
    /// `settings/`, `cache/`, and `refs/l3m/settings` with its first `settings.toml`.
    pub fn create(root: impl AsRef<Path>, options: HubOptions) -> Result<Hub, StoreError> {
        let root = root.as_ref();
        layout::claim_empty(root)?;
        let git_dir = root.join(HUB_GIT);
        gix::init_bare(&git_dir).map_err(StoreError::git(format!(
            "create the bare repository {}",
            git_dir.display()
        )))?;
        layout::create_folders(root)?;
        let hub = Self::open_unchecked(root, options)?;
        hub.commit_files(
            SETTINGS,
            Tip::Absent,
            &[(SETTINGS_FILE, INITIAL_SETTINGS.as_bytes())],
            "hub created with empty settings",
        )?;
        if options.durability.is_durable() {
            layout::sync_tree(root)?;
        }
        Ok(hub)
    }

    /// Opens the hub at `root`, refusing a folder that is not one, and indexes every chain.
    pub fn open(root: impl AsRef<Path>, options: HubOptions) -> Result<Hub, StoreError> {
        let root = root.as_ref();
        layout::check(root)?;
        let hub = Self::open_unchecked(root, options)?;
        if hub.tip(SETTINGS)? == Tip::Absent {
            return Err(StoreError::NotAHub {
                path: root.to_path_buf(),
                missing: format!("the ref {SETTINGS}"),
            });
        }
        Ok(hub)
    }

    /// How many in the WAL writes of an earlier run this open replayed: non-zero only after
    /// hubd (or its machine) stopped before a checkpoint.
    pub fn replayed(&self) -> usize {
        self.disk.replayed()
    }

    fn open_unchecked(root: &Path, options: HubOptions) -> Result<Hub, StoreError> {
        let git_dir = root.join(HUB_GIT);
        let repo = gix::open_opts(&git_dir, gix::open::Options::isolated()).map_err(|_| {
            StoreError::NotAHub {
                path: root.to_path_buf(),
                missing: format!("a git repository at {HUB_GIT}/"),
            }
        })?;
        if !repo.is_bare() {
            return Err(StoreError::NotAHub {
                path: root.to_path_buf(),
                missing: format!("a bare repository at {HUB_GIT}/"),
            });
        }
        let process_lock = layout::lock_hub(root, &git_dir)?;
        layout::remove_stale_ref_locks(&git_dir)?;
        layout::forget_legacy_worktrees(&git_dir)?;
        let disk = Arc::new(Disk::new(git_dir.clone(), options.durability, &repo)?);
        #[cfg(feature = "fault-drop-acked-on-restart")]
        super::fault::drop_one_acked_letter(&repo)?;
        let chains = index_all_chains(&repo)?;
        Ok(Hub {
            root: root.to_path_buf(),
            applier: Applier::start(Arc::clone(&disk), repo.refs.clone())?,
            repo: repo.into_sync(),
            disk,
            commit_time: options.commit_time,
            chains: Slots::new(chains),
            plain: Slots::new(HashMap::new()),
            _process_lock: process_lock,
        })
    }

    /// The hub's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The bare repository holding all durable state.
    pub fn git_dir(&self) -> PathBuf {
        self.root.join(HUB_GIT)
    }

    /// hubd's own folder inside the repository (its process lock, its lease journal): plain
    /// `git` ignores it, and nothing but the hubd that holds the hub writes there.
    pub fn hubd_dir(&self) -> PathBuf {
        super::layout::hubd_dir(&self.git_dir())
    }

    /// Appends `entries` (JSON lines, each without its newline) to the chain `refname` as one
    /// commit whose message is `summary`, if the chain is at `expected`.
    ///
    /// The commit's tree holds only these entries, as `records.jsonl`; its parent is `expected`.
    /// A chain not at `expected` is [`StoreError::Stale`] with the actual tip, and nothing is
    /// written. The in-memory index moves only once the append is durable.
    ///
    /// With [`Durability::Fsync`] this returns once the append's WAL frame is durable, and
    /// the ref moves in `hub.git` just after (see `applier`): every read through this `Hub`
    /// sees it at once, plain `git` once it is applied, or after [`Hub::settle`].
    pub fn append(
        &self,
        refname: &str,
        expected: Tip,
        entries: &[String],
        summary: &str,
    ) -> Result<Appended, StoreError> {
        require_kind(refname, RefKind::Chain)?;
        let records = records_blob(refname, entries)?;
        let message = commit_message(summary)?;
        let slot = self.chains.get(refname);
        let mut index = lock(&slot);
        if index.tip() != expected {
            return Err(StoreError::Stale {
                refname: refname.to_owned(),
                expected,
                actual: index.tip(),
            });
        }
        let (new, records_id) = chain_commit(expected, &records, message, self.now())?;
        let commit = new.commit;
        let written = match self.disk.stage(refname, expected, new) {
            Ok(Staged::Logged(unapplied)) => {
                self.applier.hand_over(unapplied);
                Ok(())
            }
            Ok(Staged::Direct(new)) => self.publish(refname, expected, &new),
            Err(err) => Err(err),
        };
        match written {
            Ok(()) => {
                let span = index.push(commit, records_id, entries.len() as u64);
                Ok(Appended {
                    commit,
                    first_seq: span.first_seq,
                    len: span.end_seq(),
                })
            }
            Err(err) => {
                // After a failure, index what the disk holds now (see `resync`).
                self.resync(refname, &mut index)?;
                match err {
                    StoreError::Stale { .. } => Err(StoreError::Stale {
                        refname: refname.to_owned(),
                        expected,
                        actual: index.tip(),
                    }),
                    other => Err(other),
                }
            }
        }
    }

    /// Commits exactly `files` (paths relative to the tree's root, and their bytes) as the new
    /// tip of the plain ref `refname`, if it is at `expected`; returns the new commit.
    ///
    /// The tree is a whole snapshot: files of the previous commit that are not listed are gone.
    pub fn commit_files(
        &self,
        refname: &str,
        expected: Tip,
        files: &[(&str, &[u8])],
        summary: &str,
    ) -> Result<ObjectId, StoreError> {
        require_kind(refname, RefKind::Plain)?;
        let tree = file_tree(files)?;
        let message = commit_message(summary)?;
        let slot = self.plain.get(refname);
        let _writer = lock(&slot);
        let new = files_commit(expected, &tree, message, self.now())?;
        self.publish(refname, expected, &new)?;
        Ok(new.commit)
    }

    /// Points the plain ref `refname` at the existing commit `new`, if it is at `expected`.
    ///
    /// The commit's objects must already be durable (any written by this store are).
    pub fn set_ref(&self, refname: &str, expected: Tip, new: ObjectId) -> Result<(), StoreError> {
        require_kind(refname, RefKind::Plain)?;
        let repo = self.settled_repo();
        if let Err(problem) = read_object(&repo, new, gix::objs::Kind::Commit, &mut Vec::new()) {
            return Err(if repo.has_object(new) {
                StoreError::NotACommit {
                    refname: refname.to_owned(),
                    problem,
                }
            } else {
                StoreError::MissingObject {
                    refname: refname.to_owned(),
                    id: new,
                }
            });
        }
        let slot = self.plain.get(refname);
        let _writer = lock(&slot);
        let new = NewCommit {
            commit: new,
            objects: Vec::new(),
        };
        self.publish(refname, expected, &new)
    }

    /// Deletes `refname` (a chain or a plain ref) if it is at `expected`.
    pub fn delete_ref(&self, refname: &str, expected: ObjectId) -> Result<(), StoreError> {
        self.applier.settle();
        match classify(refname)? {
            RefKind::Plain => {
                let slot = self.plain.get(refname);
                let _writer = lock(&slot);
                self.disk.delete(&self.repo.refs, refname, expected)
            }
            RefKind::Chain => {
                let slot = self.chains.get(refname);
                let mut index = lock(&slot);
                let outcome = self.disk.delete(&self.repo.refs, refname, expected);
                match &outcome {
                    Ok(()) => *index = ChainIndex::empty(),
                    Err(_) => self.resync(refname, &mut index)?,
                }
                outcome
            }
        }
    }

    /// Where `refname` points: for a chain from the index, for a plain ref from the disk.
    pub fn tip(&self, refname: &str) -> Result<Tip, StoreError> {
        match classify(refname)? {
            RefKind::Chain => Ok(lock(&self.chains.get(refname)).tip()),
            RefKind::Plain => self.disk_tip(refname),
        }
    }

    /// Number of entries in the chain `refname`, from the index.
    pub fn len(&self, refname: &str) -> Result<u64, StoreError> {
        self.with_existing_chain(refname, ChainIndex::len)
    }

    /// Entries `from..to` of the chain `refname`, oldest first, reading only the blobs of the
    /// commits that hold them.
    pub fn read_range(&self, refname: &str, from: u64, to: u64) -> Result<Vec<String>, StoreError> {
        let (len, spans) = self.with_existing_chain(refname, |index| {
            (index.len(), index.covering(from, to).to_vec())
        })?;
        if from > to || to > len {
            return Err(StoreError::RangeOutOfBounds {
                refname: refname.to_owned(),
                from,
                to,
                len,
            });
        }
        let repo = self.settled_repo();
        let mut buf = Vec::new();
        let mut entries = Vec::with_capacity((to - from) as usize);
        for span in &spans {
            let malformed = |problem: String| StoreError::MalformedChain {
                refname: refname.to_owned(),
                commit: span.commit,
                problem,
            };
            let data = read_object(&repo, span.records, gix::objs::Kind::Blob, &mut buf)
                .map_err(malformed)?;
            if count_lines(data) != Ok(span.count) {
                return Err(malformed(format!(
                    "its records.jsonl no longer holds {} whole lines",
                    span.count
                )));
            }
            let text = std::str::from_utf8(data).map_err(|err| malformed(err.to_string()))?;
            let skip = from.saturating_sub(span.first_seq) as usize;
            let take = (to.min(span.end_seq()) - span.first_seq) as usize - skip;
            let lines = text.split_terminator('\n');
            entries.extend(lines.skip(skip).take(take).map(str::to_owned));
        }
        Ok(entries)
    }

    /// The bytes of the file at `path` in the tree of the plain ref `refname`'s tip.
    pub fn read_file(&self, refname: &str, path: &str) -> Result<Vec<u8>, StoreError> {
        require_kind(refname, RefKind::Plain)?;
        let Tip::At(commit) = self.disk_tip(refname)? else {
            return Err(StoreError::UnknownRef {
                refname: refname.to_owned(),
            });
        };
        let repo = self.settled_repo();
        let unknown = || StoreError::UnknownFile {
            refname: refname.to_owned(),
            path: path.to_owned(),
        };
        let not_a_commit = |err: gix::Error| StoreError::NotACommit {
            refname: refname.to_owned(),
            problem: err.to_string(),
        };
        let tree = repo
            .find_commit(commit)
            .and_then(|commit| commit.tree())
            .map_err(not_a_commit)?;
        let entry = tree
            .lookup_entry_by_path(path)
            .map_err(StoreError::git(format!("look up {path} in {refname}")))?
            .ok_or_else(unknown)?;
        if !entry.mode().is_blob() {
            return Err(unknown());
        }
        let blob = entry
            .object()
            .map_err(StoreError::git(format!("read {path} in {refname}")))?;
        Ok(blob.detach().data)
    }

    /// Every file (blob) in the tree of `commit`, by its path, recursively.
    pub fn files_at(&self, commit: ObjectId) -> Result<BTreeMap<String, Vec<u8>>, StoreError> {
        let repo = self.settled_repo();
        let tree = repo
            .find_commit(commit)
            .and_then(|commit| commit.tree())
            .map_err(StoreError::git(format!("read the tree of {commit}")))?;
        let mut files = BTreeMap::new();
        collect_files(&repo, tree, "", &mut files)?;
        Ok(files)
    }

    /// The nearest common ancestor of `one` and `two`, if their histories meet.
    pub fn merge_base(&self, one: ObjectId, two: ObjectId) -> Result<Option<ObjectId>, StoreError> {
        let repo = self.settled_repo();
        let parents = |id: ObjectId| -> Result<Vec<ObjectId>, StoreError> {
            let commit = repo
                .find_commit(id)
                .map_err(StoreError::git(format!("read the commit {id}")))?;
            Ok(commit.parent_ids().map(|p| p.detach()).collect())
        };
        let mut of_two = std::collections::HashSet::new();
        let mut queue = std::collections::VecDeque::from([two]);
        while let Some(id) = queue.pop_front() {
            if of_two.insert(id) {
                queue.extend(parents(id)?);
            }
        }
        let mut seen = std::collections::HashSet::new();
        let mut queue = std::collections::VecDeque::from([one]);
        while let Some(id) = queue.pop_front() {
            if of_two.contains(&id) {
                return Ok(Some(id));
            }
            if seen.insert(id) {
                queue.extend(parents(id)?);
            }
        }
        Ok(None)
    }

    /// Commits exactly `files` as a merge on the plain ref `refname`: first parent its tip
    /// `expected`, second parent the existing commit `other`. Like [`Hub::commit_files`] the
    /// tree is a whole snapshot.
    pub fn merge_files(
        &self,
        refname: &str,
        expected: ObjectId,
        other: ObjectId,
        files: &[(&str, &[u8])],
        summary: &str,
    ) -> Result<ObjectId, StoreError> {
        require_kind(refname, RefKind::Plain)?;
        let tree = file_tree(files)?;
        let message = commit_message(summary)?;
        let slot = self.plain.get(refname);
        let _writer = lock(&slot);
        let new = merge_files_commit(expected, other, &tree, message, self.now())?;
        self.publish(refname, Tip::At(expected), &new)?;
        Ok(new.commit)
    }

    /// A copy of every non-empty chain's index, by refname.
    ///
    /// Lets tools and tests compare what the store believes with what a fresh walk of
    /// `hub.git` finds (they must be equal once [`Hub::settle`] has returned).
    pub fn index_snapshot(&self) -> BTreeMap<String, ChainIndex> {
        let chains = self
            .chains
            .map
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        chains
            .iter()
            .map(|(name, slot)| (name.clone(), lock(slot).clone()))
            .filter(|(_, index)| !index.is_empty())
            .collect()
    }

    /// Runs `read` on the index of the chain `refname`, which must exist, under its lock.
    fn with_existing_chain<T>(
        &self,
        refname: &str,
        read: impl FnOnce(&ChainIndex) -> T,
    ) -> Result<T, StoreError> {
        require_kind(refname, RefKind::Chain)?;
        let slot = self.chains.get(refname);
        let index = lock(&slot);
        if index.is_empty() {
            return Err(StoreError::UnknownRef {
                refname: refname.to_owned(),
            });
        }
        Ok(read(&index))
    }

    /// Waits until `hub.git` holds every write acknowledged so far, for readers that go around
    /// this `Hub` (plain `git`, a copy of the folder). Reads through the `Hub` need not: each
    /// waits for what it reads.
    pub fn settle(&self) {
        self.applier.settle();
    }

    /// Whether writes are made durable (see [`Durability`](super::Durability)).
    pub(super) fn is_durable(&self) -> bool {
        self.disk.is_durable()
    }

    /// The repository, once every acknowledged write has reached it.
    fn settled_repo(&self) -> gix::Repository {
        self.applier.settle();
        self.repo.to_thread_local()
    }

    /// Where `refname` points in `hub.git`, once every acknowledged write has reached it.
    fn disk_tip(&self, refname: &str) -> Result<Tip, StoreError> {
        self.applier.settle();
        read_tip(&self.repo.refs, refname)
    }

    /// Writes `new` and moves `refname` to it from `expected`, after every chain append
    /// handed to the applier: the ref's value is compared on disk.
    fn publish(&self, refname: &str, expected: Tip, new: &NewCommit) -> Result<(), StoreError> {
        self.applier.settle();
        self.disk.publish(&self.repo.refs, refname, expected, new)
    }

    /// Brings `index` up to what `hub.git` holds for the chain `refname` now.
    ///
    /// `hub.git` is the truth unless the WAL has stopped: then acknowledged appends it
    /// could not apply live only in the WAL until replay, and the index keeps them.
    fn resync(&self, refname: &str, index: &mut ChainIndex) -> Result<(), StoreError> {
        if self.disk.wal_stopped() {
            return Ok(());
        }
        let tip = self.disk_tip(refname)?;
        if tip != index.tip() {
            *index = resync_chain(&self.settled_repo(), refname, index, tip)?;
        }
        Ok(())
    }

    fn now(&self) -> gix::date::Time {
        let seconds = match self.commit_time {
            CommitTime::Fixed(seconds) => seconds,
            CommitTime::System => {
                i64::try_from(l3m_core::clock::now_ms() / 1000).unwrap_or(i64::MAX)
            }
        };
        gix::date::Time { seconds, offset: 0 }
    }
}

/// Indexes every chain under `refs/l3m/`; refs outside the layout are left alone.
fn index_all_chains(
    repo: &gix::Repository,
) -> Result<HashMap<String, Arc<Mutex<ChainIndex>>>, StoreError> {
    let platform = repo
        .refs
        .iter()
        .map_err(StoreError::git("list the hub's refs"))?;
    let prefix = "refs/l3m/"
        .try_into()
        .map_err(StoreError::git("name the refs/l3m/ prefix"))?;
    let refs = platform.prefixed(prefix).map_err(StoreError::io(
        "list refs under",
        repo.path().join("refs/l3m"),
    ))?;
    let mut slots = HashMap::new();
    for reference in refs {
        let reference = reference.map_err(StoreError::git("read a ref under refs/l3m/"))?;
        let refname = reference.name.as_bstr().to_string();
        if classify(&refname).ok() != Some(RefKind::Chain) {
            continue;
        }
        let tip = match reference.target {
            gix::refs::Target::Object(id) => Tip::At(id),
            gix::refs::Target::Symbolic(name) => {
                return Err(StoreError::NotACommit {
                    refname,
                    problem: format!("it is a symbolic ref to {}", name.as_bstr()),
                });
            }
        };
        let index = resync_chain(repo, &refname, &ChainIndex::empty(), tip)?;
        slots.insert(refname, Arc::new(Mutex::new(index)));
    }
    Ok(slots)
}

fn require_kind(refname: &str, expected: RefKind) -> Result<(), StoreError> {
    let actual = classify(refname)?;
    if actual != expected {
        return Err(StoreError::WrongRefKind {
            refname: refname.to_owned(),
            expected,
            actual,
        });
    }
    Ok(())
}

/// Adds every blob under `tree` to `files`, its path prefixed by `prefix`.
fn collect_files(
    repo: &gix::Repository,
    tree: gix::Tree<'_>,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), StoreError> {
    let decoded = tree
        .decode()
        .map_err(StoreError::git(format!("decode a tree under {prefix}")))?
        .entries
        .iter()
        .map(|e| (e.filename.to_string(), e.mode, e.oid.to_owned()))
        .collect::<Vec<_>>();
    for (name, mode, oid) in decoded {
        let path = format!("{prefix}{name}");
        if mode.is_tree() {
            let sub = repo
                .find_tree(oid)
                .map_err(StoreError::git(format!("read the tree {path}")))?;
            collect_files(repo, sub, &format!("{path}/"), files)?;
        } else if mode.is_blob() {
            let blob = repo
                .find_blob(oid)
                .map_err(StoreError::git(format!("read the file {path}")))?;
            files.insert(path, blob.detach().data);
        }
    }
    Ok(())
}
