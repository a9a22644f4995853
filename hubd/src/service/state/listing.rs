//! `hubd.list-tree`: a page of the agent tree with why each stuck asleep agent is stuck, so
//! `l3m tree`, `l3m ls` and `l3m status` ask once per page instead of reading every Log.
//!
//! What an asleep agent's tail says is kept per agent with the Log tip it was read at
//! ([`Stuck`]): a listing reads a Log again only when it moved since, so listing 10,000 asleep
//! agents costs one in-memory tip lookup each once their tails are known.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use l3m_core::names::AgentName;
use l3m_core::record_format;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::session::Capability;
use l3m_wire::hubd::tree::{AgentLife, StuckAgent, TREE_PAGE_AGENTS, TreePage, stuck_suffix};

use crate::service::error::ServiceError;
use crate::service::gate;
use crate::store::Tip;

use super::{READ_ATTEMPTS, State};

/// What each asleep agent's tail said, with the tip and tail length it was read at.
#[derive(Debug, Default)]
pub struct Stuck {
    by_agent: Mutex<HashMap<AgentName, Known>>,
}

/// One agent's answer and what it was read at.
#[derive(Debug, Clone)]
struct Known {
    tip: Tip,
    tail: u64,
    records: Option<Vec<l3m_core::log::Record>>,
}

/// The room one agent's entry takes in a page, besides its text: framing and the life's word.
const ENTRY_FRAMING: usize = 64;

impl State {
    /// `hubd.list-tree`: one page of agents after `after` (as `list-agents` gives them, up to
    /// [`TREE_PAGE_AGENTS`]) and, when `tail` > 0, the stuck part of each asleep one whose
    /// Log the caller may read.
    pub fn list_tree(
        &self,
        capability: &Capability,
        after: Option<&str>,
        tail: u64,
    ) -> Result<TreePage, ServiceError> {
        let duty = self.duty(capability)?;
        let after = after.map(gate::agent).transpose()?;
        let tail = tail.min(record_format::PAGE_LINES);
        // One more than a page holds, to know whether another page follows.
        let agents = self.agent_states(after.as_ref(), TREE_PAGE_AGENTS + 1);
        let mut stuck = Vec::new();
        let mut sizes = Vec::with_capacity(agents.len());
        for a in &agents {
            let mut size = a.name.len()
                + a.parent.len()
                + a.holder.as_ref().map_or(0, String::len)
                + ENTRY_FRAMING;
            if tail > 0 && a.life == AgentLife::Asleep {
                let name = gate::agent(&a.name)?;
                if gate::may_read(&duty, &name, "Log").is_ok()
                    && let Some(records) = self.stuck_of(&name, tail)?
                {
                    size += records
                        .iter()
                        .map(|r| record_format::to_line(r).map_or(0, |l| l.len()) + ENTRY_FRAMING)
                        .sum::<usize>();
                    stuck.push(StuckAgent {
                        agent: a.name.clone(),
                        records,
                    });
                }
            }
            sizes.push(size);
        }
        let fits = record_format::page_len(sizes).min(TREE_PAGE_AGENTS);
        let mut agents = agents;
        let next = (fits < agents.len()).then(|| agents[fits - 1].name.clone());
        agents.truncate(fits);
        if let Some(last) = agents.last() {
            let last = last.name.clone();
            stuck.retain(|s| s.agent <= last);
        }
        Ok(TreePage {
            agents,
            stuck,
            next,
        })
    }

    /// The stuck part of `agent`'s last `tail` Log records, read only when its Log moved
    /// since it was last read (or was read with another tail).
    fn stuck_of(
        &self,
        agent: &AgentName,
        tail: u64,
    ) -> Result<Option<Vec<l3m_core::log::Record>>, ServiceError> {
        let refname = refs::agent_ref(agent, AgentRef::Log);
        let known = |tip: &Tip| {
            let map = self
                .stuck
                .by_agent
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            map.get(agent)
                .filter(|k| &k.tip == tip && k.tail == tail)
                .map(|k| k.records.clone())
        };
        for _ in 0..READ_ATTEMPTS {
            let tip = self.hub.tip(&refname)?;
            if let Some(record) = known(&tip) {
                return Ok(record);
            }
            let lines = match tip {
                Tip::Absent => Vec::new(),
                Tip::At(_) => {
                    let len = self.hub.len(&refname)?;
                    self.hub
                        .read_range(&refname, len.saturating_sub(tail), len)?
                }
            };
            if self.hub.tip(&refname)? != tip {
                continue;
            }
            // A line that does not parse says nothing of how a turn ended.
            let records: Vec<l3m_core::log::Record> = lines
                .iter()
                .filter_map(|l| record_format::from_line(l, 1).ok())
                .collect();
            let part = stuck_suffix(&records);
            self.stuck
                .by_agent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(
                    agent.clone(),
                    Known {
                        tip,
                        tail,
                        records: part.clone(),
                    },
                );
            return Ok(part);
        }
        Err(ServiceError::Internal(format!(
            "{refname} moved during each of {READ_ATTEMPTS} reads; list again"
        )))
    }
}
