//! `l3m-wire`: how l3m processes talk to each other inside a site.
//!
//! Processes exchange request/reply and notifications over NATS, each message a versioned
//! MessagePack envelope. This crate owns the three things every process must agree on: the
//! **subjects** (who listens where), the **envelope** (what the bytes are, checked in strict
//! layers before any typed decoding), and the **bus** (how bytes move: [`bus::NatsBus`] over a
//! real nats-server, [`bus::LocalBus`] inside one process for the CLI's embedded mode, with the
//! same semantics). On top sits a typed request/response layer whose servers answer every bad
//! request with a typed error and keep serving.
//!
//! Git is the truth: a message is never the only copy of a fact. Anything that must survive is
//! written to a ref first and announced here second, so a lost message costs latency, not data.
//!
//! **Must never** decide anything about authority (that is `l3m-core`'s and hubd's), touch Git,
//! or read the environment; bulk data (packs, artifacts) never travels in a message. The only
//! process it starts is a test nats-server, behind the `test-support` feature.
//!
//! # Layout
//! - [`envelope`]: the versioned envelope, [`envelope::Limits`], the [`envelope::Message`] trait,
//!   `encode`/`decode`.
//! - [`reply`]: [`reply::Reply`], [`reply::RemoteError`] and its stable [`reply::ErrorCode`]s.
//! - [`subjects`]: the subject scheme (`l3m.<hub>.…`) and NATS subject syntax and matching.
//! - [`bus`]: the object-safe [`bus::Bus`] trait and its two implementations.
//! - [`typed`]: [`typed::call`] for clients, [`typed::TypedServer`] / [`typed::serve_typed`]
//!   for servers.
//! - [`client`]: [`client::HubClient`], one session with a hubd and a typed method per
//!   operation.
//! - [`control`]: control of an agent's sequencer (interrupt, rewind, forecast, status), and of
//!   its host when it is asleep.
//! - [`postman`]: the postman's status of its links to other hubs.
//! - [`build`]: requests to the builder and the runner; artifacts travel as digests only.
//! - [`reviewer`]: asking the reviewer about one round of a wild call.
//! - [`error`]: [`WireError`], what went wrong between two processes.
//! - [`credential`]: a process's credential file, the proof that opens a session, the session
//!   key and the seal on every request.
//! - [`sealed_reply`]: [`sealed_reply::ReplyKey`], the answers to a session's requests,
//!   encrypted to the session and bound to the request they answer.
//! - `test_support` (feature `test-support`): a real nats-server for tests.
//!
//! # Example
//! ```
//! use l3m_core::names::AgentName;
//! use l3m_core::refs::AgentRef;
//! use l3m_wire::subjects::{Filter, HubId, Subjects};
//!
//! let subjects = Subjects::new(HubId::parse("main")?);
//! let alice = AgentName::parse("alice")?;
//! let worker = AgentName::parse("alice/main/worker")?;
//! let moved = subjects.ref_changed(AgentRef::Log, &worker);
//! assert_eq!(moved, "l3m.main.ref.log.alice.main.worker");
//! // alice's whole subtree is two filters; her sibling `alicex` matches neither.
//! let [own, below] = subjects.ref_changes_within(&alice);
//! assert!(Filter::parse(&below)?.matches(&moved));
//! let sibling = subjects.ref_changed(AgentRef::Log, &AgentName::parse("alicex")?);
//! assert!(![own, below].iter().any(|f| Filter::parse(f).unwrap().matches(&sibling)));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod build;
pub mod bus;
pub mod client;
pub mod control;
pub mod credential;
pub mod envelope;
pub mod error;
pub mod health;
pub mod hubd;
pub mod postman;
pub mod reply;
pub mod reviewer;
pub mod sealed_reply;
pub mod subjects;
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod typed;

pub use error::WireError;
