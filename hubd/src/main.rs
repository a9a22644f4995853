//! `hubd`: The hub's storage and gatekeeper.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `hubd --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// The hub's storage and gatekeeper (arrives with the hubd issue).
///
/// hubd is the only writer of hub.git. It admits spawns through the spawn gate, appends to Logs, inboxes and the ledger by compare-and-swap, checks every request's duty against its session capability, and announces every ref move on NATS.
#[derive(Debug, Parser)]
#[command(name = "hubd", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
