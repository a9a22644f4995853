//! `l3m grant show`: a grant axis by axis, and the account beside it.

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render;

/// Show a live agent's grant, axis by axis (an axis left out confers nothing), and its budget
/// account: the loan, what it spent, what it has lent to live children, and what is left.
///
/// `--json` prints `{"agent", "grant": {<axis>: ...}, "account": {"loan", "spent",
/// "lent-out", "retired-consumed"}}` (each fuel `{"model-calls", "bytes", "wakes"}`).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m grant show`.
pub async fn cmd_show(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let view = session.client.read_grant(&name).await?;
    if args.json {
        return output::json(&view);
    }
    print!(
        "{}",
        render::grant::render(&view.agent, &view.grant, &view.account)
    );
    Ok(())
}
