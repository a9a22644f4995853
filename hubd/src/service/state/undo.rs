//! The undo chain: what an agent's tame edits replaced, appended by its sequencer before each
//! edit, and read back for a rewind.

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::session::Capability;
use l3m_wire::hubd::undo::{UndoAppended, UndoRange};

use crate::service::error::ServiceError;
use crate::service::gate;

use super::{Moved, State};

impl State {
    /// `hubd.append-undo`: lines checked for shape, then appended by CAS.
    pub fn append_undo(
        &self,
        capability: &Capability,
        agent: &str,
        expected: Option<&str>,
        lines: &[String],
    ) -> Result<(UndoAppended, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        let refname = refs::agent_ref(&agent, AgentRef::Undo);
        may_write(&duty, &refname, RefWrite::Append)?;
        let expected = gate::tip(expected)?;
        let actual = self.hub.tip(&refname)?;
        if actual != expected {
            return Err(ServiceError::Conflict {
                refname,
                expected,
                actual,
            });
        }
        gate::undo_lines(lines)?;
        let summary = format!("undo: {} line(s) before an edit", lines.len());
        let appended = self.hub.append(&refname, expected, lines, &summary)?;
        Ok((
            UndoAppended {
                tip: appended.commit.to_string(),
                len: appended.len,
            },
            (AgentRef::Undo, agent),
        ))
    }

    /// `hubd.read-undo`.
    pub fn read_undo(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
        to: u64,
    ) -> Result<UndoRange, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        gate::may_read_undo(&duty, &agent)?;
        let refname = refs::agent_ref(&agent, AgentRef::Undo);
        let (lines, from, len, tip) = self.read_page(&refname, from, to)?;
        Ok(UndoRange {
            lines,
            from,
            len,
            tip,
        })
    }
}
