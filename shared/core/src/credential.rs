//! Credentials: which process may open which sessions, as rows and their fold.
//!
//! A credential is an Ed25519 public key hubd knows under an id, with a [`Scope`] (the one kind
//! of process it is for), an expiry and who issued it. Its private half lives in one file only
//! its process reads; a session is opened by signing with it, so no secret crosses the bus.
//! The hub keeps every credential ever issued as rows of one chain (`refs/l3m/credentials`),
//! folded here into a [`Registry`] that answers one question: does credential `id` admit `duty`
//! now? Revoking is a row too, so `git log` of the chain is the audit of who could do what when.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::duty::Duty;
use crate::names::{AgentName, HumanName, ServiceName};

/// The one kind of process a credential is for, and how far it reaches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Scope {
    /// The CLI of one named human: opens that human's sessions only.
    Human {
        /// Who.
        human: HumanName,
    },
    /// A sequencer host: runs (and wakes) the agents of one subtree, or of the whole hub.
    Host {
        /// The subtree's root; `None` for every agent of the hub.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        subtree: Option<AgentName>,
    },
    /// The hub's postman, carrying airmail as one service.
    Postman {
        /// The service identity holding the postman axis.
        service: ServiceName,
    },
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::Human { human } => write!(f, "human:{human}"),
            Scope::Host { subtree: None } => f.write_str("host of every agent"),
            Scope::Host {
                subtree: Some(root),
            } => write!(f, "host of {root} and below"),
            Scope::Postman { service } => write!(f, "postman svc:{service}"),
        }
    }
}

impl Scope {
    /// Whether a session for `duty` is within this scope.
    pub fn admits(&self, duty: &Duty) -> bool {
        let within = |subtree: &Option<AgentName>, agent: &AgentName| {
            subtree.as_ref().is_none_or(|root| agent.is_within(root))
        };
        match (self, duty) {
            (Scope::Human { human }, Duty::Human { human: asked }) => human == asked,
            (Scope::Host { subtree }, Duty::Sequencer { agent }) => within(subtree, agent),
            (Scope::Host { subtree }, Duty::Host { subtree: asked }) => match asked {
                None => subtree.is_none(),
                Some(asked) => within(subtree, asked),
            },
            (Scope::Postman { service }, Duty::Postman { service: asked }) => service == asked,
            _ => false,
        }
    }
}

/// A credential's id: `c-` and 16 lowercase hex digits, chosen by the issuer at random.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CredentialId(String);

impl CredentialId {
    /// Parses an id, refusing anything but `c-` and 16 lowercase hex digits.
    pub fn parse(text: &str) -> Result<CredentialId, CredentialError> {
        let hex = text.strip_prefix("c-").unwrap_or("");
        if hex.len() == 16 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(CredentialId(text.to_owned()))
        } else {
            Err(CredentialError::BadId {
                input: text.chars().take(40).collect(),
            })
        }
    }

    /// The id made of 8 random bytes.
    pub fn from_random(bytes: [u8; 8]) -> CredentialId {
        CredentialId(format!(
            "c-{}",
            bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
        ))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for CredentialId {
    type Error = CredentialError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        CredentialId::parse(&text)
    }
}

impl From<CredentialId> for String {
    fn from(id: CredentialId) -> String {
        id.0
    }
}

impl fmt::Display for CredentialId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An Ed25519 public key: 32 bytes, written as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct PublicKey(pub [u8; 32]);

impl PublicKey {
    /// Parses 64 hex digits.
    pub fn parse(text: &str) -> Result<PublicKey, CredentialError> {
        let bad = || CredentialError::BadKey {
            input: text.chars().take(80).collect(),
        };
        // Bytes, not string slices: a multi-byte character must be refused, not split.
        let digits = text.as_bytes();
        if digits.len() != 64 {
            return Err(bad());
        }
        let nibble = |d: u8| char::from(d).to_digit(16).ok_or_else(bad);
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(digits.chunks_exact(2)) {
            *byte = u8::try_from(nibble(pair[0])? * 16 + nibble(pair[1])?).map_err(|_| bad())?;
        }
        Ok(PublicKey(key))
    }
}

impl TryFrom<String> for PublicKey {
    type Error = CredentialError;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        PublicKey::parse(&text)
    }
}

impl From<PublicKey> for String {
    fn from(key: PublicKey) -> String {
        key.to_string()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// One row of the credentials chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "row", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CredentialRow {
    /// A credential came to exist.
    Issue {
        /// Its id.
        id: CredentialId,
        /// What it may open.
        scope: Scope,
        /// The public half of its key.
        key: PublicKey,
        /// When it stops opening sessions (ms since the Unix epoch).
        expires_ms: u64,
        /// Who issued it: `init`, or `human:<name>`.
        by: String,
        /// A note for people reading `l3m credential ls` (where it is used).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        label: String,
        /// When it was issued.
        at_ms: u64,
    },
    /// A credential stopped opening sessions for good, and its sessions ended.
    Revoke {
        /// Which.
        id: CredentialId,
        /// Who revoked it.
        by: String,
        /// When.
        at_ms: u64,
    },
}

/// One credential as the fold knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// Its id.
    pub id: CredentialId,
    /// What it may open.
    pub scope: Scope,
    /// The public half of its key.
    pub key: PublicKey,
    /// When it stops opening sessions.
    pub expires_ms: u64,
    /// Who issued it.
    pub by: String,
    /// Where it is used, as its issuer said.
    pub label: String,
    /// When it was issued.
    pub at_ms: u64,
    /// When it was revoked, if it was.
    pub revoked_ms: Option<u64>,
}

/// Why a credential does not open a session, or a row does not apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialError {
    /// The id is not of the form hubd issues.
    #[error("`{input}` is not a credential id (`c-` and 16 hex digits)")]
    BadId {
        /// What was given (cut to 40 characters).
        input: String,
    },
    /// The key is not 64 hex digits.
    #[error("`{input}` is not an Ed25519 public key (64 hex digits)")]
    BadKey {
        /// What was given (cut to 80 characters).
        input: String,
    },
    /// No credential has this id.
    #[error("no credential {id} was issued on this hub")]
    Unknown {
        /// The id.
        id: CredentialId,
    },
    /// It was revoked.
    #[error("credential {id} was revoked; ask a human for a new one (l3m credential issue)")]
    Revoked {
        /// The id.
        id: CredentialId,
    },
    /// Its expiry passed.
    #[error(
        "credential {id} expired at {expires_ms} ms; ask a human for a new one (l3m credential issue)"
    )]
    Expired {
        /// The id.
        id: CredentialId,
        /// When it expired.
        expires_ms: u64,
    },
    /// It is for another kind of process, or another subtree, than the session asked for.
    #[error("credential {id} is for the {scope}; it cannot open a session for the {duty}")]
    OutOfScope {
        /// The id.
        id: CredentialId,
        /// What it is for.
        scope: Scope,
        /// What was asked, as text.
        duty: String,
    },
    /// An issue row reused an id.
    #[error("credential {id} was already issued")]
    Duplicate {
        /// The id.
        id: CredentialId,
    },
}

/// Every credential of a hub: the fold of its credentials chain.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registry {
    credentials: BTreeMap<CredentialId, Credential>,
}

impl Registry {
    /// Folds `rows` from an empty registry.
    pub fn replay(rows: &[CredentialRow]) -> Result<Registry, CredentialError> {
        let mut registry = Registry::default();
        for row in rows {
            registry.apply(row)?;
        }
        Ok(registry)
    }

    /// Applies one row, refusing a duplicate issue or a revoke of an unknown id. Revoking twice
    /// keeps the first time.
    pub fn apply(&mut self, row: &CredentialRow) -> Result<(), CredentialError> {
        match row {
            CredentialRow::Issue {
                id,
                scope,
                key,
                expires_ms,
                by,
                label,
                at_ms,
            } => {
                if self.credentials.contains_key(id) {
                    return Err(CredentialError::Duplicate { id: id.clone() });
                }
                self.credentials.insert(
                    id.clone(),
                    Credential {
                        id: id.clone(),
                        scope: scope.clone(),
                        key: *key,
                        expires_ms: *expires_ms,
                        by: by.clone(),
                        label: label.clone(),
                        at_ms: *at_ms,
                        revoked_ms: None,
                    },
                );
            }
            CredentialRow::Revoke { id, at_ms, .. } => {
                let credential = self
                    .credentials
                    .get_mut(id)
                    .ok_or_else(|| CredentialError::Unknown { id: id.clone() })?;
                credential.revoked_ms.get_or_insert(*at_ms);
            }
        }
        Ok(())
    }

    /// The credential `id` if it may open a session for `duty` at `now_ms`: known, not revoked,
    /// not expired, and its scope admits the duty.
    pub fn admit(
        &self,
        id: &CredentialId,
        duty: &Duty,
        now_ms: u64,
    ) -> Result<&Credential, CredentialError> {
        let credential = self.live(id, now_ms)?;
        if !credential.scope.admits(duty) {
            return Err(CredentialError::OutOfScope {
                id: id.clone(),
                scope: credential.scope.clone(),
                duty: duty.to_string(),
            });
        }
        Ok(credential)
    }

    /// The credential `id` if it is known, not revoked and not expired at `now_ms`.
    pub fn live(&self, id: &CredentialId, now_ms: u64) -> Result<&Credential, CredentialError> {
        let credential = self
            .credentials
            .get(id)
            .ok_or_else(|| CredentialError::Unknown { id: id.clone() })?;
        if credential.revoked_ms.is_some() {
            return Err(CredentialError::Revoked { id: id.clone() });
        }
        if now_ms >= credential.expires_ms {
            return Err(CredentialError::Expired {
                id: id.clone(),
                expires_ms: credential.expires_ms,
            });
        }
        Ok(credential)
    }

    /// The credential `id`, live or not.
    pub fn get(&self, id: &CredentialId) -> Option<&Credential> {
        self.credentials.get(id)
    }

    /// Every credential ever issued, by id.
    pub fn all(&self) -> impl Iterator<Item = &Credential> {
        self.credentials.values()
    }

    /// One page of the credentials `keep` admits, in id order after `after`: at most `limit`,
    /// and the id to ask after for the next page if more may follow. A reply stays bounded
    /// however many credentials a hub has issued.
    pub fn page(
        &self,
        after: Option<&CredentialId>,
        limit: usize,
        keep: impl Fn(&Credential) -> bool,
    ) -> (Vec<Credential>, Option<CredentialId>) {
        use std::ops::Bound;
        let from = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut page: Vec<Credential> = self
            .credentials
            .range((from, Bound::Unbounded))
            .map(|(_, c)| c)
            .filter(|c| keep(c))
            .take(limit.saturating_add(1))
            .cloned()
            .collect();
        let next = (page.len() > limit).then(|| {
            page.truncate(limit);
            page.last().map(|c| c.id.clone())
        });
        (page, next.flatten())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pages_cover_every_kept_credential_once_in_order() {
        let mut registry = Registry::default();
        for i in 0..25u8 {
            let id = CredentialId::from_random([i; 8]);
            registry.credentials.insert(
                id.clone(),
                Credential {
                    id,
                    scope: Scope::Host { subtree: None },
                    key: PublicKey([0; 32]),
                    expires_ms: 10,
                    by: "human:alice".into(),
                    label: String::new(),
                    at_ms: 0,
                    revoked_ms: (i % 3 == 0).then_some(1),
                },
            );
        }
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let (page, next) = registry.page(after.as_ref(), 4, |c| c.revoked_ms.is_none());
            assert!(page.len() <= 4);
            seen.extend(page.into_iter().map(|c| c.id));
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        let kept: Vec<_> = registry
            .all()
            .filter(|c| c.revoked_ms.is_none())
            .map(|c| c.id.clone())
            .collect();
        assert_eq!(seen, kept);
        assert_eq!(seen.len(), 16);
    }
    use proptest::prelude::*;

    fn agent(name: &str) -> AgentName {
        AgentName::parse(name).unwrap()
    }

    fn issue(id: u8, scope: Scope, expires_ms: u64) -> CredentialRow {
        CredentialRow::Issue {
            id: CredentialId::from_random([id; 8]),
            scope,
            key: PublicKey([id; 32]),
            expires_ms,
            by: "init".into(),
            label: String::new(),
            at_ms: 0,
        }
    }

    #[test]
    fn a_host_credential_opens_only_its_subtree() {
        let host = Scope::Host {
            subtree: Some(agent("alice/main")),
        };
        let seq = |a: &str| Duty::Sequencer { agent: agent(a) };
        assert!(host.admits(&seq("alice/main")));
        assert!(host.admits(&seq("alice/main/worker")));
        assert!(!host.admits(&seq("alice")));
        assert!(!host.admits(&seq("alice/mainx")));
        assert!(!host.admits(&Duty::Host { subtree: None }));
        assert!(host.admits(&Duty::Host {
            subtree: Some(agent("alice/main/worker"))
        }));
        assert!(!host.admits(&Duty::Human {
            human: HumanName::parse("alice").unwrap()
        }));
    }

    #[test]
    fn revoked_and_expired_credentials_open_nothing() {
        let scope = Scope::Host { subtree: None };
        let rows = [issue(1, scope.clone(), 100), issue(2, scope, 100)];
        let mut registry = Registry::replay(&rows).unwrap();
        let duty = Duty::Host { subtree: None };
        let one = CredentialId::from_random([1; 8]);
        let two = CredentialId::from_random([2; 8]);
        assert!(registry.admit(&one, &duty, 99).is_ok());
        assert!(matches!(
            registry.admit(&one, &duty, 100),
            Err(CredentialError::Expired { .. })
        ));
        registry
            .apply(&CredentialRow::Revoke {
                id: two.clone(),
                by: "human:alice".into(),
                at_ms: 5,
            })
            .unwrap();
        assert!(matches!(
            registry.admit(&two, &duty, 6),
            Err(CredentialError::Revoked { .. })
        ));
        assert!(matches!(
            registry.admit(&CredentialId::from_random([3; 8]), &duty, 6),
            Err(CredentialError::Unknown { .. })
        ));
        assert_eq!(
            registry.apply(&rows[0]),
            Err(CredentialError::Duplicate { id: one })
        );
    }

    #[test]
    fn a_key_is_64_hex_digits_and_anything_else_is_refused_without_a_panic() {
        let hex = "ab".repeat(32);
        assert_eq!(PublicKey::parse(&hex).unwrap().to_string(), hex);
        // 64 bytes with a two-byte character at 61..63: slicing by digit pairs would split it.
        let split = format!("{}éa", "a".repeat(61));
        for bad in [
            split.as_str(),
            "",
            &"g".repeat(64),
            &"a".repeat(63),
            &"+1".repeat(32),
        ] {
            assert!(PublicKey::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rows_read_back_as_written() {
        let row = issue(
            7,
            Scope::Postman {
                service: ServiceName::parse("post").unwrap(),
            },
            9,
        );
        let text = serde_json::to_string(&row).unwrap();
        assert_eq!(serde_json::from_str::<CredentialRow>(&text).unwrap(), row);
        assert!(serde_json::from_str::<CredentialRow>(&text.replace("c-07", "c-0Z")).is_err());
    }

    proptest! {
        /// A host scope admits a sequencer exactly when the agent is within its subtree, and
        /// never any other kind of duty. The oracle is the subtree's definition on the names'
        /// segments, not `AgentName::is_within`: the root's segments begin the agent's (so
        /// `a/b` holds `a/b` and `a/b/c`, never `a/bb`).
        #[test]
        fn host_scope_is_the_subtree_and_nothing_else(
            root_text in "[a-c]{1,2}(/[a-c]{1,2}){0,2}",
            tail in "[a-c]{1,2}(/[a-c]{1,2}){0,3}",
            how in 0u8..3,
        ) {
            // The agent: unrelated, below the root, or the root's text with more glued on (a
            // string prefix that is no subtree).
            let asked_text = match how {
                0 => tail,
                1 => format!("{root_text}/{tail}"),
                _ => format!("{root_text}{tail}"),
            };
            let (root, asked) = (agent(&root_text), agent(&asked_text));
            let scope = Scope::Host { subtree: Some(root.clone()) };
            let root_segments: Vec<&str> = root_text.split('/').collect();
            let asked_segments: Vec<&str> = asked_text.split('/').collect();
            let in_subtree = asked_segments.starts_with(&root_segments);
            prop_assert_eq!(
                scope.admits(&Duty::Sequencer { agent: asked.clone() }),
                in_subtree
            );
            let human = HumanName::parse(asked.as_str().split('/').next().unwrap()).unwrap();
            let as_human = Duty::Human { human };
            prop_assert!(!scope.admits(&as_human));
        }

        /// Once a revoke row is folded, no later time and no duty opens the credential.
        #[test]
        fn a_revoke_is_forever(at in 0u64..1000, later in 0u64..2000) {
            let scope = Scope::Host { subtree: None };
            let id = CredentialId::from_random([4; 8]);
            let registry = Registry::replay(&[
                issue(4, scope, u64::MAX),
                CredentialRow::Revoke { id: id.clone(), by: "human:a".into(), at_ms: at },
            ]).unwrap();
            let duty = Duty::Host { subtree: None };
            prop_assert!(registry.admit(&id, &duty, later).is_err());
        }
    }
}
