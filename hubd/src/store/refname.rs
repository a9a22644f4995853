//! Which refs the store may touch, and whether each is a commit chain or a plain ref. Pure.
//!
//! The hub's ref layout (DESIGN §3) decides the kind: the ledger, the credentials, and an agent's Log, inbox,
//! outbox, undo chain and cards are append-only chains; everything else (settings, personas,
//! blessings, mirrors, grants, claims, persona branches, work branches) is a plain ref whose
//! commits hold whole trees. A refname outside that layout is refused.

use std::fmt;

use l3m_core::refs::{
    AGENTS_PREFIX, AgentRef, BLESSINGS_PREFIX, CREDENTIALS, LEDGER, MIRROR_PREFIX, PERSONAS_PREFIX,
    SETTINGS, WORK_PREFIX, parse_agent_ref,
};

use super::StoreError;

/// How the store writes a ref.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefKind {
    /// An append-only commit chain: each commit carries only its new JSON lines.
    Chain,
    /// A ref moved by plain compare-and-swap, usually to commits holding whole trees.
    Plain,
}

impl fmt::Display for RefKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefKind::Chain => "chain",
            RefKind::Plain => "plain",
        })
    }
}

/// The agent refs that are chains.
fn agent_ref_is_chain(which: AgentRef) -> bool {
    match which {
        AgentRef::Log
        | AgentRef::Inbox
        | AgentRef::Outbox
        | AgentRef::Undo
        | AgentRef::Cards
        | AgentRef::Vigils => true,
        AgentRef::Grants | AgentRef::Claims | AgentRef::Persona => false,
    }
}

/// Checks that `refname` is a valid git refname inside the hub's layout and says how it is written.
pub fn classify(refname: &str) -> Result<RefKind, StoreError> {
    let bad = |reason: &str| StoreError::BadRefName {
        refname: refname.to_owned(),
        reason: reason.to_owned(),
    };
    if let Err(err) = gix::refs::FullName::try_from(refname) {
        return Err(bad(&format!("not a valid git refname ({err})")));
    }
    if refname == LEDGER || refname == CREDENTIALS {
        return Ok(RefKind::Chain);
    }
    if refname == SETTINGS {
        return Ok(RefKind::Plain);
    }
    // An office's inbound letters: `refs/l3m/mirror/<office>/inbound`.
    if let Some(office) = refname
        .strip_prefix(MIRROR_PREFIX)
        .and_then(|rest| rest.strip_suffix("/inbound"))
        && !office.is_empty()
        && !office.contains('/')
    {
        return Ok(RefKind::Chain);
    }
    if refname.starts_with(AGENTS_PREFIX) {
        return match parse_agent_ref(refname) {
            Some((_, which)) if agent_ref_is_chain(which) => Ok(RefKind::Chain),
            Some(_) => Ok(RefKind::Plain),
            None => Err(bad(
                "not one of an agent's refs (refs/l3m/a/<agent>/_/<grants|log|inbox|outbox|undo|claims|persona|cards>)",
            )),
        };
    }
    let plain_prefixes = [
        PERSONAS_PREFIX,
        BLESSINGS_PREFIX,
        MIRROR_PREFIX,
        WORK_PREFIX,
    ];
    if plain_prefixes
        .iter()
        .any(|prefix| refname.len() > prefix.len() && refname.starts_with(prefix))
    {
        return Ok(RefKind::Plain);
    }
    Err(bad(
        "outside the hub's ref layout (refs/l3m/{ledger,credentials,settings,personas/,a/,blessings/,mirror/} or refs/heads/l3m/)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_refs_have_their_kinds() {
        let cases = [
            ("refs/l3m/ledger", RefKind::Chain),
            ("refs/l3m/credentials", RefKind::Chain),
            ("refs/l3m/settings", RefKind::Plain),
            ("refs/l3m/a/alice/_/log", RefKind::Chain),
            ("refs/l3m/a/alice/main/_/inbox", RefKind::Chain),
            ("refs/l3m/a/alice/_/outbox", RefKind::Chain),
            ("refs/l3m/a/alice/_/undo", RefKind::Chain),
            ("refs/l3m/a/alice/_/cards", RefKind::Chain),
            ("refs/l3m/a/alice/_/grants", RefKind::Plain),
            ("refs/l3m/a/alice/_/claims", RefKind::Plain),
            ("refs/l3m/a/alice/_/persona", RefKind::Plain),
            ("refs/l3m/personas/coder", RefKind::Plain),
            ("refs/l3m/blessings/alice/_/build", RefKind::Plain),
            ("refs/l3m/mirror/paris/alice/_/outbox", RefKind::Plain),
            ("refs/l3m/mirror/paris/inbound", RefKind::Chain),
            ("refs/heads/l3m/alice/_/work", RefKind::Plain),
        ];
        for (refname, kind) in cases {
            assert_eq!(classify(refname).unwrap(), kind, "{refname}");
        }
    }

    #[test]
    fn refs_outside_the_layout_are_refused() {
        for refname in [
            "refs/heads/main",
            "refs/l3m/other",
            "refs/l3m/personas/",
            "refs/l3m/a/alice/_/secrets",
            "refs/l3m/a/Alice/_/log",
            "refs/l3m/a/alice/log",
            "refs/l3m/a/alice/_/log.lock",
            "refs/l3m/a/alice/_/lo g",
            "refs/l3m/a/alice/_/log/",
            "HEAD",
            "",
        ] {
            assert!(
                matches!(classify(refname), Err(StoreError::BadRefName { .. })),
                "{refname:?} was accepted"
            );
        }
    }
}
