//! The hub-facing classes, mail and spawn: the ring checks the token, then hands the call to an
//! outlet the sequencer plugs in, which reaches hubd (and hubd re-checks the real gate). The
//! same outlet carries builds and runs (`stages`): they start with hubd's voucher; and vigils
//! (the `tree-view` class), which need no token: hubd's vigil gate is the whole check; and
//! reading a letter of the agent's own inbox (the `tree-view` class too: hubd serves a session
//! only its own inbox).

use std::sync::Arc;
use std::time::Instant;

use l3m_core::axis::Axis;
use l3m_core::build::{ArtifactDigest, Blessing, Stage};
use l3m_core::grant::{SpawnLevel, SpawnRequest};
use l3m_core::log::Refusal;
use l3m_core::mail::{Address, Letter};
use l3m_core::names::AgentName;
use l3m_core::vigil::Watch;

use super::stages::{BuildAsk, Built, Ran, StageError};
use crate::tokens::{MailToken, SpawnToken};

/// What the sequencer plugs in so mail and spawn tools reach hubd (the ring checks tokens first).
pub trait HubOutlet: Send + Sync {
    /// Appends a letter to the inbox `to` names; returns the letter's id.
    fn send_letter(
        &self,
        to: &Address,
        subject: Option<&str>,
        body: &str,
    ) -> Result<String, OutletError>;
    /// Asks hubd to admit a child; returns the child's name.
    fn spawn(&self, request: &SpawnRequest, task: &str) -> Result<String, OutletError>;
    /// Asks hubd to retire `child` and its subtree (hubd checks it descends from the agent).
    fn retire(&self, child: &AgentName) -> Result<(), OutletError>;
    /// Waits until `until` for the first letter from `child` in the session's own inbox that
    /// the agent has not marked read, marks it read, and returns its body; `None` when none
    /// came in time.
    fn take_letter(&self, child: &AgentName, until: Instant)
    -> Result<Option<String>, OutletError>;
    /// Asks hubd to vouch for `ask`, then the builder to carry it out, before a deadline.
    fn build(&self, ask: &BuildAsk) -> Result<Built, StageError>;
    /// Asks hubd to vouch for a run of `artifact`, then the runner to run `stage` over it.
    fn run(&self, artifact: &ArtifactDigest, stage: &Stage) -> Result<Ran, StageError>;
    /// Reads from hubd what a human blessed for this session's agent's runs of `target`.
    fn blessing(&self, target: &str) -> Result<Option<Blessing>, StageError>;
    /// Asks hubd to arm a vigil on `on` (the session's own agent when `None`; a descendant
    /// to pin one on it) until `until_ms`; returns its id.
    fn arm_vigil(
        &self,
        on: Option<&AgentName>,
        watch: Watch,
        until_ms: u64,
    ) -> Result<String, OutletError>;
    /// Asks hubd to cancel the vigil `id` on `on` (the session's own agent when `None`).
    fn cancel_vigil(&self, on: Option<&AgentName>, id: &str) -> Result<(), OutletError>;
    /// Reads the letter `id` from the session's own inbox (`None`: it holds no such letter).
    fn read_letter(&self, id: &str) -> Result<Option<Letter>, OutletError>;
}

/// Why the outlet could not carry a call to hubd, or hubd refused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutletError {
    /// hubd answered with a refusal (its gate's reason, e.g. a spawn widening an axis).
    #[error("hubd refused ({code}): {reason}")]
    Refused {
        /// hubd's error code.
        code: String,
        /// hubd's message.
        reason: String,
        /// The grant axis hubd refused on, when it named one (a spawn widening `net`).
        axis: Option<Axis>,
    },
    /// No outlet was plugged into this session's effects, so nothing can reach hubd.
    #[error(
        "no hub outlet is plugged into this session; mail, spawn, build and run cannot reach hubd"
    )]
    Absent,
    /// hubd could not be reached or did not answer.
    #[error("hubd could not be reached: {reason}")]
    Unreachable {
        /// What failed.
        reason: String,
    },
}

/// Why a letter was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MailError {
    /// The mail boundary: no cover of the token reaches the address.
    #[error(
        "refused by the mail boundary: `{address}` is not covered by the mail grant (covers: {covers:?})"
    )]
    NotCovered {
        /// The address, rendered.
        address: String,
        /// What the token covers.
        covers: Vec<String>,
    },
    /// The letter is empty.
    #[error("a letter needs a body")]
    EmptyBody,
    /// The outlet failed or hubd refused.
    #[error(transparent)]
    Outlet(#[from] OutletError),
}

/// Why a spawn was not asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpawnError {
    /// The spawn boundary: the token's level is `off`.
    #[error("refused by the spawn boundary: the spawn level is off; this agent may not spawn")]
    Off,
    /// The spawn boundary: a child that outlives its call needs the `persist` level.
    #[error(
        "refused by the spawn boundary: child `{child}` is not driven, which needs spawn level persist (held: {held})"
    )]
    NeedsPersist {
        /// The child asked for.
        child: String,
        /// The level held.
        held: SpawnLevel,
    },
    /// The outlet failed or hubd refused (hubd's spawn gate is the real check).
    #[error(transparent)]
    Outlet(#[from] OutletError),
}

/// Letters through the outlet, after the mail token's check.
pub(super) struct MailProvider {
    /// The session's mail token.
    pub(super) token: MailToken,
    /// Where covered letters go; `for_footprint` grants mail only when it is plugged in.
    pub(super) outlet: Option<Arc<dyn HubOutlet>>,
}

impl super::Mail for MailProvider {
    fn send(&self, to: &Address, subject: Option<&str>, body: &str) -> Result<String, MailError> {
        if !self.token.covers_address(to) {
            return Err(MailError::NotCovered {
                address: to.render(),
                covers: self
                    .token
                    .covers()
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            });
        }
        if body.trim().is_empty() {
            return Err(MailError::EmptyBody);
        }
        Ok(outlet(&self.outlet)?.send_letter(to, subject, body)?)
    }
}

/// Spawn requests through the outlet, after the spawn token's check.
pub(super) struct SpawnProvider {
    /// The session's spawn token.
    pub(super) token: SpawnToken,
    /// Where admitted-looking requests go; hubd's gate decides.
    pub(super) outlet: Option<Arc<dyn HubOutlet>>,
}

impl super::Spawn for SpawnProvider {
    fn spawn(&self, request: &SpawnRequest, task: &str) -> Result<String, SpawnError> {
        match self.token.level() {
            SpawnLevel::Off => return Err(SpawnError::Off),
            SpawnLevel::Drive if !request.driven => {
                return Err(SpawnError::NeedsPersist {
                    child: request.child.to_string(),
                    held: SpawnLevel::Drive,
                });
            }
            SpawnLevel::Drive | SpawnLevel::Persist => {}
        }
        Ok(outlet(&self.outlet)?.spawn(request, task)?)
    }

    fn retire(&self, child: &AgentName) -> Result<(), SpawnError> {
        Ok(outlet(&self.outlet)?.retire(child)?)
    }

    fn take_answer(&self, child: &AgentName, until: Instant) -> Result<Option<String>, SpawnError> {
        Ok(outlet(&self.outlet)?.take_letter(child, until)?)
    }
}

/// Vigils through the outlet: hubd's gate decides who may arm or cancel which.
pub(super) struct VigilProvider {
    /// Where requests go.
    pub(super) outlet: Option<Arc<dyn HubOutlet>>,
}

impl super::Vigils for VigilProvider {
    fn arm(
        &self,
        on: Option<&AgentName>,
        watch: Watch,
        until_ms: u64,
    ) -> Result<String, OutletError> {
        outlet(&self.outlet)?.arm_vigil(on, watch, until_ms)
    }

    fn cancel(&self, on: Option<&AgentName>, id: &str) -> Result<(), OutletError> {
        outlet(&self.outlet)?.cancel_vigil(on, id)
    }
}

impl super::Inbox for VigilProvider {
    fn letter(&self, id: &str) -> Result<Option<Letter>, OutletError> {
        outlet(&self.outlet)?.read_letter(id)
    }
}

/// The plugged-in outlet, or [`OutletError::Absent`].
fn outlet(outlet: &Option<Arc<dyn HubOutlet>>) -> Result<&dyn HubOutlet, OutletError> {
    outlet.as_deref().ok_or(OutletError::Absent)
}

impl OutletError {
    /// hubd's refusal as data: its gate is the boundary, with the axis it named.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            OutletError::Refused { axis, .. } => Some(Refusal::new("hub", *axis)),
            _ => None,
        }
    }
}

impl MailError {
    /// The boundary that refused the letter, when it was refused.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            MailError::NotCovered { .. } => Some(Refusal::new("mail", Some(Axis::Mail))),
            MailError::Outlet(outlet) => outlet.refusal(),
            _ => None,
        }
    }
}

impl SpawnError {
    /// The boundary that refused the child, when it was refused.
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            SpawnError::Off | SpawnError::NeedsPersist { .. } => {
                Some(Refusal::new("spawn", Some(Axis::Spawn)))
            }
            SpawnError::Outlet(outlet) => outlet.refusal(),
        }
    }
}
