//! `l3m mail ls`: inbox lines with read marks and receipts, or an outbox's airmail with what
//! became of each letter.

use std::collections::BTreeMap;

use l3m_core::mail::{Inbox, InboxEntry, Letter, Receipt};
use l3m_core::names::{AgentName, Entity};
use l3m_wire::client::HubClient;
use l3m_wire::hubd::tree::AgentLife;
use serde::Serialize;

use crate::context::{Context, agent};
use crate::error::CliError;
use crate::output;
use crate::render::escape::Foreign;
use crate::render::time::utc;

/// List the letters in an agent's inbox (or every live agent's), each with its read mark, and
/// the receipts other hubs sent back for its airmail.
///
/// `[x]` marks a letter its recipient has read; a letter from another hub shows its office in
/// its sender's address (`office:north agent:lead*`). With `--outbox`, list the airmail the
/// agent staged for other hubs instead, each with its state: `staged` (the postman has not
/// carried it yet), `carried` (the office holds it), `read` (a receipt came back: by whom,
/// when) or `bounced` (the office's reason).
///
/// `--json` prints `{"inboxes": [{"agent", "letters": [{"id", "at_ms", "from", "origin", "to",
/// "subject", "body", "read"}], "receipts": [{"letter", "office", "by", "at_ms"}]}]}`, or with
/// `--outbox` `{"outboxes": [{"agent", "letters": [{"id", "at_ms", "office", "to", "subject",
/// "body", "state", "read_by": [{"by", "at_ms"}], "bounce"}]}]}`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Whose inbox (default: every live agent's).
    pub name: Option<String>,
    /// List the airmail staged on the outbox, with its state, instead of the inbox.
    #[arg(long)]
    pub outbox: bool,
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
    /// The office it came from, for airmail.
    pub origin: Option<String>,
    /// The recipient's address.
    pub to: String,
    /// Its subject.
    pub subject: Option<String>,
    /// Its text.
    pub body: String,
    /// Whether a read mark for it is in the inbox.
    pub read: bool,
}

/// A receipt of `--json` output: another hub's reader read this agent's letter.
#[derive(Debug, Serialize)]
pub struct ReceiptLine {
    /// The letter read.
    pub letter: String,
    /// The office whose reader read it.
    pub office: String,
    /// Who read it there.
    pub by: String,
    /// When.
    pub at_ms: u64,
}

/// One inbox of `--json` output.
#[derive(Debug, Serialize)]
pub struct InboxList {
    /// Whose.
    pub agent: String,
    /// Its letters, in stored order.
    pub letters: Vec<LetterLine>,
    /// The receipts that came back for its airmail, in stored order.
    pub receipts: Vec<ReceiptLine>,
}

/// What became of a staged letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    /// On the outbox; the postman has not carried it yet.
    Staged,
    /// The office holds it.
    Carried,
    /// A receipt came back.
    Read,
    /// The office refused it; a bounce letter is in the sender's inbox.
    Bounced,
}

/// One staged letter of `--outbox` output.
#[derive(Debug, Serialize)]
pub struct StagedLine {
    /// The letter's id.
    pub id: String,
    /// When it was staged.
    pub at_ms: u64,
    /// The office it is for.
    pub office: String,
    /// The recipient's address.
    pub to: String,
    /// Its subject.
    pub subject: Option<String>,
    /// Its text.
    pub body: String,
    /// What became of it.
    pub state: State,
    /// The readers the receipts name.
    pub read_by: Vec<ReadBy>,
    /// The office's reason, if it bounced the letter.
    pub bounce: Option<String>,
}

/// A reader a receipt names.
#[derive(Debug, Serialize)]
pub struct ReadBy {
    /// Who read it, at the office.
    pub by: String,
    /// When.
    pub at_ms: u64,
}

/// One outbox of `--outbox --json` output.
#[derive(Debug, Serialize)]
pub struct OutboxList {
    /// Whose.
    pub agent: String,
    /// The airmail it staged, in stored order.
    pub letters: Vec<StagedLine>,
}

/// The letters of one inbox with their read marks, and its receipts.
pub fn inbox_list(agent: &AgentName, entries: &[InboxEntry]) -> InboxList {
    let mut letters = Vec::new();
    let mut receipts = Vec::new();
    // Read means read by the inbox's own agent: a mark anyone else made does not count.
    let reader = Entity::Agent(agent.clone());
    let inbox: Inbox = entries.iter().cloned().collect();
    for entry in entries {
        match entry {
            InboxEntry::Letter(l) => letters.push(LetterLine {
                id: l.id.to_string(),
                at_ms: l.at_ms,
                from: l.from.render_short(),
                origin: l.from.office().map(ToString::to_string),
                to: l.to.render_short(),
                subject: l.subject.clone(),
                body: l.body.clone(),
                read: inbox.is_read(&l.id, &reader),
            }),
            InboxEntry::Receipt(r) => receipts.push(receipt_line(r)),
            InboxEntry::ReadMark(_) => {}
        }
    }
    InboxList {
        agent: agent.to_string(),
        letters,
        receipts,
    }
}

fn receipt_line(r: &Receipt) -> ReceiptLine {
    ReceiptLine {
        letter: r.letter.to_string(),
        office: r.office.to_string(),
        by: r.by.to_string(),
        at_ms: r.at_ms,
    }
}

/// The airmail of one outbox, each letter with its state: `inbox` holds the receipts and
/// bounces that came back, `carried` each office's cursor on this agent's outbox.
pub fn outbox_list(
    agent: &AgentName,
    outbox: &[InboxEntry],
    inbox: &[InboxEntry],
    carried: &BTreeMap<String, u64>,
) -> OutboxList {
    let letters = outbox
        .iter()
        .zip(0u64..)
        .filter_map(|(entry, at)| match entry {
            InboxEntry::Letter(l) => Some((at, l)),
            _ => None,
        })
        .filter_map(|(at, l)| staged_line(at, l, inbox, carried))
        .collect();
    OutboxList {
        agent: agent.to_string(),
        letters,
    }
}

fn staged_line(
    at: u64,
    letter: &Letter,
    inbox: &[InboxEntry],
    carried: &BTreeMap<String, u64>,
) -> Option<StagedLine> {
    let office = letter.to.office()?.to_string();
    let mut read_by = Vec::new();
    let mut bounce = None;
    for entry in inbox {
        match entry {
            InboxEntry::Receipt(r) if r.letter == letter.id && r.office.as_str() == office => {
                read_by.push(ReadBy {
                    by: r.by.to_string(),
                    at_ms: r.at_ms,
                });
            }
            InboxEntry::Letter(b)
                if b.in_reply_to.as_ref() == Some(&letter.id)
                    && b.id.as_str().starts_with("bounce:") =>
            {
                bounce = Some(b.body.clone());
            }
            _ => {}
        }
    }
    let state = if bounce.is_some() {
        State::Bounced
    } else if !read_by.is_empty() {
        State::Read
    } else if carried.get(&office).is_some_and(|cursor| *cursor > at) {
        State::Carried
    } else {
        State::Staged
    };
    Some(StagedLine {
        id: letter.id.to_string(),
        at_ms: letter.at_ms,
        office,
        to: letter.to.render_short(),
        subject: letter.subject.clone(),
        body: letter.body.clone(),
        state,
        read_by,
        bounce,
    })
}

/// Every entry of an inbox (`outbox == false`) or outbox, read page by page.
async fn entries(
    client: &HubClient,
    name: &AgentName,
    outbox: bool,
) -> Result<Vec<InboxEntry>, CliError> {
    let mut out = Vec::new();
    loop {
        let from = out.len() as u64;
        let page = if outbox {
            client.read_outbox(name, from).await?
        } else {
            client.read_inbox(name, from).await?
        };
        let done = page.entries.is_empty() || from + page.entries.len() as u64 >= page.len;
        out.extend(page.entries);
        if done {
            return Ok(out);
        }
    }
}

/// How far each office's postman carried `name`'s outbox.
async fn carried(client: &HubClient, name: &AgentName) -> Result<BTreeMap<String, u64>, CliError> {
    let text = client.read_settings().await?.text;
    let settings = l3m_core::settings::Settings::parse(&text)
        .map_err(|e| CliError::Runtime(format!("the hub's settings do not parse: {e}")))?;
    let mut out = BTreeMap::new();
    for office in settings.offices.keys() {
        let cursor = client.read_cursor(office.as_str()).await?;
        out.insert(
            office.to_string(),
            cursor.positions.get(name.as_str()).copied().unwrap_or(0),
        );
    }
    Ok(out)
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
    if args.outbox {
        let mut outboxes = Vec::new();
        for name in &names {
            let outbox = entries(client, name, true).await?;
            let inbox = entries(client, name, false).await?;
            let carried = carried(client, name).await?;
            outboxes.push(outbox_list(name, &outbox, &inbox, &carried));
        }
        if args.json {
            return output::json(&serde_json::json!({ "outboxes": outboxes }));
        }
        print_outboxes(&outboxes);
        return Ok(());
    }
    let mut inboxes = Vec::new();
    for name in &names {
        inboxes.push(inbox_list(name, &entries(client, name, false).await?));
    }
    if args.json {
        return output::json(&serde_json::json!({ "inboxes": inboxes }));
    }
    for list in &inboxes {
        outln!("{} ({} letters)", list.agent, list.letters.len());
        for l in &list.letters {
            let text = l.subject.as_deref().unwrap_or(&l.body);
            outln!(
                "  [{}] {} {} {} → {}: {}",
                if l.read { "x" } else { " " },
                l.id,
                utc(l.at_ms),
                l.from,
                l.to,
                Foreign(&l3m_core::story::short(text))
            );
        }
        for r in &list.receipts {
            outln!(
                "  receipt: {} read by {} at office {} {}",
                r.letter,
                r.by,
                r.office,
                utc(r.at_ms)
            );
        }
    }
    Ok(())
}

fn print_outboxes(outboxes: &[OutboxList]) {
    for list in outboxes {
        outln!("{} ({} airmail)", list.agent, list.letters.len());
        for l in &list.letters {
            let text = l.subject.as_deref().unwrap_or(&l.body);
            let state = match (l.state, l.read_by.first(), &l.bounce) {
                (State::Read, Some(r), _) => format!("read by {} {}", r.by, utc(r.at_ms)),
                (State::Bounced, _, Some(reason)) => {
                    format!("bounced: {}", Foreign(&l3m_core::story::short(reason)))
                }
                (State::Carried, ..) => "carried".into(),
                _ => "staged".into(),
            };
            outln!(
                "  {} {} → office:{} {}: {} [{state}]",
                l.id,
                utc(l.at_ms),
                l.office,
                l.to,
                Foreign(&l3m_core::story::short(text))
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::mail::{Address, LetterId, ReadMark, Receipt, Sender, bounce, stamp};
    use l3m_core::names::OfficeName;

    fn staged(id: &str) -> Letter {
        let sender = Sender::Agent {
            agent: AgentName::parse("lead").unwrap(),
            worktree: None,
            human: None,
        };
        let to = Address::parse("office:south agent:bob*").unwrap();
        let draft = l3m_core::mail::Draft::new(to, "hi");
        stamp(draft, &sender, LetterId::parse(id).unwrap(), 1).unwrap()
    }

    #[test]
    fn a_letter_is_read_only_when_the_inbox_s_own_agent_marked_it() {
        let lead = AgentName::parse("lead").unwrap();
        let mark = |letter: &str, by: &str| {
            InboxEntry::ReadMark(ReadMark {
                letter: LetterId::parse(letter).unwrap(),
                by: Entity::parse(by).unwrap(),
                at_ms: 2,
            })
        };
        let entries = vec![
            InboxEntry::Letter(Box::new(staged("a"))),
            InboxEntry::Letter(Box::new(staged("b"))),
            InboxEntry::Letter(Box::new(staged("c"))),
            mark("a", "lead"),
            mark("b", "human:bob"),
            mark("c", "lead/child"),
        ];
        let list = inbox_list(&lead, &entries);
        let read: Vec<(&str, bool)> = (list.letters.iter())
            .map(|l| (l.id.as_str(), l.read))
            .collect();
        assert_eq!(read, [("a", true), ("b", false), ("c", false)]);
    }

    #[test]
    fn each_staged_letter_shows_what_became_of_it() {
        let lead = AgentName::parse("lead").unwrap();
        let south = OfficeName::parse("south").unwrap();
        let outbox: Vec<InboxEntry> = ["a", "b", "c", "d"]
            .into_iter()
            .map(|id| InboxEntry::Letter(Box::new(staged(id))))
            .collect();
        let inbox = vec![
            InboxEntry::Receipt(Receipt {
                letter: LetterId::parse("a").unwrap(),
                office: south.clone(),
                sender: lead.clone(),
                by: Entity::parse("bob").unwrap(),
                at_ms: 5,
            }),
            InboxEntry::Letter(Box::new(bounce(&staged("b"), &south, "no bob", 6).unwrap())),
        ];
        // The office holds the first three lines.
        let carried = [("south".to_owned(), 3)].into_iter().collect();
        let list = outbox_list(&lead, &outbox, &inbox, &carried);
        let states: Vec<State> = list.letters.iter().map(|l| l.state).collect();
        assert_eq!(
            states,
            [State::Read, State::Bounced, State::Carried, State::Staged]
        );
        assert_eq!(list.letters[0].read_by[0].by, "bob");
        assert!(
            list.letters[1]
                .bounce
                .as_deref()
                .unwrap()
                .contains("no bob")
        );
    }
}
