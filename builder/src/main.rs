//! `builder`: Runs the fetch and build stages of a build in containers.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `builder --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// Runs the fetch and build stages of a build in containers (not implemented yet).
///
/// The builder owns the write half of W^X builds: a fetch stage that reads only public lockfiles and may reach the network, and a build stage that mounts source read-only with no network. It never runs a built artifact; that is the runner's duty.
#[derive(Debug, Parser)]
#[command(name = "builder", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
