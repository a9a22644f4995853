//! `hubd.stage-airmail`: a letter for another hub, stamped and staged on the sender's outbox.

use l3m_core::duty::{Duty, RefWrite, may_write};
use l3m_core::mail::{Address, InboxEntry, Sender};
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::mail::AirmailStaged;
use l3m_wire::hubd::session::Capability;

use super::{Moved, State, not_found};
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
}
