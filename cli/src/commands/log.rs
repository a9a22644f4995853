//! `l3m log`: an agent's Log, one line per record, optionally followed as it grows.

use futures_util::StreamExt;
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::envelope::{Limits, decode};
use l3m_wire::hubd::notify::RefMoved;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render::escape::Foreign;
use crate::render::log::{json, line};
use crate::render::tree::{TAIL, stuck};

/// Show an agent's Log: one line per record (seq, time, kind, a short summary).
///
/// When the agent's last turn ended in a failure it cannot get past by itself, a last line says
/// `stuck: <why>; <what to do>` (as `l3m tree` does).
///
/// `--follow` keeps printing records as the agent's sequencer appends them, until Ctrl-C.
/// `--json` prints JSON Lines: each record as stored (`seq`, `at_ms`, `kind` and its fields)
/// plus `summary`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent.
    pub name: String,
    /// The first seq to show.
    #[arg(long, default_value_t = 0)]
    pub from: u64,
    /// Keep printing new records as they are appended.
    #[arg(long, short)]
    pub follow: bool,
    /// Print JSON Lines.
    #[arg(long)]
    pub json: bool,
}

async fn print_from(
    client: &HubClient,
    name: &AgentName,
    from: u64,
    as_json: bool,
) -> Result<u64, CliError> {
    let read = client.read_log_from(name, from).await?;
    for record in &read.records {
        if as_json {
            output::json_line(&json(record))?;
        } else {
            outln!("{}", line(record));
        }
    }
    Ok(from + read.records.len() as u64)
}

/// Runs `l3m log`.
pub async fn cmd_log(args: Args, cx: Context) -> Result<(), CliError> {
    let name = agent(&args.name)?;
    let session = cx.connect().await?;
    let client = &session.client;
    // Subscribe before the first read, so nothing appended in between is missed.
    let mut moves = if args.follow {
        Some(client.watch(&name).await?)
    } else {
        None
    };
    let mut next = print_from(client, &name, args.from, args.json).await?;
    if !args.json {
        let tail = client
            .read_log_range(&name, next.saturating_sub(TAIL), next)
            .await?;
        if let Some(why) = stuck(name.as_str(), &tail.records) {
            outln!("stuck: {}", Foreign(&why));
        }
    }
    let Some(moves) = moves.as_mut() else {
        return Ok(());
    };
    let log_ref = l3m_core::refs::agent_ref(&name, l3m_core::refs::AgentRef::Log);
    loop {
        tokio::select! {
            message = moves.next() => {
                let Some(message) = message else {
                    return Err(CliError::StackDown { why: "the notification stream ended".into() });
                };
                match decode::<RefMoved>(&message.payload, &Limits::default()) {
                    Ok(moved) if moved.refname == log_ref => {
                        next = print_from(client, &name, next, args.json).await?;
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "an announcement did not decode"),
                }
            }
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}
