//! `l3m collect`: remove a retired agent's memory.

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Collect a retired agent: remove its memory (inbox, persona branch, claims); its name
/// becomes free again.
///
/// `--json` prints `{"agent"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The retired agent.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m collect`.
pub async fn cmd_collect(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let collected = session.client.collect(&name).await?;
    if args.json {
        return output::json(&collected);
    }
    outln!("collected {}", collected.agent);
    Ok(())
}
