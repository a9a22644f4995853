//! The subject scheme: every NATS subject l3m uses is spelled here and nowhere else.
//!
//! # Scheme
//! Everything of one hub lives under `l3m.<hub>.`, so one nats-server can carry several hubs and
//! a per-duty permission can be written as a prefix.
//!
//! | subject | what travels on it |
//! |---|---|
//! | `l3m.<hub>.<service>.<op>` | requests to a service operation, e.g. `l3m.main.hubd.append` |
//! | `l3m.<hub>.<service>.<op>.<agent tokens>` | requests about one agent, e.g. `l3m.main.sequencer.wake.alice.main` |
//! | `l3m.<hub>.ref.<kind>.<agent tokens>` | notification that an agent ref moved, e.g. `l3m.main.ref.log.alice.main` |
//! | `_INBOX.<id>`, `_INBOX_<user>.<id>` | reply subjects (chosen by the bus: NATS's default inbox prefix for an anonymous connection, the user's own prefix for a NATS user, see `bus::inbox_prefix`) |
//!
//! Agent name segments become subject tokens (`alice/main` → `alice.main`); the segment rule
//! `[a-z][a-z0-9-]{0,62}` already makes each a valid token. The ref kind comes *before* the agent
//! tokens because NATS's `>` may only end a filter: with the kind first, one agent and its whole
//! subtree are two filters —
//! - `l3m.<hub>.ref.*.alice` — alice's own refs, any kind;
//! - `l3m.<hub>.ref.*.alice.>` — every descendant's refs (`>` needs at least one more token, so
//!   this does not repeat alice's own, and `alicex` matches neither).
//!
//! [`Subjects::ref_changes_within`] returns that pair. A notification only announces a move
//! already written to Git: the ref is the truth, the message a hint to go and read it.

mod syntax;

use std::fmt;

use l3m_core::names::{AgentName, check_segment};
use l3m_core::refs::AgentRef;
use serde::{Deserialize, Serialize};

pub use syntax::{Filter, SubjectError, SubjectFault, check_publish, check_queue_group};

/// The first token of every l3m subject.
pub const ROOT: &str = "l3m";

/// The prefix of reply subjects on the in-process bus and on an anonymous NATS connection
/// (NATS's default). A NATS user gets its own, `bus::inbox_prefix`.
pub const INBOX_PREFIX: &str = "_INBOX";

/// The token that introduces ref notifications.
const REF_TOKEN: &str = "ref";

/// The id of a hub on the bus: one subject token `[a-z][a-z0-9-]{0,62}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HubId(String);

/// The name of a service operation, e.g. `append`: one subject token `[a-z][a-z0-9-]{0,62}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Operation(String);

/// Declares the parse/as_str/Display/serde plumbing of a one-token name.
macro_rules! token_name {
    ($ty:ident, $what:literal) => {
        impl $ty {
            #[doc = concat!("Parses a ", $what, "; the error names the rule it broke.")]
            pub fn parse(s: &str) -> Result<Self, SubjectError> {
                check_segment(s).map_err(|reason| SubjectError::BadToken {
                    what: $what,
                    token: s.to_owned(),
                    reason,
                })?;
                Ok(Self(s.to_owned()))
            }

            /// The token as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        l3m_core::string_form!($ty, SubjectError, display);
    };
}

token_name!(HubId, "hub id");
token_name!(Operation, "operation");

/// The processes that answer requests (DESIGN §2), each one subject token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Service {
    /// The hub's storage and gatekeeper.
    Hubd,
    /// The single writer of one agent's Log.
    Sequencer,
    /// The host that runs a subtree of agents (the waker): what is done for an asleep one.
    Host,
    /// The carrier of airmail between hubs.
    Postman,
    /// The deliberator over wild calls.
    Reviewer,
    /// The fetch and build stages.
    Builder,
    /// The run stage.
    Runner,
}

impl Service {
    /// The service's subject token.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Hubd => "hubd",
            Service::Sequencer => "sequencer",
            Service::Host => "host",
            Service::Postman => "postman",
            Service::Reviewer => "reviewer",
            Service::Builder => "builder",
            Service::Runner => "runner",
        }
    }
}

impl fmt::Display for Service {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The subjects of one hub. Holding a validated [`HubId`] means every subject it returns is
/// valid, so none of its methods can fail.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subjects {
    /// The hub whose prefix every subject carries.
    hub: HubId,
}

impl Subjects {
    /// The subject scheme of `hub`.
    pub fn new(hub: HubId) -> Self {
        Subjects { hub }
    }

    /// The hub these subjects belong to.
    pub fn hub(&self) -> &HubId {
        &self.hub
    }

    /// `l3m.<hub>.`: the prefix of every subject of this hub.
    pub fn prefix(&self) -> String {
        format!("{ROOT}.{}.", self.hub)
    }

    /// `l3m.<hub>.>`: a filter for everything of this hub (monitors, permissions).
    pub fn everything(&self) -> String {
        format!("{}>", self.prefix())
    }

    /// `l3m.<hub>.<service>.<op>`: where a service operation is requested.
    pub fn request(&self, service: Service, op: &Operation) -> String {
        format!("{}{service}.{op}", self.prefix())
    }

    /// `l3m.<hub>.<service>.<op>.<agent tokens>`: a request about one agent, so a server for one
    /// agent (a sequencer) or for a subtree can subscribe to just its own.
    pub fn agent_request(&self, service: Service, op: &Operation, agent: &AgentName) -> String {
        format!("{}.{}", self.request(service, op), agent_tokens(agent))
    }

    /// `l3m.<hub>.<service>.*.>`: every agent-addressed request to a service (an op and at least
    /// one agent token), and none of the service's own ops such as `health`: the filter a
    /// server of agents' requests takes, so it never answers for the service itself.
    pub fn agent_requests(&self, service: Service) -> String {
        format!("{}{service}.*.>", self.prefix())
    }

    /// `l3m.<hub>.<service>.>`: every request to a service, including agent-addressed ones; the
    /// filter a permission uses to allow (or a server uses to take) all of a service's traffic.
    pub fn service_requests(&self, service: Service) -> String {
        format!("{}{service}.>", self.prefix())
    }

    /// `l3m.<hub>.ref.<kind>.<agent tokens>`: announces that `agent`'s `which` ref moved.
    pub fn ref_changed(&self, which: AgentRef, agent: &AgentName) -> String {
        format!("{}.{}", self.ref_kind(which.as_str()), agent_tokens(agent))
    }

    /// `l3m.<hub>.ref.*.<agent tokens>`: any of `agent`'s own refs moved (not its descendants').
    pub fn ref_changes_of(&self, agent: &AgentName) -> String {
        format!("{}.{}", self.ref_kind("*"), agent_tokens(agent))
    }

    /// `l3m.<hub>.ref.*.<agent tokens>.>`: any ref of any strict descendant of `agent` moved.
    pub fn ref_changes_below(&self, agent: &AgentName) -> String {
        format!("{}.>", self.ref_changes_of(agent))
    }

    /// The two filters that together cover `agent` and its whole subtree, each notification once:
    /// [`ref_changes_of`](Self::ref_changes_of) and [`ref_changes_below`](Self::ref_changes_below).
    pub fn ref_changes_within(&self, agent: &AgentName) -> [String; 2] {
        [self.ref_changes_of(agent), self.ref_changes_below(agent)]
    }

    /// `l3m.<hub>.ref.<kind>.>`: one kind of ref, for every agent (e.g. every inbox).
    pub fn ref_changes_of_kind(&self, which: AgentRef) -> String {
        format!("{}.>", self.ref_kind(which.as_str()))
    }

    /// Reads a ref notification subject of this hub back into the ref kind and the agent; `None`
    /// for any other subject (another hub, a request, a bad agent token).
    pub fn parse_ref_changed(&self, subject: &str) -> Option<(AgentRef, AgentName)> {
        let rest = subject
            .strip_prefix(&self.prefix())?
            .strip_prefix(REF_TOKEN)?
            .strip_prefix('.')?;
        let (kind, agent) = rest.split_once('.')?;
        let which = AgentRef::ALL.into_iter().find(|r| r.as_str() == kind)?;
        let agent = AgentName::parse(&agent.replace('.', "/")).ok()?;
        Some((which, agent))
    }

    fn ref_kind(&self, kind: &str) -> String {
        format!("{}{REF_TOKEN}.{kind}", self.prefix())
    }
}

/// An agent name as subject tokens: `alice/main` → `alice.main`.
fn agent_tokens(agent: &AgentName) -> String {
    agent.segments().collect::<Vec<_>>().join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects() -> Subjects {
        Subjects::new(HubId::parse("t").unwrap())
    }

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn scheme_matches_the_documented_layout() {
        let s = subjects();
        let append = Operation::parse("append").unwrap();
        assert_eq!(s.prefix(), "l3m.t.");
        assert_eq!(s.everything(), "l3m.t.>");
        assert_eq!(s.request(Service::Hubd, &append), "l3m.t.hubd.append");
        assert_eq!(s.service_requests(Service::Hubd), "l3m.t.hubd.>");
        assert_eq!(s.agent_requests(Service::Host), "l3m.t.host.*.>");
        assert_eq!(
            s.agent_request(Service::Sequencer, &append, &agent("alice/main")),
            "l3m.t.sequencer.append.alice.main"
        );
        assert_eq!(
            s.ref_changed(AgentRef::Log, &agent("alice/main")),
            "l3m.t.ref.log.alice.main"
        );
        assert_eq!(
            s.ref_changes_within(&agent("alice")),
            [
                "l3m.t.ref.*.alice".to_owned(),
                "l3m.t.ref.*.alice.>".to_owned()
            ]
        );
        assert_eq!(s.ref_changes_of_kind(AgentRef::Inbox), "l3m.t.ref.inbox.>");
    }

    #[test]
    fn every_built_subject_is_valid() {
        let s = subjects();
        let a = agent("alice/main-2/w");
        let op = Operation::parse("wake").unwrap();
        for subject in [
            s.request(Service::Runner, &op),
            s.agent_request(Service::Sequencer, &op, &a),
            s.ref_changed(AgentRef::Cards, &a),
        ] {
            check_publish(&subject).unwrap();
        }
        for filter in [
            s.everything(),
            s.service_requests(Service::Postman),
            s.ref_changes_below(&a),
            s.ref_changes_of(&a),
            s.ref_changes_of_kind(AgentRef::Undo),
        ] {
            Filter::parse(&filter).unwrap();
        }
    }

    #[test]
    fn hub_ids_are_single_lowercase_tokens() {
        assert!(HubId::parse("main-2").is_ok());
        for bad in ["", "Main", "a.b", "a b", "2hub", "a*", ">", "_x"] {
            let err = HubId::parse(bad).unwrap_err();
            assert!(
                matches!(err, SubjectError::BadToken { what: "hub id", .. }),
                "{bad}: {err}"
            );
        }
        assert!(serde_json::from_str::<HubId>("\"a.b\"").is_err());
    }

    #[test]
    fn ref_notifications_parse_back_and_others_do_not() {
        let s = subjects();
        let a = agent("alice/main");
        assert_eq!(
            s.parse_ref_changed(&s.ref_changed(AgentRef::Inbox, &a)),
            Some((AgentRef::Inbox, a.clone()))
        );
        let other = Subjects::new(HubId::parse("u").unwrap());
        assert_eq!(
            s.parse_ref_changed(&other.ref_changed(AgentRef::Log, &a)),
            None
        );
        assert_eq!(s.parse_ref_changed("l3m.t.ref.nope.alice"), None);
        assert_eq!(s.parse_ref_changed("l3m.t.ref.log"), None);
        assert_eq!(s.parse_ref_changed("l3m.t.hubd.append"), None);
    }
}
