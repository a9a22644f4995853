//! Stamping: the host turns a sender's draft into a letter.
//!
//! The send tool has no `from`. The sender may *assert* parts of its own address (its
//! [`Draft::claims`]); the machine refutes what it knows: it overwrites the fields it owns (the
//! worktree and the agent) with the true sender's, refuses a human or an office it knows to be
//! wrong, and passes the branch and repository through as the hints they are.

use super::address::{Address, Reader};
use super::letter::{Letter, LetterId};
use super::party::{Parties, PlaceName};
use crate::names::{AgentName, HumanName, OfficeName};

/// Why the host refused to stamp a draft.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StampError {
    /// The draft claims a human other than the one the machine knows is sending.
    #[error(
        "the draft claims to be from human:{claimed}, but this session's human is human:{known}; drop the human claim and the host fills in human:{known}"
    )]
    WrongHuman {
        /// The human the draft claimed.
        claimed: HumanName,
        /// The human the machine knows.
        known: HumanName,
    },
    /// The draft claims to come from another hub; a letter stamped here comes from here.
    #[error(
        "the draft claims to be from office:{office}, but it is stamped on this hub; drop the office claim"
    )]
    OfficeClaimed {
        /// The office the draft claimed.
        office: OfficeName,
    },
}

/// Who is truly sending, as the host knows it (from the session, not from the draft).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sender {
    /// An agent's session.
    Agent {
        /// The agent whose session sends.
        agent: AgentName,
        /// The worktree the session runs in, if the host tracks one.
        worktree: Option<PlaceName>,
        /// The human the session acts for, if the host knows it.
        human: Option<HumanName>,
    },
    /// A human at the command line.
    Human {
        /// The registered human sending.
        human: HumanName,
        /// The worktree the human sends from, if the host knows it.
        worktree: Option<PlaceName>,
    },
}

/// A letter before the host stamps it: everything the sender chooses, and no `from`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// The recipient.
    pub to: Address,
    /// What the sender asserts about its own address; the host refutes what it knows.
    pub claims: Parties,
    /// An optional subject for the human.
    pub subject: Option<String>,
    /// An optional one-line summary for the human.
    pub summary: Option<String>,
    /// The letter this one answers.
    pub in_reply_to: Option<LetterId>,
    /// The text.
    pub body: String,
}

impl Draft {
    /// A plain draft: a recipient and a body, no claims, subject, summary or reply.
    pub fn new(to: Address, body: impl Into<String>) -> Self {
        Self {
            to,
            claims: Parties::default(),
            subject: None,
            summary: None,
            in_reply_to: None,
            body: body.into(),
        }
    }
}

/// Stamps `draft` with the host's `id`, time and true `sender`.
///
/// The stamped `from` stars the sender (its agent, or the human for a human sender); its
/// worktree and agent are the sender's whatever the draft claimed; its human is the one the
/// machine knows (a different claimed one is refused), or the claim when the machine knows none;
/// its branch and repository are the draft's claims, passed through as hints.
pub fn stamp(
    draft: Draft,
    sender: &Sender,
    id: LetterId,
    at_ms: u64,
) -> Result<Letter, StampError> {
    let Draft {
        to,
        claims,
        subject,
        summary,
        in_reply_to,
        body,
    } = draft;
    if let Some(office) = claims.office {
        return Err(StampError::OfficeClaimed { office });
    }
    let (reader, worktree) = match sender {
        Sender::Agent {
            agent,
            worktree,
            human,
        } => (
            Reader::Agent {
                agent: agent.clone(),
                human: refute_human(claims.human, human.as_ref())?,
            },
            worktree,
        ),
        Sender::Human { human, worktree } => {
            refute_human(claims.human, Some(human))?;
            (
                Reader::Human {
                    human: human.clone(),
                    agent: None,
                },
                worktree,
            )
        }
    };
    Ok(Letter {
        id,
        at_ms,
        from: Address::with_reader(reader, worktree.clone(), claims.branch, claims.repository),
        to,
        subject,
        summary,
        in_reply_to,
        body,
    })
}

/// The human for the stamped `from`: the one the machine knows, refusing a different claim; or
/// the claim, passed through, when the machine knows none.
fn refute_human(
    claimed: Option<HumanName>,
    known: Option<&HumanName>,
) -> Result<Option<HumanName>, StampError> {
    match (claimed, known) {
        (Some(claimed), Some(known)) if claimed != *known => Err(StampError::WrongHuman {
            claimed,
            known: known.clone(),
        }),
        (_, Some(known)) => Ok(Some(known.clone())),
        (claimed, None) => Ok(claimed),
    }
}
