//! Delivering a batch of airmail: of the letters and receipts an office carried here, what
//! goes onto the office's mirror chain, what into which inbox, and what is bounced or refused.
//! Pure: the chains it consults come in through `read`, which hubd answers from hub.git, and
//! what it decides comes back as a [`Delivery`] for hubd to append.
//!
//! The rules, each kept here once:
//! - a read mark never travels (a reader's mark goes back as a receipt): a batch holding one
//!   is refused whole ([`parse_batch`]);
//! - a letter is received ([`super::receive`]: its origin stamped with the carrier) and goes
//!   to the agent its address stars, if that agent lives here; else it is bounced;
//! - a letter goes onto the mirror unless the mirror holds its id, and into the inbox unless
//!   the inbox holds its id (then it is `already` there): a retry delivers nothing twice, and
//!   one batch carrying a letter twice delivers it once;
//! - a receipt is kept only for a letter its sender's outbox staged for this very office (an
//!   office cannot invent one), once per read on the mirror and in the sender's inbox.

use std::collections::BTreeMap;
use std::collections::hash_map::{Entry, HashMap};

use super::{InboxEntry, LetterError, LetterId, Receipt, receive};
use crate::names::{AgentName, Entity, OfficeName};

/// What a chain holds, as delivery checks it: its letters' ids (each with the office it is
/// addressed to, if any) and its receipts. Read marks are neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    letters: BTreeMap<LetterId, Option<OfficeName>>,
    receipts: Vec<Receipt>,
}

impl Held {
    /// What `entries`, a chain's entries, hold.
    pub fn of(entries: impl IntoIterator<Item = InboxEntry>) -> Held {
        let mut held = Held::default();
        for entry in entries {
            match entry {
                InboxEntry::Letter(letter) => {
                    held.letters.insert(letter.id, letter.to.office().cloned());
                }
                InboxEntry::Receipt(receipt) => held.receipts.push(receipt),
                InboxEntry::ReadMark(_) => {}
            }
        }
        held
    }

    /// Notes a letter with this id (addressed to no office) as held; `false` if one was.
    pub fn note(&mut self, id: LetterId) -> bool {
        self.letters.insert(id, None).is_none()
    }

    /// Whether the chain holds a letter with this id addressed to `office`.
    fn staged_for(&self, id: &LetterId, office: &OfficeName) -> bool {
        self.letters.get(id) == Some(&Some(office.clone()))
    }

    /// Notes `receipt` as held; `false` if the chain already said the same read.
    fn note_receipt(&mut self, receipt: &Receipt) -> bool {
        if self.receipts.iter().any(|r| r.same_read(receipt)) {
            return false;
        }
        self.receipts.push(receipt.clone());
        true
    }
}

/// A chain delivery consults besides the mirror.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Chain {
    /// An agent's inbox, which a letter or a receipt goes into.
    Inbox(AgentName),
    /// An agent's outbox, which says what airmail it staged.
    Outbox(AgentName),
}

/// Why a batch of airmail lines is refused whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// A read mark: it travels as a receipt.
    #[error("airmail line {line} is a read mark; a read mark travels as a receipt")]
    ReadMark {
        /// The line's zero-based index in the batch.
        line: usize,
    },
    /// A line that does not parse.
    #[error("airmail line {line}: {source}")]
    Line {
        /// The line's zero-based index in the batch.
        line: usize,
        /// Why.
        source: LetterError,
    },
}

/// The entries of a carried batch of storage lines; a read mark or a line that does not parse
/// refuses the batch.
pub fn parse_batch(lines: &[String]) -> Result<Vec<InboxEntry>, BatchError> {
    (lines.iter().enumerate())
        .map(|(i, line)| match InboxEntry::from_line(line, i + 1) {
            Ok(InboxEntry::ReadMark(_)) => Err(BatchError::ReadMark { line: i }),
            Ok(entry) => Ok(entry),
            Err(source) => Err(BatchError::Line { line: i, source }),
        })
        .collect()
}

/// A letter or receipt not delivered, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undelivered {
    /// The letter's id (a receipt's letter).
    pub letter: String,
    /// Why, for the sender.
    pub reason: String,
}

/// What a delivery writes and reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// Entries to append to the office's mirror chain, first.
    pub to_mirror: Vec<InboxEntry>,
    /// Entries to append to each agent's inbox, after the mirror.
    pub to_inbox: BTreeMap<AgentName, Vec<InboxEntry>>,
    /// Letters now in their recipients' inboxes.
    pub delivered: Vec<String>,
    /// Letters an inbox held already: nothing is written for them.
    pub already: Vec<String>,
    /// Letters bounced, each with its reason.
    pub bounced: Vec<Undelivered>,
    /// Receipts newly kept in their senders' inboxes.
    pub receipts: u64,
    /// Receipts refused (no such letter was sent to the office), each with its reason.
    pub refused: Vec<Undelivered>,
}

/// Delivers `entries`, carried by `office`, to a hub whose mirror of that office holds
/// `mirror`, where `is_live` says which agents live. `read` answers what a chain holds; it is
/// asked once per chain at most, and its error stops the delivery (nothing is written then).
pub fn deliver<E>(
    office: &OfficeName,
    entries: Vec<InboxEntry>,
    mut mirror: Held,
    is_live: impl Fn(&AgentName) -> bool,
    mut read: impl FnMut(&Chain) -> Result<Held, E>,
) -> Result<Delivery, E> {
    let mut chains: HashMap<Chain, Held> = HashMap::new();
    let mut out = Delivery::default();
    for entry in entries {
        let carried = match entry {
            InboxEntry::Letter(letter) => *letter,
            InboxEntry::Receipt(receipt) => {
                let receipt = receipt.returned(office);
                let sender = receipt.sender.clone();
                if !held(&mut chains, &mut read, Chain::Outbox(sender.clone()))?
                    .staged_for(&receipt.letter, office)
                {
                    out.refused.push(Undelivered {
                        letter: receipt.letter.to_string(),
                        reason: format!(
                            "{sender} staged no letter {} for office {office}: a receipt \
                             answers only a letter this hub sent there",
                            receipt.letter
                        ),
                    });
                    continue;
                }
                if mirror.note_receipt(&receipt) {
                    out.to_mirror.push(InboxEntry::Receipt(receipt.clone()));
                }
                if held(&mut chains, &mut read, Chain::Inbox(sender.clone()))?
                    .note_receipt(&receipt)
                {
                    let inbox = out.to_inbox.entry(sender).or_default();
                    inbox.push(InboxEntry::Receipt(receipt));
                    out.receipts += 1;
                }
                continue;
            }
            InboxEntry::ReadMark(_) => continue,
        };
        let id = carried.id.clone();
        let bounce = |reason: String| Undelivered {
            letter: id.to_string(),
            reason,
        };
        let local = match receive(carried.clone(), office) {
            Ok(local) => local,
            Err(refusal) => {
                out.bounced.push(bounce(refusal.to_string()));
                continue;
            }
        };
        let agent = match local.to.recipient().0 {
            Entity::Agent(agent) if is_live(&agent) => agent,
            Entity::Agent(agent) => {
                out.bounced
                    .push(bounce(format!("no agent {agent} lives on this hub")));
                continue;
            }
            other => {
                out.bounced.push(bounce(format!(
                    "airmail reaches agents only; {other} has no inbox on this hub"
                )));
                continue;
            }
        };
        if mirror.note(id.clone()) {
            out.to_mirror.push(InboxEntry::Letter(Box::new(carried)));
        }
        if !held(&mut chains, &mut read, Chain::Inbox(agent.clone()))?.note(id.clone()) {
            out.already.push(id.to_string());
            continue;
        }
        let inbox = out.to_inbox.entry(agent).or_default();
        inbox.push(InboxEntry::Letter(Box::new(local)));
        out.delivered.push(id.to_string());
    }
    Ok(out)
}

/// What `chain` holds, asked of `read` the first time only.
fn held<'a, E>(
    chains: &'a mut HashMap<Chain, Held>,
    read: &mut impl FnMut(&Chain) -> Result<Held, E>,
    chain: Chain,
) -> Result<&'a mut Held, E> {
    Ok(match chains.entry(chain) {
        Entry::Occupied(held) => held.into_mut(),
        Entry::Vacant(slot) => {
            let held = read(slot.key())?;
            slot.insert(held)
        }
    })
}

/// A commit message for carried `entries`: the one entry's id, or how many letters and
/// receipts, then `how`.
pub fn carried_summary(entries: &[InboxEntry], how: &str) -> String {
    match entries {
        [InboxEntry::Letter(letter)] => format!("airmail {} {how}", letter.id),
        [InboxEntry::Receipt(receipt)] => format!("receipt for {} {how}", receipt.letter),
        _ => {
            let letters = entries.iter().filter_map(InboxEntry::letter).count();
            format!(
                "airmail: {letters} letters and {} receipts {how}",
                entries.len() - letters
            )
        }
    }
}
