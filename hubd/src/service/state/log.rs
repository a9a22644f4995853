//! The Log: appending records by compare-and-swap after the record gate, and reading pages
//! of a chain.

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::record_format;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::log::{LogAppended, LogRange};
use l3m_wire::hubd::session::Capability;

use crate::service::error::ServiceError;
use crate::service::gate;
use crate::store::Tip;

use super::{Moved, READ_ATTEMPTS, State};

impl State {
    /// `hubd.append-log`: records checked against the chain, then appended by CAS.
    pub fn append_log(
        &self,
        capability: &Capability,
        agent: &str,
        expected: Option<&str>,
        records: &[String],
    ) -> Result<(LogAppended, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        let refname = refs::agent_ref(&agent, AgentRef::Log);
        may_write(&duty, &refname, RefWrite::Append)?;
        let expected = gate::tip(expected)?;
        let conflict = |actual| ServiceError::Conflict {
            refname: refname.clone(),
            expected,
            actual,
        };
        let actual = self.hub.tip(&refname)?;
        if actual != expected {
            return Err(conflict(actual));
        }
        let len = self.chain_len(&refname)?;
        let checked = match gate::records(records, len) {
            Ok(checked) => checked,
            Err(invalid) => {
                // The length may belong to a newer tip than the one compared: then it is a
                // conflict.
                let actual = self.hub.tip(&refname)?;
                return Err(if actual == expected {
                    invalid
                } else {
                    conflict(actual)
                });
            }
        };
        let summary = l3m_core::story::subject(&checked);
        let appended = self.hub.append(&refname, expected, records, &summary)?;
        Ok((
            LogAppended {
                tip: appended.commit.to_string(),
                first_seq: appended.first_seq,
                len: appended.len,
            },
            (AgentRef::Log, agent),
        ))
    }

    /// `hubd.read-log`.
    pub fn read_log(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
        to: u64,
    ) -> Result<LogRange, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        // Which agents exist is public (list-agents); what they hold is not.
        self.require_known(&agent)?;
        gate::may_read(&duty, &agent, "Log")?;
        let refname = refs::agent_ref(&agent, AgentRef::Log);
        let (records, from, len, tip) = self.read_page(&refname, from, to)?;
        Ok(LogRange {
            records,
            from,
            len,
            tip,
        })
    }

    /// One page of a chain with the tip its length belongs to. The tip is read on both sides of
    /// the range, so the length returned is the tip's. A chain that keeps moving under the read
    /// is retried a bounded number of times, so a write storm cannot hold a reader forever.
    pub(in crate::service) fn read_page(
        &self,
        refname: &str,
        from: u64,
        to: u64,
    ) -> Result<(Vec<String>, u64, u64, Option<String>), ServiceError> {
        for _ in 0..READ_ATTEMPTS {
            let before = self.hub.tip(refname)?;
            let (lines, from, len) = self.read_chain(refname, from, to)?;
            if self.hub.tip(refname)? == before {
                return Ok((lines, from, len, gate::tip_hex(before)));
            }
        }
        Err(ServiceError::Internal(format!(
            "{refname} moved during each of {READ_ATTEMPTS} reads; read it again"
        )))
    }

    /// One page of the chain `refname` from `from` (up to `to`): at most `PAGE_LINES` lines,
    /// cut to `PAGE_BYTES`; with the first line's number and the chain's length.
    pub(in crate::service) fn read_chain(
        &self,
        refname: &str,
        from: u64,
        to: u64,
    ) -> Result<(Vec<String>, u64, u64), ServiceError> {
        let len = self.chain_len(refname)?;
        let from = from.min(len);
        let to = to
            .min(len)
            .min(from.saturating_add(record_format::PAGE_LINES));
        let from = from.min(to);
        let mut lines = if from == to {
            Vec::new()
        } else {
            self.hub.read_range(refname, from, to)?
        };
        lines.truncate(record_format::page_len(lines.iter().map(String::len)));
        Ok((lines, from, len))
    }

    /// A chain's length; a chain not yet started has none.
    pub(in crate::service) fn chain_len(&self, refname: &str) -> Result<u64, ServiceError> {
        match self.hub.tip(refname)? {
            Tip::Absent => Ok(0),
            Tip::At(_) => Ok(self.hub.len(refname)?),
        }
    }
}
