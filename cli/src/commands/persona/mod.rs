//! `l3m persona`: upstream personas, which only a human publishes.

pub mod new;
pub mod publish;
pub mod pull;

use clap::Subcommand;

use crate::context::Context;
use crate::error::CliError;

/// The persona subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Publish a new persona from its three files (or starter text).
    New(new::Args),
    /// Publish a wearer's improvements upstream (only the three persona files).
    Publish(publish::Args),
    /// Merge upstream changes into a wearer's persona branch.
    Pull(pull::Args),
}

/// Runs one persona subcommand.
pub async fn dispatch(command: Command, cx: Context) -> Result<(), CliError> {
    match command {
        Command::New(args) => new::cmd_new(args, cx).await,
        Command::Publish(args) => publish::cmd_publish(args, cx).await,
        Command::Pull(args) => pull::cmd_pull(args, cx).await,
    }
}

/// Parses a persona name given on the command line.
pub fn persona_name(name: &str) -> Result<l3m_core::names::PersonaName, CliError> {
    l3m_core::names::PersonaName::parse(name)
        .map_err(|e| CliError::usage(format!("`{name}` is not a persona name: {e}")))
}

/// Prints a publish's outcome.
pub fn report(
    published: &l3m_wire::hubd::persona::PersonaPublished,
    json: bool,
) -> Result<(), CliError> {
    if json {
        return crate::output::json(published);
    }
    match &published.previous {
        Some(previous) => outln!(
            "published {} at {} (was {previous})",
            published.refname,
            published.commit
        ),
        None => outln!("published {} at {}", published.refname, published.commit),
    }
    Ok(())
}
