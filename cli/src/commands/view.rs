//! `l3m view`: exactly what the agent's model would see.

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render;

/// Show exactly what the agent's model would be sent next: the pure view fold over its whole
/// Log (rewinds retracted, compactions standing in, state changes narrated), before any
/// provider's dialect renders it.
///
/// `--json` prints the view itself: `{"system", "messages": [{"role": "user", "content":
/// [...]} | {"role": "assistant", "text", "tool_uses": [...]}]}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m view`.
pub async fn cmd_view(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let read = session.client.read_log_from(&name, 0).await?;
    let view = l3m_core::view::view(&read.records);
    if args.json {
        return output::json(&view);
    }
    if read.records.is_empty() {
        outln!("{name} has no Log yet: its sequencer writes one when it first runs");
        return Ok(());
    }
    out!("{}", render::view::render(&view));
    Ok(())
}
