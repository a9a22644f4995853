//! Session capabilities: unguessable tokens, each bound to one entity and one [`Duty`].
//!
//! hubd mints a capability when a holder of the hub secret opens a session, and looks it up on
//! every later request. Capabilities live only in this process's memory: when hubd restarts,
//! every session ends and its holder opens a new one (the secret is still on disk).

use std::collections::HashMap;
use std::sync::Mutex;

use l3m_core::duty::Duty;
use l3m_core::names::Entity;

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

/// The live sessions of this hubd process.
#[derive(Default)]
pub struct Sessions {
    by_capability: Mutex<HashMap<String, Duty>>,
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
        self.table().insert(capability.clone(), duty);
        Ok(capability)
    }

    /// The duty a capability is bound to; `None` for one hubd never minted.
    pub fn duty(&self, capability: &str) -> Option<Duty> {
        self.table().get(capability).cloned()
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Duty>> {
        // A panic while holding this lock cannot leave the map half-updated (each operation is
        // one insert or get), so a poisoned lock is still sound to use.
        self.by_capability
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
        assert_eq!(sessions.duty(&a), Some(duty));
        assert_eq!(sessions.duty(&"0".repeat(64)), None);
    }

    #[test]
    fn secrets_match_only_when_equal() {
        assert!(secrets_match("abc", "abc"));
        assert!(!secrets_match("abd", "abc"));
        assert!(!secrets_match("ab", "abc"));
    }
}
