//! Airmail: `hubd.stage-airmail`, a letter for another hub stamped and staged on the sender's
//! outbox; and `hubd.deliver-airmail`, letters another hub's postman carried here, mirrored and
//! then relayed into their recipients' inboxes by set union on their ids.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::PoisonError;

use l3m_core::duty::{Duty, RefWrite, may_write};
use l3m_core::mail::{self, Address, InboxEntry, Letter, Sender};
use l3m_core::names::{AgentName, Entity, OfficeName};
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::mail::{AirmailDelivered, AirmailStaged, Bounced, Cursor, CursorMoved};
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
    /// and nothing is delivered that the office did not carry.
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
        let letters = lines
            .iter()
            .enumerate()
            .map(|(i, line)| match InboxEntry::from_line(line, i + 1) {
                Ok(InboxEntry::Letter(letter)) => Ok(*letter),
                Ok(other) => Err(ServiceError::Invalid(format!(
                    "airmail line {i} is a {}, not a letter",
                    other.kind()
                ))),
                Err(e) => Err(ServiceError::Invalid(format!("airmail line {i}: {e}"))),
            })
            .collect::<Result<Vec<Letter>, _>>()?;
        let mirror = refs::mirror_inbound(&office);
        may_write(&duty, &mirror, RefWrite::Append)?;
        let _one_at_a_time = self
            .deliveries
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut mirrored = self.letter_ids(&mirror)?;
        let mut out = AirmailDelivered {
            delivered: Vec::new(),
            already: Vec::new(),
            bounced: Vec::new(),
        };
        let mut moved = Vec::new();
        // Each recipient's inbox is read once per request, not once per letter.
        let mut held: HashMap<AgentName, HashSet<String>> = HashMap::new();
        for carried in letters {
            let id = carried.id.to_string();
            let bounce = |reason: String| Bounced {
                letter: id.clone(),
                reason,
            };
            let local = match mail::receive(carried.clone(), &office) {
                Ok(local) => local,
                Err(refusal) => {
                    out.bounced.push(bounce(refusal.to_string()));
                    continue;
                }
            };
            let agent = match local.to.recipient().0 {
                Entity::Agent(agent) if self.tree().ledger.is_live(&agent) => agent,
                Entity::Agent(agent) => {
                    out.bounced
                        .push(bounce(format!("no agent {agent} lives on this hub")));
                    continue;
                }
                other => {
                    out.bounced.push(bounce(format!(
                        "airmail reaches agents only; {other} has no inbox on this hub"
                    )));
                    continue;
                }
            };
            if mirrored.insert(id.clone()) {
                let entry = InboxEntry::Letter(Box::new(carried));
                let summary = format!("airmail {id} carried by office {office}");
                self.append_line(&mirror, &entry, &summary)?;
            }
            let inbox = refs::agent_ref(&agent, AgentRef::Inbox);
            may_write(&duty, &inbox, RefWrite::Append)?;
            let ids = match held.entry(agent.clone()) {
                Entry::Occupied(ids) => ids.into_mut(),
                Entry::Vacant(slot) => slot.insert(self.letter_ids(&inbox)?),
            };
            if !ids.insert(id.clone()) {
                out.already.push(id);
                continue;
            }
            let summary = format!("airmail {id} from office {office}");
            self.append_line(&inbox, &InboxEntry::Letter(Box::new(local)), &summary)?;
            if !moved.iter().any(|(_, a)| *a == agent) {
                moved.push((AgentRef::Inbox, agent));
            }
            out.delivered.push(id);
        }
        Ok((out, moved))
    }

    /// `hubd.read-cursor`: how far the outboxes were carried to `office`.
    pub fn read_cursor(
        &self,
        capability: &Capability,
        office: &str,
    ) -> Result<Cursor, ServiceError> {
        let (_duty, refname) = self.cursor_ref(capability, office)?;
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
        let (duty, refname) = self.cursor_ref(capability, office)?;
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

    /// The postman's session and the cursor ref of a pinned `office`.
    fn cursor_ref(
        &self,
        capability: &Capability,
        office: &str,
    ) -> Result<(Duty, String), ServiceError> {
        let duty = self.duty(capability)?;
        if !matches!(duty, Duty::Postman { .. }) {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: "read or move an office's cursor".into(),
                reason: "only the postman carries airmail",
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

    /// The ids of the letters on the chain `refname` (its read marks are not letters).
    fn letter_ids(&self, refname: &str) -> Result<HashSet<String>, ServiceError> {
        let len = self.chain_len(refname)?;
        if len == 0 {
            return Ok(HashSet::new());
        }
        let lines = self.hub.read_range(refname, 0, len)?;
        Ok(lines
            .iter()
            .enumerate()
            .filter_map(|(i, line)| match InboxEntry::from_line(line, i + 1) {
                Ok(InboxEntry::Letter(letter)) => Some(letter.id.to_string()),
                _ => None,
            })
            .collect())
    }
}
