//! What one hubd holds in memory, and every operation as a synchronous step over the store.
//!
//! Operations here block (the store fsyncs); `handlers` runs each off the async path and
//! queues the announcements it returns. The tree lock serialises every ledger write, so the
//! in-memory [`Ledger`] is always the fold of the ledger chain: a row is applied to a copy first
//! (re-running its gate), appended, and only then does the copy replace the original.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Instant;

use l3m_core::duty::{Duty, RefWrite, may_write};
use l3m_core::grant::{Probe, SpawnRequest};
use l3m_core::ledger::{Ledger, LedgerRow, Life};
use l3m_core::mail::{Address, Draft, InboxEntry, LetterId, ReadMark, Sender};
use l3m_core::names::{AgentName, Entity};
use l3m_core::refs::{self, AgentRef};
use l3m_core::settings::Settings;
use l3m_core::wire_format;
use l3m_wire::bus::Bus;
use l3m_wire::hubd::authority::GrantView;
use l3m_wire::hubd::log::{LogAppended, LogRange};
use l3m_wire::hubd::mail::{InboxLines, LetterSent, MarkedRead};
use l3m_wire::hubd::session::Capability;
use l3m_wire::hubd::tree::{AgentLife, AgentState, AgentTree, Collected, Retired, Spawned};
use l3m_wire::subjects::Subjects;

use super::announce::Announcer;
use super::error::ServiceError;
use super::gate;
use super::lease::Leases;

mod airmail;
mod credentials;
mod regrant;
use crate::init::{InitError, load_credentials, load_ledger};
use crate::now_ms;
use crate::session::{Sessions, entity_of, random_hex};
use crate::store::{Checkout, Hub, Tip};

/// How many times a Log read is tried while appends keep moving its tip.
const READ_ATTEMPTS: usize = 8;

/// An agent ref that moved and must be announced.
pub type Moved = (AgentRef, AgentName);

/// The ledger's fold and every agent name it ever spawned (the fold lists only live ones).
#[derive(Debug)]
struct Tree {
    ledger: Ledger,
    names: BTreeSet<AgentName>,
}

/// One hubd's state: the store, the replayed ledger and credentials, the sessions, the bus.
#[derive(Debug)]
pub struct State {
    hub: Hub,
    tree: Mutex<Tree>,
    sessions: Sessions,
    leases: Leases,
    /// The fold of `refs/l3m/credentials`; its lock serialises credential writes.
    credentials: Mutex<l3m_core::credential::Registry>,
    /// What this process signs vouchers with (sessions learn its public half at open).
    vouchers: l3m_wire::credential::LifetimeSigner,
    bus: Arc<dyn Bus>,
    subjects: Subjects,
    /// The hub's settings as last written (parsed; the text stays in `hub.git`).
    settings: RwLock<Settings>,
    announcer: Announcer,
}

fn not_found(what: &'static str, name: impl ToString, detail: String) -> ServiceError {
    ServiceError::NotFound {
        what,
        name: name.to_string(),
        detail,
    }
}

impl State {
    /// Replays the hub's ledger and credentials; ref moves go out through `announcer`.
    pub(super) fn load(
        hub: Hub,
        bus: Arc<dyn Bus>,
        subjects: Subjects,
        announcer: Announcer,
    ) -> Result<State, InitError> {
        let (ledger, names) = load_ledger(&hub)?;
        let credentials = Mutex::new(load_credentials(&hub)?);
        let vouchers = l3m_wire::credential::LifetimeSigner::generate()?;
        let settings = Settings::parse(&super::settings::read_text(&hub)?)?;
        Ok(State {
            hub,
            tree: Mutex::new(Tree { ledger, names }),
            sessions: Sessions::default(),
            leases: Leases::default(),
            credentials,
            vouchers,
            bus,
            subjects,
            settings: RwLock::new(settings),
            announcer,
        })
    }

    /// Queues the announcements of `moved` (published after the reply, in order).
    pub(super) fn announce(&self, moved: &[Moved]) {
        self.announcer.announce(self, moved);
    }

    /// Keeps `settings`, just written, for what hubd serves from them.
    pub(super) fn replace_settings(&self, settings: Settings) {
        *self
            .settings
            .write()
            .unwrap_or_else(PoisonError::into_inner) = settings;
    }

    /// The hub's subjects.
    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// The bus announcements go out on.
    pub fn bus(&self) -> &Arc<dyn Bus> {
        &self.bus
    }

    /// The store.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The session leases.
    pub(super) fn leases(&self) -> &Leases {
        &self.leases
    }

    fn tree(&self) -> MutexGuard<'_, Tree> {
        // Every write to the tree is a whole-value replace after the store write succeeded, so
        // a panic elsewhere cannot leave it half-updated.
        self.tree.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn duty(&self, capability: &Capability) -> Result<Duty, ServiceError> {
        self.sessions
            .duty(&capability.0)
            .map_err(ServiceError::from)
    }

    /// Applies `rows` to a copy of the ledger (each re-running its gate), appends them as one
    /// commit, then installs the copy.
    fn append_ledger(
        &self,
        tree: &mut Tree,
        rows: &[LedgerRow],
        summary: &str,
    ) -> Result<(), ServiceError> {
        let mut next = tree.ledger.clone();
        for row in rows {
            next.apply(row)?;
        }
        let lines = rows
            .iter()
            .map(wire_format::to_line)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ServiceError::Internal(format!("encoding a ledger row: {e}")))?;
        let tip = self.hub.tip(refs::LEDGER)?;
        self.hub.append(refs::LEDGER, tip, &lines, summary)?;
        tree.ledger = next;
        for row in rows {
            if let LedgerRow::Spawn { child, .. } = row {
                tree.names.insert(child.clone());
            }
        }
        Ok(())
    }

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
        // The tip is read on both sides of the range, so the length returned is the tip's. A
        // Log that keeps moving under the read is retried a bounded number of times, so a
        // write storm cannot hold a reader forever.
        for _ in 0..READ_ATTEMPTS {
            let before = self.hub.tip(&refname)?;
            let (records, from, len) = self.read_chain(&refname, from, to)?;
            if self.hub.tip(&refname)? == before {
                return Ok(LogRange {
                    records,
                    from,
                    len,
                    tip: gate::tip_hex(before),
                });
            }
        }
        Err(ServiceError::Internal(format!(
            "{refname} moved during each of {READ_ATTEMPTS} reads; read it again"
        )))
    }

    /// One page of the chain `refname` from `from` (up to `to`): at most `PAGE_LINES` lines,
    /// cut to `PAGE_BYTES`; with the first line's number and the chain's length.
    fn read_chain(
        &self,
        refname: &str,
        from: u64,
        to: u64,
    ) -> Result<(Vec<String>, u64, u64), ServiceError> {
        let len = self.chain_len(refname)?;
        let from = from.min(len);
        let to = to
            .min(len)
            .min(from.saturating_add(wire_format::PAGE_LINES));
        let from = from.min(to);
        let mut lines = if from == to {
            Vec::new()
        } else {
            self.hub.read_range(refname, from, to)?
        };
        lines.truncate(wire_format::page_len(lines.iter().map(String::len)));
        Ok((lines, from, len))
    }

    /// A chain's length; a chain not yet started has none.
    fn chain_len(&self, refname: &str) -> Result<u64, ServiceError> {
        match self.hub.tip(refname)? {
            Tip::Absent => Ok(0),
            Tip::At(_) => Ok(self.hub.len(refname)?),
        }
    }

    pub(super) fn require_known(&self, agent: &AgentName) -> Result<(), ServiceError> {
        match self.tree().ledger.agent(agent) {
            Some(_) => Ok(()),
            None => Err(not_found("agent", agent, String::new())),
        }
    }

    /// The persona a live agent wears, as its spawn row recorded it.
    pub(super) fn worn_persona(
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
                    push_urls: super::settings::push_urls(&settings, &entry.grant),
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
        let child = req.child.clone();
        let row = LedgerRow::Spawn {
            parent: parent.clone(),
            child: child.clone(),
            grant: req.grant.clone(),
            loan: req.loan,
            driven: req.driven,
            persona: req.persona.clone(),
            at_ms: now_ms(),
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
        let persona = self.fork_persona(&child, persona_commit)?;
        moved.push((AgentRef::Persona, child.clone()));
        let work_branch = self.fork_work_branch(&child, &parent)?;
        self.make_acr(&child, &work_branch, persona)?;
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

    /// Writes `child`'s grants ref: its grant and its account, as JSON files.
    fn write_grants(
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

    /// The child's work branch starts at its parent's, or empty for a root.
    fn fork_work_branch(&self, child: &AgentName, parent: &Entity) -> Result<String, ServiceError> {
        let branch = refs::work_branch(child);
        let current = self.hub.tip(&branch)?;
        let from = match parent {
            Entity::Agent(parent) => self.hub.tip(&refs::work_branch(parent))?.id(),
            _ => None,
        };
        match from {
            Some(commit) => self.hub.set_ref(&branch, current, commit)?,
            None => {
                self.hub
                    .commit_files(&branch, current, &[], &format!("work of {child} begins"))?;
            }
        }
        Ok(branch)
    }

    /// The child's persona branch: a fork of the persona it wears, or, wearing none, a first
    /// commit with an empty tree, so that its `agent/` worktree always has something to check
    /// out and the agent can write its own persona files there.
    fn fork_persona(
        &self,
        child: &AgentName,
        worn: Option<gix::ObjectId>,
    ) -> Result<gix::ObjectId, ServiceError> {
        let refname = refs::agent_ref(child, AgentRef::Persona);
        let current = self.hub.tip(&refname)?;
        Ok(match worn {
            Some(commit) => {
                self.hub.set_ref(&refname, current, commit)?;
                commit
            }
            None => self.hub.commit_files(
                &refname,
                current,
                &[],
                &format!("persona of {child} begins, wearing none"),
            )?,
        })
    }

    /// The ACR: `workspace/`, a worktree on the work branch; `agent/`, a worktree detached at
    /// the persona branch's tip (git cannot keep a worktree on a ref outside `refs/heads/`, see
    /// [`crate::store::Checkout`]); `.l3m/`, a plain directory for the harness.
    fn make_acr(
        &self,
        agent: &AgentName,
        work_branch: &str,
        persona: gix::ObjectId,
    ) -> Result<(), ServiceError> {
        let root = self.hub.root();
        let harness = root.join(refs::paths::harness_dir(agent));
        std::fs::create_dir_all(&harness).map_err(|source| ServiceError::Io {
            action: "creating",
            path: harness.display().to_string(),
            source,
        })?;
        self.hub.add_worktree(
            &root.join(refs::paths::workspace(agent)),
            Checkout::Branch(work_branch),
        )?;
        self.hub.add_worktree(
            &root.join(refs::paths::persona_worktree(agent)),
            Checkout::Detached(persona),
        )?;
        Ok(())
    }

    /// Removes an ACR: its worktrees, then the rest of the directory.
    fn remove_acr(&self, agent: &AgentName) -> Result<(), ServiceError> {
        let root = self.hub.root();
        for dir in [
            refs::paths::persona_worktree(agent),
            refs::paths::workspace(agent),
        ] {
            self.hub.remove_worktree(&root.join(dir))?;
        }
        let acr = root.join(refs::paths::acr(agent));
        match std::fs::remove_dir_all(&acr) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(ServiceError::Io {
                action: "removing",
                path: acr.display().to_string(),
                source: e,
            }),
            _ => Ok(()),
        }
    }

    /// Deletes a ref if it exists; returns whether it did.
    fn delete_if_present(&self, refname: &str) -> Result<bool, ServiceError> {
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
        let mut tree = self.tree();
        let rows = tree.ledger.retire_subtree(&agent, now_ms())?;
        self.append_ledger(&mut tree, &rows, &format!("retire {agent} and its subtree"))?;
        drop(tree);
        let retired: Vec<AgentName> = rows
            .iter()
            .filter_map(|row| match row {
                LedgerRow::Retire { agent, .. } => Some(agent.clone()),
                _ => None,
            })
            .collect();
        self.sessions.revoke_agents(&retired);
        self.leases.with(|t| t.forget(&retired));
        let mut moved = Vec::new();
        for a in &retired {
            if self.delete_if_present(&refs::agent_ref(a, AgentRef::Grants))? {
                moved.push((AgentRef::Grants, a.clone()));
            }
            self.remove_acr(a)?;
        }
        self.hub.prune_worktrees()?;
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
            at_ms: now_ms(),
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
        let now = Instant::now();
        let tree = self.tree();
        let start = match &after {
            Some(after) => std::ops::Bound::Excluded(after),
            None => std::ops::Bound::Unbounded,
        };
        let mut agents: Vec<AgentState> = tree
            .names
            .range((start, std::ops::Bound::Unbounded))
            .filter_map(|name| {
                let entry = tree.ledger.agent(name)?;
                let holder = match entry.life {
                    Life::Live => self
                        .leases
                        .with(|t| t.live(name, now).map(|l| l.holder.clone())),
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
                })
            })
            // One more than a page holds, to know whether another page follows.
            .take(wire_format::PAGE_LINES as usize + 1)
            .collect();
        // One page: at most PAGE_LINES agents, and what one message holds (each state's text,
        // with room for its framing).
        let fits = wire_format::page_len(agents.iter().map(|a| {
            a.name.len() + a.parent.len() + a.holder.as_ref().map_or(0, String::len) + 64
        }))
        .min(wire_format::PAGE_LINES as usize);
        let next = (fits < agents.len()).then(|| agents[fits - 1].name.clone());
        agents.truncate(fits);
        Ok(AgentTree { agents, next })
    }

    /// `hubd.send-letter`: stamped with the session's true sender, checked against the
    /// address's vouched star and the sender's mail axis, appended to the recipient's inbox.
    pub fn send_letter(
        &self,
        capability: &Capability,
        to: &str,
        subject: Option<String>,
        body: String,
    ) -> Result<(LetterSent, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let address = Address::parse(to)
            .map_err(|e| ServiceError::Invalid(format!("address {to:?}: {e}")))?;
        if let Some(office) = address.office() {
            return Err(ServiceError::Invalid(format!(
                "address {to:?} is at office {office}, another hub: stage it with stage-airmail"
            )));
        }
        let (sender, recipient) = {
            let tree = self.tree();
            let ledger = &tree.ledger;
            address
                .check_star(|entity| match entity {
                    Entity::Agent(a) => ledger.is_live(a),
                    Entity::Human(h) => ledger.human_grant(h).is_some(),
                    Entity::Service(s) => ledger.service_grant(s).is_some(),
                })
                .map_err(|e| ServiceError::Invalid(format!("address {to:?}: {e}")))?;
            let (recipient, _) = address.recipient();
            let sender = match &duty {
                Duty::Sequencer { agent } => {
                    // The grant as it reaches: its own covers plus the default reach of every
                    // agent (its own subtree and its ancestors).
                    let allowed = ledger.grant(agent).is_some_and(|g| {
                        g.expand_own(agent).allows(&Probe::Mail(recipient.clone()))
                    });
                    if !allowed {
                        return Err(ServiceError::NotAllowed {
                            duty: duty.to_string(),
                            action: format!("mail {recipient}"),
                            reason: "the sender's grant does not cover the recipient on its \
                                     `mail` axis",
                        });
                    }
                    Sender::Agent {
                        agent: agent.clone(),
                        worktree: None,
                        human: None,
                    }
                }
                Duty::Human { human } => Sender::Human {
                    human: human.clone(),
                    worktree: None,
                },
                Duty::Postman { .. } | Duty::Host { .. } => {
                    return Err(ServiceError::NotAllowed {
                        duty: duty.to_string(),
                        action: "send a letter".into(),
                        reason: "the postman carries airmail and a host wakes agents; neither \
                                 writes letters",
                    });
                }
            };
            (sender, recipient)
        };
        let Entity::Agent(agent) = recipient else {
            return Err(ServiceError::Invalid(format!(
                "{recipient} has no inbox in hub.git: hubd delivers to agents only"
            )));
        };
        let (id, letter) = Self::stamp_letter(address, subject, body, &sender)?;
        let entry = InboxEntry::Letter(Box::new(letter));
        let inbox = refs::agent_ref(&agent, AgentRef::Inbox);
        let seq = self.append_line(&inbox, &entry, &format!("letter {id}"))?;
        Ok((
            LetterSent {
                letter: id.as_str().to_owned(),
                inbox,
                seq,
            },
            (AgentRef::Inbox, agent),
        ))
    }

    /// A letter stamped by the host: a fresh random id, the time, the session's true sender.
    fn stamp_letter(
        address: Address,
        subject: Option<String>,
        body: String,
        sender: &Sender,
    ) -> Result<(LetterId, l3m_core::mail::Letter), ServiceError> {
        let id = random_hex()
            .map_err(|e| ServiceError::Internal(format!("the OS random source failed: {e}")))?;
        let id = LetterId::parse(&id).map_err(|e| ServiceError::Internal(e.to_string()))?;
        let mut draft = Draft::new(address, body);
        draft.subject = subject;
        let letter = l3m_core::mail::stamp(draft, sender, id.clone(), now_ms())
            .map_err(|e| ServiceError::Invalid(e.to_string()))?;
        Ok((id, letter))
    }

    /// Appends one inbox line, retrying on a lost CAS (hubd is the inbox's only writer of
    /// letters; a concurrent letter only moves the tip).
    fn append_line(
        &self,
        refname: &str,
        entry: &InboxEntry,
        summary: &str,
    ) -> Result<u64, ServiceError> {
        let line = entry
            .to_line()
            .map_err(|e| ServiceError::Internal(format!("encoding an inbox line: {e}")))?;
        if line.len() > wire_format::MAX_STORED_LINE {
            return Err(ServiceError::Invalid(format!(
                "{summary} is {} bytes as stored, over the limit of {} bytes for one inbox line; \
                 send a shorter text (control characters count escaped), or put the bulk in a \
                 file and send its path",
                line.len(),
                wire_format::MAX_STORED_LINE
            )));
        }
        loop {
            let tip = self.hub.tip(refname)?;
            match self
                .hub
                .append(refname, tip, std::slice::from_ref(&line), summary)
            {
                Ok(appended) => return Ok(appended.first_seq),
                Err(crate::store::StoreError::Stale { .. }) => continue,
                Err(other) => return Err(other.into()),
            }
        }
    }

    /// `hubd.read-inbox`: the agent's own sequencer, an ancestor's, or a human.
    pub fn read_inbox(
        &self,
        capability: &Capability,
        agent: &str,
        from: u64,
    ) -> Result<InboxLines, ServiceError> {
        let duty = self.duty(capability)?;
        let agent = gate::agent(agent)?;
        self.require_known(&agent)?;
        gate::may_read(&duty, &agent, "inbox")?;
        self.read_chain(&refs::agent_ref(&agent, AgentRef::Inbox), from, u64::MAX)
            .map(|(entries, from, len)| InboxLines { entries, from, len })
    }

    /// `hubd.mark-read`: a read mark on the caller's own inbox.
    pub fn mark_read(
        &self,
        capability: &Capability,
        letter: &str,
    ) -> Result<(MarkedRead, Moved), ServiceError> {
        let duty = self.duty(capability)?;
        let Duty::Sequencer { agent } = &duty else {
            return Err(ServiceError::NotAllowed {
                duty: duty.to_string(),
                action: "mark a letter read".into(),
                reason: "a read mark goes on the reader's own inbox; only an agent has one in hub.git",
            });
        };
        let inbox = refs::agent_ref(agent, AgentRef::Inbox);
        may_write(&duty, &inbox, RefWrite::Append)?;
        let letter = LetterId::parse(letter)
            .map_err(|e| ServiceError::Invalid(format!("letter id: {e}")))?;
        let entry = InboxEntry::ReadMark(ReadMark {
            letter: letter.clone(),
            by: Entity::Agent(agent.clone()),
            at_ms: now_ms(),
        });
        let seq = self.append_line(&inbox, &entry, &format!("read {}", letter.as_str()))?;
        Ok((MarkedRead { seq }, (AgentRef::Inbox, agent.clone())))
    }
}
