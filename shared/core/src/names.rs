//! Names of entities: agents, humans and services.
//!
//! An agent name is a path of `/`-separated segments, each matching `[a-z][a-z0-9-]{0,62}`.
//! A child's name extends its parent's by one segment, so the name tree *is* the agent tree:
//! parentage can be read off a name and never changes. Segments never start with `_`, which is
//! what lets the ref layout use `_` to separate an agent's own refs from its children's.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Longest segment, in bytes: `[a-z]` followed by at most 62 more.
pub const MAX_SEGMENT_LEN: usize = 63;
/// Deepest agent tree a name may describe. It keeps ref names and ACR paths well inside
/// filesystem limits (63 × 32 bytes plus separators stays under 4 KiB).
pub const MAX_DEPTH: usize = 32;

/// Why a string is not a valid name. Each variant names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The whole name was empty.
    #[error("a name cannot be empty")]
    Empty,
    /// Two slashes in a row, or a leading/trailing slash.
    #[error("segment {index} of {name:?} is empty (look for a doubled, leading or trailing '/')")]
    EmptySegment {
        /// The name as given.
        name: String,
        /// Zero-based position of the empty segment.
        index: usize,
    },
    /// A segment broke the `[a-z][a-z0-9-]{0,62}` rule.
    #[error("segment {segment:?} of {name:?} is invalid: {reason}")]
    BadSegment {
        /// The name as given.
        name: String,
        /// The offending segment.
        segment: String,
        /// What rule it broke.
        reason: SegmentFault,
    },
    /// More than [`MAX_DEPTH`] segments.
    #[error("{name:?} has {depth} segments; at most {MAX_DEPTH} are allowed")]
    TooDeep {
        /// The name as given.
        name: String,
        /// How many segments it had.
        depth: usize,
    },
    /// An entity name without a known kind prefix.
    #[error("{given:?} is not an entity: write an agent path, `human:NAME` or `svc:NAME`")]
    UnknownEntityKind {
        /// The string as given.
        given: String,
    },
}

/// The rule a bad segment broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentFault {
    /// The first character is not `a`–`z` (this includes a leading `_` or digit).
    BadFirstChar(char),
    /// A later character is not `a`–`z`, `0`–`9` or `-`.
    BadChar(char),
    /// Longer than [`MAX_SEGMENT_LEN`] bytes.
    TooLong(usize),
}

impl fmt::Display for SegmentFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadFirstChar(c) => write!(f, "it must start with a lowercase letter, not {c:?}"),
            Self::BadChar(c) => {
                write!(
                    f,
                    "{c:?} is not allowed (use lowercase letters, digits and '-')"
                )
            }
            Self::TooLong(n) => write!(
                f,
                "it is {n} bytes long; at most {MAX_SEGMENT_LEN} are allowed"
            ),
        }
    }
}

/// Checks one segment against `[a-z][a-z0-9-]{0,62}`.
pub fn check_segment(segment: &str) -> Result<(), SegmentFault> {
    let mut chars = segment.chars();
    match chars.next() {
        Some(c) if c.is_ascii_lowercase() => {}
        Some(c) => return Err(SegmentFault::BadFirstChar(c)),
        None => return Err(SegmentFault::TooLong(0)),
    }
    if let Some(c) = chars.find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-')) {
        return Err(SegmentFault::BadChar(c));
    }
    if segment.len() > MAX_SEGMENT_LEN {
        return Err(SegmentFault::TooLong(segment.len()));
    }
    Ok(())
}

fn segment_error(name: &str, index: usize, segment: &str, reason: SegmentFault) -> NameError {
    if segment.is_empty() {
        NameError::EmptySegment {
            name: name.to_owned(),
            index,
        }
    } else {
        NameError::BadSegment {
            name: name.to_owned(),
            segment: segment.to_owned(),
            reason,
        }
    }
}

/// A validated agent name such as `alice/main/worker`.
///
/// The only way to get one is [`AgentName::parse`] (or deserialising, which parses), so every
/// value in the system satisfies the segment rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct AgentName(String);

impl AgentName {
    /// Parses and validates a name; the error names the first bad segment.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        if s.is_empty() {
            return Err(NameError::Empty);
        }
        let mut depth = 0;
        for (index, segment) in s.split('/').enumerate() {
            check_segment(segment).map_err(|reason| segment_error(s, index, segment, reason))?;
            depth += 1;
        }
        if depth > MAX_DEPTH {
            return Err(NameError::TooDeep {
                name: s.to_owned(),
                depth,
            });
        }
        Ok(Self(s.to_owned()))
    }

    /// The name as written, e.g. `alice/main`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The segments from the root down.
    pub fn segments(&self) -> impl DoubleEndedIterator<Item = &str> + '_ {
        self.0.split('/')
    }

    /// How many segments the name has; a root agent has depth 1.
    pub fn depth(&self) -> usize {
        self.segments().count()
    }

    /// The last segment: the agent's own part of its name.
    pub fn leaf(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or(&self.0)
    }

    /// The parent's name, or `None` for a root agent.
    pub fn parent(&self) -> Option<AgentName> {
        self.0
            .rsplit_once('/')
            .map(|(parent, _)| Self(parent.to_owned()))
    }

    /// The root of this agent's tree (its first segment).
    pub fn root(&self) -> AgentName {
        Self(self.segments().next().unwrap_or(&self.0).to_owned())
    }

    /// Strict ancestors, nearest first: `a/b/c` yields `a/b`, then `a`.
    pub fn ancestors(&self) -> impl Iterator<Item = AgentName> + '_ {
        self.0
            .match_indices('/')
            .rev()
            .map(|(i, _)| Self(self.0[..i].to_owned()))
    }

    /// Whether `self` lies strictly below `ancestor` in the tree.
    pub fn is_descendant_of(&self, ancestor: &AgentName) -> bool {
        self.0.len() > ancestor.0.len()
            && self.0.starts_with(ancestor.as_str())
            && self.0.as_bytes()[ancestor.0.len()] == b'/'
    }

    /// Whether `self` is `other` or lies below it: the subtree test.
    pub fn is_within(&self, other: &AgentName) -> bool {
        self == other || self.is_descendant_of(other)
    }

    /// Names a child of this agent; the segment is validated like any other.
    pub fn child(&self, segment: &str) -> Result<AgentName, NameError> {
        Self::parse(&format!("{}/{segment}", self.0))
    }
}

crate::string_form!(AgentName, NameError, display);

/// Declares a single-segment name type (humans, services, personas, offices).
macro_rules! simple_name {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $ty(String);

        impl $ty {
            /// Parses and validates a one-segment name.
            pub fn parse(s: &str) -> Result<Self, NameError> {
                if s.is_empty() {
                    return Err(NameError::Empty);
                }
                check_segment(s).map_err(|reason| segment_error(s, 0, s, reason))?;
                Ok(Self(s.to_owned()))
            }

            /// The name as written.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        crate::string_form!($ty, NameError, display);
    };
}

simple_name!(
    /// A registered human, written `human:NAME` as an entity.
    HumanName
);
simple_name!(
    /// A service identity such as the postmaster, written `svc:NAME` as an entity.
    ServiceName
);
simple_name!(
    /// An upstream persona kept on `refs/l3m/personas/<name>`.
    PersonaName
);
simple_name!(
    /// Another hub that mail can reach, named in this hub's settings.
    OfficeName
);

/// Anything that can appear in the ledger: an agent, a human or a service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Entity {
    /// An agent, written as its bare path.
    Agent(AgentName),
    /// A human, written `human:NAME`.
    Human(HumanName),
    /// A service, written `svc:NAME`.
    Service(ServiceName),
}

impl Entity {
    /// Parses `alice/main`, `human:alice` or `svc:postmaster`.
    pub fn parse(s: &str) -> Result<Self, NameError> {
        if let Some(rest) = s.strip_prefix("human:") {
            HumanName::parse(rest).map(Self::Human)
        } else if let Some(rest) = s.strip_prefix("svc:") {
            ServiceName::parse(rest).map(Self::Service)
        } else if s.contains(':') {
            Err(NameError::UnknownEntityKind {
                given: s.to_owned(),
            })
        } else {
            AgentName::parse(s).map(Self::Agent)
        }
    }

    /// The agent name, if this entity is an agent.
    pub fn as_agent(&self) -> Option<&AgentName> {
        match self {
            Self::Agent(a) => Some(a),
            _ => None,
        }
    }
}

impl fmt::Display for Entity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Agent(a) => write!(f, "{a}"),
            Self::Human(h) => write!(f, "human:{h}"),
            Self::Service(s) => write!(f, "svc:{s}"),
        }
    }
}

crate::string_form!(Entity, NameError);

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    #[test]
    fn parses_and_navigates() {
        let n = name("alice/main/worker");
        assert_eq!(n.depth(), 3);
        assert_eq!(n.leaf(), "worker");
        assert_eq!(n.parent(), Some(name("alice/main")));
        assert_eq!(n.root(), name("alice"));
        let ancestors: Vec<_> = n.ancestors().collect();
        assert_eq!(ancestors, vec![name("alice/main"), name("alice")]);
        assert_eq!(name("alice").parent(), None);
        assert_eq!(name("alice").child("main").unwrap(), name("alice/main"));
    }

    #[test]
    fn descendant_test_respects_segment_boundaries() {
        assert!(name("alice/main").is_descendant_of(&name("alice")));
        assert!(!name("alicex/main").is_descendant_of(&name("alice")));
        assert!(!name("alice").is_descendant_of(&name("alice")));
        assert!(name("alice").is_within(&name("alice")));
    }

    #[test]
    fn bad_names_name_the_bad_segment() {
        let err = AgentName::parse("alice/Main/x").unwrap_err();
        assert!(
            matches!(&err, NameError::BadSegment { segment, .. } if segment == "Main"),
            "{err}"
        );
        assert!(err.to_string().contains("\"Main\""));
        let err = AgentName::parse("alice/_/x").unwrap_err();
        assert!(matches!(
            err,
            NameError::BadSegment {
                reason: SegmentFault::BadFirstChar('_'),
                ..
            }
        ));
        assert!(matches!(
            AgentName::parse("alice//x"),
            Err(NameError::EmptySegment { index: 1, .. })
        ));
        assert!(matches!(
            AgentName::parse("/alice"),
            Err(NameError::EmptySegment { index: 0, .. })
        ));
        assert!(matches!(
            AgentName::parse("alice/"),
            Err(NameError::EmptySegment { index: 1, .. })
        ));
        assert!(matches!(AgentName::parse(""), Err(NameError::Empty)));
        assert!(matches!(
            AgentName::parse("a/b c"),
            Err(NameError::BadSegment {
                reason: SegmentFault::BadChar(' '),
                ..
            })
        ));
        let long = "a".repeat(64);
        assert!(matches!(
            AgentName::parse(&long),
            Err(NameError::BadSegment {
                reason: SegmentFault::TooLong(64),
                ..
            })
        ));
        assert!(AgentName::parse(&"a".repeat(63)).is_ok());
        let deep = vec!["a"; MAX_DEPTH + 1].join("/");
        assert!(matches!(
            AgentName::parse(&deep),
            Err(NameError::TooDeep { .. })
        ));
        assert!(name("alice").child("Bad").is_err());
    }

    #[test]
    fn entities_round_trip() {
        for s in ["alice/main", "human:alice", "svc:postmaster"] {
            let e = Entity::parse(s).unwrap();
            assert_eq!(e.to_string(), s);
            let json = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<Entity>(&json).unwrap(), e);
        }
        assert!(matches!(
            Entity::parse("robot:x"),
            Err(NameError::UnknownEntityKind { .. })
        ));
        assert!(serde_json::from_str::<AgentName>("\"Alice\"").is_err());
    }
}
