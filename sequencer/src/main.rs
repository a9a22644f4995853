//! `sequencer`: Advances exactly one agent: the single writer of its Log.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `sequencer --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// Advances exactly one agent: the single writer of its Log (arrives with the sequencer issue).
///
/// The sequencer drains its agent's signals, journals them, runs hooks, folds the Log into what is owed, appends by compare-and-swap and only then starts model calls and tools. It never writes another agent's refs nor its own grants.
#[derive(Debug, Parser)]
#[command(name = "sequencer", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
