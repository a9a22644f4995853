//! Fixtures for the ring's tests and the crates that test through it (the tools, the red team):
//! a hub folder with ACRs and snapshots, a git layout with remotes, a loopback HTTP server and a
//! shell ACR; a recording hub outlet. One copy here instead of `#[path]` includes of another crate's test files.
//!
//! Compiled only with the `test-support` feature; no l3m binary enables it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    missing_debug_implementations,
    clippy::new_without_default // a fixture is built on disk, never defaulted
)]

pub mod files_hub;
pub mod git_hub;
pub mod net_server;
pub mod outlet;
pub mod shell_acr;
