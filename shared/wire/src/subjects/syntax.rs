//! The NATS subject rules, as pure functions: what a publish subject, a subscription filter and a
//! queue group may look like, and whether a filter matches a subject.
//!
//! Both buses check subjects here first, so a bad subject is refused with the same
//! [`SubjectError`] whether it would have gone to nats-server or stayed in process, and
//! [`Filter::matches`] is what gives [`LocalBus`](crate::bus::LocalBus) NATS's wildcard semantics:
//! `*` matches exactly one token, `>` (last token only) matches one or more remaining tokens.

use l3m_core::names::SegmentFault;

/// Why a subject, filter, token or queue group was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    /// A name that becomes one subject token (a hub id, an operation) broke the token rule
    /// `[a-z][a-z0-9-]{0,62}`.
    #[error("{what} {token:?} cannot be a subject token: {reason}")]
    BadToken {
        /// What the token names, e.g. `hub id`.
        what: &'static str,
        /// The token as given.
        token: String,
        /// The rule it broke.
        reason: SegmentFault,
    },
    /// A whole subject or filter broke the NATS subject syntax.
    #[error("subject {subject:?} is invalid: {reason}")]
    BadSubject {
        /// The subject as given.
        subject: String,
        /// The rule it broke.
        reason: SubjectFault,
    },
    /// A queue group name was empty or contained whitespace.
    #[error("queue group {group:?} is invalid: it must be non-empty and contain no whitespace")]
    BadQueueGroup {
        /// The name as given.
        group: String,
    },
}

/// The rule a bad subject broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SubjectFault {
    /// The subject was the empty string.
    #[error("it is empty")]
    Empty,
    /// It contains whitespace, which NATS uses to separate protocol fields.
    #[error("it contains whitespace {0:?}")]
    Whitespace(char),
    /// Two dots in a row, or a leading or trailing dot.
    #[error("token {index} is empty (look for a doubled, leading or trailing '.')")]
    EmptyToken {
        /// Zero-based position of the empty token.
        index: usize,
    },
    /// A wildcard token in a subject that is published to.
    #[error("token {index} is a wildcard; wildcards are only for subscriptions")]
    WildcardInPublish {
        /// Zero-based position of the wildcard.
        index: usize,
    },
    /// `>` somewhere other than the last token.
    #[error("token {index} is '>', which may only be the last token")]
    FullWildcardNotLast {
        /// Zero-based position of the misplaced `>`.
        index: usize,
    },
}

/// Checks that `subject` can be published to: non-empty tokens, no whitespace, no wildcards.
pub fn check_publish(subject: &str) -> Result<(), SubjectError> {
    check_tokens(subject, |index, token, _| {
        if token == "*" || token == ">" {
            Err(SubjectFault::WildcardInPublish { index })
        } else {
            Ok(())
        }
    })
}

/// Checks a queue group name the way nats-server does: non-empty, no whitespace.
pub fn check_queue_group(group: &str) -> Result<(), SubjectError> {
    if group.is_empty() || group.chars().any(char::is_whitespace) {
        return Err(SubjectError::BadQueueGroup {
            group: group.to_owned(),
        });
    }
    Ok(())
}

/// A validated subscription filter: a subject whose tokens may be `*` (one token) or, last,
/// `>` (one or more tokens).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Filter(String);

impl Filter {
    /// Parses a filter, refusing empty tokens, whitespace and a `>` that is not last.
    pub fn parse(filter: &str) -> Result<Self, SubjectError> {
        check_tokens(filter, |index, token, is_last| {
            if token == ">" && !is_last {
                Err(SubjectFault::FullWildcardNotLast { index })
            } else {
                Ok(())
            }
        })?;
        Ok(Filter(filter.to_owned()))
    }

    /// The filter as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether a (valid, wildcard-free) subject is delivered to this filter.
    pub fn matches(&self, subject: &str) -> bool {
        let mut wanted = self.0.split('.');
        let mut given = subject.split('.');
        loop {
            match (wanted.next(), given.next()) {
                (Some(">"), Some(_)) => return true,
                (Some("*"), Some(_)) => {}
                (Some(w), Some(g)) if w == g => {}
                (None, None) => return true,
                _ => return false,
            }
        }
    }
}

impl std::fmt::Display for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The rules shared by subjects and filters, plus a per-token rule `extra(index, token, is_last)`.
fn check_tokens(
    subject: &str,
    extra: impl Fn(usize, &str, bool) -> Result<(), SubjectFault>,
) -> Result<(), SubjectError> {
    let fault = |reason| SubjectError::BadSubject {
        subject: subject.to_owned(),
        reason,
    };
    if subject.is_empty() {
        return Err(fault(SubjectFault::Empty));
    }
    if let Some(c) = subject.chars().find(|c| c.is_whitespace()) {
        return Err(fault(SubjectFault::Whitespace(c)));
    }
    let count = subject.split('.').count();
    for (index, token) in subject.split('.').enumerate() {
        if token.is_empty() {
            return Err(fault(SubjectFault::EmptyToken { index }));
        }
        extra(index, token, index + 1 == count).map_err(fault)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(filter: &str, subject: &str) -> bool {
        Filter::parse(filter).unwrap().matches(subject)
    }

    #[test]
    fn star_matches_exactly_one_token() {
        assert!(matches("a.*.c", "a.b.c"));
        assert!(!matches("a.*.c", "a.c"));
        assert!(!matches("a.*", "a.b.c"));
        assert!(!matches("a.*", "a"));
    }

    #[test]
    fn full_wildcard_matches_one_or_more_tokens() {
        assert!(matches("a.>", "a.b"));
        assert!(matches("a.>", "a.b.c.d"));
        assert!(!matches("a.>", "a"));
        assert!(matches(">", "a"));
    }

    #[test]
    fn literal_tokens_match_whole_tokens_only() {
        assert!(matches("a.b", "a.b"));
        assert!(!matches("a.b", "a.bc"));
        assert!(!matches("a.b", "a.b.c"));
    }

    #[test]
    fn bad_subjects_name_the_rule() {
        let fault = |s: &str| match check_publish(s).unwrap_err() {
            SubjectError::BadSubject { reason, .. } => reason,
            other => panic!("{other}"),
        };
        assert_eq!(fault(""), SubjectFault::Empty);
        assert_eq!(fault("a b"), SubjectFault::Whitespace(' '));
        assert_eq!(fault("a..b"), SubjectFault::EmptyToken { index: 1 });
        assert_eq!(fault("a.*"), SubjectFault::WildcardInPublish { index: 1 });
        assert_eq!(
            Filter::parse("a.>.b").unwrap_err(),
            SubjectError::BadSubject {
                subject: "a.>.b".into(),
                reason: SubjectFault::FullWildcardNotLast { index: 1 }
            }
        );
        assert!(check_queue_group("").is_err());
        assert!(check_queue_group("a b").is_err());
        assert!(check_queue_group("workers").is_ok());
    }
}
