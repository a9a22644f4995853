//! The cards chain: wild calls at a stalemate, raised by the agent's own sequencer and
//! answered by a human, each line checked by core's `admit_card_line` before it is appended.

use l3m_core::duty::{RefWrite, may_write};
use l3m_core::refs::{self, AgentRef};
use l3m_core::review::card::{CardError, CardLine, admit_card_line, parse_card_line};
use l3m_wire::hubd::cards::{CardAppended, CardRange};
use l3m_wire::hubd::session::Capability;

use crate::service::error::ServiceError;
use crate::service::gate;

use super::{Moved, State};

/// Appends lost to a concurrent append before giving up (a raise and an answer racing).
const APPEND_ATTEMPTS: usize = 3;

fn refused(e: CardError) -> ServiceError {
    match e {
        CardError::Malformed(why) => ServiceError::Invalid(format!("not a card line: {why}")),
        CardError::NotTheProposer { duty, .. } => ServiceError::NotAllowed {
            duty,
            action: "raise this agent's card".into(),
            reason: "a card is raised only by the agent's own sequencer",
        },
        CardError::NotAHuman { duty, id } => ServiceError::NotAllowed {
            duty,
            action: format!("answer card {id}"),
            reason: "cards are answered by humans only",
        },
        CardError::NotWaiting { .. } => ServiceError::Invalid(e.to_string()),
    }
}

impl State {
    /// `hubd.append-card`: the line parsed and admitted against the chain, then appended.
    pub fn append_card(
        &self,
        capability: &Capability,
        agent: &str,
        line: &str,
    ) -> Result<(CardAppended, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        let refname = refs::agent_ref(&agent, AgentRef::Cards);
        may_write(&duty, &refname, RefWrite::Append)?;
        let line = parse_card_line(line).map_err(refused)?;
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS {
            let tip = self.hub.tip(&refname)?;
            let stored = match tip.id() {
                Some(_) => self.hub.read_range(&refname, 0, self.hub.len(&refname)?)?,
                None => Vec::new(),
            };
            let existing: Vec<CardLine> = stored
                .iter()
                .filter_map(|l| parse_card_line(l).ok())
                .collect();
            let admitted =
                admit_card_line(&duty, &agent, &existing, line.clone()).map_err(refused)?;
            let text = serde_json::to_string(&admitted)
                .map_err(|e| ServiceError::Internal(format!("encoding a card line: {e}")))?;
            let summary = match &admitted {
                CardLine::Raised { id, .. } => format!("card {id}: raised at a stalemate"),
                CardLine::Answered {
                    id, by, approve, ..
                } => {
                    format!(
                        "card {id}: {} by {by}",
                        if *approve { "approved" } else { "denied" }
                    )
                }
            };
            match self.hub.append(&refname, tip, &[text], &summary) {
                Ok(appended) => {
                    return Ok((CardAppended { len: appended.len }, (AgentRef::Cards, agent)));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or_else(
            || ServiceError::Internal("no append was tried".into()),
            ServiceError::from,
        ))
    }

    /// `hubd.read-cards`: the agent's own sequencer, its host, or a human.
    pub fn read_cards(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
        to: u64,
    ) -> Result<CardRange, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        gate::may_read_undo(&duty, &agent)?;
        let refname = refs::agent_ref(&agent, AgentRef::Cards);
        if self.hub.tip(&refname)?.id().is_none() {
            return Ok(CardRange {
                lines: Vec::new(),
                from,
                len: 0,
                tip: None,
            });
        }
        let (lines, from, len, tip) = self.read_page(&refname, from, to)?;
        Ok(CardRange {
            lines,
            from,
            len,
            tip,
        })
    }
}
