//! `hubd.regrant`: an agent's issuer replaces its grant, through the ledger's regrant gate.

use l3m_core::grant::Grant;
use l3m_core::ledger::{LedgerRow, Life};
use l3m_core::refs::AgentRef;
use l3m_wire::hubd::authority::Regranted;
use l3m_wire::hubd::session::Capability;

use super::{Moved, State, not_found};
use crate::capability::entity_of;
use crate::service::error::ServiceError;
use crate::service::gate;

impl State {
    /// `hubd.regrant`: only the agent's issuer (its parent); the new grant within the issuer's
    /// (the ledger's gate, and a root's human's registered grant), its live children within the
    /// new one. The ledger row and the grants ref are written under the tree lock, so the
    /// grants ref follows the ledger's order.
    pub fn regrant(
        &self,
        capability: &Capability,
        agent: &str,
        grant: Grant,
    ) -> Result<(Regranted, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        let issuer = entity_of(&duty).ok_or_else(|| ServiceError::NotAllowed {
            duty: duty.to_string(),
            action: format!("regrant {agent}"),
            reason: "a grant is changed only by its issuer: a human or a parent's sequencer",
        })?;
        let mut tree = self.tree();
        let parent = match tree.ledger.agent(&agent) {
            Some(entry) if entry.life == Life::Live => entry.parent.clone(),
            Some(entry) => {
                let detail = format!(" as live: it is {}", entry.life);
                return Err(not_found("agent", &agent, detail));
            }
            None => return Err(not_found("agent", &agent, String::new())),
        };
        gate::may_regrant(&duty, &issuer, &parent, &agent)?;
        gate::regrant_bounds(&tree.ledger, &parent, &agent, &grant)?;
        let row = LedgerRow::Regrant {
            issuer,
            subject: agent.clone(),
            grant: grant.clone(),
            at_ms: self.now_ms(),
        };
        self.append_ledger(&mut tree, &[row], &format!("regrant {agent} by {parent}"))?;
        let account = tree.ledger.account(&agent).cloned().ok_or_else(|| {
            ServiceError::Internal(format!("{agent} has no account after its regrant"))
        })?;
        let grants_tip = self.write_grants(&agent, &grant, &account)?;
        drop(tree);
        Ok((
            Regranted {
                agent: agent.to_string(),
                grants_tip: grants_tip.to_string(),
            },
            (AgentRef::Grants, agent),
        ))
    }
}
