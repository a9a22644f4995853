//! Asking the reviewer about one round of a wild call.
//!
//! The proposer's sequencer sends a [`ReviewAsk`] to `Subjects::request(Service::Reviewer,
//! "review")` and journals the [`ReviewAnswer`] as a `review` record of its own Log: the
//! reviewer writes nothing anywhere, so it needs no hubd session at all. Only NATS users allowed
//! to publish there (the `sequencer` user of `deploy/nats.conf`) can ask; the reviewer's own
//! user may only serve this subject.
//!
//! # Format
//! A [`ReviewAsk`] (`reviewer.review`): `{ request: ReviewRequest }` (core's
//! [`ReviewRequest`]: agent, tool use, round, rounds allowed, proposer family, effect,
//! justification, earlier rounds) → a [`ReviewAnswer`] (`reviewer.review-reply`): `{ verdict,
//! by, spent }`, or a typed error: `refused` for a proposal of the reviewer's own model family,
//! `invalid` when its model answered garbage, `internal` when its model could not be reached.

use std::time::Duration;

use l3m_core::log::Verdict;
use l3m_core::review::{ReviewRequest, ReviewSpent};
use serde::{Deserialize, Serialize};

use crate::client::HubClient;
use crate::envelope::{Limits, Message};
use crate::error::WireError;
use crate::reply::RemoteError;
use crate::subjects::{Operation, Service};

/// The review op's subject token.
pub const OP_REVIEW: &str = "review";

/// One round's question to the reviewer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReviewAsk {
    /// What is asked: the effect, the justification, the exchange so far.
    pub request: ReviewRequest,
}

impl Message for ReviewAsk {
    const KIND: &'static str = "reviewer.review";
}

/// The reviewer's answer to one round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewAnswer {
    /// Its verdict.
    pub verdict: Verdict,
    /// Who answered: the reviewer service and the model it asked.
    pub by: String,
    /// What the round cost the reviewer.
    pub spent: ReviewSpent,
}

impl Message for ReviewAnswer {
    const KIND: &'static str = "reviewer.review-reply";
}

/// The subject the reviewer of `client`'s hub serves.
pub fn subject(client: &HubClient) -> Result<String, WireError> {
    let op = Operation::parse(OP_REVIEW)?;
    Ok(client.subjects().request(Service::Reviewer, &op))
}

/// Asks the reviewer of `client`'s hub about one round. `Err` on the outer level: nobody
/// answered within `timeout` (no reviewer runs, or it crashed) or the wire failed.
pub async fn ask(
    client: &HubClient,
    request: ReviewRequest,
    timeout: Duration,
) -> Result<Result<ReviewAnswer, RemoteError>, WireError> {
    crate::typed::call(
        client.bus().as_ref(),
        &subject(client)?,
        &ReviewAsk { request },
        timeout,
        &Limits::default(),
    )
    .await
}
