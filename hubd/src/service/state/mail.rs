//! Mail inside the hub: sending a letter (the sender's mail axis), reading an inbox in pages,
//! marking a letter read.

use l3m_core::duty::{Duty, RefWrite, may_write};
use l3m_core::grant::Probe;
use l3m_core::mail::{Address, Draft, InboxEntry, LetterId, ReadMark, Receipt, Sender};
use l3m_core::names::Entity;
use l3m_core::record_format;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::mail::{InboxLines, LetterSent, MarkedRead};
use l3m_wire::hubd::session::Capability;

use crate::service::error::ServiceError;
use crate::service::gate;
use l3m_wire::credential::random_hex;

use super::{Moved, State};

impl State {
    /// `hubd.send-letter`: stamped with the session's true sender, checked against the
    /// address's vouched star and the sender's mail axis, appended to the recipient's inbox.
    pub fn send_letter(
        &self,
        capability: &Capability,
        to: &str,
        subject: Option<String>,
        body: String,
        in_reply_to: Option<&str>,
    ) -> Result<(LetterSent, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let address = Address::parse(to)
            .map_err(|e| ServiceError::Invalid(format!("address {to:?}: {e}")))?;
        if let Some(office) = address.office() {
            return Err(ServiceError::Invalid(format!(
                "address {to:?} is at office {office}, another hub: stage it with stage-airmail"
            )));
        }
        let (sender, recipient) = {
            let tree = self.tree();
            let ledger = &tree.ledger;
            address
                .check_star(|entity| match entity {
                    Entity::Agent(a) => ledger.is_live(a),
                    Entity::Human(h) => ledger.human_grant(h).is_some(),
                    Entity::Service(s) => ledger.service_grant(s).is_some(),
                })
                .map_err(|e| ServiceError::Invalid(format!("address {to:?}: {e}")))?;
            let (recipient, _) = address.recipient();
            let sender = match &duty {
                Duty::Sequencer { agent } => {
                    // The grant as it reaches: its own covers plus the default reach of every
                    // agent (its own subtree and its ancestors).
                    let allowed = ledger.grant(agent).is_some_and(|g| {
                        g.expand_own(agent).allows(&Probe::Mail(recipient.clone()))
                    });
                    if !allowed {
                        return Err(ServiceError::NotAllowed {
                            duty: duty.to_string(),
                            action: format!("mail {recipient}"),
                            reason: "the sender's grant does not cover the recipient on its \
                                     `mail` axis",
                        });
                    }
                    Sender::Agent {
                        agent: agent.clone(),
                        worktree: None,
                        human: None,
                    }
                }
                Duty::Human { human } => Sender::Human {
                    human: human.clone(),
                    worktree: None,
                },
                Duty::Postman { .. } | Duty::Host { .. } => {
                    return Err(ServiceError::NotAllowed {
                        duty: duty.to_string(),
                        action: "send a letter".into(),
                        reason: "the postman carries airmail and a host wakes agents; neither \
                                 writes letters",
                    });
                }
            };
            (sender, recipient)
        };
        let Entity::Agent(agent) = recipient else {
            return Err(ServiceError::Invalid(format!(
                "{recipient} has no inbox in hub.git: hubd delivers to agents only"
            )));
        };
        let answers = match (in_reply_to, &sender) {
            (None, _) => None,
            (Some(answered), Sender::Agent { agent: own, .. }) => {
                Some(self.received(own, answered)?)
            }
            (Some(_), Sender::Human { .. }) => {
                return Err(ServiceError::Invalid(
                    "a human has no inbox here, so has no letter to answer".into(),
                ));
            }
        };
        let (id, mut letter) = self.stamp_letter(address, subject, body, &sender)?;
        letter.in_reply_to = answers;
        let entry = InboxEntry::Letter(Box::new(letter));
        let inbox = refs::agent_ref(&agent, AgentRef::Inbox);
        let seq = self.append_line(&inbox, &entry, &format!("letter {id}"))?;
        Ok((
            LetterSent {
                letter: id.as_str().to_owned(),
                inbox,
                seq,
            },
            (AgentRef::Inbox, agent),
        ))
    }

    /// The letter `id` as one `agent` received: in its own inbox, so a reply names a letter its
    /// sender really got.
    fn received(
        &self,
        agent: &l3m_core::names::AgentName,
        id: &str,
    ) -> Result<LetterId, ServiceError> {
        let inbox = refs::agent_ref(agent, AgentRef::Inbox);
        let (lines, _, _) = self.read_chain(&inbox, 0, u64::MAX)?;
        lines
            .iter()
            .enumerate()
            .find_map(|(i, line)| match InboxEntry::from_line(line, i + 1) {
                Ok(InboxEntry::Letter(l)) if l.id.as_str() == id => Some(l.id),
                _ => None,
            })
            .ok_or_else(|| {
                ServiceError::Invalid(format!(
                    "{agent}'s inbox holds no letter {id}; a reply answers a letter its sender got"
                ))
            })
    }

    /// A letter stamped by the host: a fresh random id, the time, the session's true sender.
    pub(in crate::service) fn stamp_letter(
        &self,
        address: Address,
        subject: Option<String>,
        body: String,
        sender: &Sender,
    ) -> Result<(LetterId, l3m_core::mail::Letter), ServiceError> {
        let id = random_hex()
            .map_err(|e| ServiceError::Internal(format!("the OS random source failed: {e}")))?;
        let id = LetterId::parse(&id).map_err(|e| ServiceError::Internal(e.to_string()))?;
        let mut draft = Draft::new(address, body);
        draft.subject = subject;
        let letter = l3m_core::mail::stamp(draft, sender, id.clone(), self.now_ms())
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        Ok((id, letter))
    }

    /// Appends one inbox line, retrying on a lost CAS (hubd is the inbox's only writer of
    /// letters; a concurrent letter only moves the tip).
    pub(in crate::service) fn append_line(
        &self,
        refname: &str,
        entry: &InboxEntry,
        summary: &str,
    ) -> Result<u64, ServiceError> {
        self.append_lines(refname, std::slice::from_ref(entry), summary)
    }

    /// Appends `entries` to the chain `refname` as one commit, retrying on a lost CAS; returns
    /// the seq of the first. An entry over the stored line limit refuses them all, naming it.
    pub(in crate::service) fn append_lines(
        &self,
        refname: &str,
        entries: &[InboxEntry],
        summary: &str,
    ) -> Result<u64, ServiceError> {
        let lines = entries
            .iter()
            .map(|entry| {
                let line = entry
                    .to_line()
                    .map_err(|e| ServiceError::Internal(format!("encoding an inbox line: {e}")))?;
                if line.len() > record_format::MAX_STORED_LINE {
                    return Err(ServiceError::Invalid(format!(
                        "{summary} is {} bytes as stored, over the limit of {} bytes for one \
                         inbox line; send a shorter text (control characters count escaped), or \
                         put the bulk in a file and send its path",
                        line.len(),
                        record_format::MAX_STORED_LINE
                    )));
                }
                Ok(line)
            })
            .collect::<Result<Vec<String>, _>>()?;
        loop {
            let tip = self.hub.tip(refname)?;
            match self.hub.append(refname, tip, &lines, summary) {
                Ok(appended) => return Ok(appended.first_seq),
                Err(crate::store::StoreError::Stale { .. }) => continue,
                Err(other) => return Err(other.into()),
            }
        }
    }

    /// `hubd.read-inbox`: the agent's own sequencer, an ancestor's, or a human.
    pub fn read_inbox(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
    ) -> Result<InboxLines, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        gate::may_read(&duty, &agent, "inbox")?;
        self.read_chain(&refs::agent_ref(&agent, AgentRef::Inbox), from, u64::MAX)
            .map(|(entries, from, len)| InboxLines { entries, from, len })
    }

    /// `hubd.read-outbox`: the postman reads any agent's outbox (it carries what is staged
    /// there); an agent's own sequencer, an ancestor's, or a human, as for an inbox.
    pub fn read_outbox(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
    ) -> Result<InboxLines, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        if !matches!(duty, Duty::Postman { .. }) {
            gate::may_read(&duty, &agent, "outbox")?;
        }
        self.read_chain(&refs::agent_ref(&agent, AgentRef::Outbox), from, u64::MAX)
            .map(|(entries, from, len)| InboxLines { entries, from, len })
    }

    /// `hubd.mark-read`: a read mark on the caller's own inbox. A letter another hub carried
    /// here also gets a receipt on the reader's outbox, for the postman to carry back; the
    /// receipt is written first, so a crash between the two leaves the letter unread (marked
    /// again later, and the second receipt is the same read to its sender) rather than read
    /// with no receipt.
    pub fn mark_read(
        &self,
        capability: &Capability,
        letter: &str,
    ) -> Result<(MarkedRead, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let Duty::Sequencer { agent } = &duty else {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: "mark a letter read".into(),
                reason: "a read mark goes on the reader's own inbox; only an agent has one in hub.git",
            });
        };
        let inbox = refs::agent_ref(agent, AgentRef::Inbox);
        may_write(&duty, &inbox, RefWrite::Append)?;
        let letter = LetterId::parse(letter)
            .map_err(|e| ServiceError::Invalid(format!("letter id: {e}")))?;
        let at_ms = self.now_ms();
        let by = Entity::Agent(agent.clone());
        let airmail = self
            .entries(&inbox)?
            .into_iter()
            .find_map(|entry| match entry {
                InboxEntry::Letter(l) if l.id == letter => {
                    Some((l.from.office()?.clone(), l.from.agent()?.clone()))
                }
                _ => None,
            });
        if let Some((office, sender)) = airmail {
            let outbox = refs::agent_ref(agent, AgentRef::Outbox);
            may_write(&duty, &outbox, RefWrite::Append)?;
            let receipt = InboxEntry::Receipt(Receipt {
                letter: letter.clone(),
                office: office.clone(),
                sender,
                by: by.clone(),
                at_ms,
            });
            let summary = format!("receipt for {} to office {office}", letter.as_str());
            self.append_line(&outbox, &receipt, &summary)?;
        }
        let entry = InboxEntry::ReadMark(ReadMark {
            letter: letter.clone(),
            by,
            at_ms,
        });
        let seq = self.append_line(&inbox, &entry, &format!("read {}", letter.as_str()))?;
        Ok((MarkedRead { seq }, (AgentRef::Inbox, agent.clone())))
    }
}
