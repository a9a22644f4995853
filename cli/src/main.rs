//! `l3m`: The human's command line for l3m.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `l3m --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// The human's command line for l3m (arrives with the CLI issue).
///
/// l3m initialises hubs, starts the local stack, spawns and inspects agents, and shows exactly what each model sees.
#[derive(Debug, Parser)]
#[command(name = "l3m", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
