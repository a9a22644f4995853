//! `l3m retire`: retire an agent and its live subtree.

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Retire an agent and its whole live subtree, deepest first: its ACR and grants are removed
/// and any unspent loan returns to its parent. Its memory (inbox, persona branch) stays until
/// `l3m collect`.
///
/// `--json` prints `{"agents": [...]}`, in the order they were retired.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m retire`.
pub async fn cmd_retire(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let retired = session.client.retire(&name).await?;
    if args.json {
        return output::json(&retired);
    }
    for a in &retired.agents {
        outln!("retired {a}");
    }
    Ok(())
}
