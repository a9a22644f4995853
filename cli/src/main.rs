//! `l3m`: the human's command line. Parses arguments, sets up logging, finds the l3m home, and
//! runs the command; every decision lives in the library.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Started under the evaluator's name (`l3m demo` links it so), this binary is the sealed
    // programs' evaluator and nothing else: no logging, no home, its own arguments.
    let mut args = std::env::args_os();
    let name = args.next();
    let evaluator = OsStr::new(l3m_programs::process::EVALUATOR_NAME);
    if name.as_deref().map(Path::new).and_then(Path::file_name) == Some(evaluator) {
        let args: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
        return l3m_programs::child::main(&args);
    }
    // tracing-subscriber (>= 0.3.20) escapes ANSI sequences in what it formats; the CLI's own
    // words go through `l3m::output`.
    #[allow(clippy::disallowed_methods)]
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
            l3m::output::err(&l3m::output::Shown::new(&format!("l3m: {error}\n")));
            ExitCode::from(error.exit() as u8)
        }
    }
}
