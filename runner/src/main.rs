//! `runner`: Runs a built artifact by digest in a sealed container.
//!
//! This duty has no implementation yet. The binary exists so the workspace shows the
//! architecture and so `runner --help` can say what the duty is; it does nothing else.

use clap::Parser;

/// Runs a built artifact by digest in a sealed container (not implemented yet).
///
/// The runner owns the execute half of W^X builds: it runs an artifact, named by digest, read-only, with no network and one fresh out/ directory as its only writable mount. It never writes source or artifacts.
#[derive(Debug, Parser)]
#[command(name = "runner", version, arg_required_else_help = true)]
struct Cli {}

fn main() {
    let Cli {} = Cli::parse();
}
