//! What one hubd holds in memory, and every operation as a synchronous step over the store.
//!
//! Operations here block (the store fsyncs); `handlers` runs each off the async path and
//! queues the announcements it returns. The tree lock serialises every ledger write, so the
//! in-memory [`Ledger`] is always the fold of the ledger chain: a row is applied to a copy first
//! (re-running its gate), appended, and only then does the copy replace the original.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};

use l3m_core::duty::Duty;
use l3m_core::ledger::{Ledger, LedgerRow};
use l3m_core::names::AgentName;
use l3m_core::record_format;
use l3m_core::refs::{self, AgentRef};
use l3m_core::settings::Settings;
use l3m_wire::bus::Bus;
use l3m_wire::hubd::session::Capability;
use l3m_wire::subjects::Subjects;

use super::announce::Announcer;
use super::error::ServiceError;
use super::health::Meter;
use super::lease::Leases;

mod acr;
mod airmail;
mod builds;
mod cards;
mod credentials;
mod listing;
mod log;
mod mail;
mod pack;
mod regrant;
mod tree;
mod undo;
pub(super) mod vigils;
use crate::capability::Sessions;
use crate::init::{InitError, load_credentials, load_ledger};
use crate::store::Hub;
use l3m_core::clock::{Clock, SystemClock};

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
    /// The hub's identity, which signs every `open-session` answer.
    identity: l3m_wire::credential::HubIdentity,
    /// The control vouchers issued and not yet expired, each spent once here.
    outstanding: Mutex<crate::vouchers::Outstanding>,
    bus: Arc<dyn Bus>,
    subjects: Subjects,
    /// The hub's settings as last written (parsed; the text stays in `hub.git`).
    settings: RwLock<Settings>,
    announcer: Announcer,
    /// Pushes whose packs are still arriving.
    uploads: Mutex<pack::Uploads>,
    /// Held while airmail is delivered, so two deliveries of one letter cannot both find it
    /// absent and both append it.
    deliveries: Mutex<()>,
    /// Where every stamp hubd writes (a ledger row, a letter, a credential's expiry) comes from.
    clock: Arc<dyn Clock>,
    /// What each operation has served, for health and metrics.
    meter: Meter,
    /// When this process loaded the hub, in milliseconds since the Unix epoch.
    started_ms: u64,
    /// The armed vigils of every live agent, as their chains fold.
    vigils: Mutex<vigils::Armed>,
    /// Where a sweep is asked for when a watched ref moves (set once the task runs).
    vigil_pokes: OnceLock<tokio::sync::mpsc::Sender<vigils::Sweep>>,
    /// What each asleep agent's Log tail says, by Log tip, for `hubd.list-tree`.
    stuck: listing::Stuck,
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
        let identity = crate::init::identity(&hub)?;
        let settings = Settings::parse(&super::settings::read_text(&hub)?)?;
        let leases = Leases::open(&hub.hubd_dir()).map_err(InitError::LeaseJournal)?;
        Ok(State {
            hub,
            tree: Mutex::new(Tree { ledger, names }),
            sessions: Sessions::default(),
            leases,
            credentials,
            vouchers,
            identity,
            outstanding: Mutex::default(),
            bus,
            subjects,
            settings: RwLock::new(settings),
            announcer,
            clock: Arc::new(SystemClock),
            deliveries: Mutex::new(()),
            uploads: Mutex::default(),
            meter: Meter::default(),
            started_ms: l3m_core::clock::now_ms(),
            vigils: Mutex::default(),
            vigil_pokes: OnceLock::new(),
            stuck: listing::Stuck::default(),
        })
    }

    /// The time now, from the state's clock.
    pub(super) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Queues the announcements of `moved` (published after the reply, in order), and asks for
    /// a vigil sweep if an armed vigil watches one of them.
    pub(super) fn announce(&self, moved: &[Moved]) {
        self.announcer.announce(self, moved);
        if self.watched(moved) {
            self.poke_vigils(vigils::Sweep::Moved(moved.to_vec()));
        }
    }

    /// Asks the vigil task for `sweep`; dropped (with the next full sweep as the backstop) if
    /// its queue is full or it does not run.
    pub(super) fn poke_vigils(&self, sweep: vigils::Sweep) {
        if let Some(pokes) = self.vigil_pokes.get()
            && pokes.try_send(sweep).is_err()
        {
            tracing::debug!("the vigil task is busy; the next full sweep catches up");
        }
    }

    /// Where pokes go: set once, by the task that sweeps.
    pub(super) fn set_vigil_pokes(&self, pokes: tokio::sync::mpsc::Sender<vigils::Sweep>) {
        if self.vigil_pokes.set(pokes).is_err() {
            tracing::warn!("a second vigil task was started; the first one keeps the pokes");
        }
    }

    /// The armed vigils of every live agent.
    fn armed_vigils(&self) -> MutexGuard<'_, vigils::Armed> {
        // Every write is a whole-entry replace from a fold of the chain.
        self.vigils.lock().unwrap_or_else(PoisonError::into_inner)
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

    /// The open sessions.
    pub(super) fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// What each operation has served.
    pub fn meter(&self) -> &Meter {
        &self.meter
    }

    /// When this process loaded the hub, in milliseconds since the Unix epoch.
    pub fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// How many agents the ledger holds alive.
    pub(super) fn live_agent_count(&self) -> usize {
        self.tree().ledger.live_agents().count()
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
        let lines = rows
            .iter()
            .map(record_format::to_line)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| ServiceError::Internal(format!("encoding a ledger row: {e}")))?;
        let tip = self.hub.tip(refs::LEDGER)?;
        if let [row] = rows {
            // One row is applied in place: a refused row changes nothing (the law
            // `human_grant_is_a_root`), and copying a ledger of thousands of agents for every
            // spawn made a spawn's cost grow with their number.
            tree.ledger.apply(row)?;
            if let Err(error) = self.hub.append(refs::LEDGER, tip, &lines, summary) {
                // The row is not on the ref: the fold goes back to what the ref holds.
                match crate::init::load_ledger(&self.hub) {
                    Ok((ledger, _)) => tree.ledger = ledger,
                    Err(reload) => {
                        tracing::error!(%reload, "could not read the ledger back after a failed append");
                    }
                }
                return Err(error.into());
            }
        } else {
            // Later rows may depend on earlier ones: all are tried on a copy first.
            let mut next = tree.ledger.clone();
            for row in rows {
                next.apply(row)?;
            }
            self.hub.append(refs::LEDGER, tip, &lines, summary)?;
            tree.ledger = next;
        }
        for row in rows {
            if let LedgerRow::Spawn { child, .. } = row {
                tree.names.insert(child.clone());
            }
        }
        Ok(())
    }
}
