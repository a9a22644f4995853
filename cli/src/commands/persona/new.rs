//! `l3m persona new`: a new upstream persona.

use std::path::{Path, PathBuf};

use l3m_wire::hubd::persona::PersonaSource;

use super::{persona_name, report};
use crate::context::Context;
use crate::error::CliError;

/// Publish a new persona: `refs/l3m/personas/<NAME>` with its three files. Each file comes
/// from its flag, or starts as a one-line heading to edit later. Agents spawned with
/// `--persona NAME` fork it into their own persona branch.
///
/// `--json` prints `{"persona", "refname", "commit", "previous"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The persona's name.
    pub name: String,
    /// instructions.md.
    #[arg(long, value_name = "FILE")]
    pub instructions: Option<PathBuf>,
    /// personality.md.
    #[arg(long, value_name = "FILE")]
    pub personality: Option<PathBuf>,
    /// memories.md.
    #[arg(long, value_name = "FILE")]
    pub memories: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

fn text(path: Option<&Path>, starter: String) -> Result<String, CliError> {
    match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| CliError::io("read", p, e)),
        None => Ok(starter),
    }
}

/// Runs `l3m persona new`.
pub async fn cmd_new(args: Args, cx: Context) -> Result<(), CliError> {
    let persona = persona_name(&args.name)?;
    let source = PersonaSource::Files {
        instructions: text(
            args.instructions.as_deref(),
            format!("# {persona}: instructions\n"),
        )?,
        personality: text(
            args.personality.as_deref(),
            format!("# {persona}: personality\n"),
        )?,
        memories: text(args.memories.as_deref(), format!("# {persona}: memories\n"))?,
    };
    let session = cx.connect().await?;
    let published = session.client.publish_persona(&persona, source).await?;
    report(&published, args.json)
}
