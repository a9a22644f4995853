//! `l3m-ring`: the capability ring, the only code that touches the OS on behalf of tools.
//!
//! A tool body never touches the world directly: it calls a provider, and every provider call
//! takes a capability token whose scope the provider checks again on each call. This crate holds
//! both halves. Tokens ([`tokens`]) are values only this crate can construct — minted once at
//! boot from the agent's grant by [`tokens::mint_from_grant`], one per conferred axis, narrowed
//! but never widened. Providers ([`files`], [`git`], [`net`], [`shell`]) are the one place a
//! class meets the operating system; mail and spawn are checked here and carried to hubd by an
//! outlet the sequencer plugs in ([`effects::HubOutlet`]). Tame edits are journaled before they
//! happen ([`undo`]), which is what rewind restores from.
//!
//! **Must never**: be bypassed. Tool crates must not use `std::fs`, `std::process`, `std::net`,
//! `std::env`, or cap-std's ambient authority (the sealing linter's `disallowed-methods`); this
//! crate is the only one that does, and only through capability handles rooted at the ACR.
//!
//! Limitations of this slice: blob store, tree view, airmail, build and run have no provider
//! yet, so no tool can use them. Providers are Linux-only (they rely on `O_NOFOLLOW`, `openat2`
//! and bubblewrap); git push needs the `git` CLI.
//!
//! # Layout
//! - [`path`]: ACR-relative paths, parsed once (`..`, absolute and NUL refused).
//! - [`tokens`]: the capability tokens, `mint_from_grant` and `mint`.
//! - [`files`]: the tame file provider (read, list, write, remove, mkdir, restore).
//! - [`git`]: the git provider (status, diff, log, commit onto granted branches, push to granted
//!   remotes) on worktrees under the write roots.
//! - [`undo`]: undo entries (a path's prior state, a branch's move), the `UndoStore` trait they
//!   are recorded through, the hub chain's line format and `MemoryUndo`.
//! - [`rewind`]: restoring files and branches from undo entries together, planned before anything changes.
//! - [`effects`]: the effect-class traits tool bodies are written over, the `Effects` bundle
//!   that grants a call exactly the classes its footprint names, and the `HubOutlet`.
//! - [`net`]: the HTTP provider (GET/HEAD to the token's hosts, checked before, at connect, at redirects).
//! - [`shell`]: the sandboxed shell (listed programs under bubblewrap: no network, a deadline).
//!
//! # Example
//! ```
//! use std::collections::BTreeMap;
//! use l3m_core::grant::{AcrPath, Grant};
//! use l3m_core::names::AgentName;
//! use l3m_ring::{ambient_authority, files, undo::MemoryUndo, tokens};
//!
//! let acr = tempfile::tempdir()?;
//! std::fs::create_dir(acr.path().join("workspace"))?;
//! let grant = Grant {
//!     files: [AcrPath::parse("workspace")?].into(),
//!     ..Default::default()
//! };
//! let alice = AgentName::parse("alice")?;
//! let minted =
//!     tokens::mint_from_grant(&grant, &alice, acr.path().into(), &BTreeMap::new(), ambient_authority())?;
//! let token = minted.files.as_ref().unwrap();
//! let journal = MemoryUndo::default();
//!
//! files::write(token, "workspace/notes.md", b"hello", &journal)?;
//! assert_eq!(files::read(token, "workspace/notes.md")?, b"hello");
//! assert!(files::write(token, "../elsewhere", b"x", &journal).is_err());
//! assert!(files::read(token, ".l3m/undo.journal").is_err());
//!
//! files::restore(token, &journal.entries()?)?;
//! assert!(files::read(token, "workspace/notes.md").is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod effects;
pub mod files;
pub mod git;
pub mod net;
pub mod path;
pub mod rewind;
pub mod shell;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod tokens;
pub mod undo;

/// cap-std's marker for an act that uses ambient authority (opening a path from the process's
/// view of the filesystem). Minting and opening the journal take it, so the sealing linter can
/// forbid `ambient_authority()` everywhere but the harness.
pub use cap_std::{AmbientAuthority, ambient_authority};
