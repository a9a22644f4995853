//! `sequencer`: advances exactly one agent, as the single writer of its Log.
//!
//! One task owns the Log. Everything else — a letter, a model reply, a finished tool, a control
//! request — is an input on its channel. Each pass drains the inputs, journals them through
//! core's pure [`journal`](l3m_core::owed::journal), runs the hooks (default: show), asks core's
//! [`plan`](l3m_core::owed::plan) what is owed, appends every new record in one compare-and-swap
//! to the Log ref, and only then starts the activities those records name (model calls, tools),
//! each a task that reports back as an input. Booting closes what a dead process left open with
//! [`close_open`](l3m_core::owed::close_open), exactly as an interrupt does: there is no other
//! resume path.
//!
//! Decisions worth knowing:
//! - Every letter, a human's to its own agent included, is journaled as an `event` (source
//!   `letter`) and shown by the default hook; none becomes a `user-line`, so hooks see all mail
//!   alike and every letter gets its read mark (written once its event is appended).
//! - Budget: each `call-started` is appended with a `budget-change` (one call, and the bytes
//!   journaled since the previous call); at boot and on grant moves the budget is hubd's
//!   account `left` less what this Log has spent, journaled only if it differs.
//! - Letters from the agent's driven children (its programs' calls' children) are never
//!   posted as mail: a program takes each through `await_answer` as one menu word
//!   ([`drive`]); boot retires every live driven child, since no call survives a restart.
//! - Model calls go to the agent's model on attempt 1 and to its fallback (if configured) on
//!   later attempts, after a doubling backoff.
//!
//! **Must never**: start an activity before the record that authorizes it is appended; append
//! after losing a compare-and-swap (a conflict stops the sequencer, it is never retried);
//! make a model call past the budget; write another agent's refs or its own grants.
//!
//! # Layout
//! - [`model`]: the provider face, `l3m-models` re-exported.
//! - [`acr`]: the agent's ACR, a clone this host keeps of its branches, fetched from and
//!   pushed back through hubd.
//! - [`outlet`]: how the mail and spawn tools reach hubd.
//! - [`drive`]: the agent's driven children: their letters held back, their retirement at boot.
//! - [`config`]: the TOML configuration.
//! - [`prompt`]: the system prompt, assembled purely.
//! - [`toolbox`]: the tool table, minted effects and undo attribution.
//! - [`boundary`]: the one door from foreign input (replies, provider errors, tool outputs,
//!   letters) to the Log: every record is fitted there, so hubd never refuses one for content.
//! - `writer` (private): the single-writer state and its pass.
//! - `boot` (private): lease, fold, close, prompt, budget.
//! - `inputs` (private): inbox and grants watching; lease renewal.
//! - [`control`]: the control subject (interrupt, rewind, status), offline rewind, fork.
//! - [`vouchers`]: who may control this sequencer (hubd's signed vouchers, each used once).
//! - [`supervise`](mod@supervise): waking asleep agents with unread mail or an answered card.
//! - [`run_agent`]: the entry point.

pub mod acr;
pub mod boundary;
pub mod config;
pub mod control;
pub mod drive;
pub mod model;
pub mod outlet;
pub mod prompt;
pub mod supervise;
pub mod toolbox;
pub mod undo;
pub mod vouchers;

mod boot;
mod health;
mod inputs;
mod writer;

use std::path::PathBuf;
use std::sync::Arc;

use l3m_core::names::AgentName;
use l3m_wire::client::{ClientError, HubClient};
use tokio_util::sync::CancellationToken;

pub use config::Config;
pub use control::{HostControl, rewind_offline, serve_host};
pub use health::{HostMeter, HostShown};
pub use supervise::{
    Launcher, ProcessLauncher, Supervisor, TaskLauncher, supervise, supervise_metered,
};

/// Builds the provider for a model label of the configuration.
pub type ProviderFactory =
    Arc<dyn Fn(&str) -> Result<Arc<dyn model::Provider>, model::ModelError> + Send + Sync>;

/// Why the sequencer stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum SequencerError {
    /// Another sequencer holds the agent's lease; hubd's message names the holder.
    #[error("another sequencer runs {agent}: {message}")]
    LeaseHeld {
        /// The agent.
        agent: String,
        /// hubd's refusal, naming the holder.
        message: String,
    },
    /// A compare-and-swap on the Log was lost: another writer appended. Never retried.
    #[error("the Log of {agent} moved under this sequencer (another writer exists); stopping")]
    LostWriter {
        /// The agent.
        agent: String,
    },
    /// A call to hubd failed.
    #[error("hubd: {0}")]
    Hub(#[from] ClientError),
    /// The ACR's clone could not be made ready or pushed.
    #[error(transparent)]
    Acr(#[from] acr::AcrError),
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// A model provider could not be built.
    #[error(transparent)]
    Model(#[from] model::ModelError),
    /// The tool table, tokens or undo chain could not be set up or used.
    #[error("tools: {0}")]
    Tools(String),
    /// A rewind's restore was refused or failed (a branch someone else moved, a lost token);
    /// when refused, nothing was restored and, before journaling, nothing was journaled.
    #[error("rewind: {0}")]
    Restore(#[from] l3m_ring::rewind::RestoreError),
    /// Core refused what the sequencer asked to journal (the Log is not where it thought).
    #[error("the Log refused a record: {0}")]
    Stale(#[from] l3m_core::owed::Stale),
    /// The sequencer built a record hubd would refuse (its own logic, never a model's or a
    /// tool's content, which the boundary fits): it stops rather than append it.
    #[error("a record the sequencer built cannot be stored: {0}")]
    Unjournalable(l3m_core::log_rule::Refused),
    /// An id the sequencer made is not a valid one.
    #[error("an id made for the Log is invalid: {0}")]
    Id(#[from] l3m_core::log::LogError),
    /// A subject could not be formed or served.
    #[error("subject: {0}")]
    Subject(#[from] l3m_wire::subjects::SubjectError),
    /// The bus failed: connecting, or serving a subject.
    #[error("{what}: {source}")]
    Bus {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: l3m_wire::WireError,
    },
    /// A running sequencer did not answer a control request, or refused it.
    #[error("{agent}'s sequencer {outcome}")]
    Control {
        /// The agent.
        agent: String,
        /// "did not answer: …" or "refused: …".
        outcome: String,
    },
    /// The Log names an undo entry that is not an undo chain id: the rewind stops rather
    /// than skip it (skipping would leave an edit unrestored while the notice said it was whole).
    #[error(
        "the Log names undo entry {id:?} after record {to}, which is not an undo chain id; \
         the rewind stops rather than skip it"
    )]
    BadUndoId {
        /// The id as the Log holds it.
        id: String,
        /// The rewind's target record.
        to: u64,
    },
    /// A fork asked for a record the source's Log does not have.
    #[error("{source_agent}'s Log has {len} records; there is no record {at} to fork at")]
    NoSuchRecord {
        /// The agent forked from.
        source_agent: String,
        /// The Log's length.
        len: u64,
        /// The record asked for.
        at: u64,
    },
    /// Launching a sequencer for an agent failed.
    #[error("launching the sequencer of {agent}: {reason}")]
    Launch {
        /// The agent.
        agent: String,
        /// Why.
        reason: String,
    },
}

/// How a run ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Nothing to do for `idle_exit_secs`; the lease was released.
    Idle,
    /// Asked to stop.
    Shutdown,
    /// A unit of fuel ran out (journaled as `out-of-fuel`).
    OutOfFuel,
    /// The lease was lost to another holder; nothing more was appended.
    LeaseLost,
    /// The agent was retired.
    Retired,
}

/// Everything one run of one agent needs. The library reads no environment or arguments.
#[derive(Clone)]
pub struct AgentRun {
    /// Where this host keeps its agents' ACRs ([`acr`]): `<hub>/forest` on the hub's own
    /// host, any folder on another.
    pub forest: PathBuf,
    /// The agent to run.
    pub agent: AgentName,
    /// A session with hubd holding `Duty::Sequencer { agent }`.
    pub client: HubClient,
    /// The configuration.
    pub config: Config,
    /// Builds providers by model label.
    pub provider_factory: ProviderFactory,
    /// Who holds the lease (e.g. `host:pid`), as a second sequencer is told.
    pub holder: String,
}

impl std::fmt::Debug for AgentRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRun")
            .field("forest", &self.forest)
            .field("agent", &self.agent)
            .field("holder", &self.holder)
            .finish_non_exhaustive()
    }
}

/// Runs `run.agent` with the built-in tools until it is idle, out of fuel, stopped or loses
/// its lease.
pub async fn run_agent(run: AgentRun, shutdown: CancellationToken) -> Result<Exit, SequencerError> {
    run_agent_with(run, l3m_tools::builtin, shutdown).await
}

/// [`run_agent`] with another tool set (tests add a slow tool); `tools` is called each time the
/// table is built (at boot and when the grant changes).
pub async fn run_agent_with(
    run: AgentRun,
    tools: fn() -> Vec<Box<dyn l3m_tools::Tool>>,
    shutdown: CancellationToken,
) -> Result<Exit, SequencerError> {
    let booted = boot::boot(&run, tools, shutdown.clone()).await?;
    booted.run(shutdown).await
}

/// Milliseconds since the Unix epoch, for record stamps: core's one clock.
pub(crate) use l3m_core::clock::now_ms;
