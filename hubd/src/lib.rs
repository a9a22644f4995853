//! `hubd`: the hub's storage and gatekeeper, as a library the `hubd` binary wraps.
//!
//! hubd is the only writer of `hub.git`. This crate holds, so far, its storage layer
//! ([`store`]): the hub folder, commit chains appended by compare-and-swap, plain refs, and the
//! in-memory index that lets reads skip history. The gatekeeper duties arrive later.
//!
//! **Must never** run models, tools or containers, or write `hub.git` by any path other than
//! [`store`].
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod store;
