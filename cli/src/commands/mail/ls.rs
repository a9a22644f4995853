//! `l3m mail ls`: inbox lines with read marks.

use std::collections::BTreeSet;

use l3m_core::mail::InboxEntry;
use l3m_core::names::AgentName;
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;
use serde::Serialize;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render::time::utc;

/// List the letters in an agent's inbox (or every live agent's), each with its read mark.
///
/// `[x]` marks a letter its recipient has read. `--json` prints `{"inboxes": [{"agent",
/// "letters": [{"id", "at_ms", "from", "to", "subject", "body", "read"}]}]}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Whose inbox (default: every live agent's).
    pub name: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One letter of `--json` output.
#[derive(Debug, Serialize)]
pub struct LetterLine {
    /// The letter's id.
    pub id: String,
    /// When it was delivered.
    pub at_ms: u64,
    /// The sender's address.
    pub from: String,
    /// The recipient's address.
    pub to: String,
    /// Its subject.
    pub subject: Option<String>,
    /// Its text.
    pub body: String,
    /// Whether a read mark for it is in the inbox.
    pub read: bool,
}

/// One inbox of `--json` output.
#[derive(Debug, Serialize)]
pub struct InboxList {
    /// Whose.
    pub agent: String,
    /// Its letters, in stored order.
    pub letters: Vec<LetterLine>,
}

/// The letters of one inbox with their read marks.
pub fn letters(entries: &[InboxEntry]) -> Vec<LetterLine> {
    let read: BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| match e {
            InboxEntry::ReadMark(mark) => Some(mark.letter.as_str()),
            InboxEntry::Letter(_) => None,
        })
        .collect();
    entries
        .iter()
        .filter_map(|e| match e {
            InboxEntry::Letter(l) => Some(LetterLine {
                id: l.id.to_string(),
                at_ms: l.at_ms,
                from: l.from.render_short(),
                to: l.to.render_short(),
                subject: l.subject.clone(),
                body: l.body.clone(),
                read: read.contains(l.id.as_str()),
            }),
            InboxEntry::ReadMark(_) => None,
        })
        .collect()
}

async fn inbox(client: &HubClient, name: &AgentName) -> Result<InboxList, CliError> {
    let read = client.read_inbox(name, 0).await?;
    Ok(InboxList {
        agent: name.to_string(),
        letters: letters(&read.entries),
    })
}

/// Runs `l3m mail ls`.
pub async fn cmd_ls(args: Args, cx: Context) -> Result<(), CliError> {
    let named = args.name.as_deref().map(agent).transpose()?;
    let session = cx.connect().await?;
    let client = &session.client;
    let names: Vec<AgentName> = match named {
        Some(name) => vec![name],
        None => client
            .list_agents()
            .await?
            .agents
            .into_iter()
            .filter(|a| matches!(a.life, AgentLife::Running | AgentLife::Asleep))
            .filter_map(|a| AgentName::parse(&a.name).ok())
            .collect(),
    };
    let mut inboxes = Vec::new();
    for name in &names {
        inboxes.push(inbox(client, name).await?);
    }
    if args.json {
        return output::json(&serde_json::json!({ "inboxes": inboxes }));
    }
    for list in &inboxes {
        println!("{} ({} letters)", list.agent, list.letters.len());
        for l in &list.letters {
            let text = l.subject.as_deref().unwrap_or(&l.body);
            println!(
                "  [{}] {} {} {} → {}: {}",
                if l.read { "x" } else { " " },
                l.id,
                utc(l.at_ms),
                l.from,
                l.to,
                l3m_core::story::short(text)
            );
        }
    }
    Ok(())
}
