//! Addresses: whom a letter is for, and which one party must handle it.
//!
//! # Format
//! Long form: space-separated `key:value` tokens, in any order, each key at most once. The keys
//! are `office` (another hub), `worktree`, `agent`, `branch`, `repo` and `human`. Exactly one
//! token ends in `*`: the starred party, which must handle the letter; the others are hints.
//! Only an agent or a human may carry the star, because only they are readers the machine can
//! vouch for. Short form: a bare agent path, `alice/main/worker`, means
//! `agent:alice/main/worker*`.
//!
//! The canonical long form ([`Address::render`]) lists the parties in the order office,
//! worktree, agent, branch, repo, human, so each address has exactly one canonical spelling.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::TokenFault;
use super::party::{Parties, Party, PlaceName, Star};
use crate::names::{AgentName, Entity, HumanName, NameError, OfficeName};

/// Why an address could not be read or was refused. Each variant names the bad token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Nothing but whitespace was given.
    #[error("an address cannot be empty: write an agent path or `key:value` tokens")]
    Empty,
    /// A token in a long-form address had no `key:`.
    #[error(
        "token {token:?} has no key: write `agent:{token}` for an agent, or `key:value` with a key among office, worktree, agent, branch, repo, human"
    )]
    NoKey {
        /// The token as given.
        token: String,
    },
    /// A token's key is not one of the six parties.
    #[error(
        "token {token:?} has unknown key {key:?}: use office, worktree, agent, branch, repo or human"
    )]
    UnknownKey {
        /// The token as given.
        token: String,
        /// Its key.
        key: String,
    },
    /// The same party was named twice.
    #[error("the {party} party is named twice, by {first:?} and {second:?}; keep one")]
    DuplicateKey {
        /// The party named twice.
        party: Party,
        /// The first token naming it.
        first: String,
        /// The second token naming it.
        second: String,
    },
    /// No party carries the star.
    #[error(
        "no party is starred in {address:?}: add `*` after the agent or human who must handle it"
    )]
    NoStar {
        /// The address as given.
        address: String,
    },
    /// More than one party carries the star.
    #[error("both {first:?} and {second:?} are starred: exactly one party must handle a letter")]
    TwoStars {
        /// The first starred token.
        first: String,
        /// The second starred token.
        second: String,
    },
    /// The starred party has no value (`human:*`, or [`Address::new`] with that party unset).
    #[error(
        "the star is on the {party} party, which is empty: name the {party} or star another party"
    )]
    StarOnEmpty {
        /// The starred, empty party.
        party: Party,
    },
    /// An unstarred party was written with no value (`branch:`).
    #[error("token {token:?} has no value: name the party or leave the token out")]
    EmptyValue {
        /// The token as given.
        token: String,
    },
    /// An agent, human or office name broke the naming rules.
    #[error("token {token:?} does not name a valid {party}: {source}")]
    BadName {
        /// The token as given.
        token: String,
        /// Which party it was meant to name.
        party: Party,
        /// What the name rules said.
        source: NameError,
    },
    /// A worktree, branch or repository name broke the place rules.
    #[error("token {token:?} does not name a valid place: {fault} (no whitespace, control or `*`)")]
    BadPlace {
        /// The token (or bare value) as given.
        token: String,
        /// The rule it broke.
        fault: TokenFault,
    },
    /// The star is on a worktree, branch or repository, which are hints and cannot read.
    #[error(
        "{token:?} is starred, but a {party} is a hint and cannot read mail: star the agent or human who must handle it"
    )]
    StarOnHint {
        /// The starred token.
        token: String,
        /// The hint party it is on.
        party: Party,
    },
    /// The star is on the office, which is a route, not a reader.
    #[error(
        "{token:?} is starred, but an office is a route, not a reader: star the agent or human there"
    )]
    StarOnOffice {
        /// The starred token.
        token: String,
    },
    /// The starred agent or human is not one the machine can vouch for.
    #[error(
        "{entity} is starred in {address:?}, but the machine cannot vouch for it: no such agent in the ledger or registered human"
    )]
    Unvouched {
        /// The starred entity.
        entity: Entity,
        /// The address, in canonical long form.
        address: String,
    },
}

/// The starred reader together with the other reader-kind party, so the star can never sit on
/// an empty party.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Reader {
    Agent {
        agent: AgentName,
        human: Option<HumanName>,
    },
    Human {
        human: HumanName,
        agent: Option<AgentName>,
    },
}

/// A validated address: up to five parties plus an optional office, exactly one agent or human
/// starred. See the module docs for the written forms.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Address {
    office: Option<OfficeName>,
    worktree: Option<PlaceName>,
    branch: Option<PlaceName>,
    repository: Option<PlaceName>,
    reader: Reader,
}

impl Address {
    /// Builds an address from its parties, starring `star`; refused if that party is unset.
    pub fn new(parties: Parties, star: Star) -> Result<Self, AddressError> {
        let Parties {
            office,
            worktree,
            agent,
            branch,
            repository,
            human,
        } = parties;
        let empty = AddressError::StarOnEmpty {
            party: star.party(),
        };
        let reader = match star {
            Star::Agent => Reader::Agent {
                agent: agent.ok_or(empty)?,
                human,
            },
            Star::Human => Reader::Human {
                human: human.ok_or(empty)?,
                agent,
            },
        };
        Ok(Self {
            office,
            worktree,
            branch,
            repository,
            reader,
        })
    }

    /// The address of an agent alone: what the short form `alice/main/worker` means.
    pub fn for_agent(agent: AgentName) -> Self {
        Self::starring(Reader::Agent { agent, human: None })
    }

    /// The address of a human alone: `human:NAME*`.
    pub fn for_human(human: HumanName) -> Self {
        Self::starring(Reader::Human { human, agent: None })
    }

    fn starring(reader: Reader) -> Self {
        Self::with_reader(reader, None, None, None)
    }

    /// An address on this hub whose reader is already known present: the stamping path, which
    /// therefore cannot meet [`AddressError::StarOnEmpty`].
    pub(super) fn with_reader(
        reader: Reader,
        worktree: Option<PlaceName>,
        branch: Option<PlaceName>,
        repository: Option<PlaceName>,
    ) -> Self {
        Self {
            office: None,
            worktree,
            branch,
            repository,
            reader,
        }
    }

    /// Parses the long or the short form; the error names the first bad token.
    pub fn parse(s: &str) -> Result<Self, AddressError> {
        let tokens: Vec<&str> = s.split_whitespace().collect();
        match tokens.as_slice() {
            [] => Err(AddressError::Empty),
            [only] if !only.contains(':') => {
                AgentName::parse(only)
                    .map(Self::for_agent)
                    .map_err(|source| AddressError::BadName {
                        token: (*only).to_owned(),
                        party: Party::Agent,
                        source,
                    })
            }
            _ => Self::parse_long(s, &tokens),
        }
    }

    fn parse_long(address: &str, tokens: &[&str]) -> Result<Self, AddressError> {
        let mut parties = Parties::default();
        let mut seen: BTreeMap<Party, &str> = BTreeMap::new();
        let mut star: Option<(Star, &str)> = None;
        for &token in tokens {
            let (key, rest) = token.split_once(':').ok_or_else(|| AddressError::NoKey {
                token: token.to_owned(),
            })?;
            let party = Party::from_key(key).ok_or_else(|| AddressError::UnknownKey {
                token: token.to_owned(),
                key: key.to_owned(),
            })?;
            if let Some(first) = seen.insert(party, token) {
                return Err(AddressError::DuplicateKey {
                    party,
                    first: first.to_owned(),
                    second: token.to_owned(),
                });
            }
            let (value, starred) = match rest.strip_suffix('*') {
                Some(value) => (value, true),
                None => (rest, false),
            };
            if value.is_empty() {
                return Err(if starred {
                    AddressError::StarOnEmpty { party }
                } else {
                    AddressError::EmptyValue {
                        token: token.to_owned(),
                    }
                });
            }
            if starred {
                let this = star_on(party, token)?;
                if let Some((_, first)) = star {
                    return Err(AddressError::TwoStars {
                        first: first.to_owned(),
                        second: token.to_owned(),
                    });
                }
                star = Some((this, token));
            }
            set_party(&mut parties, party, value, token)?;
        }
        let (star, _) = star.ok_or_else(|| AddressError::NoStar {
            address: address.to_owned(),
        })?;
        Self::new(parties, star)
    }

    /// The canonical long form: every named party, in canonical order, the reader starred.
    pub fn render(&self) -> String {
        let star = self.star().party();
        let mut out = String::new();
        for party in Party::ALL {
            if let Some(value) = self.value_of(party) {
                if !out.is_empty() {
                    out.push(' ');
                }
                out.push_str(party.key());
                out.push(':');
                out.push_str(value);
                if party == star {
                    out.push('*');
                }
            }
        }
        out
    }

    /// The short form (the bare agent path) when the address is a lone starred agent, otherwise
    /// the canonical long form; either parses back to `self`.
    pub fn render_short(&self) -> String {
        match &self.reader {
            Reader::Agent { agent, human: None } if *self == Self::for_agent(agent.clone()) => {
                agent.to_string()
            }
            _ => self.render(),
        }
    }

    fn value_of(&self, party: Party) -> Option<&str> {
        match party {
            Party::Office => self.office.as_ref().map(OfficeName::as_str),
            Party::Worktree => self.worktree.as_ref().map(PlaceName::as_str),
            Party::Agent => self.agent().map(AgentName::as_str),
            Party::Branch => self.branch.as_ref().map(PlaceName::as_str),
            Party::Repository => self.repository.as_ref().map(PlaceName::as_str),
            Party::Human => self.human().map(HumanName::as_str),
        }
    }

    /// Which party carries the star.
    pub fn star(&self) -> Star {
        match self.reader {
            Reader::Agent { .. } => Star::Agent,
            Reader::Human { .. } => Star::Human,
        }
    }

    /// The starred party as an entity, and the office it lives at (`None` for this hub).
    pub fn recipient(&self) -> (Entity, Option<&OfficeName>) {
        let entity = match &self.reader {
            Reader::Agent { agent, .. } => Entity::Agent(agent.clone()),
            Reader::Human { human, .. } => Entity::Human(human.clone()),
        };
        (entity, self.office.as_ref())
    }

    /// Admits the star only if `vouch` knows the starred reader (an agent in the ledger, a
    /// registered human). For an address with an office, `vouch` should consult that office's
    /// mirrored ledger; [`Address::office`] says which. Stars on hints never get this far: the
    /// type cannot hold them, and [`Address::parse`] refuses them with
    /// [`AddressError::StarOnHint`].
    pub fn check_star(&self, vouch: impl Fn(&Entity) -> bool) -> Result<(), AddressError> {
        let (entity, _) = self.recipient();
        if vouch(&entity) {
            Ok(())
        } else {
            Err(AddressError::Unvouched {
                entity,
                address: self.render(),
            })
        }
    }

    /// Every party, unstarred: the way to edit an address and rebuild it with [`Address::new`].
    pub fn parties(&self) -> Parties {
        Parties {
            office: self.office.clone(),
            worktree: self.worktree.clone(),
            agent: self.agent().cloned(),
            branch: self.branch.clone(),
            repository: self.repository.clone(),
            human: self.human().cloned(),
        }
    }

    /// The office (another hub), if the letter must leave this one.
    pub fn office(&self) -> Option<&OfficeName> {
        self.office.as_ref()
    }

    /// The worktree party, if named.
    pub fn worktree(&self) -> Option<&PlaceName> {
        self.worktree.as_ref()
    }

    /// The agent party, starred or not.
    pub fn agent(&self) -> Option<&AgentName> {
        match &self.reader {
            Reader::Agent { agent, .. } => Some(agent),
            Reader::Human { agent, .. } => agent.as_ref(),
        }
    }

    /// The agent party when the address is on this hub (names no office): the agent a letter
    /// `from` it was written by here.
    pub fn local_agent(&self) -> Option<&AgentName> {
        self.office.is_none().then(|| self.agent()).flatten()
    }

    /// The branch hint, if named.
    pub fn branch(&self) -> Option<&PlaceName> {
        self.branch.as_ref()
    }

    /// The repository hint, if named.
    pub fn repository(&self) -> Option<&PlaceName> {
        self.repository.as_ref()
    }

    /// The human party, starred or not.
    pub fn human(&self) -> Option<&HumanName> {
        match &self.reader {
            Reader::Agent { human, .. } => human.as_ref(),
            Reader::Human { human, .. } => Some(human),
        }
    }
}

/// The star for `party`, or the refusal for starring a hint or the office.
fn star_on(party: Party, token: &str) -> Result<Star, AddressError> {
    match party {
        Party::Agent => Ok(Star::Agent),
        Party::Human => Ok(Star::Human),
        Party::Office => Err(AddressError::StarOnOffice {
            token: token.to_owned(),
        }),
        Party::Worktree | Party::Branch | Party::Repository => Err(AddressError::StarOnHint {
            token: token.to_owned(),
            party,
        }),
    }
}

/// Validates `value` as `party` and records it; errors name `token`.
fn set_party(
    parties: &mut Parties,
    party: Party,
    value: &str,
    token: &str,
) -> Result<(), AddressError> {
    let bad_name = |source| AddressError::BadName {
        token: token.to_owned(),
        party,
        source,
    };
    let place = || PlaceName::parse_in(value, token);
    match party {
        Party::Office => parties.office = Some(OfficeName::parse(value).map_err(bad_name)?),
        Party::Agent => parties.agent = Some(AgentName::parse(value).map_err(bad_name)?),
        Party::Human => parties.human = Some(HumanName::parse(value).map_err(bad_name)?),
        Party::Worktree => parties.worktree = Some(place()?),
        Party::Branch => parties.branch = Some(place()?),
        Party::Repository => parties.repository = Some(place()?),
    }
    Ok(())
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

impl std::str::FromStr for Address {
    type Err = AddressError;
    fn from_str(s: &str) -> Result<Self, AddressError> {
        Self::parse(s)
    }
}

impl TryFrom<String> for Address {
    type Error = AddressError;
    fn try_from(s: String) -> Result<Self, AddressError> {
        Self::parse(&s)
    }
}

impl From<Address> for String {
    fn from(a: Address) -> String {
        a.render()
    }
}
