//! `l3m settings`: the hub's settings file (`settings.toml` on `refs/l3m/settings`).
//!
//! The file is replaced whole: `show` prints it (with `--json`, the commit it was read at), you
//! edit a copy, and `apply` sends the copy back, stating that commit with `--expect` so that an
//! edit made against an older version is refused instead of undoing someone else's change.

use std::path::PathBuf;

use crate::context::Context;
use crate::error::CliError;

/// The settings subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Print the hub's settings.toml as it is.
    ///
    /// `--json` prints `{"text", "tip"}`; `tip` is what `apply --expect` takes.
    Show(ShowArgs),
    /// Replace the hub's settings.toml with FILE (humans only).
    ///
    /// hubd checks the whole file first (schema 1; each `[remotes]` entry a remote name and a
    /// plain URL) and writes nothing if any of it is wrong. With `--expect COMMIT` (the `tip`
    /// of `show --json`) the change is refused if someone changed the settings since; without
    /// it, FILE replaces whatever is there.
    ///
    /// Example: `l3m settings show > settings.toml`, add `[remotes]` with
    /// `origin = "https://git.example/app.git"`, then `l3m settings apply settings.toml`.
    Apply(ApplyArgs),
}

/// `l3m settings show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `l3m settings apply`.
#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// The new settings.toml.
    pub file: PathBuf,
    /// The settings commit FILE was written against (from `show --json`).
    #[arg(long, value_name = "COMMIT")]
    pub expect: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs one settings subcommand.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Show(args) => {
            let session = cx.connect().await?;
            let view = session.client.read_settings().await?;
            if args.json {
                return crate::output::json(&view);
            }
            out!("{}", view.text);
            Ok(())
        }
        Command::Apply(args) => {
            let text = std::fs::read_to_string(&args.file)
                .map_err(|source| CliError::io("read", &args.file, source))?;
            let session = cx.connect().await?;
            let expected = match args.expect {
                Some(tip) => tip,
                None => session.client.read_settings().await?.tip,
            };
            let updated = session.client.update_settings(&text, &expected).await?;
            if args.json {
                return crate::output::json(&updated);
            }
            outln!(
                "settings updated at {} (was {})",
                updated.tip,
                updated.previous
            );
            Ok(())
        }
    }
}
