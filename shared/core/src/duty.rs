//! Duty, not trust: which holder of a session capability may change which ref.
//!
//! hubd mints every session capability for one entity and one [`Duty`], and before it changes a
//! ref it asks [`may_write`]. The table here is the coarse fence: it says which *kind* of party may
//! touch a ref at all (only an agent's sequencer appends its Log; nobody writes a grant directly —
//! the regrant gate does, for the issuer; no agent writes personas, blessings or settings). The
//! fine checks — a grant's git prefixes, its mail axis, the spawn gate — run on top of it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::{AgentName, HumanName, ServiceName};
use crate::refs::{self, AgentRef};

/// The one job a session capability is good for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "duty", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Duty {
    /// Advancing one agent: the single writer of its Log.
    Sequencer {
        /// The agent advanced.
        agent: AgentName,
    },
    /// A human at the CLI.
    Human {
        /// Who.
        human: HumanName,
    },
    /// The hub's postmaster, carrying airmail.
    Postman {
        /// The service identity holding the postman axis.
        service: ServiceName,
    },
    /// A sequencer host's waker: sees which agents of its subtree have work, and starts their
    /// sequencers. It writes nothing itself.
    Host {
        /// The subtree's root; `None` for every agent of the hub.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subtree: Option<AgentName>,
    },
}

impl fmt::Display for Duty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Duty::Sequencer { agent } => write!(f, "sequencer of {agent}"),
            Duty::Human { human } => write!(f, "human:{human}"),
            Duty::Postman { service } => write!(f, "postman svc:{service}"),
            Duty::Host { subtree: None } => f.write_str("host of every agent"),
            Duty::Host {
                subtree: Some(root),
            } => write!(f, "host of {root} and below"),
        }
    }
}

/// How a ref is to be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefWrite {
    /// Add a commit to a chain whose tip is the expected one.
    Append,
    /// Point the ref at a new commit (compare-and-swap).
    Set,
    /// Remove the ref.
    Delete,
}

impl fmt::Display for RefWrite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefWrite::Append => "append to",
            RefWrite::Set => "set",
            RefWrite::Delete => "delete",
        })
    }
}

/// A ref write the duty table refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DutyError {
    /// The duty does not cover this ref.
    #[error("{duty} may not {how} {refname}: {reason}")]
    Refused {
        /// The duty that asked, as text.
        duty: String,
        /// How it asked to change the ref.
        how: RefWrite,
        /// The ref.
        refname: String,
        /// Why, and what to do instead.
        reason: &'static str,
    },
    /// The ref is not part of the hub's layout at all.
    #[error("{refname} is not a ref l3m knows; hub refs live under refs/l3m/ and refs/heads/l3m/")]
    UnknownRef {
        /// The ref.
        refname: String,
    },
}

/// The kinds of ref the table distinguishes.
enum RefKind {
    Ledger,
    Settings,
    Persona,
    Blessing,
    Mirror,
    Agent(AgentName, AgentRef),
    Branch(AgentName),
}

fn classify(refname: &str) -> Option<RefKind> {
    if refname == refs::LEDGER {
        return Some(RefKind::Ledger);
    }
    if refname == refs::SETTINGS {
        return Some(RefKind::Settings);
    }
    if let Some((agent, which)) = refs::parse_agent_ref(refname) {
        return Some(RefKind::Agent(agent, which));
    }
    if let Some(rest) = refname.strip_prefix(refs::WORK_PREFIX) {
        // An agent's branches are `refs/heads/l3m/<agent>/_/<branch>`: the `_` segment makes the
        // owner unambiguous, since no agent segment can start with `_`.
        let (owner, branch) = rest.split_once("/_/")?;
        if branch.is_empty() {
            return None;
        }
        return AgentName::parse(owner).ok().map(RefKind::Branch);
    }
    let under = |prefix: &str| {
        refname
            .strip_prefix(prefix)
            .is_some_and(|rest| !rest.is_empty())
    };
    if under(refs::PERSONAS_PREFIX) {
        Some(RefKind::Persona)
    } else if under(refs::BLESSINGS_PREFIX) {
        Some(RefKind::Blessing)
    } else if under(refs::MIRROR_PREFIX) {
        Some(RefKind::Mirror)
    } else {
        None
    }
}

/// Decides whether `duty` may change `refname` in the way `how`.
pub fn may_write(duty: &Duty, refname: &str, how: RefWrite) -> Result<(), DutyError> {
    let kind = classify(refname).ok_or_else(|| DutyError::UnknownRef {
        refname: refname.to_owned(),
    })?;
    let refuse = |reason: &'static str| DutyError::Refused {
        duty: duty.to_string(),
        how,
        refname: refname.to_owned(),
        reason,
    };
    let own = |agent: &AgentName| matches!(duty, Duty::Sequencer { agent: a } if a == agent);
    let human = matches!(duty, Duty::Human { .. });
    let postman = matches!(duty, Duty::Postman { .. });
    match kind {
        RefKind::Ledger => Err(refuse(
            "the ledger is appended only by hubd's own gates; send a spawn, retire, collect or regrant request",
        )),
        RefKind::Settings | RefKind::Persona | RefKind::Blessing if human => Ok(()),
        RefKind::Settings => Err(refuse("settings are written by humans only")),
        RefKind::Persona => Err(refuse(
            "upstream personas are published by humans only; edit your own persona branch instead",
        )),
        RefKind::Blessing => Err(refuse("blessings are pinned by humans only (l3m bless)")),
        RefKind::Mirror if postman && how != RefWrite::Delete => Ok(()),
        RefKind::Mirror => Err(refuse("office mirrors are written by the postman only")),
        RefKind::Agent(_, AgentRef::Grants) => Err(refuse(
            "a grant is written only by its issuer, through the regrant gate",
        )),
        RefKind::Agent(_, AgentRef::Claims) => {
            Err(refuse("claims change only through a claim request"))
        }
        RefKind::Agent(a, AgentRef::Log | AgentRef::Undo) if own(&a) && how == RefWrite::Append => {
            Ok(())
        }
        RefKind::Agent(_, AgentRef::Log) => Err(refuse(
            "a Log is appended only by its own agent's sequencer",
        )),
        RefKind::Agent(_, AgentRef::Undo) => Err(refuse(
            "an undo chain is appended only by its own agent's sequencer",
        )),
        RefKind::Agent(a, AgentRef::Inbox) if (own(&a) || postman) && how == RefWrite::Append => {
            Ok(())
        }
        RefKind::Agent(_, AgentRef::Inbox) => Err(refuse(
            "letters reach an inbox through a send request, checked against the sender's mail axis",
        )),
        RefKind::Agent(a, AgentRef::Outbox) if (own(&a) || postman) && how == RefWrite::Append => {
            Ok(())
        }
        RefKind::Agent(_, AgentRef::Outbox) => Err(refuse(
            "only the agent itself stages airmail on its outbox, and only the postman carries it",
        )),
        RefKind::Agent(a, AgentRef::Cards) if (own(&a) || human) && how == RefWrite::Append => {
            Ok(())
        }
        RefKind::Agent(_, AgentRef::Cards) => Err(refuse(
            "review cards are raised by the agent's sequencer and answered by a human",
        )),
        RefKind::Agent(_, AgentRef::Vigils) => Err(refuse(
            "vigils are armed and cancelled through hubd's vigil requests, and fired by hubd",
        )),
        RefKind::Agent(a, AgentRef::Persona) if (own(&a) || human) && how != RefWrite::Delete => {
            Ok(())
        }
        RefKind::Agent(_, AgentRef::Persona) => Err(refuse(
            "an agent's persona branch is edited by that agent, or pulled and published by a human",
        )),
        RefKind::Branch(owner) => match duty {
            Duty::Human { .. } => Ok(()),
            Duty::Sequencer { agent } if owner.is_within(agent) => Ok(()),
            _ => Err(refuse(
                "work branches are written by their agent (or an ancestor's) sequencer, within its git-write prefixes",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    fn seq(s: &str) -> Duty {
        Duty::Sequencer { agent: agent(s) }
    }

    #[test]
    fn agent_writes_its_own_log_only() {
        let me = agent("alice/main");
        let log = refs::agent_ref(&me, AgentRef::Log);
        assert_eq!(
            may_write(&seq("alice/main"), &log, RefWrite::Append),
            Ok(())
        );
        assert!(
            may_write(&seq("alice/main"), &log, RefWrite::Set).is_err(),
            "a Log is never reset"
        );
        assert!(
            may_write(&seq("alice/other"), &log, RefWrite::Append).is_err(),
            "sibling"
        );
        assert!(
            may_write(&seq("alice"), &log, RefWrite::Append).is_err(),
            "even the parent"
        );
        let human = Duty::Human {
            human: HumanName::parse("alice").unwrap(),
        };
        assert!(
            may_write(&human, &log, RefWrite::Append).is_err(),
            "even a human"
        );
    }

    #[test]
    fn nobody_writes_grants_directly_and_agents_never_write_human_refs() {
        let me = agent("alice/main");
        let err = may_write(
            &seq("alice/main"),
            &refs::agent_ref(&me, AgentRef::Grants),
            RefWrite::Set,
        )
        .unwrap_err();
        assert!(err.to_string().contains("regrant"), "{err}");
        for r in [
            refs::SETTINGS.to_owned(),
            refs::persona(&crate::names::PersonaName::parse("coder").unwrap()),
            refs::blessing(&me, "build"),
        ] {
            assert!(
                may_write(&seq("alice/main"), &r, RefWrite::Set).is_err(),
                "{r}"
            );
        }
        assert!(may_write(&seq("alice/main"), refs::LEDGER, RefWrite::Append).is_err());
    }

    #[test]
    fn branches_follow_the_name_tree() {
        let child_work = refs::work_branch(&agent("alice/main/worker"));
        assert_eq!(
            may_write(&seq("alice/main/worker"), &child_work, RefWrite::Set),
            Ok(())
        );
        assert_eq!(
            may_write(&seq("alice/main"), &child_work, RefWrite::Set),
            Ok(())
        );
        assert!(may_write(&seq("alice/main/other"), &child_work, RefWrite::Set).is_err());
        assert_eq!(
            may_write(
                &seq("alice/main"),
                "refs/heads/l3m/alice/main/_/feature",
                RefWrite::Set
            ),
            Ok(())
        );
        assert!(matches!(
            may_write(
                &seq("alice/main"),
                "refs/heads/l3m/alice/main/feature",
                RefWrite::Set
            ),
            Err(DutyError::UnknownRef { .. })
        ));
        assert!(matches!(
            may_write(&seq("alice"), "refs/heads/main", RefWrite::Set),
            Err(DutyError::UnknownRef { .. })
        ));
    }

    fn name() -> impl Strategy<Value = AgentName> {
        proptest::collection::vec("[a-c]", 1..4)
            .prop_map(|s| AgentName::parse(&s.join("/")).unwrap())
    }

    proptest! {
        /// `sequencer_writes_only_its_own_column`: a sequencer may change an agent ref only if the
        /// ref is its own agent's, and never its grants or claims.
        #[test]
        fn sequencer_writes_only_its_own_column(me in name(), other in name(), which in proptest::sample::select(AgentRef::ALL.to_vec())) {
            let r = refs::agent_ref(&other, which);
            for how in [RefWrite::Append, RefWrite::Set, RefWrite::Delete] {
                if may_write(&Duty::Sequencer { agent: me.clone() }, &r, how).is_ok() {
                    prop_assert_eq!(&me, &other);
                    prop_assert!(!matches!(which, AgentRef::Grants | AgentRef::Claims));
                }
            }
        }
    }
}
