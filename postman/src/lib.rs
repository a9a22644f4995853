//! `postman`: carries airmail between hubs over QUIC with mutual TLS (DESIGN §7).
//!
//! Who a hub is to other hubs, how two postmen reach each other and prove who they are, and
//! the carrying of staged letters from outboxes to the offices' hubds (which mirror them, then
//! relay them into inboxes by set union).
//!
//! # Layout
//! - [`identity`]: the hub's key pair and self-signed certificate; the [`identity::Fingerprint`]
//!   a peer pins.
//! - [`frame`]: versioned MessagePack frames, sized before they are read.
//! - [`link`]: QUIC endpoints with mutual TLS pinned by fingerprint, and the hello that binds a
//!   link to an office.
//! - [`carry`]: the serving postman — outboxes read through hubd and sent over the links;
//!   carried letters handed to hubd.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod carry;
pub mod frame;
pub mod identity;
pub mod link;
pub mod status;
