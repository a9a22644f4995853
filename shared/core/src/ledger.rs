//! The ledger: who exists, who is whose parent, and under which grant — as rows and their fold.
//!
//! The hub's ledger (`refs/l3m/ledger`) is an append-only list of [`LedgerRow`]s stored as
//! versioned JSON lines ([`crate::record_format`]). [`Ledger`] is the state they fold to, and
//! [`Ledger::apply`] re-runs every gate on every row — a spawn is admitted against the parent's
//! *current* grant and account, a regrant against its issuer's — so a ledger that replays is a
//! ledger whose every row was admissible when it was appended, whoever wrote it.
//!
//! # Rules the fold enforces
//! - The first row of a hub registers a human: the root of all authority.
//! - Root agents (one segment) are spawned by a registered human, within that human's grant;
//!   every other agent by its live parent, through [`admit_spawn`].
//! - A name is taken from its spawn until it is collected.
//! - An agent retires only after its live children (deepest first, [`Ledger::retire_subtree`]);
//!   retiring removes its authority and returns its unspent loan to its parent.
//! - An agent is collected only after it retired.
//!
//! # Spend
//! What a live agent spends is recorded on its Log, not in the ledger; the shell folds it in with
//! [`Ledger::charge`]. A [`LedgerRow::Retire`] row carries the agent's final own spend, so a replay
//! settles every retired loan exactly without reading any Log.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::budget::{Account, BudgetError, Fuel};
use crate::grant::{
    Grant, RegrantRefusal, SpawnRefusal, SpawnRequest, admit_regrant, admit_root_spawn, admit_spawn,
};
use crate::names::{AgentName, Entity, HumanName, PersonaName, ServiceName};
use crate::record_format::{self, LineError};

/// One row of the hub's ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "kebab-case",
    rename_all_fields = "kebab-case",
    deny_unknown_fields
)]
pub enum LedgerRow {
    /// A child started under a grant and a loan. `parent` is an agent, or a human for a root.
    Spawn {
        /// Who asked for the child.
        parent: Entity,
        /// The child's name.
        child: AgentName,
        /// The child's grant.
        grant: Grant,
        /// The fuel lent to the child.
        loan: Fuel,
        /// Whether the child retires when the call that started it returns.
        driven: bool,
        /// The persona the child wears.
        persona: Option<PersonaName>,
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
    /// An agent retired: its authority is removed and its unspent loan returns to its parent.
    Retire {
        /// The agent.
        agent: AgentName,
        /// Its final own spend (its retired children's consumption is already in its account).
        spent: Fuel,
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
    /// A retired agent's memory was removed; its name may be used again.
    Collect {
        /// The agent.
        agent: AgentName,
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
    /// An issuer replaced an agent's grant.
    Regrant {
        /// Who issued it: a strict ancestor of the subject, or a human.
        issuer: Entity,
        /// Whose grant changes.
        subject: AgentName,
        /// The new grant.
        grant: Grant,
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
    /// A human was registered (or re-registered) with the grant bounding the roots it spawns.
    RegisterHuman {
        /// The human.
        human: HumanName,
        /// The human's grant.
        grant: Grant,
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
    /// A service was registered (or re-registered) with the grant of its duty.
    RegisterService {
        /// The service.
        service: ServiceName,
        /// The grant of its duty (e.g. the postman axis for the postmaster).
        grant: Grant,
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
}

impl LedgerRow {
    /// The row's kind, as spelt in its `kind` field.
    pub fn kind(&self) -> &'static str {
        match self {
            LedgerRow::Spawn { .. } => "spawn",
            LedgerRow::Retire { .. } => "retire",
            LedgerRow::Collect { .. } => "collect",
            LedgerRow::Regrant { .. } => "regrant",
            LedgerRow::RegisterHuman { .. } => "register-human",
            LedgerRow::RegisterService { .. } => "register-service",
        }
    }

    /// Whether only a human's command may append this row: registrations, and spawns or
    /// regrants a human issues. The gatekeeper refuses such rows from any agent or service;
    /// together with the fold's gates this is what keeps a human's grant out of agents' reach.
    pub fn is_human_only(&self) -> bool {
        match self {
            LedgerRow::RegisterHuman { .. } | LedgerRow::RegisterService { .. } => true,
            LedgerRow::Spawn { parent, .. } => matches!(parent, Entity::Human(_)),
            LedgerRow::Regrant { issuer, .. } => matches!(issuer, Entity::Human(_)),
            LedgerRow::Retire { .. } | LedgerRow::Collect { .. } => false,
        }
    }
}

/// Where an agent is in its life. Running or asleep is not stored anywhere (DESIGN §9); this is
/// only what the ledger says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    /// Spawned and not retired: it holds its grant and account.
    Live,
    /// Retired at this instant: no authority, memory still kept.
    Retired {
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
    /// Collected at this instant: memory removed too; the name is free.
    Collected {
        /// When, in ms since the Unix epoch.
        at_ms: u64,
    },
}

impl fmt::Display for Life {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Life::Live => f.write_str("live"),
            Life::Retired { at_ms } => write!(f, "retired at {at_ms} ms"),
            Life::Collected { at_ms } => write!(f, "collected at {at_ms} ms"),
        }
    }
}

/// What the ledger knows of one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentEntry {
    /// Who spawned it: its parent agent, or a human for a root agent.
    pub parent: Entity,
    /// Its current grant (last spawn or regrant).
    pub grant: Grant,
    /// Its fuel account; frozen when it retires.
    pub account: Account,
    /// Whether it retires when the call that started it returns.
    pub driven: bool,
    /// The persona it wears.
    pub persona: Option<PersonaName>,
    /// When it was spawned, in ms since the Unix epoch.
    pub spawned_at_ms: u64,
    /// Where it is in its life.
    pub life: Life,
}

/// Why a row was refused. The ledger is unchanged by a refused row.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LedgerError {
    /// A hub's first row must register a human.
    #[error(
        "the first row of a hub must register a human (the root of all authority), not a \
         `{kind}` row; register a human first"
    )]
    NoHumanYet {
        /// The kind of the row offered.
        kind: &'static str,
    },
    /// The row names a human the ledger does not know.
    #[error("human:{human} is not registered in this hub; register the human first")]
    UnknownHuman {
        /// The human.
        human: HumanName,
    },
    /// The row names an agent the ledger does not know.
    #[error("{agent} does not exist in this hub")]
    UnknownAgent {
        /// The agent.
        agent: AgentName,
    },
    /// The row needs a live agent, and this one is not.
    #[error("{agent} is not live (it is {life}); only a live agent can do or undergo this")]
    NotLive {
        /// The agent.
        agent: AgentName,
        /// Where it is in its life.
        life: Life,
    },
    /// A spawn names an agent that already exists and has not been collected.
    #[error("{agent} already exists ({life}); pick another name, or retire and collect it first")]
    NameTaken {
        /// The name.
        agent: AgentName,
        /// Where the existing agent is in its life.
        life: Life,
    },
    /// A service tried to spawn.
    #[error("svc:{service} is a service and cannot spawn agents")]
    ServiceCannotSpawn {
        /// The service.
        service: ServiceName,
    },
    /// The spawn gate refused.
    #[error("spawning {child} refused: {refusal}")]
    Spawn {
        /// The child asked for.
        child: AgentName,
        /// The gate's refusal.
        #[source]
        refusal: SpawnRefusal,
    },
    /// The regrant gate refused.
    #[error("regranting {subject} refused: {refusal}")]
    Regrant {
        /// The subject.
        subject: AgentName,
        /// The gate's refusal.
        #[source]
        refusal: RegrantRefusal,
    },
    /// An agent with live children cannot retire before them.
    #[error(
        "{agent} still has a live child {child}; retire the subtree deepest first \
         (`Ledger::retire_subtree` produces the rows in order)"
    )]
    LiveChildren {
        /// The agent.
        agent: AgentName,
        /// One of its live children.
        child: AgentName,
    },
    /// A retire row reports less spend than the ledger has already charged.
    #[error(
        "the retire row for {agent} reports {reported} spent, but {charged} are already \
         charged; a retire row carries the agent's final spend"
    )]
    SpendBelowCharged {
        /// The agent.
        agent: AgentName,
        /// What the row says.
        reported: Fuel,
        /// What the account already holds.
        charged: Fuel,
    },
    /// A collect row for an agent that has not retired.
    #[error("{agent} is {life}; collect only a retired agent (retire it first)")]
    NotRetired {
        /// The agent.
        agent: AgentName,
        /// Where it is in its life.
        life: Life,
    },
    /// A budget operation was refused.
    #[error("the account of {agent} refused: {error}")]
    Budget {
        /// Whose account.
        agent: AgentName,
        /// The refusal.
        #[source]
        error: BudgetError,
    },
    /// A stored line could not be read.
    #[error("ledger blob: {0}")]
    Line(#[from] LineError),
    /// A row refused during a replay, by its zero-based position.
    #[error("row {index}: {error}")]
    AtRow {
        /// Zero-based position of the refused row.
        index: usize,
        /// Why it was refused.
        #[source]
        error: Box<LedgerError>,
    },
}

/// The state the ledger's rows fold to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    humans: BTreeMap<HumanName, Grant>,
    services: BTreeMap<ServiceName, Grant>,
    agents: BTreeMap<AgentName, AgentEntry>,
}

impl Ledger {
    /// An empty ledger: a hub before its first human registers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds rows from empty; the error names the first refused row by its zero-based index.
    pub fn replay<'a>(rows: impl IntoIterator<Item = &'a LedgerRow>) -> Result<Self, LedgerError> {
        let mut ledger = Ledger::new();
        for (index, row) in rows.into_iter().enumerate() {
            ledger.apply(row).map_err(|error| LedgerError::AtRow {
                index,
                error: Box::new(error),
            })?;
        }
        Ok(ledger)
    }

    /// Parses a blob of versioned JSON lines (as stored on `refs/l3m/ledger`) and replays it.
    pub fn replay_lines(blob: &str) -> Result<Self, LedgerError> {
        let rows: Vec<LedgerRow> = record_format::from_lines(blob)?;
        Self::replay(&rows)
    }

    /// Applies one row, re-running its gate against the current state; a refused row leaves the
    /// ledger unchanged.
    pub fn apply(&mut self, row: &LedgerRow) -> Result<(), LedgerError> {
        if self.humans.is_empty() && !matches!(row, LedgerRow::RegisterHuman { .. }) {
            return Err(LedgerError::NoHumanYet { kind: row.kind() });
        }
        match row {
            LedgerRow::RegisterHuman { human, grant, .. } => {
                self.humans.insert(human.clone(), grant.clone());
                Ok(())
            }
            LedgerRow::RegisterService { service, grant, .. } => {
                self.services.insert(service.clone(), grant.clone());
                Ok(())
            }
            LedgerRow::Spawn {
                parent,
                child,
                grant,
                loan,
                driven,
                persona,
                at_ms,
            } => {
                let req = SpawnRequest {
                    child: child.clone(),
                    grant: grant.clone(),
                    loan: *loan,
                    driven: *driven,
                    persona: persona.clone(),
                    fork: None,
                };
                self.apply_spawn(parent, req, *at_ms)
            }
            LedgerRow::Regrant {
                issuer,
                subject,
                grant,
                ..
            } => self.apply_regrant(issuer, subject, grant),
            LedgerRow::Retire {
                agent,
                spent,
                at_ms,
            } => self.apply_retire(agent, *spent, *at_ms),
            LedgerRow::Collect { agent, at_ms } => {
                let entry = self.entry_mut(agent)?;
                match entry.life {
                    Life::Retired { .. } => {
                        entry.life = Life::Collected { at_ms: *at_ms };
                        Ok(())
                    }
                    life => Err(LedgerError::NotRetired {
                        agent: agent.clone(),
                        life,
                    }),
                }
            }
        }
    }

    fn apply_spawn(
        &mut self,
        parent: &Entity,
        req: SpawnRequest,
        at_ms: u64,
    ) -> Result<(), LedgerError> {
        if let Some(existing) = self.agents.get(&req.child)
            && !matches!(existing.life, Life::Collected { .. })
        {
            return Err(LedgerError::NameTaken {
                agent: req.child.clone(),
                life: existing.life,
            });
        }
        let refused = |refusal| LedgerError::Spawn {
            child: req.child.clone(),
            refusal,
        };
        let admission = match parent {
            Entity::Human(human) => {
                let grant = self
                    .humans
                    .get(human)
                    .ok_or_else(|| LedgerError::UnknownHuman {
                        human: human.clone(),
                    })?;
                admit_root_spawn(grant, &req).map_err(refused)?
            }
            Entity::Agent(agent) => {
                let entry = self.live(agent)?;
                admit_spawn(agent, &entry.grant, &entry.account, &req).map_err(refused)?
            }
            Entity::Service(service) => {
                return Err(LedgerError::ServiceCannotSpawn {
                    service: service.clone(),
                });
            }
        };
        if let (Entity::Agent(agent), Some(account)) = (parent, admission.parent_account) {
            self.entry_mut(agent)?.account = account;
        }
        self.agents.insert(
            req.child,
            AgentEntry {
                parent: parent.clone(),
                grant: req.grant,
                account: admission.child_account,
                driven: req.driven,
                persona: req.persona,
                spawned_at_ms: at_ms,
                life: Life::Live,
            },
        );
        Ok(())
    }

    fn apply_regrant(
        &mut self,
        issuer: &Entity,
        subject: &AgentName,
        grant: &Grant,
    ) -> Result<(), LedgerError> {
        self.live(subject)?;
        let issuer_grant = match issuer {
            Entity::Human(human) if !self.humans.contains_key(human) => {
                return Err(LedgerError::UnknownHuman {
                    human: human.clone(),
                });
            }
            Entity::Agent(agent) => self.grant(agent),
            Entity::Human(_) | Entity::Service(_) => None,
        };
        admit_regrant(issuer, issuer_grant, subject, grant).map_err(|refusal| {
            LedgerError::Regrant {
                subject: subject.clone(),
                refusal,
            }
        })?;
        self.entry_mut(subject)?.grant = grant.clone();
        Ok(())
    }

    fn apply_retire(
        &mut self,
        agent: &AgentName,
        spent: Fuel,
        at_ms: u64,
    ) -> Result<(), LedgerError> {
        let entry = self.live(agent)?;
        if let Some(child) = self.children(agent).into_iter().next() {
            return Err(LedgerError::LiveChildren {
                agent: agent.clone(),
                child,
            });
        }
        let budget = |error| LedgerError::Budget {
            agent: agent.clone(),
            error,
        };
        let mut account = entry.account.clone();
        let extra =
            spent
                .checked_sub(&account.spent())
                .ok_or_else(|| LedgerError::SpendBelowCharged {
                    agent: agent.clone(),
                    reported: spent,
                    charged: account.spent(),
                })?;
        account.spend(extra).map_err(budget)?;
        let parent_account = match &entry.parent {
            Entity::Agent(parent) => {
                let mut parent_account = self.live(parent)?.account.clone();
                parent_account
                    .settle_retired_child(account.loan(), account.consumed())
                    .map_err(|error| LedgerError::Budget {
                        agent: parent.clone(),
                        error,
                    })?;
                Some((parent.clone(), parent_account))
            }
            // A root's unspent fuel returns to the human, outside the tree.
            Entity::Human(_) | Entity::Service(_) => None,
        };
        if let Some((parent, parent_account)) = parent_account {
            self.entry_mut(&parent)?.account = parent_account;
        }
        let entry = self.entry_mut(agent)?;
        entry.account = account;
        entry.life = Life::Retired { at_ms };
        Ok(())
    }

    /// Charges a live agent's own spend, as its Log records it; refused past what it has left.
    pub fn charge(&mut self, agent: &AgentName, amount: Fuel) -> Result<(), LedgerError> {
        self.live(agent)?;
        let entry = self.entry_mut(agent)?;
        entry
            .account
            .spend(amount)
            .map_err(|error| LedgerError::Budget {
                agent: agent.clone(),
                error,
            })
    }

    /// The rows that retire `agent` and its live subtree, deepest first, each carrying the
    /// agent's spend as charged so far. Applying them in order retires the subtree.
    pub fn retire_subtree(
        &self,
        agent: &AgentName,
        at_ms: u64,
    ) -> Result<Vec<LedgerRow>, LedgerError> {
        self.live(agent)?;
        Ok(self
            .live_subtree_deepest_first(agent)
            .into_iter()
            .filter_map(|a| {
                let spent = self.agents.get(&a)?.account.spent();
                Some(LedgerRow::Retire {
                    agent: a,
                    spent,
                    at_ms,
                })
            })
            .collect())
    }

    fn entry_mut(&mut self, agent: &AgentName) -> Result<&mut AgentEntry, LedgerError> {
        self.agents
            .get_mut(agent)
            .ok_or_else(|| LedgerError::UnknownAgent {
                agent: agent.clone(),
            })
    }

    fn live(&self, agent: &AgentName) -> Result<&AgentEntry, LedgerError> {
        let entry = self
            .agents
            .get(agent)
            .ok_or_else(|| LedgerError::UnknownAgent {
                agent: agent.clone(),
            })?;
        match entry.life {
            Life::Live => Ok(entry),
            life => Err(LedgerError::NotLive {
                agent: agent.clone(),
                life,
            }),
        }
    }

    /// What the ledger knows of an agent, live or not.
    pub fn agent(&self, agent: &AgentName) -> Option<&AgentEntry> {
        self.agents.get(agent)
    }

    /// A live agent's current grant; `None` once it retired (retiring removes authority).
    pub fn grant(&self, agent: &AgentName) -> Option<&Grant> {
        self.live(agent).ok().map(|e| &e.grant)
    }

    /// A live agent's account.
    pub fn account(&self, agent: &AgentName) -> Option<&Account> {
        self.live(agent).ok().map(|e| &e.account)
    }

    /// Who spawned an agent: its parent agent, or a human for a root.
    pub fn parent(&self, agent: &AgentName) -> Option<&Entity> {
        self.agents.get(agent).map(|e| &e.parent)
    }

    /// Whether an agent is live.
    pub fn is_live(&self, agent: &AgentName) -> bool {
        self.live(agent).is_ok()
    }

    /// A registered human's grant.
    pub fn human_grant(&self, human: &HumanName) -> Option<&Grant> {
        self.humans.get(human)
    }

    /// A registered service's grant.
    pub fn service_grant(&self, service: &ServiceName) -> Option<&Grant> {
        self.services.get(service)
    }

    /// Every live agent, in name order.
    pub fn live_agents(&self) -> impl Iterator<Item = &AgentName> + '_ {
        self.agents
            .iter()
            .filter(|(_, e)| e.life == Life::Live)
            .map(|(name, _)| name)
    }

    /// The live direct children of an agent, in name order.
    pub fn children(&self, agent: &AgentName) -> Vec<AgentName> {
        self.live_agents()
            .filter(|a| a.parent().as_ref() == Some(agent))
            .cloned()
            .collect()
    }

    /// The live agents whose lifetime is over at `now_ms`, shallowest first (ties in name
    /// order): what the daemon retires, each with its subtree, so an agent listed below an
    /// ancestor already listed is gone by its turn (`lifetimeRetires_iff_done`).
    pub fn lifetimes_over(&self, now_ms: u64) -> Vec<AgentName> {
        let mut over: Vec<AgentName> = self
            .agents
            .iter()
            .filter(|(_, e)| e.life == Life::Live && !e.grant.lifetime.is_alive_at(now_ms))
            .map(|(name, _)| name.clone())
            .collect();
        over.sort_by(|a, b| a.depth().cmp(&b.depth()).then_with(|| a.cmp(b)));
        over
    }

    /// The live agents at or below `agent`, deepest first (ties in name order): the order in
    /// which a subtree retires.
    pub fn live_subtree_deepest_first(&self, agent: &AgentName) -> Vec<AgentName> {
        let mut subtree: Vec<AgentName> = self
            .live_agents()
            .filter(|a| a.is_within(agent))
            .cloned()
            .collect();
        subtree.sort_by(|a, b| b.depth().cmp(&a.depth()).then_with(|| a.cmp(b)));
        subtree
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axis::Axis;
    use crate::grant::SpawnLevel;

    fn agent(s: &str) -> AgentName {
        AgentName::parse(s).unwrap()
    }

    fn entity(s: &str) -> Entity {
        Entity::parse(s).unwrap()
    }

    fn calls(n: u64) -> Fuel {
        Fuel {
            model_calls: n,
            ..Fuel::ZERO
        }
    }

    fn persist() -> Grant {
        Grant {
            spawn: SpawnLevel::Persist,
            ..Grant::default()
        }
    }

    fn register(human: &str) -> LedgerRow {
        LedgerRow::RegisterHuman {
            human: HumanName::parse(human).unwrap(),
            grant: persist(),
            at_ms: 1,
        }
    }

    fn spawn(parent: &str, child: &str, loan: u64) -> LedgerRow {
        LedgerRow::Spawn {
            parent: entity(parent),
            child: agent(child),
            grant: persist(),
            loan: calls(loan),
            driven: false,
            persona: None,
            at_ms: 2,
        }
    }

    fn retire(a: &str, spent: u64) -> LedgerRow {
        LedgerRow::Retire {
            agent: agent(a),
            spent: calls(spent),
            at_ms: 3,
        }
    }

    fn collect(a: &str) -> LedgerRow {
        LedgerRow::Collect {
            agent: agent(a),
            at_ms: 4,
        }
    }

    proptest::proptest! {
        /// An agent is retired for its lifetime exactly when that lifetime is over: listed iff
        /// live and not alive at `now`, and a listed subtree retired leaves no agent whose
        /// lifetime is over (`lifetimeRetires_iff_done`).
        #[test]
        fn lifetime_retires_iff_done(
            ends in proptest::collection::vec(proptest::option::of(0u64..100), 1..6),
            now in 0u64..120,
        ) {
            let mut rows = vec![register("alice")];
            let mut name = String::new();
            // A child lives no longer than its parent (the spawn gate's rule).
            let mut bound: Option<u64> = None;
            for (i, end) in ends.iter().enumerate() {
                let parent = if i == 0 { "human:alice".to_owned() } else { name.clone() };
                name = if i == 0 { "alice".to_owned() } else { format!("{name}/c{i}") };
                bound = match (bound, *end) {
                    (Some(b), Some(e)) => Some(b.min(e)),
                    (b, e) => b.or(e),
                };
                let mut row = spawn(&parent, &name, 0);
                if let (LedgerRow::Spawn { grant, .. }, Some(end)) = (&mut row, bound) {
                    grant.lifetime = crate::grant::Lifetime::Until(end);
                }
                rows.push(row);
            }
            let mut l = Ledger::replay(&rows).unwrap();
            let over = l.lifetimes_over(now);
            for a in l.live_agents() {
                let done = !l.grant(a).unwrap().lifetime.is_alive_at(now);
                proptest::prop_assert_eq!(over.contains(a), done, "{}", a);
            }
            for a in &over {
                if l.is_live(a) {
                    let rows = l.retire_subtree(a, now).unwrap();
                    for row in rows {
                        l.apply(&row).unwrap();
                    }
                }
            }
            proptest::prop_assert!(l.lifetimes_over(now).is_empty());
        }
    }

    /// A hub with alice (100 calls) and her child alice/w (30 calls).
    fn hub() -> Ledger {
        Ledger::replay(&[
            register("alice"),
            spawn("human:alice", "alice", 100),
            spawn("alice", "alice/w", 30),
        ])
        .unwrap()
    }

    #[test]
    fn the_first_row_registers_a_human() {
        let err = Ledger::new()
            .apply(&spawn("human:alice", "alice", 1))
            .unwrap_err();
        assert!(
            matches!(err, LedgerError::NoHumanYet { kind: "spawn" }),
            "{err}"
        );
        assert!(err.to_string().contains("register a human first"), "{err}");
        let mut l = Ledger::new();
        l.apply(&register("alice")).unwrap();
        assert_eq!(
            l.human_grant(&HumanName::parse("alice").unwrap()),
            Some(&persist())
        );
    }

    #[test]
    fn spawns_build_the_tree_and_lend_fuel() {
        let l = hub();
        assert_eq!(l.parent(&agent("alice")), Some(&entity("human:alice")));
        assert_eq!(l.parent(&agent("alice/w")), Some(&entity("alice")));
        assert_eq!(l.children(&agent("alice")), vec![agent("alice/w")]);
        assert_eq!(l.account(&agent("alice")).unwrap().left(), calls(70));
        assert_eq!(l.account(&agent("alice/w")).unwrap().loan(), calls(30));
        assert!(l.is_live(&agent("alice/w")));
        assert_eq!(l.live_agents().count(), 2);
    }

    #[test]
    fn spawn_refusals_are_reported_and_change_nothing() {
        let mut l = hub();
        let before = l.clone();
        let cases = [
            (spawn("human:bob", "bob", 1), "human:bob is not registered"),
            (spawn("alice", "alice/w", 1), "already exists"),
            (spawn("alice", "alice/v", 71), "cannot lend"),
            (spawn("alice", "bob/v", 1), "not a direct child"),
            (spawn("human:alice", "bob/v", 1), "not a root agent"),
            (spawn("svc:postmaster", "bob", 1), "cannot spawn"),
            (spawn("alice/nobody", "alice/nobody/x", 1), "does not exist"),
        ];
        for (row, text) in cases {
            let err = l.apply(&row).unwrap_err();
            assert!(err.to_string().contains(text), "{row:?}: {err}");
            assert_eq!(l, before);
        }
        let mut wide = spawn("alice", "alice/v", 1);
        if let LedgerRow::Spawn { grant, .. } = &mut wide {
            grant.build = true;
        }
        match l.apply(&wide).unwrap_err() {
            LedgerError::Spawn { refusal, .. } => assert_eq!(refusal.axis(), Some(Axis::Build)),
            other => panic!("expected a spawn refusal, got {other}"),
        }
    }

    #[test]
    fn the_gate_reads_the_parents_current_grant_and_account() {
        let mut l = hub();
        l.charge(&agent("alice"), calls(60)).unwrap();
        let err = l.apply(&spawn("alice", "alice/v", 11)).unwrap_err();
        assert!(err.to_string().contains("only 10 are left"), "{err}");
        l.apply(&LedgerRow::Regrant {
            issuer: entity("human:alice"),
            subject: agent("alice"),
            grant: Grant::default(),
            at_ms: 5,
        })
        .unwrap();
        let err = l.apply(&spawn("alice", "alice/v", 1)).unwrap_err();
        assert!(err.to_string().contains("`off`"), "{err}");
    }

    #[test]
    fn charge_is_refused_past_the_loan_or_after_retiring() {
        let mut l = hub();
        let err = l.charge(&agent("alice/w"), calls(31)).unwrap_err();
        assert!(matches!(err, LedgerError::Budget { .. }), "{err}");
        l.apply(&retire("alice/w", 0)).unwrap();
        let err = l.charge(&agent("alice/w"), calls(1)).unwrap_err();
        assert!(matches!(err, LedgerError::NotLive { .. }), "{err}");
    }

    #[test]
    fn retiring_settles_the_loan_deepest_first() {
        let mut l = hub();
        let err = l.apply(&retire("alice", 0)).unwrap_err();
        assert!(
            matches!(&err, LedgerError::LiveChildren { child, .. } if *child == agent("alice/w")),
            "{err}"
        );
        l.charge(&agent("alice/w"), calls(5)).unwrap();
        let err = l.apply(&retire("alice/w", 4)).unwrap_err();
        assert!(
            matches!(err, LedgerError::SpendBelowCharged { .. }),
            "{err}"
        );
        let err = l.apply(&retire("alice/w", 31)).unwrap_err();
        assert!(matches!(err, LedgerError::Budget { .. }), "{err}");
        l.apply(&retire("alice/w", 12)).unwrap();
        let alice = l.account(&agent("alice")).unwrap();
        assert_eq!(alice.left(), calls(88), "18 unspent calls returned");
        assert_eq!(alice.consumed(), calls(12));
        assert_eq!(
            l.grant(&agent("alice/w")),
            None,
            "retiring removes authority"
        );
        let err = l.apply(&retire("alice/w", 12)).unwrap_err();
        assert!(matches!(err, LedgerError::NotLive { .. }), "{err}");
        let err = l.apply(&retire("alice/x", 0)).unwrap_err();
        assert!(matches!(err, LedgerError::UnknownAgent { .. }), "{err}");
    }

    #[test]
    fn retire_subtree_yields_rows_deepest_first() {
        let mut l = hub();
        for row in [
            spawn("alice/w", "alice/w/x", 10),
            spawn("alice", "alice/v", 10),
        ] {
            l.apply(&row).unwrap();
        }
        l.charge(&agent("alice/w/x"), calls(3)).unwrap();
        assert_eq!(
            l.live_subtree_deepest_first(&agent("alice")),
            vec![
                agent("alice/w/x"),
                agent("alice/v"),
                agent("alice/w"),
                agent("alice")
            ]
        );
        let rows = l.retire_subtree(&agent("alice/w"), 9).unwrap();
        let at_9 = |a: &str, spent: u64| LedgerRow::Retire {
            agent: agent(a),
            spent: calls(spent),
            at_ms: 9,
        };
        assert_eq!(rows, vec![at_9("alice/w/x", 3), at_9("alice/w", 0)]);
        for row in &rows {
            l.apply(row).unwrap();
        }
        assert_eq!(l.children(&agent("alice")), vec![agent("alice/v")]);
        // 60 left after both loans, plus alice/w's 30 less the 3 its child consumed.
        assert_eq!(l.account(&agent("alice")).unwrap().left(), calls(87));
        assert_eq!(l.account(&agent("alice")).unwrap().consumed(), calls(3));
        assert!(l.retire_subtree(&agent("alice/w"), 9).is_err());
    }

    #[test]
    fn collecting_needs_a_retired_agent_and_frees_the_name() {
        let mut l = hub();
        let err = l.apply(&collect("alice/w")).unwrap_err();
        assert!(
            matches!(
                err,
                LedgerError::NotRetired {
                    life: Life::Live,
                    ..
                }
            ),
            "{err}"
        );
        l.apply(&retire("alice/w", 0)).unwrap();
        let err = l.apply(&spawn("alice", "alice/w", 1)).unwrap_err();
        assert!(
            err.to_string().contains("retire and collect it first"),
            "{err}"
        );
        l.apply(&collect("alice/w")).unwrap();
        let err = l.apply(&collect("alice/w")).unwrap_err();
        assert!(matches!(
            err,
            LedgerError::NotRetired {
                life: Life::Collected { .. },
                ..
            }
        ));
        l.apply(&spawn("alice", "alice/w", 1)).unwrap();
        assert!(l.is_live(&agent("alice/w")));
    }

    #[test]
    fn regrants_are_gated_by_the_issuer() {
        let mut l = hub();
        l.apply(&spawn("alice/w", "alice/w/x", 1)).unwrap();
        let regrant = |issuer: &str, subject: &str, grant: Grant| LedgerRow::Regrant {
            issuer: entity(issuer),
            subject: agent(subject),
            grant,
            at_ms: 5,
        };
        // A grandparent regrants within its own expanded grant.
        let own_reads = Grant::default().expand_own(&agent("alice"));
        l.apply(&regrant("alice", "alice/w/x", own_reads.clone()))
            .unwrap();
        assert_eq!(l.grant(&agent("alice/w/x")), Some(&own_reads));
        let before = l.clone();
        let cases = [
            (
                regrant("alice/w", "alice/w", Grant::default()),
                "its own grant",
            ),
            (
                regrant("alice/w/x", "alice/w", Grant::default()),
                "only its own descendants",
            ),
            (
                regrant("svc:postmaster", "alice/w", Grant::default()),
                "services never issue",
            ),
            (
                regrant("human:bob", "alice/w", Grant::default()),
                "not registered",
            ),
            (
                regrant("alice", "alice/nobody", Grant::default()),
                "does not exist",
            ),
            (
                regrant(
                    "alice",
                    "alice/w",
                    Grant {
                        run: true,
                        ..Grant::default()
                    },
                ),
                "`run`",
            ),
        ];
        for (row, text) in cases {
            let err = l.apply(&row).unwrap_err();
            assert!(err.to_string().contains(text), "{row:?}: {err}");
            assert_eq!(l, before);
        }
        l.apply(&retire("alice/w/x", 0)).unwrap();
        let err = l
            .apply(&regrant("alice", "alice/w/x", Grant::default()))
            .unwrap_err();
        assert!(matches!(err, LedgerError::NotLive { .. }), "{err}");
    }

    #[test]
    fn services_register_and_rows_round_trip_as_json_lines() {
        let rows = vec![
            register("alice"),
            LedgerRow::RegisterService {
                service: ServiceName::parse("postmaster").unwrap(),
                grant: Grant {
                    postman: true,
                    ..Grant::default()
                },
                at_ms: 1,
            },
            spawn("human:alice", "alice", 100),
            spawn("alice", "alice/w", 30),
            retire("alice/w", 3),
            collect("alice/w"),
        ];
        let blob = record_format::to_lines(&rows).unwrap();
        let first = blob.lines().next().unwrap();
        assert!(first.contains("\"kind\":\"register-human\"") && first.contains("\"at-ms\":1"));
        assert!(first.contains("\"v\":1"), "{first}");
        assert_eq!(record_format::from_lines::<LedgerRow>(&blob).unwrap(), rows);
        let l = Ledger::replay_lines(&blob).unwrap();
        assert_eq!(l, Ledger::replay(&rows).unwrap());
        assert!(
            l.service_grant(&ServiceName::parse("postmaster").unwrap())
                .unwrap()
                .postman
        );
        assert_eq!(
            l.agent(&agent("alice/w")).unwrap().life,
            Life::Collected { at_ms: 4 }
        );

        let err = Ledger::replay_lines("{\"v\":1,\"kind\":\"spawn\"}").unwrap_err();
        assert!(
            matches!(err, LedgerError::Line(LineError::Malformed { line: 1, .. })),
            "{err}"
        );
        let smuggled = first.replace("\"at-ms\":1", "\"at-ms\":1,\"issuer\":\"alice\"");
        let err = Ledger::replay_lines(&smuggled).unwrap_err();
        assert!(
            err.to_string().contains("issuer"),
            "unknown fields are refused: {err}"
        );
        let bad_order = record_format::to_lines(&rows[2..]).unwrap();
        let err = Ledger::replay_lines(&bad_order).unwrap_err();
        assert!(matches!(&err, LedgerError::AtRow { index: 0, .. }), "{err}");
        assert!(err.to_string().starts_with("row 0: "), "{err}");
    }

    #[test]
    fn human_only_rows_are_marked() {
        assert!(register("alice").is_human_only());
        assert!(spawn("human:alice", "alice", 1).is_human_only());
        assert!(!spawn("alice", "alice/w", 1).is_human_only());
        assert!(!retire("alice", 0).is_human_only() && !collect("alice").is_human_only());
    }
}
