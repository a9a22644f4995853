//! Sessions: unguessable capabilities, each bound to one duty, one session key, one inbox.
//!
//! hubd opens a session when a credential's signature checks out ([`crate::service`]), and
//! checks every later request against it: the capability names the session, the seal proves the
//! sender holds its key ([`l3m_wire::credential::SessionKey`]), the request number is used once
//! (a window of [`WINDOW`] numbers, so concurrent requests may arrive out of order), and the
//! answer goes to the inbox the session was opened from. Sessions live only in this process's
//! memory: when hubd restarts, every session ends and its holder opens a new one.
//!
//! A sequencer's session is bound to its agent's incarnation: retiring or collecting the agent
//! revokes every session opened for it ([`Sessions::revoke_agents`]), and a session can only be
//! opened for a live agent, so a name spawned again is a new incarnation its old sessions never
//! reach. A host session opened for a subtree is bound the same way to the incarnation of the
//! subtree's root. Revoking a credential ends every session it opened
//! ([`Sessions::revoke_credential`]).
//!
//! What a credential's holder can make hubd keep is bounded: at most [`SESSIONS_PER_CREDENTIAL`]
//! live sessions per credential (opening one more ends the oldest, whose holder is told its
//! session ended), and at most [`REVOKED_KEPT`] revoked capabilities remembered as revoked
//! (past that, the oldest are forgotten and read as ended).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use l3m_core::credential::CredentialId;
use l3m_core::duty::Duty;
use l3m_core::names::{AgentName, Entity};
use l3m_wire::credential::{Seal, SessionKey, random_hex};
use l3m_wire::sealed_reply::ReplyKey;
use l3m_wire::typed::Sealed;

/// How many request numbers behind the highest seen are still accepted (once each).
pub const WINDOW: u64 = 128;

/// The most live sessions one credential holds; opening one more ends its oldest.
pub const SESSIONS_PER_CREDENTIAL: usize = 256;

/// The most revoked capabilities remembered as revoked (the oldest are forgotten first).
pub const REVOKED_KEPT: usize = 65_536;

/// Whom a duty acts as: the agent of a sequencer, the human, the postman's service. A host's
/// waker acts as no one: it only starts sequencers.
pub fn entity_of(duty: &Duty) -> Option<Entity> {
    match duty {
        Duty::Sequencer { agent } => Some(Entity::Agent(agent.clone())),
        Duty::Human { human } => Some(Entity::Human(human.clone())),
        Duty::Postman { service } => Some(Entity::Service(service.clone())),
        Duty::Host { .. } => None,
    }
}

/// The inbox an answer goes to: the reply subject's first token (`_INBOX_<user>` for a client
/// connected as a NATS user of its own).
pub fn inbox_of(reply: Option<&str>) -> Option<&str> {
    reply.map(|reply| reply.split('.').next().unwrap_or(reply))
}

/// What a session is opened with.
#[derive(Debug)]
pub struct Opening {
    /// Its duty.
    pub duty: Duty,
    /// The credential that opened it.
    pub credential: CredentialId,
    /// When that credential expires.
    pub expires_ms: u64,
    /// The key both ends derived.
    pub key: SessionKey,
    /// The inbox it was opened from.
    pub inbox: Option<String>,
}

/// One live session.
#[derive(Debug)]
struct Session {
    opening: Opening,
    window: Window,
}

/// The request numbers seen: the highest, and which of the [`WINDOW`] below it were.
#[derive(Debug, Default)]
struct Window {
    highest: Option<u64>,
    seen: u128,
}

impl Window {
    /// Marks `n` used; false if it was used before or is too far behind.
    fn take(&mut self, n: u64) -> bool {
        let Some(highest) = self.highest else {
            self.highest = Some(n);
            self.seen = 1;
            return true;
        };
        if n > highest {
            let shift = n - highest;
            self.seen = if shift >= WINDOW {
                0
            } else {
                self.seen << shift
            };
            self.seen |= 1;
            self.highest = Some(n);
            return true;
        }
        let behind = highest - n;
        if behind >= WINDOW || self.seen & (1 << behind) != 0 {
            return false;
        }
        self.seen |= 1 << behind;
        true
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
    live: HashMap<String, Session>,
    revoked: HashSet<String>,
    /// [`Table::revoked`] in the order revoked, to forget the oldest first.
    revoked_order: VecDeque<String>,
    /// Each credential's live sessions, oldest first.
    by_credential: HashMap<CredentialId, VecDeque<String>>,
}

impl Table {
    /// Removes a live session, from every index; `revoked` remembers it as revoked.
    fn remove(&mut self, capability: &str, revoked: bool) {
        let Some(session) = self.live.remove(capability) else {
            return;
        };
        let id = &session.opening.credential;
        if let Some(caps) = self.by_credential.get_mut(id) {
            caps.retain(|c| c != capability);
            if caps.is_empty() {
                self.by_credential.remove(id);
            }
        }
        if revoked {
            if self.revoked_order.len() >= REVOKED_KEPT
                && let Some(oldest) = self.revoked_order.pop_front()
            {
                self.revoked.remove(&oldest);
            }
            self.revoked.insert(capability.to_owned());
            self.revoked_order.push_back(capability.to_owned());
        }
    }
}

/// Why a request does not belong to a live session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    /// hubd never minted the capability (forged, or from before a restart).
    Unknown,
    /// Its agent retired or was collected, or its credential was revoked.
    Revoked,
    /// Its credential expired.
    Expired,
    /// The request carries no seal.
    Unsealed,
    /// The seal was not made with the session's key over this request.
    BadSeal,
    /// The request number was used before (a replay) or is too old.
    Replayed,
    /// The answer would go to another inbox than the session's.
    OtherInbox,
}

/// What [`Sessions::check_parts`] found: whether the request goes on, and the key its answer
/// is sealed with (`None` until the request proved it comes from the session's holder).
#[derive(Debug)]
pub struct Checked {
    /// The session's reply key, once the request's seal verified.
    pub reply_key: Option<ReplyKey>,
    /// Whether the request goes on.
    pub verdict: Result<(), Closed>,
}

impl Checked {
    /// A refusal answered in clear: no session, or a seal that did not verify.
    fn plain(closed: Closed) -> Checked {
        Checked {
            reply_key: None,
            verdict: Err(closed),
        }
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// How many sessions are open.
    pub fn open_count(&self) -> usize {
        self.table().live.len()
    }

    /// Mints a capability for a session opened with `opening`; if its credential already
    /// holds [`SESSIONS_PER_CREDENTIAL`] sessions, the oldest ends (its holder is told the
    /// session ended, as after a restart).
    pub fn open(&self, opening: Opening) -> Result<String, getrandom::Error> {
        let capability = random_hex()?;
        let mut table = self.table();
        let id = opening.credential.clone();
        let oldest = {
            let caps = table.by_credential.entry(id).or_default();
            caps.push_back(capability.clone());
            (caps.len() > SESSIONS_PER_CREDENTIAL)
                .then(|| caps.front().cloned())
                .flatten()
        };
        if let Some(oldest) = oldest {
            table.remove(&oldest, false);
        }
        table.live.insert(
            capability.clone(),
            Session {
                opening,
                window: Window::default(),
            },
        );
        Ok(capability)
    }

    /// How many live sessions credential `id` holds.
    pub fn count_of(&self, id: &CredentialId) -> usize {
        self.table().by_credential.get(id).map_or(0, VecDeque::len)
    }

    /// Whether `proof` proves possession of the key of live session `capability` for a
    /// voucher's `statement` ([`SessionKey::holder_proof`]).
    pub fn proves_holder(&self, capability: &str, statement: &[u8], proof: &[u8; 32]) -> bool {
        self.table()
            .live
            .get(capability)
            .is_some_and(|s| s.opening.key.proves_holder(statement, proof))
    }

    /// Checks that a request of `kind` with capability `capability` comes from the session's
    /// holder: sealed with its key, a fresh request number, answered to its inbox, its
    /// credential not expired at `now_ms`. Marks the number used.
    pub fn check(
        &self,
        capability: &str,
        kind: &str,
        sealed: Option<&Sealed>,
        reply: Option<&str>,
        now_ms: u64,
    ) -> Result<(), Closed> {
        let (seal, body) = sealed.map_or((None, &[][..]), |s| (Some(&s.seal), &s.body[..]));
        self.check_parts(capability, kind, seal, body, reply, now_ms)
            .verdict
    }

    /// [`Sessions::check`] on an envelope's parts, before its body is decoded: the seal, the
    /// body bytes it covers. Names the session's reply key once the seal verified, so the
    /// answer (a later refusal included) is sealed to the one who asked.
    pub fn check_parts(
        &self,
        capability: &str,
        kind: &str,
        seal: Option<&Seal>,
        body: &[u8],
        reply: Option<&str>,
        now_ms: u64,
    ) -> Checked {
        let mut table = self.table();
        let Some(session) = table.live.get_mut(capability) else {
            return Checked::plain(if table.revoked.contains(capability) {
                Closed::Revoked
            } else {
                Closed::Unknown
            });
        };
        let Some(seal) = seal else {
            return Checked::plain(Closed::Unsealed);
        };
        if !session.opening.key.verifies(seal, kind, body) {
            return Checked::plain(Closed::BadSeal);
        }
        let verdict = if session.opening.inbox.as_deref() != inbox_of(reply) {
            Err(Closed::OtherInbox)
        } else if now_ms >= session.opening.expires_ms {
            Err(Closed::Expired)
        } else if !session.window.take(seal.n) {
            Err(Closed::Replayed)
        } else {
            Ok(())
        };
        Checked {
            reply_key: Some(session.opening.key.reply().clone()),
            verdict,
        }
    }

    /// The duty a capability is bound to, or why it has none.
    pub fn duty(&self, capability: &str) -> Result<Duty, Closed> {
        let table = self.table();
        match table.live.get(capability) {
            Some(session) => Ok(session.opening.duty.clone()),
            None if table.revoked.contains(capability) => Err(Closed::Revoked),
            None => Err(Closed::Unknown),
        }
    }

    /// Revokes every sequencer session of `agents`, and every host session of a subtree one of
    /// them is the root of (a respawned root is a new incarnation its old sessions never
    /// reach); returns how many.
    pub fn revoke_agents(&self, agents: &[AgentName]) -> usize {
        self.revoke_where(|s| match &s.opening.duty {
            Duty::Sequencer { agent }
            | Duty::Host {
                subtree: Some(agent),
            } => agents.contains(agent),
            _ => false,
        })
    }

    /// Revokes every session opened with credential `id`; returns how many.
    pub fn revoke_credential(&self, id: &CredentialId) -> usize {
        self.revoke_where(|s| &s.opening.credential == id)
    }

    fn revoke_where(&self, doomed: impl Fn(&Session) -> bool) -> usize {
        let mut table = self.table();
        let gone: Vec<String> = table
            .live
            .iter()
            .filter(|(_, session)| doomed(session))
            .map(|(capability, _)| capability.clone())
            .collect();
        for capability in &gone {
            table.remove(capability, true);
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
    use l3m_wire::credential::Ephemeral;
    use proptest::prelude::*;

    fn opening(duty: Duty, credential: u8) -> (Opening, SessionKey) {
        let (a, b) = (
            Ephemeral::generate().unwrap(),
            Ephemeral::generate().unwrap(),
        );
        let key = a.with_hub(&b.public);
        let opening = Opening {
            duty,
            credential: CredentialId::from_random([credential; 8]),
            expires_ms: 1_000,
            key: key.clone(),
            inbox: Some("_INBOX_seq".into()),
        };
        (opening, key)
    }

    fn sealed(key: &SessionKey, n: u64, body: &[u8]) -> Sealed {
        Sealed {
            seal: key.seal(n, "hubd.k", body),
            body: body.to_vec(),
            capability: None,
        }
    }

    fn seq(a: &str) -> Duty {
        Duty::Sequencer {
            agent: AgentName::parse(a).unwrap(),
        }
    }

    #[test]
    fn a_request_passes_only_sealed_fresh_and_answered_home() {
        let sessions = Sessions::default();
        let (opening, key) = opening(seq("bob"), 1);
        let cap = sessions.open(opening).unwrap();
        let home = Some("_INBOX_seq.abc.1");
        let check = |s: Option<&Sealed>, reply, now| sessions.check(&cap, "hubd.k", s, reply, now);
        assert_eq!(check(Some(&sealed(&key, 0, b"x")), home, 5), Ok(()));
        assert_eq!(
            check(Some(&sealed(&key, 0, b"x")), home, 5),
            Err(Closed::Replayed)
        );
        assert_eq!(check(None, home, 5), Err(Closed::Unsealed));
        let mut forged = sealed(&key, 1, b"x");
        forged.body = b"y".to_vec();
        assert_eq!(check(Some(&forged), home, 5), Err(Closed::BadSeal));
        let other = Some("_INBOX_spy.abc.1");
        assert_eq!(
            check(Some(&sealed(&key, 2, b"x")), other, 5),
            Err(Closed::OtherInbox)
        );
        assert_eq!(
            check(Some(&sealed(&key, 3, b"x")), home, 1_000),
            Err(Closed::Expired)
        );
        assert_eq!(
            sessions.check(&"0".repeat(64), "hubd.k", None, home, 5),
            Err(Closed::Unknown)
        );
    }

    #[test]
    fn revoking_closes_only_the_sessions_named() {
        let sessions = Sessions::default();
        let bob = AgentName::parse("bob").unwrap();
        let b = sessions.open(opening(seq("bob"), 1).0).unwrap();
        let c = sessions.open(opening(seq("carol"), 2).0).unwrap();
        assert_eq!(sessions.revoke_agents(std::slice::from_ref(&bob)), 1);
        assert_eq!(sessions.duty(&b), Err(Closed::Revoked));
        assert_eq!(sessions.duty(&c), Ok(seq("carol")));
        let again = sessions.open(opening(seq("bob"), 1).0).unwrap();
        assert_eq!(sessions.duty(&again), Ok(seq("bob")), "a new incarnation");
        assert_eq!(
            sessions.revoke_credential(&CredentialId::from_random([1; 8])),
            1
        );
        assert_eq!(sessions.duty(&again), Err(Closed::Revoked));
        assert_eq!(sessions.duty(&c), Ok(seq("carol")));
    }

    #[test]
    fn a_host_session_ends_with_its_subtree_roots_incarnation() {
        let sessions = Sessions::default();
        let bob = AgentName::parse("bob").unwrap();
        let host = |root: &str| Duty::Host {
            subtree: Some(AgentName::parse(root).unwrap()),
        };
        let h = sessions.open(opening(host("bob"), 1).0).unwrap();
        let other = sessions.open(opening(host("carol"), 1).0).unwrap();
        let whole = sessions
            .open(opening(Duty::Host { subtree: None }, 1).0)
            .unwrap();
        assert_eq!(sessions.revoke_agents(std::slice::from_ref(&bob)), 1);
        assert_eq!(sessions.duty(&h), Err(Closed::Revoked));
        assert!(sessions.duty(&other).is_ok() && sessions.duty(&whole).is_ok());
    }

    #[test]
    fn one_credential_holds_a_bounded_number_of_sessions_the_oldest_ending_first() {
        let sessions = Sessions::default();
        let first = sessions.open(opening(seq("bob"), 1).0).unwrap();
        let second = sessions.open(opening(seq("bob"), 1).0).unwrap();
        for _ in 2..SESSIONS_PER_CREDENTIAL {
            sessions.open(opening(seq("bob"), 1).0).unwrap();
        }
        let other = sessions.open(opening(seq("bob"), 2).0).unwrap();
        let id = CredentialId::from_random([1; 8]);
        assert_eq!(sessions.count_of(&id), SESSIONS_PER_CREDENTIAL);
        sessions.open(opening(seq("bob"), 1).0).unwrap();
        assert_eq!(sessions.count_of(&id), SESSIONS_PER_CREDENTIAL);
        assert_eq!(
            sessions.duty(&first),
            Err(Closed::Unknown),
            "ended, told so"
        );
        assert_eq!(sessions.duty(&second), Ok(seq("bob")));
        assert_eq!(
            sessions.duty(&other),
            Ok(seq("bob")),
            "another credential's"
        );
        assert_eq!(sessions.open_count(), SESSIONS_PER_CREDENTIAL + 1);
    }

    proptest! {
        /// Whatever order numbers arrive in, each is taken at most once, and every number
        /// within the window of the highest seen is taken the first time.
        #[test]
        fn each_request_number_is_taken_once(order in proptest::collection::vec(0u64..300, 1..200)) {
            let mut window = Window::default();
            let mut taken = HashSet::new();
            let mut highest = None::<u64>;
            for n in order {
                let fresh = !taken.contains(&n)
                    && highest.is_none_or(|h| n > h || h - n < WINDOW);
                let got = window.take(n);
                prop_assert!(!(got && taken.contains(&n)), "{} taken twice", n);
                prop_assert_eq!(got, fresh, "n = {}", n);
                if got {
                    taken.insert(n);
                    highest = Some(highest.map_or(n, |h| h.max(n)));
                }
            }
        }
    }
}
