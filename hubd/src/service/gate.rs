//! The pure checks a request passes before hubd touches the store: parsing what the client
//! sent, validating Log records, who may prune whose subtree, who may read an agent's refs,
//! who may regrant and within what, and who may stage airmail.

use l3m_core::duty::Duty;
use l3m_core::grant::{Grant, Probe, RegrantRefusal};
use l3m_core::ledger::{Ledger, LedgerError};
use l3m_core::log::Record;
use l3m_core::log_rule;
use l3m_core::names::{AgentName, Entity, OfficeName};
use l3m_core::record_format;

use l3m_wire::hubd::pack::{CHUNK_BYTES, MAX_PACK_BYTES, RefUpdate};

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
/// versioned [`Record`], its `seq` is the next one, and its body holds on its own. Returns the
/// records, so the commit that appends them can say what they tell.
pub fn records(lines: &[String], len: u64) -> Result<Vec<Record>, ServiceError> {
    if lines.is_empty() {
        return Err(ServiceError::Invalid(
            "an append needs at least one record".into(),
        ));
    }
    let mut checked = Vec::with_capacity(lines.len());
    for (line, expected) in lines.iter().zip(len..) {
        // core's rule, the one the sequencer's `Journaled` records are built by.
        log_rule::check_line(line)
            .map_err(|e| ServiceError::Invalid(format!("record {}: {e}", expected - len)))?;
        let record: Record = record_format::from_line(line, (expected - len) as usize + 1)
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
        log_rule::check_summary(&record)
            .map_err(|e| ServiceError::Invalid(format!("record seq {expected}: {e}")))?;
        checked.push(record);
    }
    Ok(checked)
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

/// Whether `duty` may read `agent`'s `what` (its Log, inbox or grant): the agent's own
/// sequencer, the sequencer of one of its ancestors, the host that runs it, or a human. A
/// sibling, a cousin, another host's waker or a service may not.
pub fn may_read(duty: &Duty, agent: &AgentName, what: &str) -> Result<(), ServiceError> {
    match duty {
        Duty::Human { .. } => Ok(()),
        Duty::Sequencer { agent: own } if agent.is_within(own) => Ok(()),
        Duty::Host { subtree } if subtree.as_ref().is_none_or(|root| agent.is_within(root)) => {
            Ok(())
        }
        _ => Err(ServiceError::NotAllowed {
            duty: duty.to_string(),
            action: format!("read the {what} of {agent}"),
            reason: "an agent's Log, inbox and grant are read only by its own sequencer, the \
                     sequencer of one of its ancestors, its host, or a human",
        }),
    }
}

/// Checks lines for an undo chain: at least one, each one line within the stored limit, and a
/// versioned JSON object. Their shape is the sequencer's (`l3m_ring::undo::lines`), which reads
/// them strictly; hubd only keeps the chain readable.
pub fn undo_lines(lines: &[String]) -> Result<(), ServiceError> {
    if lines.is_empty() {
        return Err(ServiceError::Invalid(
            "an undo append needs at least one line".into(),
        ));
    }
    for (index, line) in lines.iter().enumerate() {
        if line.contains(['\n', '\r']) {
            return Err(ServiceError::Invalid(format!(
                "undo line {index} contains a line break"
            )));
        }
        if line.len() > record_format::MAX_STORED_LINE {
            return Err(ServiceError::Invalid(format!(
                "undo line {index} is {} bytes, over the limit of {} bytes for one line",
                line.len(),
                record_format::MAX_STORED_LINE
            )));
        }
        record_format::from_line::<serde_json::Map<String, serde_json::Value>>(line, index + 1)
            .map_err(|e| ServiceError::Invalid(format!("undo line {index}: {e}")))?;
    }
    Ok(())
}

/// Whether `duty` may read `agent`'s undo chain, which holds the contents its edits replaced:
/// only its own sequencer, a host running it, or a human (not its ancestors' sequencers).
pub fn may_read_undo(duty: &Duty, agent: &AgentName) -> Result<(), ServiceError> {
    match duty {
        Duty::Human { .. } => Ok(()),
        Duty::Sequencer { agent: own } if own == agent => Ok(()),
        Duty::Host { subtree } if subtree.as_ref().is_none_or(|root| agent.is_within(root)) => {
            Ok(())
        }
        _ => Err(ServiceError::NotAllowed {
            duty: duty.to_string(),
            action: format!("read the undo chain of {agent}"),
            reason: "an agent's undo chain is read only by its own sequencer, its host, or a human",
        }),
    }
}

/// Whether `duty` may fetch `agent`'s work and persona branches: its own sequencer (to keep its
/// clone), its host, or a human. The branches hold the agent's files, like its undo chain.
pub fn may_fetch(duty: &Duty, agent: &AgentName) -> Result<(), ServiceError> {
    match duty {
        Duty::Human { .. } => Ok(()),
        Duty::Sequencer { agent: own } if own == agent => Ok(()),
        Duty::Host { subtree } if subtree.as_ref().is_none_or(|root| agent.is_within(root)) => {
            Ok(())
        }
        _ => Err(ServiceError::NotAllowed {
            duty: duty.to_string(),
            action: format!("fetch the branches of {agent}"),
            reason: "an agent's branches are fetched only by its own sequencer, its host, or a \
                     human",
        }),
    }
}

/// A branch move a push asked for, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchMove {
    /// The full ref name.
    pub refname: String,
    /// Where the pusher saw it.
    pub old: gix::ObjectId,
    /// Where it goes.
    pub new: gix::ObjectId,
    /// Whether it goes back to an ancestor of `old` (a rewind) instead of forward.
    pub back: bool,
}

/// Checks a push's ref updates before any byte of its pack is looked at: only `agent`'s own
/// sequencer pushes, only to `agent`'s work and persona branches, each at most once, each from
/// one commit id to another.
pub fn push_updates(
    duty: &Duty,
    agent: &AgentName,
    updates: &[RefUpdate],
) -> Result<Vec<BranchMove>, ServiceError> {
    match duty {
        Duty::Sequencer { agent: own } if own == agent => {}
        _ => {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: format!("push to the branches of {agent}"),
                reason: "only an agent's own sequencer pushes to its branches",
            });
        }
    }
    if updates.is_empty() {
        return Err(ServiceError::Invalid(
            "a push needs at least one ref update".into(),
        ));
    }
    let own = [
        l3m_core::refs::work_branch(agent),
        l3m_core::refs::agent_ref(agent, l3m_core::refs::AgentRef::Persona),
    ];
    let mut moves: Vec<BranchMove> = Vec::with_capacity(updates.len());
    for update in updates {
        if !own.contains(&update.refname) {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: format!(
                    "push to {}",
                    update.refname.chars().take(200).collect::<String>()
                ),
                reason: "a push moves only its agent's own work branch and persona branch",
            });
        }
        if moves.iter().any(|m| m.refname == update.refname) {
            return Err(ServiceError::Invalid(format!(
                "the push names {} twice",
                update.refname
            )));
        }
        let commit = |hex: &str| match tip(Some(hex))? {
            Tip::At(id) => Ok(id),
            Tip::Absent => Err(ServiceError::Invalid("a push names no commit".into())),
        };
        moves.push(BranchMove {
            refname: update.refname.clone(),
            old: commit(&update.old)?,
            new: commit(&update.new)?,
            back: update.back,
        });
    }
    Ok(moves)
}

/// Checks one chunk of a pushed pack against the limits: the whole pack within
/// [`MAX_PACK_BYTES`], the chunk within [`CHUNK_BYTES`] and inside the pack.
pub fn push_chunk(total: u64, offset: u64, len: usize) -> Result<(), ServiceError> {
    if total > MAX_PACK_BYTES {
        return Err(ServiceError::Invalid(format!(
            "the pack is {total} bytes, over the limit of {MAX_PACK_BYTES} bytes for one push"
        )));
    }
    if len > CHUNK_BYTES {
        return Err(ServiceError::Invalid(format!(
            "a chunk of {len} bytes is over the limit of {CHUNK_BYTES} bytes for one chunk"
        )));
    }
    if offset.saturating_add(len as u64) > total || (len == 0 && offset < total) {
        return Err(ServiceError::Invalid(format!(
            "a chunk of {len} bytes at byte {offset} does not fit a pack of {total} bytes"
        )));
    }
    Ok(())
}

/// Whether `issuer` (the session's entity) may regrant `agent`, whose parent is `parent`: only
/// the issuer of its grant, which is its parent.
pub fn may_regrant(
    duty: &Duty,
    issuer: &Entity,
    parent: &Entity,
    agent: &AgentName,
) -> Result<(), ServiceError> {
    if issuer == parent {
        return Ok(());
    }
    Err(ServiceError::NotAllowed {
        duty: duty.to_string(),
        action: format!("regrant {agent}, whose grant was issued by {parent}"),
        reason: "a grant is changed only by its issuer: the human that spawned a root, or the \
                 parent's sequencer for a child",
    })
}

/// The bounds a regrant of `agent` to `new` must meet beyond the ledger's own gate: a root's
/// grant stays within its human's registered grant (as at spawn), and every live child of
/// `agent` stays within `new` expanded at `agent` (a narrowing never strands a wider child).
pub fn regrant_bounds(
    ledger: &Ledger,
    parent: &Entity,
    agent: &AgentName,
    new: &Grant,
) -> Result<(), ServiceError> {
    if let Entity::Human(human) = parent {
        let bound = ledger.human_grant(human).ok_or_else(|| {
            ServiceError::Ledger(LedgerError::UnknownHuman {
                human: human.clone(),
            })
        })?;
        new.within(bound).map_err(|widening| {
            ServiceError::Ledger(LedgerError::Regrant {
                subject: agent.clone(),
                refusal: RegrantRefusal::Widening(widening),
            })
        })?;
    }
    let bound = new.expand_own(agent);
    for child in ledger.children(agent) {
        if let Some(grant) = ledger.grant(&child) {
            grant
                .within(&bound)
                .map_err(|widening| ServiceError::ChildOutside {
                    agent: agent.clone(),
                    child: child.clone(),
                    widening,
                })?;
        }
    }
    Ok(())
}

/// Whether `grant` lets its agent stage airmail for `office`: the mail axis must cover the
/// office (`office:<name>`) and the airmail axis must list it.
pub fn may_stage_airmail(
    duty: &Duty,
    grant: &Grant,
    office: &OfficeName,
) -> Result<(), ServiceError> {
    let refuse = |reason| ServiceError::NotAllowed {
        duty: duty.to_string(),
        action: format!("stage airmail for office {office}"),
        reason,
    };
    if !grant.allows(&Probe::Airmail(office.clone())) {
        return Err(refuse(
            "the sender's grant does not list the office on its `airmail` axis",
        ));
    }
    if !grant.allows(&Probe::MailOffice(office.clone())) {
        return Err(refuse(
            "the sender's grant does not cover the office on its `mail` axis (`office:<name>`)",
        ));
    }
    Ok(())
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

    #[test]
    fn reads_go_to_the_agent_its_ancestors_and_humans() {
        let seq = |n: &str| Duty::Sequencer {
            agent: AgentName::parse(n).unwrap(),
        };
        let kid = AgentName::parse("alice/w/kid").unwrap();
        for reader in ["alice/w/kid", "alice/w", "alice"] {
            assert!(may_read(&seq(reader), &kid, "Log").is_ok(), "{reader}");
        }
        for reader in ["alice/w/other", "alice/v", "alice/w/kid/grandkid", "bob"] {
            let err = may_read(&seq(reader), &kid, "Log").unwrap_err();
            assert!(err.to_string().contains("ancestors"), "{err}");
        }
        let human = Duty::Human {
            human: l3m_core::names::HumanName::parse("alice").unwrap(),
        };
        assert!(may_read(&human, &kid, "inbox").is_ok());
    }

    #[test]
    fn airmail_needs_both_the_airmail_and_the_mail_axis() {
        use l3m_core::grant::MailCover;
        let duty = Duty::Sequencer {
            agent: AgentName::parse("alice").unwrap(),
        };
        let far = OfficeName::parse("far").unwrap();
        let mut grant = Grant::default();
        let err = may_stage_airmail(&duty, &grant, &far).unwrap_err();
        assert!(err.to_string().contains("`airmail`"), "{err}");
        grant.airmail.insert(far.clone());
        let err = may_stage_airmail(&duty, &grant, &far).unwrap_err();
        assert!(err.to_string().contains("`mail`"), "{err}");
        grant.mail.insert(MailCover::Office(far.clone()));
        assert!(may_stage_airmail(&duty, &grant, &far).is_ok());
        let near = OfficeName::parse("near").unwrap();
        assert!(may_stage_airmail(&duty, &grant, &near).is_err());
    }
}
