//! The l3m command line: the human's way to make a hub, start the local stack, spawn and
//! inspect agents, and see exactly what each model sees.
//!
//! Every command is a thin handler over library faces: `hubd`'s for `init` and the embedded
//! stack (the `embedded` feature, on by default; without it the CLI links neither hubd nor the
//! sequencer, so the compiler keeps every other command on the wire),
//! [`l3m_wire::client::HubClient`] for everything that talks to a running hubd, and
//! `l3m_core`'s pure folds (`view`, the stats fold) for what is shown. The CLI holds the
//! human's own document (`~/.l3m/l3m.toml`) and nothing else.
//!
//! **Must never** write a credential into `l3m.toml` (credentials are named by environment
//! variable), or signal a process its run file does not list.
//!
//! # Layout
//! - [`Cli`], [`run`]: the argument tree and the dispatcher (one file per subcommand under
//!   [`commands`], groups as folders).
//! - [`config`]: the human's document.
//! - [`context`]: from the document to the selected hub and a hubd session.
//! - [`stack`]: the local stack's processes and run file.
//! - `embedded` (feature `embedded`): hubd and the supervisor in this process, over any bus.
//! - [`models`]: which model the document gives an agent.
//! - [`render`]: pure renderings (Log lines, views, trees, stats, grants).
//! - [`output`]: the only way to the terminal: every byte printed is made visible
//!   ([`output::Shown`]), `--json` printing, a closed pipe ending the process quietly.
//! - [`error`]: [`CliError`] and the exit codes.

// First, so its `outln!`, `out!` and `errln!` are in scope in every module after it.
#[macro_use]
pub mod output;
pub mod commands;
pub mod config;
pub mod context;
#[cfg(feature = "embedded")]
pub mod embedded;
pub mod error;
pub mod models;
pub mod render;
pub mod stack;

use std::path::PathBuf;

pub use commands::Cli;
pub use error::{CliError, Exit};

/// Runs `cli` with the l3m home `home` on a fresh tokio runtime.
pub fn run(cli: Cli, home: PathBuf) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Runtime(format!("cannot start the async runtime: {e}")))?;
    let context = context::Context {
        home,
        hub: cli.hub.clone(),
    };
    runtime.block_on(commands::dispatch(cli.command, context))
}
