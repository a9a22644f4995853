//! The one error type of the store boundary.
//!
//! Every variant names the bad input or the conflicting state, so a caller can act on it (retry a
//! stale append from `actual`, fix a refname, report a malformed chain by commit) without parsing
//! a message.

use std::path::PathBuf;

use super::Tip;
use super::refname::RefKind;

/// Why a store operation was refused or failed. Nothing was written unless the variant says so.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// [`Hub::create`](super::Hub::create) found something at the path already.
    #[error("cannot create a hub at {path}: it exists and is not an empty directory")]
    HubPathTaken {
        /// The path that was asked for.
        path: PathBuf,
    },
    /// [`Hub::open`](super::Hub::open) found a folder that is not a hub.
    #[error("{path} is not an l3m hub: {missing} is missing (create one with `Hub::create`)")]
    NotAHub {
        /// The path that was asked for.
        path: PathBuf,
        /// What a hub has and this folder lacks, e.g. `forest/` or the ref `refs/l3m/settings`.
        missing: String,
    },
    /// Another process holds the hub open; hubd must be the only writer of `hub.git`.
    #[error("the hub {path} is already open in another process (its lock {lock} is held)")]
    HubBusy {
        /// The hub.
        path: PathBuf,
        /// The lock file whose `flock` is held.
        lock: PathBuf,
    },
    /// The refname is not one the store may write or read.
    #[error("bad refname {refname:?}: {reason}")]
    BadRefName {
        /// The refname as given.
        refname: String,
        /// What rule it breaks.
        reason: String,
    },
    /// The operation needs a chain and got a plain ref, or the other way round.
    #[error("{refname} is a {actual} ref; this operation needs a {expected} ref")]
    WrongRefKind {
        /// The refname as given.
        refname: String,
        /// The kind the operation works on.
        expected: RefKind,
        /// The kind the refname has.
        actual: RefKind,
    },
    /// An append carried no entries; a commit per append must say something.
    #[error("an append to {refname} needs at least one entry")]
    NoEntries {
        /// The chain.
        refname: String,
    },
    /// An entry contains a line break, so it would read back as more than one entry.
    #[error("entry {index} contains a line break (entries are single JSON lines): {entry:?}")]
    EntryNotOneLine {
        /// Position of the entry in the batch.
        index: usize,
        /// The entry as given.
        entry: String,
    },
    /// An entry is not one JSON value.
    #[error("entry {index} is not a JSON value ({reason}): {entry:?}")]
    EntryNotJson {
        /// Position of the entry in the batch.
        index: usize,
        /// The entry as given.
        entry: String,
        /// What the JSON parser said.
        reason: String,
    },
    /// A commit summary must be one non-empty line, so `git log --oneline` reads one line per write.
    #[error("a summary must be one non-empty line without line breaks, got {summary:?}")]
    SummaryNotOneLine {
        /// The summary as given.
        summary: String,
    },
    /// A file path for [`Hub::commit_files`](super::Hub::commit_files) is not a plain relative path.
    #[error("bad file path {path:?}: {reason}")]
    BadFilePath {
        /// The path as given.
        path: String,
        /// What rule it breaks.
        reason: &'static str,
    },
    /// Compare-and-swap lost: the ref is not where the caller expected it. Nothing was written.
    #[error("{refname} is stale: expected {expected}, but it is at {actual}")]
    Stale {
        /// The ref.
        refname: String,
        /// The tip the caller expected.
        expected: Tip,
        /// The tip found under the ref lock; retry from here.
        actual: Tip,
    },
    /// Another process holds the ref's lock file (a git command, or a crashed writer that
    /// [`Hub::open`](super::Hub::open) will clean up).
    #[error("{refname} is locked by another writer: {lock} exists")]
    RefLocked {
        /// The ref.
        refname: String,
        /// The lock file.
        lock: PathBuf,
    },
    /// A read named a ref that does not exist.
    #[error("unknown ref {refname}")]
    UnknownRef {
        /// The ref.
        refname: String,
    },
    /// A read asked for entries past the end of a chain, or an empty-or-backwards range.
    #[error("range {from}..{to} is not within {refname}, which has {len} entries")]
    RangeOutOfBounds {
        /// The chain.
        refname: String,
        /// First sequence number asked for.
        from: u64,
        /// One past the last sequence number asked for.
        to: u64,
        /// Number of entries in the chain.
        len: u64,
    },
    /// A plain commit's tree has no file at that path.
    #[error("{refname} has no file {path:?}")]
    UnknownFile {
        /// The ref.
        refname: String,
        /// The path asked for.
        path: String,
    },
    /// [`Hub::set_ref`](super::Hub::set_ref) was asked to point a ref at an object the hub lacks.
    #[error("cannot point {refname} at {id}: no such object in hub.git")]
    MissingObject {
        /// The ref.
        refname: String,
        /// The object id.
        id: gix::ObjectId,
    },
    /// A chain on disk does not have the shape the store writes (found while walking it).
    #[error("chain {refname} is malformed at commit {commit}: {problem}")]
    MalformedChain {
        /// The chain.
        refname: String,
        /// The commit where the walk stopped.
        commit: gix::ObjectId,
        /// What is wrong with it.
        problem: String,
    },
    /// A ref points somewhere the store cannot follow (a symbolic ref, or a non-commit).
    #[error("{refname} does not point at a commit: {problem}")]
    NotACommit {
        /// The ref.
        refname: String,
        /// What it points at instead.
        problem: String,
    },
    /// gix refused to encode an object the store built (an input check is missing).
    #[error("could not encode a {kind} object: {source}")]
    Encode {
        /// The kind of object.
        kind: gix::objs::Kind,
        /// What the encoder said.
        #[source]
        source: std::io::Error,
    },
    /// The WAL stopped earlier (a frame not written, not made durable, or not applied to
    /// `hub.git`), so `hub.git` may not match it; writes are refused until hubd restarts and
    /// replays the WAL.
    #[error(
        "the write-ahead log in {dir} stopped earlier ({why}); restart hubd to replay it before writing again"
    )]
    WalBroken {
        /// The WAL's folder.
        dir: PathBuf,
        /// What stopped it.
        why: super::WalStop,
    },
    /// A filesystem call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What the store was doing.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A pushed pack broke a rule: it does not index, holds a malformed object, misses an
    /// object its commits reach, or holds an object over the limit. Nothing of it was kept.
    #[error("the pack was refused: {problem}")]
    PackRefused {
        /// Which rule, and the evidence (git's own words where git found it).
        problem: String,
    },
    /// A pack asked for is larger than the store serves.
    #[error("the pack of {what} is over the limit of {limit} bytes")]
    PackTooLarge {
        /// What was asked for.
        what: String,
        /// The limit.
        limit: u64,
    },
    /// The git CLI, run for what gix cannot do (worktrees, packs), failed or could not start.
    #[error("git {args} failed: {detail}")]
    GitCli {
        /// The git arguments, as text.
        args: String,
        /// Its exit status and standard error, or why it did not start.
        detail: String,
    },
    /// A gix call failed.
    #[error("{op}: {source}")]
    Git {
        /// What the store was doing.
        op: String,
        /// The gix error.
        #[source]
        source: gix::Error,
    },
}

impl StoreError {
    /// Wraps an OS error with what was being done and where.
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::Io { op, path, source }
    }

    /// Wraps a gix error with what was being done.
    pub(crate) fn git(op: impl Into<String>) -> impl FnOnce(gix::Error) -> Self {
        let op = op.into();
        move |source| StoreError::Git { op, source }
    }
}

impl From<l3m_git::GitCliError> for StoreError {
    fn from(e: l3m_git::GitCliError) -> Self {
        StoreError::GitCli {
            args: e.args,
            detail: e.detail,
        }
    }
}
