//! `postman`: carries airmail between hubs over QUIC with mutual TLS.
//!
//! Built so far: the hub's identity between hubs (`postman identity`) and the link layer in the
//! library (pinned mutual TLS over QUIC, the hello). Carrying letters is not built yet, and the
//! binary says so rather than pretend.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use postman::identity::{IDENTITY_DIR, Identity};

/// Carries airmail between hubs over QUIC with mutual TLS and pinned certificates.
///
/// The postman holds its hub's postman duty and nothing more: it pushes staged outboxes to each
/// office named in the hub's settings, fetches offices only into mirror refs, relays their
/// letters into local inboxes by set union, and carries read marks back as receipts. Today it
/// makes and shows the hub's identity; carrying letters is not built yet.
#[derive(Debug, Parser)]
#[command(name = "postman", version, arg_required_else_help = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Make the hub's identity if it has none (a key pair and a self-signed certificate under
    /// HUB/.postman/identity, the key readable by its owner alone), and print the fingerprint a
    /// peer hub pins for this one.
    Identity(IdentityArgs),
}

#[derive(Debug, clap::Args)]
struct IdentityArgs {
    /// The hub folder.
    #[arg(long)]
    hub: PathBuf,
    /// The hub's name, written into a new certificate (default: the hub folder's name).
    #[arg(long)]
    name: Option<String>,
    /// Print JSON: `{"fingerprint", "certificate"}`.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    match command {
        Command::Identity(args) => match identity(&args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("postman: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

fn identity(args: &IdentityArgs) -> Result<(), String> {
    if !args.hub.join("hub.git").is_dir() {
        return Err(format!(
            "{} is not a hub folder (it has no hub.git); make one with `l3m init` or `hubd init`",
            args.hub.display()
        ));
    }
    let name = args.name.clone().unwrap_or_else(|| {
        args.hub
            .file_name()
            .map_or_else(|| "hub".to_owned(), |n| n.to_string_lossy().into_owned())
    });
    let dir = args.hub.join(IDENTITY_DIR);
    let identity = Identity::load_or_create(&dir, &name).map_err(|e| e.to_string())?;
    let cert = dir.join(postman::identity::IDENTITY_CERT);
    if args.json {
        let out = serde_json::json!({
            "fingerprint": identity.fingerprint().to_string(),
            "certificate": cert.display().to_string(),
        });
        println!("{out}");
    } else {
        println!("{}", identity.fingerprint());
        println!(
            "(certificate: {}; pin this fingerprint on the peer hub)",
            cert.display()
        );
    }
    Ok(())
}
