//! The parties an address can name, and the place names three of them use.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::address::AddressError;
use super::check_token;
use super::line::is_line_unsafe;
use crate::names::{AgentName, HumanName, OfficeName};

/// Longest worktree, branch or repository name, in bytes; a Git ref name stays well inside it.
pub const MAX_PLACE_LEN: usize = 255;

/// One of the six parties an address can name, in canonical order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Party {
    /// Another hub, named in this hub's settings.
    Office,
    /// A worktree: a hint in a recipient, owned by the machine in a sender.
    Worktree,
    /// An agent: the persona that reads the letter.
    Agent,
    /// A branch (hint).
    Branch,
    /// A repository (hint), written `repo:`.
    Repository,
    /// A registered human.
    Human,
}

impl Party {
    /// Every party, in the canonical rendering order.
    pub const ALL: [Party; 6] = [
        Party::Office,
        Party::Worktree,
        Party::Agent,
        Party::Branch,
        Party::Repository,
        Party::Human,
    ];

    /// The key this party is written with.
    pub fn key(self) -> &'static str {
        match self {
            Self::Office => "office",
            Self::Worktree => "worktree",
            Self::Agent => "agent",
            Self::Branch => "branch",
            Self::Repository => "repo",
            Self::Human => "human",
        }
    }

    pub(super) fn from_key(key: &str) -> Option<Party> {
        Self::ALL.into_iter().find(|p| p.key() == key)
    }
}

impl fmt::Display for Party {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// The parties that may carry the star: the two kinds of reader the machine can vouch for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Star {
    /// The agent must handle the letter.
    Agent,
    /// The human must handle the letter.
    Human,
}

impl Star {
    /// The party this star sits on.
    pub fn party(self) -> Party {
        match self {
            Self::Agent => Party::Agent,
            Self::Human => Party::Human,
        }
    }
}

/// A worktree, branch or repository name: where work lives, never a reader.
///
/// One token of at most [`MAX_PLACE_LEN`] bytes with no whitespace, control, bidi-control or
/// `*` character, so it can sit in an address and in a one-line letter unchanged.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PlaceName(String);

impl PlaceName {
    /// Validates a place name; the error carries the name and the rule it broke.
    pub fn parse(s: &str) -> Result<Self, AddressError> {
        Self::parse_in(s, s)
    }

    /// Validates `value`, naming `token` (the address token it came from) in the error.
    pub(super) fn parse_in(value: &str, token: &str) -> Result<Self, AddressError> {
        check_token(value, MAX_PLACE_LEN, |c| {
            !(c.is_whitespace() || c == '*' || is_line_unsafe(c))
        })
        .map_err(|fault| AddressError::BadPlace {
            token: token.to_owned(),
            fault,
        })?;
        Ok(Self(value.to_owned()))
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

crate::string_form!(PlaceName, AddressError, display);

/// Every party an address may name, unstarred: the input to [`Address::new`](super::Address::new) and the sender's
/// claims in a [`Draft`](super::Draft).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Parties {
    /// Another hub the letter must travel to.
    pub office: Option<OfficeName>,
    /// The worktree the letter concerns.
    pub worktree: Option<PlaceName>,
    /// The agent (persona).
    pub agent: Option<AgentName>,
    /// The branch the letter concerns.
    pub branch: Option<PlaceName>,
    /// The repository the letter concerns.
    pub repository: Option<PlaceName>,
    /// The human.
    pub human: Option<HumanName>,
}
