//! `l3m persona pull`: upstream changes, into a wearer's persona branch.

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Bring the newer upstream version of the persona AGENT wears into its persona branch, as a
/// merge. A persona file the wearer has not changed takes upstream's version; one upstream has
/// not changed keeps the wearer's; one both changed is refused (exit 4) naming the file, so
/// a wearer's edit is never overwritten. Hooks and programs on the branch are kept.
///
/// `--json` prints `{"agent", "persona", "commit", "upstream", "updated"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The wearer.
    pub agent: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m persona pull`.
pub async fn cmd_pull(args: Args, cx: Context) -> Result<(), CliError> {
    let wearer = agent(&args.agent)?;
    let session = cx.connect().await?;
    let pulled = session.client.pull_persona(&wearer).await?;
    if args.json {
        return output::json(&pulled);
    }
    if pulled.updated.is_empty() {
        outln!(
            "{} already has persona {} at {}",
            pulled.agent,
            pulled.persona,
            pulled.upstream
        );
    } else {
        outln!(
            "pulled persona {} at {} into {}: {} updated",
            pulled.persona,
            pulled.upstream,
            pulled.agent,
            pulled.updated.join(", ")
        );
    }
    Ok(())
}
