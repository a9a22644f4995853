//! `l3m say`: a letter from the human to an agent.

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;

/// Send an agent a letter from you; its arrival wakes the agent if it is asleep.
///
/// `--json` prints `{"letter", "inbox", "seq"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// What to say.
    pub text: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m say`.
pub async fn cmd_say(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let sent = session
        .client
        .send_letter(name.as_str(), None, &args.text)
        .await?;
    if args.json {
        return output::json(&sent);
    }
    outln!("letter {} → {name}", sent.letter);
    Ok(())
}
