//! `l3m mail send`: a letter from the human to any address.

use crate::context::Context;
use crate::error::CliError;
use crate::output;

/// Send a letter from you. TO is an address: `alice/main/worker` is short for
/// `agent:alice/main/worker*`. hubd stamps the id, the time and you as the sender.
///
/// `--json` prints `{"letter", "inbox", "seq"}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The recipient's address.
    pub to: String,
    /// The letter's text.
    pub body: String,
    /// A subject line.
    #[arg(long)]
    pub subject: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `l3m mail send`.
pub async fn cmd_send(args: Args, cx: Context) -> Result<(), CliError> {
    l3m_core::mail::Address::parse(&args.to)
        .map_err(|e| CliError::usage(format!("`{}` is not an address: {e}", args.to)))?;
    let session = cx.connect().await?;
    let sent = session
        .client
        .send_letter(&args.to, args.subject.as_deref(), &args.body)
        .await?;
    if args.json {
        return output::json(&sent);
    }
    outln!(
        "letter {} → {} (#{} of {})",
        sent.letter,
        args.to,
        sent.seq,
        sent.inbox
    );
    Ok(())
}
