//! `l3m-tools`: the tool bodies an agent's model may call, sealed away from the OS.
//!
//! A tool body is written over the ring's effect-class traits ([`l3m_ring::effects`]) and
//! nothing else: it receives a [`Granted`](l3m_ring::effects::Granted) holding exactly the
//! classes its footprint names, and this crate's `clippy.toml` (`disallowed-methods` and
//! `disallowed-types` over `std::fs`, `std::process`, `std::net`, `std::env`, the clock,
//! `tokio::{fs, process, net}` and cap-std's ambient authority) plus `#![forbid(unsafe_code)]`
//! is the sealing linter that keeps it there; `tests/sealing_lint.rs` proves the linter fires.
//!
//! Each tool declares its footprint and claim ([`Tool::decl`]); its tier is computed by
//! [`ToolDecl::check`](l3m_core::effects::ToolDecl::check), never labelled. The [`ToolTable`]
//! refuses over-claims when it is built, offers the model only the tools the agent's grant
//! covers (a tool it may not use is *absent*, not refused), and turns a wild call into a review
//! [`Card`] that waits instead of running.
//!
//! **Must never**: touch the OS directly — no `std::fs`, `std::process`, `std::net`, `std::env`,
//! `SystemTime::now`, tokio's fs/process/net, or `ambient_authority()`; nor depend on tokio or
//! cap-std.
//!
//! # Layout
//! - [`tool`]: the [`Tool`] trait, [`ToolOutput`] and [`ToolError`].
//! - [`table`]: the [`ToolTable`]: build-time checks, what is offered, and [`Dispatch`].
//! - [`files`]: `read_file`, `write_file`, `list_dir`, `remove_file`, `make_dir`.
//! - [`edit`]: `edit_file`, an exact-string replace that refuses missing or ambiguous matches.
//! - [`search`]: `search_files`, a bounded substring search over a tree.
//! - [`clock`]: the `now` tool.
//! - [`git`]: `git_status`, `git_diff`, `git_log`, `git_commit`, `git_push`.
//! - [`net`]: the `fetch_url` tool.
//! - [`hub`]: `send_letter`, `spawn_agent` and `read_letter`, which reach hubd through the
//!   sequencer's outlet.
//! - [`shell`]: `shell`, the sandboxed (wild, reviewed) shell.
//! - [`build`]: `build` and `run`, W^X builds through the builder and the runner.
//! - [`make`]: `make`, a blessed Makefile target, only while its bytes are the blessed ones.
//! - [`vigil`]: `watch` and `unwatch`, vigils on hub facts through the sequencer's outlet.
//!
//! # Example
//! ```
//! use std::collections::BTreeSet;
//! use l3m_tools::{ToolTable, builtin};
//!
//! let table = ToolTable::build(builtin(), &BTreeSet::new())?;
//! let names: Vec<_> = table.offered().map(|o| o.name.as_str()).collect();
//! assert!(names.contains(&"read_file") && names.contains(&"now"));
//! # Ok::<(), l3m_tools::TableError>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod args;
pub mod build;
pub mod clock;
pub mod edit;
pub mod files;
pub mod git;
pub mod hub;
pub mod make;
pub mod net;
pub mod search;
pub mod shell;
pub mod table;
pub mod tool;
pub mod vigil;

pub use table::{Card, Dispatch, Offered, TableError, ToolTable};
pub use tool::{Tool, ToolError, ToolOutput};

/// Every tool this crate defines, for building a session's [`ToolTable`].
pub fn builtin() -> Vec<Box<dyn Tool>> {
    vec![
        Box::new(files::ReadFile),
        Box::new(files::WriteFile),
        Box::new(files::ListDir),
        Box::new(files::RemoveFile),
        Box::new(files::MakeDir),
        Box::new(edit::EditFile),
        Box::new(search::SearchFiles),
        Box::new(clock::Now),
        Box::new(git::GitStatus),
        Box::new(git::GitDiff),
        Box::new(git::GitLog),
        Box::new(git::GitCommit),
        Box::new(git::GitPush),
        Box::new(net::FetchUrl),
        Box::new(hub::SendLetter),
        Box::new(hub::SpawnAgent),
        Box::new(hub::ReadLetter),
        Box::new(shell::RunShell),
        Box::new(build::BuildTool),
        Box::new(build::RunTool),
        Box::new(make::Make),
        Box::new(vigil::WatchTool),
        Box::new(vigil::Unwatch),
    ]
}
