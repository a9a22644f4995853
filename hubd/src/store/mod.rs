//! hubd's storage layer: the hub folder and its commit chains in `hub.git`.
//!
//! The store is generic over what it stores: chain entries are JSON lines as text (the typed
//! rows come from `l3m-core`), plain refs hold whole trees of files. Every write states the tip
//! it expects and loses cleanly, as [`StoreError::Stale`], if another writer got there first.
//!
//! # Layout
//! - [`Hub`] (`hub`): create or open a hub; append to chains, commit files, move and delete
//!   refs; read tips, lengths, entry ranges and files.
//! - `refname`: which refs exist in the hub's layout and whether each is a chain ([`RefKind`]).
//! - `input`: checks on entries, summaries and file paths, before anything is written.
//! - `object`: the git objects a write adds, encoded and hashed in memory with gix.
//! - `zlib`: the uncompressed zlib streams small objects are stored in.
//! - `index`: per chain, which commit holds which entry sequence numbers ([`ChainIndex`]).
//! - `read`: walking a chain once at open, and reading objects back.
//! - `disk`: placing objects and moving refs durably by compare-and-swap ([`Durability`]).
//! - `WAL`: the write-ahead log that makes a write durable with one `fdatasync`, and
//!   its replay after a crash.
//! - `applier`: the thread that puts in the WAL chain appends into `hub.git` after the reply.
//! - `barrier`: fsyncing many files for the price of one (where there is no WAL).
//! - `spare`: empty files made ahead of time so a write never waits on creating one.
//! - `recycle`: the inodes of replaced ref values, reused for objects instead of freed.
//! - `layout`: the hub folder on disk and the first `settings.toml`.
//! - `pack` ([`Quarantine`]): packs of commits out of `hub.git`, and pushed packs checked in a
//!   quarantine before their objects join it.
//! - `worktree`: linked worktrees of `hub.git` (the ACRs' checkouts), through the git CLI.
//!
//! # Chains
//! The ledger and each agent's Log, inbox, outbox, undo chain and cards are chains. Each
//! commit's tree holds only that append's entries, as one blob `records.jsonl` (one entry per
//! line); its parent is the previous tip; its message is a one-line human summary. So the cost
//! of an append does not grow with history, and `git log --oneline <chain>` reads as its story.
//! Entry `n` of a chain is its `n`-th line over the whole chain, oldest first, 0-based.
//!
//! # Durability
//! With [`Durability::Fsync`] a write returns `Ok` only once it would survive a crash of the
//! machine: its WAL frame is on disk. Opening the hub replays what the WAL holds, so
//! after any crash, once reopened, no ref points at a missing object and every acknowledged
//! write is there. A chain append is acknowledged at that point and reaches `hub.git` a moment
//! later: every read through the [`Hub`] waits for it, plain `git` may not see it until
//! [`Hub::settle`] (or closing the hub) returns. [`Durability::Barriers`] fsyncs the objects
//! and then the ref instead, so that `hub.git` is whole even before a reopen, at about twice
//! the cost. See `disk`, `WAL` and `applier` for the protocols and what was measured.
//!
//! # Example
//! ```
//! use hubd::store::{Durability, Hub, HubOptions, Tip};
//!
//! let dir = tempfile::tempdir()?;
//! let options = HubOptions { durability: Durability::Relaxed, ..HubOptions::default() };
//! let hub = Hub::create(dir.path().join("HUB"), options)?;
//! let log = "refs/l3m/a/alice/_/log";
//! let first = hub.append(log, Tip::Absent, &[r#"{"v":1,"kind":"boot"}"#.into()], "boot")?;
//! hub.append(log, first.tip(), &[r#"{"v":1,"kind":"note"}"#.into()], "a note")?;
//! assert_eq!(hub.len(log)?, 2);
//! assert_eq!(hub.read_range(log, 1, 2)?, [r#"{"v":1,"kind":"note"}"#]);
//! // A second writer from the old tip loses, and learns the actual one.
//! let lost = hub.append(log, first.tip(), &["{}".into()], "late");
//! assert!(matches!(lost, Err(hubd::store::StoreError::Stale { .. })));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod applier;
mod barrier;
mod disk;
mod error;
#[cfg(feature = "fault-drop-acked-on-restart")]
mod fault;
mod hub;
mod index;
mod input;
mod layout;
mod object;
mod pack;
mod read;
mod recycle;
mod refname;
mod spare;
mod tip;
mod wal;
mod zlib;

use l3m_git as git_cli;

pub use disk::Durability;
pub use error::StoreError;
pub use hub::{Appended, CommitTime, Hub, HubOptions};
pub use index::{ChainIndex, Span};
pub use layout::{INITIAL_SETTINGS, SETTINGS_FILE};
pub use object::{IDENTITY_EMAIL, IDENTITY_NAME, RECORDS_FILE};
pub use pack::Quarantine;
pub use refname::{RefKind, classify};
pub use tip::Tip;
pub use wal::WalStop;
