//! The vigils chain: arming and cancelling through core's gates, and firing.
//!
//! Every line is appended by hubd itself, after [`admit_arm`], [`admit_cancel`] or [`fire`]
//! over the chain as it is (a lost compare-and-swap re-reads and decides again), so a vigil
//! fires at most once and a pinned one is cancelled only by its pinner or a human. hubd keeps
//! the armed vigils of every live agent in memory ([`Armed`], rebuilt from the chains at
//! start) to know cheaply which ref moves may fire one; `service::vigils` runs the sweeps.

use std::collections::BTreeMap;

use l3m_core::mail::InboxEntry;
use l3m_core::names::{AgentName, Entity};
use l3m_core::refs::{self, AgentRef};
use l3m_core::vigil::{
    Observed, Vigil, VigilError, VigilLine, Watch, admit_arm, admit_cancel, armed, fire, fires,
    parse_vigil_line,
};
use l3m_wire::hubd::session::Capability;
use l3m_wire::hubd::vigils::{VigilArmed, VigilCancelled, VigilRange};

use crate::service::error::ServiceError;
use crate::service::gate;

use super::{Moved, State};

/// Appends lost to a concurrent append before giving up.
const APPEND_ATTEMPTS: usize = 3;

/// The armed vigils of each agent that has any, as its chain last folded.
pub(in crate::service) type Armed = BTreeMap<AgentName, Vec<Vigil>>;

/// Which vigils a sweep looks at.
#[derive(Debug, Clone)]
pub(in crate::service) enum Sweep {
    /// Those watching one of these refs, observed afresh.
    Moved(Vec<Moved>),
    /// Every armed vigil, against the clock only: deadlines and bounds.
    Clock,
    /// Every armed vigil, observed afresh (at start, and now and then, for moves not heard).
    All,
}

fn refused(e: VigilError) -> ServiceError {
    match e {
        VigilError::NotAllowed {
            duty,
            action,
            agent,
        } => ServiceError::NotAllowed {
            duty,
            action: format!("{action} a vigil on {agent}"),
            reason: "a vigil is armed by its agent, an ancestor or a human, and cancelled by \
                     whoever armed it or a human",
        },
        VigilError::Pinned {
            id,
            pinned_by,
            duty,
        } => ServiceError::NotAllowed {
            duty,
            action: format!("cancel vigil {id}, pinned by {pinned_by}"),
            reason: "a pinned vigil is cancelled only by whoever pinned it, or a human",
        },
        other => ServiceError::Invalid(other.to_string()),
    }
}

impl State {
    /// The vigils chain of `agent`, parsed; a line that does not parse is skipped with a
    /// warning (hubd wrote every line, so only damage outside hubd makes one).
    fn vigil_lines(&self, agent: &AgentName) -> Result<Vec<VigilLine>, ServiceError> {
        let refname = refs::agent_ref(agent, AgentRef::Vigils);
        if self.hub.tip(&refname)?.id().is_none() {
            return Ok(Vec::new());
        }
        let stored = self.hub.read_range(&refname, 0, self.hub.len(&refname)?)?;
        Ok(stored
            .iter()
            .filter_map(|l| match parse_vigil_line(l) {
                Ok(line) => Some(line),
                Err(error) => {
                    tracing::warn!(%agent, %error, "skipping a vigil line");
                    None
                }
            })
            .collect())
    }

    /// Appends the line `decide` makes of the chain as it is now, retrying a lost race; keeps
    /// the agent's armed vigils in memory as the chain now folds. `None` from `decide`: nothing
    /// to append.
    fn append_vigil<T>(
        &self,
        agent: &AgentName,
        decide: impl Fn(&[VigilLine]) -> Result<Option<(VigilLine, T)>, ServiceError>,
    ) -> Result<Option<(T, u64)>, ServiceError> {
        let refname = refs::agent_ref(agent, AgentRef::Vigils);
        let mut last = None;
        for _ in 0..APPEND_ATTEMPTS {
            let tip = self.hub.tip(&refname)?;
            let mut lines = self.vigil_lines(agent)?;
            let Some((line, answer)) = decide(&lines)? else {
                return Ok(None);
            };
            let text = serde_json::to_string(&line)
                .map_err(|e| ServiceError::Internal(format!("encoding a vigil line: {e}")))?;
            let summary = match &line {
                VigilLine::Armed { vigil } => format!(
                    "vigil {} armed by {}: {}",
                    vigil.id,
                    vigil.armed_by,
                    vigil.watch.describe()
                ),
                VigilLine::Cancelled { id, by } => format!("vigil {id} cancelled by {by}"),
                VigilLine::Fired { id, .. } => format!("vigil {id} fired"),
            };
            match self.hub.append(&refname, tip, &[text], &summary) {
                Ok(appended) => {
                    lines.push(line);
                    self.keep_armed(agent, armed(&lines));
                    return Ok(Some((answer, appended.len)));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or_else(
            || ServiceError::Internal("no append was tried".into()),
            ServiceError::from,
        ))
    }

    fn keep_armed(&self, agent: &AgentName, now: Vec<Vigil>) {
        let mut all = self.armed_vigils();
        if now.is_empty() {
            all.remove(agent);
        } else {
            all.insert(agent.clone(), now);
        }
    }

    /// Rebuilds the armed vigils of every live agent from their chains (at start).
    pub(in crate::service) fn load_vigils(&self) -> Result<usize, ServiceError> {
        let live: Vec<AgentName> = self.tree().ledger.live_agents().cloned().collect();
        let mut count = 0;
        for agent in live {
            let now = armed(&self.vigil_lines(&agent)?);
            count += now.len();
            self.keep_armed(&agent, now);
        }
        Ok(count)
    }

    /// `hubd.arm-vigil`: core's gate over the chain; hubd fills in what only it knows (the
    /// watched ref's tip) and checks what needs the hub (the letter was sent by the agent).
    pub fn arm_vigil(
        &self,
        capability: &Capability,
        agent: &str,
        mut watch: Watch,
        until_ms: u64,
    ) -> Result<(VigilArmed, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        if !self.tree().ledger.is_live(&agent) {
            return Err(ServiceError::Invalid(format!(
                "{agent} is not a live agent; only a live agent keeps vigils"
            )));
        }
        match &mut watch {
            Watch::RefMoved {
                agent: of,
                which,
                from,
            } => *from = gate::tip_hex(self.hub.tip(&refs::agent_ref(of, *which))?),
            Watch::LetterRead { letter, reader } => self.require_sent(&agent, letter, reader)?,
            Watch::ChildDone { child } => self.require_known(child)?,
            Watch::Deadline { .. } => {}
        }
        let now_ms = self.now_ms();
        let armed = self.append_vigil(&agent, |lines| {
            let line = admit_arm(&duty, &agent, lines, watch.clone(), until_ms, now_ms)
                .map_err(refused)?;
            let VigilLine::Armed { vigil } = &line else {
                return Err(ServiceError::Internal("arming made no armed line".into()));
            };
            let id = vigil.id.clone();
            Ok(Some((line, id)))
        })?;
        let (id, len) = armed.ok_or_else(|| ServiceError::Internal("nothing armed".into()))?;
        Ok((VigilArmed { id, len }, (AgentRef::Vigils, agent)))
    }

    /// That `letter` is a letter `agent` sent to `reader`'s inbox.
    fn require_sent(
        &self,
        agent: &AgentName,
        letter: &str,
        reader: &AgentName,
    ) -> Result<(), ServiceError> {
        self.require_known(reader)?;
        let inbox = refs::agent_ref(reader, AgentRef::Inbox);
        let (lines, _, _) = self.read_chain(&inbox, 0, u64::MAX)?;
        let sent = lines.iter().enumerate().any(|(i, line)| {
            matches!(InboxEntry::from_line(line, i + 1),
                Ok(InboxEntry::Letter(l)) if l.id.as_str() == letter
                    && l.from.recipient().0 == Entity::Agent(agent.clone()))
        });
        if sent {
            Ok(())
        } else {
            Err(ServiceError::Invalid(format!(
                "{reader}'s inbox holds no letter {letter} from {agent}; a vigil watches only \
                 letters its agent sent"
            )))
        }
    }

    /// `hubd.cancel-vigil`: core's gate over the chain.
    pub fn cancel_vigil(
        &self,
        capability: &Capability,
        agent: &str,
        id: &str,
    ) -> Result<(VigilCancelled, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        let cancelled = self.append_vigil(&agent, |lines| {
            let line = admit_cancel(&duty, &agent, lines, id).map_err(refused)?;
            Ok(Some((line, ())))
        })?;
        let ((), len) =
            cancelled.ok_or_else(|| ServiceError::Internal("nothing cancelled".into()))?;
        Ok((VigilCancelled { len }, (AgentRef::Vigils, agent)))
    }

    /// `hubd.read-vigils`: as an inbox is read (the agent, an ancestor, its host, a human).
    pub fn read_vigils(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
        to: u64,
    ) -> Result<VigilRange, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        gate::may_read(&duty, &agent, "vigils")?;
        let refname = refs::agent_ref(&agent, AgentRef::Vigils);
        if self.hub.tip(&refname)?.id().is_none() {
            return Ok(VigilRange {
                lines: Vec::new(),
                from,
                len: 0,
                tip: None,
            });
        }
        let (lines, from, len, tip) = self.read_page(&refname, from, to)?;
        Ok(VigilRange {
            lines,
            from,
            len,
            tip,
        })
    }

    /// Whether any armed vigil watches one of `moved`: cheap, so every announcement can ask.
    pub(in crate::service) fn watched(&self, moved: &[Moved]) -> bool {
        let all = self.armed_vigils();
        all.values()
            .flatten()
            .any(|v| v.watch.key().is_some_and(|key| moved.contains(&key)))
    }

    /// Fires every vigil `sweep` finds true or past its bound, each once; forgets the vigils
    /// of agents no longer live. Returns the chains that moved.
    pub(in crate::service) fn sweep_vigils(&self, sweep: &Sweep) -> Vec<Moved> {
        let candidates: Vec<(AgentName, Vigil)> = self
            .armed_vigils()
            .iter()
            .flat_map(|(a, vs)| vs.iter().map(|v| (a.clone(), v.clone())))
            .collect();
        let mut moved = Vec::new();
        for (agent, vigil) in candidates {
            if !self.tree().ledger.is_live(&agent) {
                self.keep_armed(&agent, Vec::new());
                continue;
            }
            let observed = match sweep {
                Sweep::Clock => Observed::Clock,
                Sweep::Moved(keys) if !vigil.watch.key().is_some_and(|k| keys.contains(&k)) => {
                    Observed::Clock
                }
                Sweep::Moved(_) | Sweep::All => match self.observe(&vigil.watch) {
                    Ok(observed) => observed,
                    Err(error) => {
                        tracing::warn!(%agent, vigil = vigil.id, %error, "could not observe");
                        Observed::Clock
                    }
                },
            };
            let now_ms = self.now_ms();
            let Some(fact) = fires(&vigil, &observed, now_ms) else {
                continue;
            };
            let fired = self.append_vigil(&agent, |lines| {
                Ok(fire(lines, &vigil.id, fact.clone(), now_ms).map(|line| (line, ())))
            });
            match fired {
                Ok(Some(_)) => {
                    tracing::info!(%agent, vigil = vigil.id, ?fact, "vigil fired");
                    moved.push((AgentRef::Vigils, agent));
                }
                Ok(None) => {}
                Err(error) => tracing::warn!(%agent, vigil = vigil.id, %error, "could not fire"),
            }
        }
        moved.dedup();
        moved
    }

    /// What the hub says about `watch` now.
    fn observe(&self, watch: &Watch) -> Result<Observed, ServiceError> {
        Ok(match watch {
            Watch::RefMoved { agent, which, .. } => Observed::Tip(gate::tip_hex(
                self.hub.tip(&refs::agent_ref(agent, *which))?,
            )),
            Watch::LetterRead { letter, reader } => {
                let inbox = refs::agent_ref(reader, AgentRef::Inbox);
                let (lines, _, _) = self.read_chain(&inbox, 0, u64::MAX)?;
                let by = Entity::Agent(reader.clone());
                Observed::Read(lines.iter().enumerate().any(|(i, line)| {
                    matches!(InboxEntry::from_line(line, i + 1),
                        Ok(InboxEntry::ReadMark(m)) if m.letter.as_str() == letter && m.by == by)
                }))
            }
            Watch::ChildDone { child } => Observed::Retired(!self.tree().ledger.is_live(child)),
            Watch::Deadline { .. } => Observed::Clock,
        })
    }
}
