//! Epoch milliseconds as `YYYY-MM-DDTHH:MM:SS.mmmZ` (core's one rendering), and the clock
//! reading every command stamps with.

/// Milliseconds since the Unix epoch, now: core's one clock.
pub use l3m_core::clock::now_ms;

/// Renders `at_ms` (milliseconds since the Unix epoch) as a UTC timestamp.
pub use l3m_core::clock::rfc3339 as utc;
