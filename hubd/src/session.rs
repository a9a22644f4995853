//! Session capabilities: unguessable tokens, each bound to one entity and one [`Duty`].
//!
//! hubd mints a capability when a holder of the hub secret opens a session, and looks it up on
//! every later request. Capabilities live only in this process's memory: when hubd restarts,
//! every session ends and its holder opens a new one (the secret is still on disk).
//!
//! A sequencer's session is bound to its agent's incarnation: retiring or collecting the agent
//! revokes every session opened for it ([`Sessions::revoke`]), and a session can only be opened
//! for a live agent, so a name spawned again is a new incarnation its old sessions never reach.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use l3m_core::duty::Duty;
use l3m_core::names::{AgentName, Entity};

/// 32 random bytes from the OS, as 64 lowercase hex digits.
pub fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether two secrets are equal, in time independent of where they differ.
pub fn secrets_match(given: &str, actual: &str) -> bool {
    let (a, b) = (given.as_bytes(), actual.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whom a duty acts as: the agent of a sequencer, the human, the postman's service.
pub fn entity_of(duty: &Duty) -> Entity {
    match duty {
        Duty::Sequencer { agent } => Entity::Agent(agent.clone()),
        Duty::Human { human } => Entity::Human(human.clone()),
        Duty::Postman { service } => Entity::Service(service.clone()),
    }
}

/// The live sessions of this hubd process, and the revoked ones (kept so a revoked capability
/// is told so, not taken for a forgery).
#[derive(Default)]
pub struct Sessions {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    live: HashMap<String, Duty>,
    revoked: HashSet<String>,
}

/// Why a capability does not open a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// hubd never minted it (forged, or from before a restart).
    Unknown,
    /// Its agent retired or was collected.
    Revoked,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// Mints a capability for `duty`.
    pub fn open(&self, duty: Duty) -> Result<String, getrandom::Error> {
        let capability = random_hex()?;
        self.table().live.insert(capability.clone(), duty);
        Ok(capability)
    }

    /// The duty a capability is bound to, or why it has none.
    pub fn duty(&self, capability: &str) -> Result<Duty, Closed> {
        let table = self.table();
        match table.live.get(capability) {
            Some(duty) => Ok(duty.clone()),
            None if table.revoked.contains(capability) => Err(Closed::Revoked),
            None => Err(Closed::Unknown),
        }
    }

    /// Revokes every sequencer session of `agents`; returns how many.
    pub fn revoke(&self, agents: &[AgentName]) -> usize {
        let mut table = self.table();
        let gone: Vec<String> = table
            .live
            .iter()
            .filter(|(_, duty)| matches!(duty, Duty::Sequencer { agent } if agents.contains(agent)))
            .map(|(capability, _)| capability.clone())
            .collect();
        for capability in &gone {
            table.live.remove(capability);
            table.revoked.insert(capability.clone());
        }
        gone.len()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding this lock cannot leave the table half-updated (a revoke moves
        // each capability with no step that can panic in between), so a poisoned lock is
        // still sound to use.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_are_64_hex_digits_and_distinct() {
        let sessions = Sessions::default();
        let duty = Duty::Human {
            human: l3m_core::names::HumanName::parse("alice").unwrap(),
        };
        let a = sessions.open(duty.clone()).unwrap();
        let b = sessions.open(duty.clone()).unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(sessions.duty(&a), Ok(duty));
        assert_eq!(sessions.duty(&"0".repeat(64)), Err(Closed::Unknown));
    }

    #[test]
    fn revoking_an_agent_closes_only_its_sequencer_sessions() {
        let sessions = Sessions::default();
        let bob = AgentName::parse("bob").unwrap();
        let seq = |a: &str| Duty::Sequencer {
            agent: AgentName::parse(a).unwrap(),
        };
        let (b, c) = (
            sessions.open(seq("bob")).unwrap(),
            sessions.open(seq("carol")).unwrap(),
        );
        assert_eq!(sessions.revoke(std::slice::from_ref(&bob)), 1);
        assert_eq!(sessions.duty(&b), Err(Closed::Revoked));
        assert_eq!(sessions.duty(&c), Ok(seq("carol")));
        let again = sessions.open(seq("bob")).unwrap();
        assert_eq!(
            sessions.duty(&again),
            Ok(seq("bob")),
            "a new session of a new incarnation"
        );
        assert_eq!(sessions.duty(&b), Err(Closed::Revoked));
    }

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(secrets_match("abc", "abc"));
        assert!(!secrets_match("abd", "abc"));
        assert!(!secrets_match("ab", "abc"));
    }
}
