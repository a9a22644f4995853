//! `reviewer`: Deliberates over wild calls before they run.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `reviewer --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// Deliberates over wild calls before they run (not implemented yet).
///
/// The reviewer holds a model provider of another family than the proposer's and no tools at all. For each wild call it reads the proposer's justification and the call's effect, answers safe, unsafe (optionally with a tame alternative) or unclear, and after a few bounded rounds approves, withdraws, redirects, or escalates a stalemate to a human card. Until it exists, every wild call becomes a human card.
#[derive(Debug, Parser)]
#[command(name = "reviewer", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
