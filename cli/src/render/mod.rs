//! Pure renderings of what hubd returns: Log lines, the model's view, the agent tree, the
//! stats fold, grants. Nothing here does IO; each command prints what these return.
//!
//! # Layout
//! - [`escape`]: foreign text with its control characters made visible.
//! - [`time`]: epoch milliseconds as UTC timestamps.
//! - [`log`]: one short line per Log record.
//! - [`view`]: the model's view, readably.
//! - [`tree`]: the agent hierarchy, drawn.
//! - [`stats`]: model calls, tokens and tool latency folded from Logs.
//! - [`grant`]: a grant axis by axis, and an account.

pub mod economy;
pub mod escape;
pub mod grant;
pub mod log;
pub mod stats;
pub mod time;
pub mod tree;
pub mod view;
