//! The agent tree: spawning through the ledger's gate, retiring, collecting, listing, and
//! reading an agent's grant.

use std::sync::PoisonError;
use std::time::Instant;

use l3m_core::duty::Duty;
use l3m_core::grant::{ForkFrom, SpawnRequest};
use l3m_core::ledger::{LedgerRow, Life};
use l3m_core::log::Record;
use l3m_core::names::AgentName;
use l3m_core::owed;
use l3m_core::record_format;
use l3m_core::refs::{self, AgentRef};
use l3m_wire::hubd::authority::GrantView;
use l3m_wire::hubd::session::Capability;
use l3m_wire::hubd::tree::{AgentLife, AgentState, AgentTree, Collected, Retired, Spawned};

use crate::capability::entity_of;
use crate::service::error::ServiceError;
use crate::service::gate;
use crate::store::Tip;

use super::{Moved, State, not_found};

impl State {
    pub(in crate::service) fn require_known(&self, agent: &AgentName) -> Result<(), ServiceError> {
        match self.tree().ledger.agent(agent) {
            Some(_) => Ok(()),
            None => Err(not_found("agent", agent, String::new())),
        }
    }

    /// The persona a live agent wears, as its spawn row recorded it.
    pub(in crate::service) fn worn_persona(
        &self,
        agent: &AgentName,
    ) -> Result<Option<l3m_core::names::PersonaName>, ServiceError> {
        match self.tree().ledger.agent(agent) {
            Some(entry) if entry.life == Life::Live => Ok(entry.persona.clone()),
            Some(entry) => Err(not_found(
                "agent",
                agent,
                format!(" as live: it is {}", entry.life),
            )),
            None => Err(not_found("agent", agent, String::new())),
        }
    }

    /// `hubd.read-grant`.
    pub fn read_grant(
        &self,
        capability: &Capability,
        agent: &str,
    ) -> Result<GrantView, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        let tree = self.tree();
        match tree.ledger.agent(&agent) {
            Some(entry) if entry.life == Life::Live => {
                gate::may_read(&duty, &agent, "grant")?;
                let settings = self.settings.read().unwrap_or_else(PoisonError::into_inner);
                Ok(GrantView {
                    agent: agent.to_string(),
                    grant: entry.grant.clone(),
                    account: entry.account.clone(),
                    push_urls: crate::service::settings::push_urls(&settings, &entry.grant),
                })
            }
            Some(entry) => Err(not_found(
                "agent",
                &agent,
                format!(" as live: it is {}", entry.life),
            )),
            None => Err(not_found("agent", &agent, String::new())),
        }
    }

    /// `hubd.spawn`: the spawn gate (the ledger's fold), then the child's refs and ACR.
    pub fn spawn(
        &self,
        capability: &Capability,
        req: SpawnRequest,
    ) -> Result<(Spawned, Vec<Moved>), ServiceError> {
        let duty = self.duty(capability)?;
        let parent = match &duty {
            Duty::Human { .. } | Duty::Sequencer { .. } => entity_of(&duty),
            Duty::Postman { .. } | Duty::Host { .. } => None,
        }
        .ok_or_else(|| ServiceError::NotAllowed {
            duty: duty.to_string(),
            action: format!("spawn {}", req.child),
            reason: "only a human spawns roots, and only an agent's sequencer its children",
        })?;
        let persona_commit = match &req.persona {
            None => None,
            Some(persona) => {
                let refname = refs::persona(persona);
                match self.hub.tip(&refname)? {
                    Tip::At(id) => Some(id),
                    Tip::Absent => {
                        return Err(ServiceError::UnknownPersona {
                            persona: persona.to_string(),
                            refname,
                        });
                    }
                }
            }
        };
        let seed = match &req.fork {
            None => None,
            Some(from) => Some(self.fork_seed(&duty, &req, from)?),
        };
        let child = req.child.clone();
        let row = LedgerRow::Spawn {
            parent: parent.clone(),
            child: child.clone(),
            grant: req.grant.clone(),
            loan: req.loan,
            driven: req.driven,
            persona: req.persona.clone(),
            at_ms: self.now_ms(),
        };
        let mut tree = self.tree();
        self.append_ledger(&mut tree, &[row], &format!("spawn {child} by {parent}"))?;
        let account =
            tree.ledger.account(&child).cloned().ok_or_else(|| {
                ServiceError::Internal(format!("{child} not live after its spawn"))
            })?;
        drop(tree);
        let mut moved = vec![(AgentRef::Grants, child.clone())];
        let grants_tip = self.write_grants(&child, &req.grant, &account)?;
        self.fork_persona(&child, persona_commit)?;
        moved.push((AgentRef::Persona, child.clone()));
        let work_branch = self.fork_work_branch(&child, &parent)?;
        if let Some(records) = seed {
            self.seed_log(&child, &records)?;
            moved.push((AgentRef::Log, child.clone()));
        }
        Ok((
            Spawned {
                child: child.to_string(),
                grants_tip: grants_tip.to_string(),
                work_branch,
                acr: refs::paths::acr(&child).display().to_string(),
            },
            moved,
        ))
    }

    /// A fork's first records, checked before anything is written: the spawner may read the
    /// source's Log, the child's grant is within the source's (a fork never gains authority
    /// over its source), and the Log holds the record forked at.
    fn fork_seed(
        &self,
        duty: &Duty,
        req: &SpawnRequest,
        from: &ForkFrom,
    ) -> Result<Vec<Record>, ServiceError> {
        let source = &from.source;
        self.require_known(source)?;
        gate::may_read(duty, source, "Log")?;
        let source_grant = self
            .tree()
            .ledger
            .grant(source)
            .cloned()
            .ok_or_else(|| not_found("agent", source, String::new()))?;
        req.grant
            .within(&source_grant)
            .map_err(|widening| ServiceError::ForkWider {
                source_agent: source.clone(),
                widening,
            })?;
        let refname = refs::agent_ref(source, AgentRef::Log);
        let len = self.chain_len(&refname)?;
        if from.at >= len {
            return Err(ServiceError::Invalid(format!(
                "{source}'s Log has {len} record(s), so there is no record {} to fork at; `l3m log {source}` lists them",
                from.at
            )));
        }
        let lines = self.hub.read_range(&refname, 0, from.at + 1)?;
        let prefix = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                record_format::from_line(line, i + 1).map_err(|e| {
                    ServiceError::Internal(format!(
                        "{refname} holds a record that does not read: {e}"
                    ))
                })
            })
            .collect::<Result<Vec<Record>, _>>()?;
        let reason = format!("forked from {source} at record {}", from.at);
        Ok(owed::fork_log(prefix, &reason, self.now_ms()))
    }

    /// Writes a fork's first records as the new agent's Log, through the record gate like any
    /// append.
    fn seed_log(&self, child: &AgentName, records: &[Record]) -> Result<(), ServiceError> {
        let lines = records
            .iter()
            .map(|r| {
                r.to_line()
                    .map_err(|e| ServiceError::Internal(format!("a forked record: {e}")))
            })
            .collect::<Result<Vec<String>, _>>()?;
        let checked = gate::records(&lines, 0)?;
        let refname = refs::agent_ref(child, AgentRef::Log);
        let summary = l3m_core::story::subject(&checked);
        self.hub.append(&refname, Tip::Absent, &lines, &summary)?;
        Ok(())
    }

    /// Writes `child`'s grants ref: its grant and its account, as JSON files.
    pub(in crate::service) fn write_grants(
        &self,
        child: &AgentName,
        grant: &l3m_core::grant::Grant,
        account: &l3m_core::budget::Account,
    ) -> Result<gix::ObjectId, ServiceError> {
        let encode = |what: &str, value: serde_json::Result<String>| {
            value.map_err(|e| ServiceError::Internal(format!("encoding {what}: {e}")))
        };
        let grant = encode("the grant", serde_json::to_string_pretty(grant))?;
        let account = encode("the account", serde_json::to_string_pretty(account))?;
        let refname = refs::agent_ref(child, AgentRef::Grants);
        let files: [(&str, &[u8]); 2] = [
            ("grant.json", grant.as_bytes()),
            ("account.json", account.as_bytes()),
        ];
        Ok(self.hub.commit_files(
            &refname,
            self.hub.tip(&refname)?,
            &files,
            &format!("grant of {child}"),
        )?)
    }

    /// Deletes a ref if it exists; returns whether it did.
    pub(in crate::service) fn delete_if_present(
        &self,
        refname: &str,
    ) -> Result<bool, ServiceError> {
        match self.hub.tip(refname)? {
            Tip::At(id) => {
                self.hub.delete_ref(refname, id)?;
                Ok(true)
            }
            Tip::Absent => Ok(false),
        }
    }

    /// `hubd.retire`: the live subtree, deepest first: ledger rows, grants refs, ACRs.
    pub fn retire(
        &self,
        capability: &Capability,
        agent: &str,
    ) -> Result<(Retired, Vec<Moved>), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        gate::may_prune(&duty, &agent, "retire")?;
        self.retire_subtree(&agent, &format!("retire {agent} and its subtree"))
    }

    /// Retires every agent whose lifetime is over, each with its subtree (the daemon's duty,
    /// `lifetimeRetires_iff_done`); returns the grants refs that moved. A failure is logged and
    /// tried again at the next sweep.
    pub(in crate::service) fn retire_lifetimes_over(&self) -> Vec<Moved> {
        let over = self.tree().ledger.lifetimes_over(self.now_ms());
        let mut moved = Vec::new();
        for agent in over {
            if !self.tree().ledger.is_live(&agent) {
                continue; // retired with an ancestor already listed
            }
            match self.retire_subtree(&agent, &format!("retire {agent}: its lifetime is over")) {
                Ok((retired, m)) => {
                    tracing::info!(agents = ?retired.agents, "lifetime over; retired");
                    moved.extend(m);
                }
                Err(error) => tracing::warn!(%agent, %error, "could not retire at lifetime's end"),
            }
        }
        moved
    }

    /// Retires the live subtree of `agent`, deepest first, with `summary` as the ledger
    /// commit's: ledger rows, sessions and leases ended, grants refs deleted, ACRs removed.
    fn retire_subtree(
        &self,
        agent: &AgentName,
        summary: &str,
    ) -> Result<(Retired, Vec<Moved>), ServiceError> {
        let mut tree = self.tree();
        let rows = tree.ledger.retire_subtree(agent, self.now_ms())?;
        self.append_ledger(&mut tree, &rows, summary)?;
        drop(tree);
        let retired: Vec<AgentName> = rows
            .iter()
            .filter_map(|row| match row {
                LedgerRow::Retire { agent, .. } => Some(agent.clone()),
                _ => None,
            })
            .collect();
        self.sessions.revoke_agents(&retired);
        if let Err(e) = self.leases.forget(&retired) {
            // The agents are retired whatever the journal says: a lease it brings back after a
            // restart names an agent no sequencer may run any more.
            tracing::warn!(error = %e, "the end of a retired agent's lease is not journaled");
        }
        let mut moved = Vec::new();
        for a in &retired {
            if self.delete_if_present(&refs::agent_ref(a, AgentRef::Grants))? {
                moved.push((AgentRef::Grants, a.clone()));
            }
            self.remove_acr(a)?;
        }
        Ok((
            Retired {
                agents: retired.iter().map(ToString::to_string).collect(),
            },
            moved,
        ))
    }

    /// `hubd.collect`: a retired agent's memory refs and work branch go; its name is free.
    pub fn collect(
        &self,
        capability: &Capability,
        agent: &str,
    ) -> Result<(Collected, Vec<Moved>), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        gate::may_prune(&duty, &agent, "collect")?;
        let mut tree = self.tree();
        let row = LedgerRow::Collect {
            agent: agent.clone(),
            at_ms: self.now_ms(),
        };
        self.append_ledger(&mut tree, &[row], &format!("collect {agent}"))?;
        drop(tree);
        self.sessions.revoke_agents(std::slice::from_ref(&agent));
        let mut moved = Vec::new();
        for which in AgentRef::ALL {
            if self.delete_if_present(&refs::agent_ref(&agent, which))? {
                moved.push((which, agent.clone()));
            }
        }
        self.delete_if_present(&refs::work_branch(&agent))?;
        Ok((
            Collected {
                agent: agent.to_string(),
            },
            moved,
        ))
    }

    /// `hubd.list-agents`: one page of agents after `after`, each live one reported running
    /// (with its lease holder) or asleep from the leases.
    pub fn list_agents(
        &self,
        capability: &Capability,
        after: Option<&str>,
    ) -> Result<AgentTree, ServiceError> {
        self.duty(capability)?;
        let after = after.map(gate::agent).transpose()?;
        // One more than a page holds, to know whether another page follows.
        let mut agents = self.agent_states(after.as_ref(), record_format::PAGE_LINES as usize + 1);
        // One page: at most PAGE_LINES agents, and what one message holds (each state's text,
        // with room for its framing).
        let fits = record_format::page_len(agents.iter().map(|a| {
            a.name.len() + a.parent.len() + a.holder.as_ref().map_or(0, String::len) + 64
        }))
        .min(record_format::PAGE_LINES as usize);
        let next = (fits < agents.len()).then(|| agents[fits - 1].name.clone());
        agents.truncate(fits);
        Ok(AgentTree { agents, next })
    }

    /// Up to `take` agents after `after`, in name order, each live one running (with its lease
    /// holder) or asleep from the leases.
    pub(super) fn agent_states(&self, after: Option<&AgentName>, take: usize) -> Vec<AgentState> {
        let now = Instant::now();
        let tree = self.tree();
        let start = match after {
            Some(after) => std::ops::Bound::Excluded(after),
            None => std::ops::Bound::Unbounded,
        };
        tree.names
            .range((start, std::ops::Bound::Unbounded))
            .filter_map(|name| {
                let entry = tree.ledger.agent(name)?;
                let holder = match entry.life {
                    Life::Live => self
                        .leases
                        .read(|t| t.live(name, now).map(|l| l.holder.clone())),
                    _ => None,
                };
                Some(AgentState {
                    name: name.to_string(),
                    parent: entry.parent.to_string(),
                    life: match entry.life {
                        Life::Live if holder.is_some() => AgentLife::Running,
                        Life::Live => AgentLife::Asleep,
                        Life::Retired { .. } => AgentLife::Retired,
                        Life::Collected { .. } => AgentLife::Collected,
                    },
                    holder,
                    driven: entry.driven,
                })
            })
            .take(take)
            .collect()
    }
}
