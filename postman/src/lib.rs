//! `postman`: carries airmail between hubs over QUIC with mutual TLS (DESIGN §7).
//!
//! This is the transport half of the duty: who a hub is to other hubs, and how two postmen
//! reach each other and prove who they are. Carrying letters (outbox to mirror to inbox, with
//! receipts) is built on it and not written yet; the binary says so.
//!
//! # Layout
//! - [`identity`]: the hub's key pair and self-signed certificate; the [`identity::Fingerprint`]
//!   a peer pins.
//! - [`frame`]: versioned MessagePack frames, sized before they are read.
//! - [`link`]: QUIC endpoints with mutual TLS pinned by fingerprint, and the hello that binds a
//!   link to an office.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod frame;
pub mod identity;
pub mod link;
