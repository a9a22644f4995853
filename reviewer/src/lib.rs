//! `reviewer`: deliberates over wild calls before they run (DESIGN §4, "Review as deliberation").
//!
//! The reviewer holds a model of **another family** than the proposer's and nothing else: no
//! tool, no token, no hubd session. For each round a proposer's sequencer asks about, it shows
//! its model the call's effect (what would change and where), the proposer's justification and
//! the exchange so far, and answers the verdict its model wrote — safe, unsafe (with a reason and
//! maybe a tame alternative) or unclear. The sequencer journals that answer as a `review` record
//! of its own Log and decides what follows with core's [`l3m_core::review::conclude`]; the
//! reviewer decides nothing but its verdict, and its verdict cannot widen anything: an approved
//! call still runs in the proposer's sandbox, under the proposer's grant.
//!
//! **Must never**: hold a tool or a hubd credential, judge a proposal of its own model family
//! unless the human opted in, or answer a verdict its model did not write (garbage is an error,
//! never a default).
//!
//! # Layout
//! - [`judge`]: [`Reviewer`], one round: the prompt, the model call, the verdict.
//! - [`serve`]: serving `l3m.<hub>.reviewer.review` on the bus until shutdown, and the
//!   reviewer's health (`l3m.<hub>.reviewer.health`: rounds answered and failed).
//!
//! # Example
//! ```no_run
//! # async fn run(bus: std::sync::Arc<dyn l3m_wire::bus::Bus>, provider: std::sync::Arc<dyn l3m_models::Provider>) -> Result<(), Box<dyn std::error::Error>> {
//! use l3m_wire::subjects::{HubId, Subjects};
//! let reviewer = reviewer::Reviewer::new(provider, "gpt-4o".into(), 1024, false)?;
//! let subjects = Subjects::new(HubId::parse("main")?);
//! reviewer::serve(bus.as_ref(), &subjects, std::sync::Arc::new(reviewer), Default::default()).await?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod judge;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use l3m_wire::bus::Bus;
use l3m_wire::error::WireError;
use l3m_wire::reviewer::{OP_REVIEW, ReviewAnswer, ReviewAsk};
use l3m_wire::subjects::{Operation, Service, Subjects};
use l3m_wire::typed::{ServeOptions, TypedRequest, TypedServer};
use tokio_util::sync::CancellationToken;

pub use judge::{Reviewer, ReviewerError};

/// Serves review requests for the hub of `subjects` until `shutdown`: each round is one call to
/// the reviewer's model, answered as a [`ReviewAnswer`] or a typed error.
pub async fn serve(
    bus: &dyn Bus,
    subjects: &Subjects,
    reviewer: Arc<Reviewer>,
    shutdown: CancellationToken,
) -> Result<(), WireError> {
    serve_counting(bus, subjects, reviewer, Arc::new(Rounds::new()), shutdown).await
}

/// [`serve`], counting on `rounds` (which the process's metrics endpoint also reads).
pub async fn serve_counting(
    bus: &dyn Bus,
    subjects: &Subjects,
    reviewer: Arc<Reviewer>,
    rounds: Arc<Rounds>,
    shutdown: CancellationToken,
) -> Result<(), WireError> {
    let op = Operation::parse(OP_REVIEW)?;
    let subject = subjects.request(Service::Reviewer, &op);
    let server =
        TypedServer::<ReviewAsk, ReviewAnswer>::bind(bus, &subject, ServeOptions::default())
            .await?;
    let report = Arc::clone(&rounds);
    let health = l3m_wire::health::serve(
        bus,
        subjects,
        Service::Reviewer,
        move || report.health(),
        shutdown.clone(),
    );
    let reviewing = server.run(
        move |req: TypedRequest<ReviewAsk>| {
            let (reviewer, rounds) = (Arc::clone(&reviewer), Arc::clone(&rounds));
            async move {
                let request = req.body.request;
                match reviewer.review(&request).await {
                    Ok(answer) => {
                        rounds.answered.fetch_add(1, Ordering::Relaxed);
                        Ok(answer)
                    }
                    Err(e) => {
                        rounds.failed.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(agent = %request.agent, tool_use = %request.tool_use, error = %e, "review failed");
                        Err(e.to_remote())
                    }
                }
            }
        },
        shutdown,
    );
    let (health, ()) = tokio::join!(health, reviewing);
    health
}

/// The rounds this reviewer answered and failed: its health answer and its metrics.
#[derive(Debug)]
pub struct Rounds {
    started_ms: u64,
    answered: AtomicU64,
    failed: AtomicU64,
}

impl Default for Rounds {
    fn default() -> Rounds {
        Rounds::new()
    }
}

impl Rounds {
    /// No rounds yet, for a reviewer starting now.
    pub fn new() -> Rounds {
        Rounds {
            started_ms: l3m_core::clock::now_ms(),
            answered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Well while it serves: a failed round (the model's garbage, a timeout) is the proposer's
    /// to handle and is counted, not a sickness of the reviewer.
    pub fn health(&self) -> l3m_wire::health::Health {
        let gauges = std::collections::BTreeMap::from([
            (
                "rounds_answered_total".to_owned(),
                self.answered.load(Ordering::Relaxed),
            ),
            (
                "rounds_failed_total".to_owned(),
                self.failed.load(Ordering::Relaxed),
            ),
        ]);
        l3m_wire::health::Health::of(Service::Reviewer, self.started_ms, Vec::new(), gauges)
    }
}
