//! The pure checks a request passes before hubd touches the store: parsing what the client
//! sent, validating Log records, and who may prune whose subtree.

use l3m_core::duty::Duty;
use l3m_core::log::Record;
use l3m_core::names::AgentName;
use l3m_core::wire_format;

use super::error::ServiceError;
use crate::store::Tip;

/// Parses an agent name from a request.
pub fn agent(input: &str) -> Result<AgentName, ServiceError> {
    AgentName::parse(input).map_err(|error| ServiceError::BadName {
        what: "agent",
        input: input.to_owned(),
        error,
    })
}

/// Parses an expected tip: `None` is an absent ref, otherwise a hex commit id.
pub fn tip(input: Option<&str>) -> Result<Tip, ServiceError> {
    match input {
        None => Ok(Tip::Absent),
        Some(hex) => gix::ObjectId::from_hex(hex.as_bytes())
            .map(Tip::At)
            .map_err(|e| ServiceError::BadTip {
                input: hex.chars().take(80).collect(),
                reason: e.to_string(),
            }),
    }
}

/// A tip as the wire spells it.
pub fn tip_hex(tip: Tip) -> Option<String> {
    tip.id().map(|id| id.to_string())
}

/// Checks that `lines` are Log records continuing a chain of length `len`: each decodes as a
/// versioned [`Record`], its `seq` is the next one, and its body holds on its own.
pub fn records(lines: &[String], len: u64) -> Result<(), ServiceError> {
    if lines.is_empty() {
        return Err(ServiceError::Invalid(
            "an append needs at least one record".into(),
        ));
    }
    for (line, expected) in lines.iter().zip(len..) {
        let record: Record = wire_format::from_line(line, (expected - len) as usize + 1)
            .map_err(|e| ServiceError::Invalid(format!("record {}: {e}", expected - len)))?;
        if record.seq != expected {
            return Err(ServiceError::Invalid(format!(
                "record {} has seq {} but the Log continues at seq {expected}; number records \
                 contiguously from the Log's length",
                expected - len,
                record.seq
            )));
        }
        record
            .body
            .check(expected)
            .map_err(|e| ServiceError::Invalid(format!("record seq {expected}: {e}")))?;
    }
    Ok(())
}

/// Whether `duty` may retire or collect `agent`: a human may prune any agent, a sequencer only
/// strict descendants of its own agent (an agent never retires itself or a sibling by request).
pub fn may_prune(duty: &Duty, agent: &AgentName, action: &str) -> Result<(), ServiceError> {
    match duty {
        Duty::Human { .. } => Ok(()),
        Duty::Sequencer { agent: own } if agent.is_descendant_of(own) => Ok(()),
        _ => Err(ServiceError::NotAllowed {
            duty: duty.to_string(),
            action: format!("{action} {agent}"),
            reason: "only a human or the sequencer of a strict ancestor prunes an agent",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use l3m_core::log::RecordBody;

    fn line(seq: u64) -> String {
        Record {
            seq,
            at_ms: 1,
            body: RecordBody::TurnEnd,
        }
        .to_line()
        .unwrap()
    }

    #[test]
    fn records_must_continue_the_chain() {
        assert!(records(&[line(3), line(4)], 3).is_ok());
        assert!(matches!(
            records(&[line(4)], 3),
            Err(ServiceError::Invalid(_))
        ));
        assert!(matches!(
            records(&[line(3), line(3)], 3),
            Err(ServiceError::Invalid(_))
        ));
        assert!(matches!(records(&[], 0), Err(ServiceError::Invalid(_))));
        assert!(matches!(
            records(&["{}".into()], 0),
            Err(ServiceError::Invalid(_))
        ));
    }

    #[test]
    fn only_humans_and_ancestors_prune() {
        let a = AgentName::parse("alice").unwrap();
        let child = AgentName::parse("alice/x").unwrap();
        let seq = |n: &AgentName| Duty::Sequencer { agent: n.clone() };
        assert!(may_prune(&seq(&a), &child, "retire").is_ok());
        assert!(may_prune(&seq(&a), &a, "retire").is_err());
        assert!(may_prune(&seq(&child), &a, "retire").is_err());
    }

    #[test]
    fn tips_parse_from_hex_or_absent() {
        assert_eq!(tip(None).unwrap(), Tip::Absent);
        assert!(tip(Some("zz")).is_err());
        let hex = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(tip_hex(tip(Some(hex)).unwrap()).unwrap(), hex);
    }
}
