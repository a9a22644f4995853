//! The session leases: who runs which agent, until when.
//!
//! The decisions are pure functions of the table and a caller-given instant, so they are tested
//! without a clock; [`Leases`] wraps the table in a mutex for the service and keeps every grant
//! and end in the [`journal`], so the leases in force outlive a hubd restart.

pub mod journal;
pub mod lapse;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use l3m_core::duty::Duty;
use l3m_core::names::AgentName;
use l3m_wire::hubd::lease::{LeaseHeld, LeaseReleased};
use l3m_wire::hubd::session::Capability;

use self::journal::{Entry, Journal, JournalError};
use super::error::ServiceError;
use super::gate;
use super::state::State;

/// The shortest and longest lease a sequencer may ask for: shorter would expire between two
/// renewals on a loaded host; longer would keep a dead sequencer's agent locked too long.
pub const TTL_RANGE_MS: std::ops::RangeInclusive<u64> = 500..=600_000;

/// The longest holder text a lease carries, in bytes: every agent list shows it, so its length
/// is bounded like every other stored item's.
pub const MAX_HOLDER: usize = 256;

/// One granted lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it.
    pub holder: String,
    /// Its fencing number.
    pub token: u64,
    /// How long each renewal extends it.
    pub ttl: Duration,
    /// When it lapses unless renewed.
    pub until: Instant,
}

/// Why a lease was not granted, renewed or released.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LeaseError {
    /// Another holder keeps the lease alive.
    #[error(
        "{agent} is already run by {holder} (lease {token}, {left_ms} ms left); stop that \
         sequencer first, or wait for its lease to lapse"
    )]
    Held {
        /// The agent.
        agent: String,
        /// The holder.
        holder: String,
        /// Its fencing number.
        token: u64,
        /// How long it has left.
        left_ms: u64,
    },
    /// The lease named is not the one in force: it lapsed and was taken, or never existed.
    #[error("lease {token} on {agent} is not in force{now}; this sequencer must stop")]
    Lost {
        /// The agent.
        agent: String,
        /// The token given.
        token: u64,
        /// Who holds the agent now, if anyone.
        now: String,
    },
    /// The holder text is longer than a lease may carry (it is shown in every agent list).
    #[error(
        "a lease holder text of {len} bytes exceeds the limit of {max} bytes; name the holder shortly (host:pid)"
    )]
    HolderTooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The TTL asked for is out of range.
    #[error("a lease ttl of {ttl_ms} ms is outside {min}..={max} ms")]
    BadTtl {
        /// The TTL asked.
        ttl_ms: u64,
        /// The shortest allowed.
        min: u64,
        /// The longest allowed.
        max: u64,
    },
}

/// The lease table.
#[derive(Debug, Default, Clone)]
pub struct Table {
    leases: HashMap<AgentName, Lease>,
    next_token: u64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Table {
    /// An empty table whose next fencing number is above `floor`.
    pub fn starting_at(floor: u64) -> Table {
        Table {
            leases: HashMap::new(),
            next_token: floor,
        }
    }

    /// How many leases the table holds, lapsed or not.
    pub fn len(&self) -> usize {
        self.leases.len()
    }

    /// Puts back a lease read from the journal, in force for one whole TTL from `now`.
    pub fn restore(
        &mut self,
        agent: AgentName,
        holder: String,
        token: u64,
        ttl: Duration,
        now: Instant,
    ) {
        self.next_token = self.next_token.max(token);
        let until = now + ttl;
        self.leases.insert(
            agent,
            Lease {
                holder,
                token,
                ttl,
                until,
            },
        );
    }

    /// The journal line that records `lease` granted on `agent`.
    pub fn granted(agent: &AgentName, lease: &Lease) -> journal::Entry {
        journal::Entry::Grant {
            agent: agent.to_string(),
            holder: lease.holder.clone(),
            token: lease.token,
            ttl_ms: ms(lease.ttl),
        }
    }

    /// One grant line for every lease the table holds, for a rewritten journal.
    pub fn grants(&self) -> impl Iterator<Item = journal::Entry> + '_ {
        self.leases
            .iter()
            .map(|(agent, lease)| Table::granted(agent, lease))
    }

    /// The agents whose lease lapsed by `now` and is not in `told` yet (by fencing number),
    /// marking them told; a told lapse no longer lapsed (renewed, released, taken) is forgotten,
    /// so a lease that lapses again is told again.
    pub fn newly_lapsed(&self, now: Instant, told: &mut HashSet<u64>) -> Vec<AgentName> {
        let lapsed: HashMap<u64, &AgentName> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.until <= now)
            .map(|(agent, lease)| (lease.token, agent))
            .collect();
        told.retain(|token| lapsed.contains_key(token));
        lapsed
            .into_iter()
            .filter(|(token, _)| told.insert(*token))
            .map(|(_, agent)| agent.clone())
            .collect()
    }

    /// How many leases are in force at `now`.
    pub fn held(&self, now: Instant) -> usize {
        self.leases.values().filter(|l| l.until > now).count()
    }

    /// The lease in force on `agent` at `now`, if any.
    pub fn live(&self, agent: &AgentName, now: Instant) -> Option<&Lease> {
        self.leases.get(agent).filter(|l| l.until > now)
    }

    /// Grants `holder` a fresh lease unless another holder's is still in force.
    pub fn acquire(
        &mut self,
        agent: &AgentName,
        holder: &str,
        ttl_ms: u64,
        now: Instant,
    ) -> Result<Lease, LeaseError> {
        if holder.len() > MAX_HOLDER {
            return Err(LeaseError::HolderTooLong {
                len: holder.len(),
                max: MAX_HOLDER,
            });
        }
        if !TTL_RANGE_MS.contains(&ttl_ms) {
            return Err(LeaseError::BadTtl {
                ttl_ms,
                min: *TTL_RANGE_MS.start(),
                max: *TTL_RANGE_MS.end(),
            });
        }
        if let Some(held) = self.live(agent, now) {
            return Err(LeaseError::Held {
                agent: agent.to_string(),
                holder: held.holder.clone(),
                token: held.token,
                left_ms: ms(held.until.saturating_duration_since(now)),
            });
        }
        self.next_token += 1;
        let ttl = Duration::from_millis(ttl_ms);
        let lease = Lease {
            holder: holder.to_owned(),
            token: self.next_token,
            ttl,
            until: now + ttl,
        };
        self.leases.insert(agent.clone(), lease.clone());
        Ok(lease)
    }

    /// Extends the lease `token` by its TTL. A lapsed lease nobody took is renewed: its holder
    /// never lost the agent.
    pub fn renew(
        &mut self,
        agent: &AgentName,
        token: u64,
        now: Instant,
    ) -> Result<Lease, LeaseError> {
        match self.leases.get_mut(agent) {
            Some(lease) if lease.token == token => {
                lease.until = now + lease.ttl;
                Ok(lease.clone())
            }
            other => Err(LeaseError::Lost {
                agent: agent.to_string(),
                token,
                now: other
                    .filter(|l| l.until > now)
                    .map(|l| format!(" ({} holds lease {})", l.holder, l.token))
                    .unwrap_or_default(),
            }),
        }
    }

    /// Drops the lease `token`; a lease already gone or replaced is left as it is.
    pub fn release(&mut self, agent: &AgentName, token: u64) {
        if self.leases.get(agent).is_some_and(|l| l.token == token) {
            self.leases.remove(agent);
        }
    }

    /// The lease the table holds on `agent`, in force or lapsed.
    pub fn live_or_lapsed(&self, agent: &AgentName) -> Option<&Lease> {
        self.leases.get(agent)
    }

    /// Forgets every lease of `agents` (they were retired).
    pub fn forget<'a>(&mut self, agents: impl IntoIterator<Item = &'a AgentName>) {
        for agent in agents {
            self.leases.remove(agent);
        }
    }
}

/// The lease table behind a mutex, for the service, with its journal.
#[derive(Debug)]
pub struct Leases(Mutex<(Table, Journal)>);

impl Leases {
    /// Opens the journal in `dir` (hubd's own folder) and restores the leases it holds.
    pub fn open(dir: &Path) -> Result<Leases, JournalError> {
        let (journal, table) = Journal::open(dir, Instant::now())?;
        Ok(Leases(Mutex::new((table, journal))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Table, Journal)> {
        // Every change leaves the table consistent before it can panic, so a poisoned lock
        // still holds a usable table.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads the table.
    pub fn read<T>(&self, f: impl FnOnce(&Table) -> T) -> T {
        f(&self.lock().0)
    }

    /// Changes the table with `f` where the change journals nothing (a renewal: a restart
    /// grants a whole TTL anyway), so there is nothing to roll back and no copy to keep.
    fn update<T>(
        &self,
        f: impl FnOnce(&mut Table) -> Result<T, LeaseError>,
    ) -> Result<T, ServiceError> {
        Ok(f(&mut self.lock().0)?)
    }

    /// Changes the table with `f`, which also says what to journal; the change stands only once
    /// its lines are durable (on a failed write the table is as it was).
    fn change<T>(
        &self,
        f: impl FnOnce(&mut Table) -> Result<(T, Vec<Entry>), LeaseError>,
    ) -> Result<T, ServiceError> {
        let mut guard = self.lock();
        let (table, journal) = &mut *guard;
        let before = table.clone();
        let (value, entries) = f(table)?;
        for entry in &entries {
            if let Err(e) = journal.record(entry, table) {
                *table = before;
                return Err(ServiceError::LeaseJournal(e));
            }
        }
        Ok(value)
    }

    /// Ends the leases of `agents` (they were retired).
    pub fn forget(&self, agents: &[AgentName]) -> Result<(), ServiceError> {
        self.change(|t| {
            t.forget(agents);
            let ends = agents.iter().map(|a| Entry::end(a, None)).collect();
            Ok(((), ends))
        })
    }
}

fn held(agent: &AgentName, lease: &Lease) -> LeaseHeld {
    LeaseHeld {
        agent: agent.to_string(),
        holder: lease.holder.clone(),
        token: lease.token,
        ttl_ms: ms(lease.ttl),
    }
}

impl State {
    /// The agent named, if the session is that agent's own sequencer and the agent is known.
    fn lease_subject(
        &self,
        capability: &Capability,
        agent: &str,
        action: &str,
    ) -> Result<AgentName, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        match &duty {
            Duty::Sequencer { agent: own } if *own == agent => {}
            _ => {
                return Err(ServiceError::NotAllowed {
                    duty: duty.to_string(),
                    action: format!("{action} the lease on {agent}"),
                    reason: "only the agent's own sequencer holds its lease",
                });
            }
        }
        self.require_known(&agent)?;
        Ok(agent)
    }

    /// `hubd.acquire-lease`.
    pub fn acquire_lease(
        &self,
        capability: &Capability,
        agent: &str,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<LeaseHeld, ServiceError> {
        let agent = self.lease_subject(capability, agent, "acquire")?;
        let lease = self.leases().change(|t| {
            let lease = t.acquire(&agent, holder, ttl_ms, Instant::now())?;
            let entry = Table::granted(&agent, &lease);
            Ok((lease, vec![entry]))
        })?;
        Ok(held(&agent, &lease))
    }

    /// `hubd.renew-lease`.
    pub fn renew_lease(
        &self,
        capability: &Capability,
        agent: &str,
        token: u64,
    ) -> Result<LeaseHeld, ServiceError> {
        let agent = self.lease_subject(capability, agent, "renew")?;
        let lease = self
            .leases()
            .update(|t| t.renew(&agent, token, Instant::now()))?;
        Ok(held(&agent, &lease))
    }

    /// `hubd.release-lease`.
    pub fn release_lease(
        &self,
        capability: &Capability,
        agent: &str,
        token: u64,
    ) -> Result<LeaseReleased, ServiceError> {
        let agent = self.lease_subject(capability, agent, "release")?;
        self.leases().change(|t| {
            let ends = match t.live_or_lapsed(&agent) {
                Some(lease) if lease.token == token => vec![Entry::end(&agent, Some(token))],
                _ => Vec::new(),
            };
            t.release(&agent, token);
            Ok(((), ends))
        })?;
        Ok(LeaseReleased {
            agent: agent.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent() -> AgentName {
        AgentName::parse("alice").unwrap()
    }

    #[test]
    fn second_holder_is_refused_while_the_first_is_live() {
        let mut t = Table::default();
        let now = Instant::now();
        let first = t.acquire(&agent(), "a:1", 1_000, now).unwrap();
        let err = t
            .acquire(&agent(), "b:2", 1_000, now + Duration::from_millis(10))
            .unwrap_err();
        assert!(
            matches!(&err, LeaseError::Held { holder, token, .. } if holder == "a:1" && *token == first.token),
            "{err}"
        );
        assert!(err.to_string().contains("a:1"));
    }

    #[test]
    fn a_lapsed_lease_can_be_taken_and_its_old_holder_loses_renewal() {
        let mut t = Table::default();
        let now = Instant::now();
        let first = t.acquire(&agent(), "a:1", 1_000, now).unwrap();
        let later = now + Duration::from_millis(1_500);
        let second = t.acquire(&agent(), "b:2", 1_000, later).unwrap();
        assert!(second.token > first.token);
        let err = t.renew(&agent(), first.token, later).unwrap_err();
        assert!(err.to_string().contains("b:2"), "{err}");
        assert!(t.renew(&agent(), second.token, later).is_ok());
    }

    #[test]
    fn a_lapsed_lease_nobody_took_is_renewed() {
        let mut t = Table::default();
        let now = Instant::now();
        let first = t.acquire(&agent(), "a:1", 1_000, now).unwrap();
        let later = now + Duration::from_millis(5_000);
        let renewed = t.renew(&agent(), first.token, later).unwrap();
        assert!(renewed.until > later);
    }

    #[test]
    fn release_frees_at_once_but_only_its_own_lease() {
        let mut t = Table::default();
        let now = Instant::now();
        let first = t.acquire(&agent(), "a:1", 1_000, now).unwrap();
        t.release(&agent(), first.token + 7);
        assert!(t.live(&agent(), now).is_some());
        t.release(&agent(), first.token);
        assert!(t.live(&agent(), now).is_none());
        assert!(t.acquire(&agent(), "b:2", 1_000, now).is_ok());
    }

    #[test]
    fn a_lapse_is_told_once_and_again_only_after_a_renewal() {
        let mut t = Table::default();
        let now = Instant::now();
        let lease = t.acquire(&agent(), "a:1", 1_000, now).unwrap();
        let mut told = HashSet::new();
        assert!(t.newly_lapsed(now, &mut told).is_empty());
        let later = now + Duration::from_millis(1_000);
        assert_eq!(t.newly_lapsed(later, &mut told), [agent()]);
        assert!(t.newly_lapsed(later, &mut told).is_empty());
        t.renew(&agent(), lease.token, later).unwrap();
        assert!(t.newly_lapsed(later, &mut told).is_empty());
        assert!(told.is_empty());
        let again = later + Duration::from_millis(1_000);
        assert_eq!(t.newly_lapsed(again, &mut told), [agent()]);
    }

    #[test]
    fn ttl_out_of_range_is_refused() {
        let mut t = Table::default();
        let err = t.acquire(&agent(), "a", 10, Instant::now()).unwrap_err();
        assert!(matches!(err, LeaseError::BadTtl { ttl_ms: 10, .. }));
    }
}
