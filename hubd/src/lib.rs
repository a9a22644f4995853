//! `hubd`: the hub's storage and gatekeeper, as a library the `hubd` binary wraps.
//!
//! hubd is the only writer of `hub.git`. Its storage layer ([`store`]) holds the hub folder,
//! commit chains appended by compare-and-swap, plain refs and the index that lets reads skip
//! history. On top, [`service`] serves hubd's requests over a [`l3m_wire::bus::Bus`]: sessions
//! ([`capability`]), Logs, the agent tree through the ledger's gates, and mail; [`init`] creates a
//! hub whose ledger starts with its human root.
//!
//! **Must never** run models, tools or containers, or write `hub.git` by any path other than
//! [`store`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod capability;
pub mod init;
pub mod metrics;
pub mod service;
pub mod store;
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod vouchers;

/// Milliseconds since the Unix epoch, now: core's one clock.
pub(crate) use l3m_core::clock::now_ms;
