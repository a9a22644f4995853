//! `l3m mail`: letters within the hub.

pub mod ls;
pub mod send;

use clap::Subcommand;

use crate::context::Context;
use crate::error::CliError;

/// The mail subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Send a letter from you to an address.
    Send(send::Args),
    /// List inboxes with read marks.
    Ls(ls::Args),
}

/// Runs one mail subcommand.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::Send(args) => send::cmd_send(args, cx).await,
        Command::Ls(args) => ls::cmd_ls(args, cx).await,
    }
}
