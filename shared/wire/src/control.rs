//! Control of an agent's sequencer — interrupt, rewind, forecast, status — and of the host
//! that runs it when it is asleep.
//!
//! A running sequencer serves `Subjects::agent_request(Service::Sequencer, op, agent)` for each
//! op; the host running an agent's subtree (the waker, `sequencer supervise`) serves
//! `Subjects::agent_request(Service::Host, op, agent)` for [`OP_REWIND`] and [`OP_FORECAST`] of
//! an agent no sequencer runs, under its own host credential — so the CLI never opens a session
//! as anyone but its human. Either takes a request only with hubd's voucher that the sender may
//! make it on this agent ([`crate::hubd::session::Vouched`]), signed by hubd's per-process key.
//!
//! # Format
//! A [`Controlled`] (`sequencer.control`): `{ vouched, request: { op: "interrupt"|"rewind"|
//! "forecast"|"status", ... } }` → a [`ControlReply`] (`sequencer.control-reply`): `{ kind:
//! "done", next_seq } | { kind: "refused", reason } | { kind: "status", ... } | { kind:
//! "forecast", ... }`.

use std::time::Duration;

use l3m_core::budget::Fuel;
use l3m_core::log::EffectNote;
use l3m_core::names::AgentName;
use serde::{Deserialize, Serialize};

use crate::client::{ClientError, HubClient};
use crate::envelope::{Limits, Message};
use crate::error::WireError;
use crate::hubd::session::Vouched;
use crate::subjects::{Operation, Service};

/// The op that interrupts the agent.
pub const OP_INTERRUPT: &str = "interrupt";
/// The op that rewinds the agent.
pub const OP_REWIND: &str = "rewind";
/// The op that forecasts a rewind, changing nothing.
pub const OP_FORECAST: &str = "forecast";
/// The op that reports the agent's state.
pub const OP_STATUS: &str = "status";

/// A request to an agent's sequencer, or to its host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum ControlRequest {
    /// Close what is open and end the turn.
    Interrupt {
        /// Why (who asked).
        reason: String,
    },
    /// Return the conversation to just after record `to`, restoring files and branches.
    Rewind {
        /// The record.
        to: u64,
        /// Why.
        reason: String,
    },
    /// Say what a rewind to record `to` would restore and what not, changing nothing.
    Forecast {
        /// The record.
        to: u64,
    },
    /// Report the agent's state.
    Status,
}

/// A control request as sent: the request and hubd's voucher that the sender may make it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Controlled {
    /// hubd's voucher for this agent and op.
    pub vouched: Vouched,
    /// The request.
    pub request: ControlRequest,
}

impl Message for Controlled {
    const KIND: &'static str = "sequencer.control";
}

/// The answer of a sequencer or host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ControlReply {
    /// Journaled; the Log's next seq is now `next_seq`.
    Done {
        /// The next seq.
        next_seq: u64,
    },
    /// Not journaled, and why (e.g. a rewind target past the Log).
    Refused {
        /// Why.
        reason: String,
    },
    /// The state.
    Status(Status),
    /// What a rewind would do.
    Forecast(Forecast),
}

impl Message for ControlReply {
    const KIND: &'static str = "sequencer.control-reply";
}

/// What a running sequencer reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// The agent.
    pub agent: String,
    /// The Log's next seq.
    pub next_seq: u64,
    /// Whether a turn is under way.
    pub live: bool,
    /// The open model call, if any.
    pub open_call: Option<String>,
    /// Tool uses running.
    pub running_tools: Vec<String>,
    /// Fuel left per the Log.
    pub fuel: Option<Fuel>,
}

impl ControlRequest {
    /// The request with who asked (as hubd vouched for them) added to its reason, so the Log
    /// records the true sender, not only what the sender wrote.
    pub fn asked_by(self, by: &str) -> ControlRequest {
        match self {
            ControlRequest::Interrupt { reason } => ControlRequest::Interrupt {
                reason: format!("{reason} (asked by {by})"),
            },
            ControlRequest::Rewind { to, reason } => ControlRequest::Rewind {
                to,
                reason: format!("{reason} (asked by {by})"),
            },
            other => other,
        }
    }

    /// The digest a voucher binds ([`crate::hubd::session::Voucher::digest`]): BLAKE3 of the
    /// request's MessagePack encoding, so a voucher for one rewind target opens no other.
    pub fn digest(&self) -> Result<[u8; 32], WireError> {
        let bytes = rmp_serde::to_vec_named(self).map_err(|e| WireError::Encode {
            kind: Controlled::KIND,
            reason: e.to_string(),
        })?;
        let mut hasher = blake3::Hasher::new_derive_key("l3m control request v1");
        hasher.update(&bytes);
        Ok(*hasher.finalize().as_bytes())
    }

    /// The control op this request is sent on.
    pub fn op(&self) -> &'static str {
        match self {
            ControlRequest::Interrupt { .. } => OP_INTERRUPT,
            ControlRequest::Rewind { .. } => OP_REWIND,
            ControlRequest::Forecast { .. } => OP_FORECAST,
            ControlRequest::Status => OP_STATUS,
        }
    }
}

/// Who answers a control request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The agent's running sequencer.
    Sequencer,
    /// The host that runs the agent's subtree, for an agent no sequencer runs.
    Host,
}

impl Target {
    /// The service whose subjects the target serves.
    pub fn service(self) -> Service {
        match self {
            Target::Sequencer => Service::Sequencer,
            Target::Host => Service::Host,
        }
    }
}

/// Why a control request came to nothing.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// hubd would not vouch for the request (the sender may not make it), or was not reached.
    #[error(transparent)]
    Hub(#[from] ClientError),
    /// A subject or op did not parse (a bug, named).
    #[error(transparent)]
    Wire(#[from] WireError),
    /// Nobody answered: no sequencer runs the agent (or no host serves it).
    #[error("{who} did not answer: {source}")]
    NoAnswer {
        /// Whose silence.
        who: String,
        /// What the bus said.
        source: WireError,
    },
    /// The target answered with an error.
    #[error("{who} refused: {reason}")]
    Refused {
        /// Who refused.
        who: String,
        /// Why.
        reason: String,
    },
}

/// Asks `target` for `agent` (reached over `client`'s bus) to carry out `request`, with hubd's
/// voucher that `client`'s session may. No responder is [`ControlError::NoAnswer`].
pub async fn call(
    client: &HubClient,
    target: Target,
    agent: &AgentName,
    request: &ControlRequest,
    timeout: Duration,
) -> Result<ControlReply, ControlError> {
    let who = match target {
        Target::Sequencer => format!("{agent}'s sequencer"),
        Target::Host => format!("the host of {agent}"),
    };
    let op = Operation::parse(request.op()).map_err(WireError::from)?;
    let subject = client
        .subjects()
        .agent_request(target.service(), &op, agent);
    let vouched = client.vouch(agent, request).await?;
    let reply = crate::typed::call(
        client.bus().as_ref(),
        &subject,
        &Controlled {
            vouched,
            request: request.clone(),
        },
        timeout,
        &Limits::default(),
    )
    .await
    .map_err(|source| ControlError::NoAnswer {
        who: who.clone(),
        source,
    })?;
    reply.map_err(|e| ControlError::Refused {
        who,
        reason: e.message,
    })
}

/// What a rewind to a record restores and what it cannot undo: forecast with nothing changed
/// (`--dry-run`), or reported once done.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forecast {
    /// The record the rewind returns to.
    pub to: u64,
    /// How many file edits are undone.
    pub edits: usize,
    /// The paths they touched, sorted.
    pub paths: Vec<String>,
    /// The branches moved back.
    pub branches: Vec<BranchBack>,
    /// What a rewind does not take back (a push that left the host, a letter, a spawn).
    pub not_undone: Vec<EffectNote>,
}

/// One branch a rewind moves back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BranchBack {
    /// The branch's full ref name.
    pub branch: String,
    /// Where it is now.
    pub from: Option<String>,
    /// Where it goes back to (`None`: deleted, the undone commits created it).
    pub to: Option<String>,
}

impl Forecast {
    /// One line saying what is (or would be) restored and what is not undone, counted in words
    /// that agree with their numbers.
    pub fn narrate(&self, done: bool) -> String {
        let (restore, move_back) = if done {
            ("restored", "moved back")
        } else {
            ("would restore", "would move back")
        };
        let mut parts = Vec::new();
        if self.edits > 0 {
            parts.push(format!(
                "{restore} {} of {}",
                counted(self.edits, "file edit", "file edits"),
                self.paths.join(", ")
            ));
        }
        if !self.branches.is_empty() {
            let each: Vec<String> = self
                .branches
                .iter()
                .map(|b| match &b.to {
                    Some(id) => format!("{} to {}", b.branch, short(id)),
                    None => format!("{} (deleted: the undone commits created it)", b.branch),
                })
                .collect();
            parts.push(format!(
                "{move_back} {}: {}",
                counted(self.branches.len(), "branch", "branches"),
                each.join(", ")
            ));
        }
        if parts.is_empty() {
            parts.push("no file edits or commits to restore".into());
        }
        if !self.not_undone.is_empty() {
            let each: Vec<String> = self
                .not_undone
                .iter()
                .map(|n| format!("{} {}", n.class, n.target))
                .collect();
            parts.push(format!(
                "not undone ({} left this host or cannot be taken back): {}",
                if self.not_undone.len() == 1 {
                    "it"
                } else {
                    "they"
                },
                each.join("; ")
            ));
        }
        format!("rewind to {}: {}", self.to, parts.join("; "))
    }
}

/// `n` and the noun in the number `n` asks for.
fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// A commit id as people quote it.
fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}
