//! Airmail: `hubd.stage-airmail`, a letter for another hub stamped and staged on the sender's
//! outbox; and `hubd.deliver-airmail`, letters another hub's postman carried here, mirrored and
//! then relayed into their recipients' inboxes by set union on their ids.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::PoisonError;

use l3m_core::duty::{Duty, RefWrite, may_write};
use l3m_core::mail::delivery::{self, Chain, Held};
use l3m_core::mail::{self, Address, InboxEntry, Letter, Sender};
use l3m_core::names::{AgentName, OfficeName};
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::mail::{
    AirmailDelivered, AirmailStaged, Bounced, BouncesReturned, Cursor, CursorMoved, Returned,
};
use l3m_wire::hubd::session::Capability;

use super::{Moved, State, not_found};
use crate::store::Tip;

/// The file on an office's cursor ref.
const CURSOR_FILE: &str = "positions.json";
use crate::service::error::ServiceError;
use crate::service::gate;

impl State {
    /// `hubd.stage-airmail`: only an agent's sequencer, for an office its grant covers on
    /// both the mail and the airmail axis; appended to its own outbox as one stamped letter
    /// line (the same line an inbox holds, so the postman relays it by set union).
    ///
    /// The star is not vouched for here: whether the starred party exists is known only to the
    /// office's ledger, which this hub does not mirror yet; the office refuses on delivery.
    pub fn stage_airmail(
        &self,
        capability: &Capability,
        to: &str,
        subject: Option<String>,
        body: String,
    ) -> Result<(AirmailStaged, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let Duty::Sequencer { agent } = &duty else {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: "stage airmail".into(),
                reason: "airmail is staged by an agent's sequencer, on that agent's own outbox",
            });
        };
        let address = Address::parse(to)
            .map_err(|e| ServiceError::Invalid(format!("address {to:?}: {e}")))?;
        let Some(office) = address.office().cloned() else {
            return Err(ServiceError::Invalid(format!(
                "address {to:?} names no office: a letter within this hub goes by send-letter"
            )));
        };
        {
            let tree = self.tree();
            let grant = tree
                .ledger
                .grant(agent)
                .ok_or_else(|| not_found("agent", agent, " as live".into()))?;
            gate::may_stage_airmail(&duty, grant, &office)?;
        }
        let outbox = refs::agent_ref(agent, AgentRef::Outbox);
        may_write(&duty, &outbox, RefWrite::Append)?;
        let sender = Sender::Agent {
            agent: agent.clone(),
            worktree: None,
            human: None,
        };
        let (id, letter) = self.stamp_letter(address, subject, body, &sender)?;
        let entry = InboxEntry::Letter(Box::new(letter));
        let summary = format!("airmail {} for office {office}", id.as_str());
        let seq = self.append_line(&outbox, &entry, &summary)?;
        Ok((
            AirmailStaged {
                letter: id.as_str().to_owned(),
                outbox,
                seq,
            },
            (AgentRef::Outbox, agent.clone()),
        ))
    }

    /// `hubd.deliver-airmail`: the postman's duty only, for an office the settings pin. Each
    /// letter goes onto the office's mirror chain, then into its recipient's inbox unless the
    /// inbox holds it already — so a retry after a crash or a partition delivers nothing twice,
    /// and nothing is delivered that the office did not carry. Each receipt for a letter this
    /// hub sent the office goes the same way into the letter's sender's inbox; a receipt for
    /// any other letter is refused, so an office cannot invent one.
    pub fn deliver_airmail(
        &self,
        capability: &Capability,
        office: &str,
        lines: &[String],
    ) -> Result<(AirmailDelivered, Vec<Moved>), ServiceError> {
        let duty = self.duty(capability)?;
        if !matches!(duty, Duty::Postman { .. }) {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: "deliver airmail".into(),
                reason: "only the postman hands over letters another hub carried",
            });
        }
        let office = OfficeName::parse(office)
            .map_err(|e| ServiceError::Invalid(format!("office {office:?}: {e}")))?;
        let pinned = self
            .settings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .offices
            .contains_key(&office);
        if !pinned {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: format!("deliver airmail from office {office}"),
                reason: "the office is not pinned in this hub's settings (l3m office add)",
            });
        }
        let entries =
            delivery::parse_batch(lines).map_err(|e| ServiceError::Invalid(e.to_string()))?;
        let mirror = refs::mirror_inbound(&office);
        may_write(&duty, &mirror, RefWrite::Append)?;
        let _one_at_a_time = self
            .deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Each inbox and outbox is read once per request, not once per entry; what is new is
        // appended once per chain at the end.
        let planned = delivery::deliver(
            &office,
            entries,
            self.held(&mirror)?,
            |agent| self.tree().ledger.is_live(agent),
            |chain| match chain {
                Chain::Inbox(agent) => {
                    let inbox = refs::agent_ref(agent, AgentRef::Inbox);
                    may_write(&duty, &inbox, RefWrite::Append)?;
                    self.held(&inbox)
                }
                Chain::Outbox(agent) => self.held(&refs::agent_ref(agent, AgentRef::Outbox)),
            },
        )?;
        let undelivered = |list: Vec<delivery::Undelivered>| {
            (list.into_iter())
                .map(|u| Bounced {
                    letter: u.letter,
                    reason: u.reason,
                })
                .collect()
        };
        let out = AirmailDelivered {
            delivered: planned.delivered,
            already: planned.already,
            bounced: undelivered(planned.bounced),
            receipts: planned.receipts,
            refused: undelivered(planned.refused),
        };
        let (to_mirror, to_inbox) = (planned.to_mirror, planned.to_inbox);
        let mut moved = Vec::new();
        // One commit per chain: the mirror first, so whatever reaches an inbox is mirrored.
        if !to_mirror.is_empty() {
            let summary =
                delivery::carried_summary(&to_mirror, &format!("carried by office {office}"));
            self.append_lines(&mirror, &to_mirror, &summary)?;
        }
        for (agent, entries) in to_inbox {
            let inbox = refs::agent_ref(&agent, AgentRef::Inbox);
            let summary = delivery::carried_summary(&entries, &format!("from office {office}"));
            self.append_lines(&inbox, &entries, &summary)?;
            moved.push((AgentRef::Inbox, agent));
        }
        Ok((out, moved))
    }

    /// `hubd.return-bounces`: the postman's duty only. Every bounced letter must be on its
    /// sender's outbox, addressed to `office` (checked for all before anything is written);
    /// its bounce goes into the sender's inbox unless it is there already.
    pub fn return_bounces(
        &self,
        capability: &Capability,
        office: &str,
        bounces: &[Returned],
    ) -> Result<(BouncesReturned, Vec<Moved>), ServiceError> {
        let duty = self.duty(capability)?;
        if !matches!(duty, Duty::Postman { .. }) {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: "return bounced airmail".into(),
                reason: "only the postman carries what an office answered",
            });
        }
        let office = OfficeName::parse(office)
            .map_err(|e| ServiceError::Invalid(format!("office {office:?}: {e}")))?;
        let mut outboxes: HashMap<AgentName, Vec<Letter>> = HashMap::new();
        let mut found = Vec::with_capacity(bounces.len());
        for returned in bounces {
            let agent = gate::agent(&returned.agent)?;
            self.require_known(&agent)?;
            let staged = match outboxes.entry(agent.clone()) {
                Entry::Occupied(staged) => staged.into_mut(),
                Entry::Vacant(slot) => {
                    let outbox = refs::agent_ref(&agent, AgentRef::Outbox);
                    slot.insert(self.letters_on(&outbox)?)
                }
            };
            let letter = staged
                .iter()
                .find(|l| l.id.as_str() == returned.letter && l.to.office() == Some(&office))
                .ok_or_else(|| {
                    ServiceError::Invalid(format!(
                        "{agent} staged no letter {} for office {office}; only a letter this \
                         hub sent there can come back bounced",
                        returned.letter
                    ))
                })?;
            found.push((agent, letter.clone(), returned.reason.as_str()));
        }
        let _one_at_a_time = self
            .deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut out = BouncesReturned {
            written: Vec::new(),
            already: Vec::new(),
        };
        let mut moved = Vec::new();
        let mut inboxes: HashMap<AgentName, Held> = HashMap::new();
        for (agent, letter, reason) in found {
            let bounce = mail::bounce(&letter, &office, reason, self.now_ms())
                .map_err(|e| ServiceError::Invalid(format!("bouncing {}: {e}", letter.id)))?;
            let inbox = refs::agent_ref(&agent, AgentRef::Inbox);
            may_write(&duty, &inbox, RefWrite::Append)?;
            let held = cached(&mut inboxes, &agent, |agent| {
                self.held(&refs::agent_ref(agent, AgentRef::Inbox))
            })?;
            let original = letter.id.to_string();
            if !held.note(bounce.id.clone()) {
                out.already.push(original);
                continue;
            }
            let summary = format!("bounce of {original} from office {office}");
            self.append_line(&inbox, &InboxEntry::Letter(Box::new(bounce)), &summary)?;
            announce(&mut moved, &agent);
            out.written.push(original);
        }
        Ok((out, moved))
    }

    /// `hubd.read-cursor`: how far the outboxes were carried to `office` (the postman, and
    /// humans, who see there which airmail an office holds).
    pub fn read_cursor(
        &self,
        capability: &Capability,
        office: &str,
    ) -> Result<Cursor, ServiceError> {
        let (_duty, refname) = self.cursor_ref(capability, office, true)?;
        let (positions, tip) = self.cursor_at(&refname)?;
        Ok(Cursor {
            positions,
            tip: gate::tip_hex(tip),
        })
    }

    /// `hubd.move-cursor`: the postman moves `office`'s cursor forward by compare-and-swap;
    /// a position behind the stored one is refused, so what an office acknowledged is never
    /// carried as new again by mistake, nor forgotten.
    pub fn move_cursor(
        &self,
        capability: &Capability,
        office: &str,
        positions: BTreeMap<String, u64>,
        expected: Option<&str>,
    ) -> Result<CursorMoved, ServiceError> {
        let (duty, refname) = self.cursor_ref(capability, office, false)?;
        may_write(&duty, &refname, RefWrite::Set)?;
        let expected = gate::tip(expected)?;
        let (stored, actual) = self.cursor_at(&refname)?;
        if actual != expected {
            return Err(ServiceError::Conflict {
                refname,
                expected,
                actual,
            });
        }
        for (agent, at) in &stored {
            let to = positions.get(agent).copied().unwrap_or(0);
            if to < *at {
                return Err(ServiceError::Invalid(format!(
                    "the cursor of {agent} would move back from {at} to {to}; it only moves forward"
                )));
            }
        }
        for agent in positions.keys() {
            gate::agent(agent)?;
        }
        let text = serde_json::to_string_pretty(&positions)
            .map_err(|e| ServiceError::Internal(format!("encoding a cursor: {e}")))?;
        let files: [(&str, &[u8]); 1] = [(CURSOR_FILE, text.as_bytes())];
        let commit =
            self.hub
                .commit_files(&refname, expected, &files, "postman: carried to here")?;
        Ok(CursorMoved {
            tip: commit.to_string(),
        })
    }

    /// The session's duty and the cursor ref of `office`: the postman's, or a human's when
    /// `human_reads`.
    fn cursor_ref(
        &self,
        capability: &Capability,
        office: &str,
        human_reads: bool,
    ) -> Result<(Duty, String), ServiceError> {
        let duty = self.duty(capability)?;
        let human = human_reads && matches!(duty, Duty::Human { .. });
        if !human && !matches!(duty, Duty::Postman { .. }) {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: if human_reads {
                    "read an office's cursor".into()
                } else {
                    "move an office's cursor".into()
                },
                reason: "only the postman carries airmail (humans may read how far it got)",
            });
        }
        let office = OfficeName::parse(office)
            .map_err(|e| ServiceError::Invalid(format!("office {office:?}: {e}")))?;
        Ok((duty, refs::mirror_sent(&office)))
    }

    /// The positions stored on `refname`, and its tip.
    fn cursor_at(&self, refname: &str) -> Result<(BTreeMap<String, u64>, Tip), ServiceError> {
        let tip = self.hub.tip(refname)?;
        if tip == Tip::Absent {
            return Ok((BTreeMap::new(), tip));
        }
        let bytes = self.hub.read_file(refname, CURSOR_FILE)?;
        let positions = serde_json::from_slice(&bytes)
            .map_err(|e| ServiceError::Internal(format!("{refname} holds a bad cursor: {e}")))?;
        Ok((positions, tip))
    }

    /// What the chain `refname` holds, as delivery checks it.
    fn held(&self, refname: &str) -> Result<Held, ServiceError> {
        Ok(Held::of(self.entries(refname)?))
    }

    /// The letters on the chain `refname`.
    fn letters_on(&self, refname: &str) -> Result<Vec<Letter>, ServiceError> {
        Ok((self.entries(refname)?.into_iter())
            .filter_map(InboxEntry::into_letter)
            .collect())
    }

    /// Every entry on the chain `refname`; a line that does not parse is skipped (hubd wrote
    /// each, so none should fail, and one bad line must not stop delivery).
    pub(in crate::service) fn entries(
        &self,
        refname: &str,
    ) -> Result<Vec<InboxEntry>, ServiceError> {
        let len = self.chain_len(refname)?;
        if len == 0 {
            return Ok(Vec::new());
        }
        let lines = self.hub.read_range(refname, 0, len)?;
        Ok(lines
            .iter()
            .enumerate()
            .filter_map(|(i, line)| InboxEntry::from_line(line, i + 1).ok())
            .collect())
    }
}

/// The entry for `agent` in `cache`, read by `read` the first time.
fn cached<'a>(
    cache: &'a mut HashMap<AgentName, Held>,
    agent: &AgentName,
    read: impl FnOnce(&AgentName) -> Result<Held, ServiceError>,
) -> Result<&'a mut Held, ServiceError> {
    Ok(match cache.entry(agent.clone()) {
        Entry::Occupied(held) => held.into_mut(),
        Entry::Vacant(slot) => slot.insert(read(agent)?),
    })
}

/// Notes that `agent`'s inbox moved, once.
fn announce(moved: &mut Vec<Moved>, agent: &AgentName) {
    if !moved.iter().any(|(_, a)| a == agent) {
        moved.push((AgentRef::Inbox, agent.clone()));
    }
}
