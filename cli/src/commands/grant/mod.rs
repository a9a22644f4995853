//! `l3m grant`: reading grants.

pub mod show;

use clap::Subcommand;

use crate::context::Context;
use crate::error::CliError;

/// The grant subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show a live agent's grant axis by axis, and its budget account.
    Show(show::Args),
}

/// Runs one grant subcommand.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Show(args) => show::cmd_show(args, cx).await,
    }
}
