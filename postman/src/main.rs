//! `postman`: Carries airmail between hubs over QUIC.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `postman --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// Carries airmail between hubs over QUIC (not implemented yet).
///
/// The postman holds its hub's postman axis and nothing more: it pushes staged outboxes to each office named in the hub's settings over mutual-TLS QUIC with pinned certificates, fetches offices only into mirror refs, relays their letters into local inboxes by set union, and carries read marks back as receipts. It never reads or writes anything but outboxes, mirrors and inbox appends.
#[derive(Debug, Parser)]
#[command(name = "postman", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
