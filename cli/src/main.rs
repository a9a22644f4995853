//! `l3m`: the human's command line. Parses arguments, sets up logging, finds the l3m home, and
//! runs the command; every decision lives in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = l3m::Cli::parse();
    let home = std::env::var_os("L3M_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".l3m")))
        .unwrap_or_else(|| PathBuf::from(".l3m"));
    match l3m::run(cli, home) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("l3m: {error}");
            ExitCode::from(error.exit() as u8)
        }
    }
}
