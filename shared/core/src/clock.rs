//! Time as l3m reads it: milliseconds since the Unix epoch, through one trait, so that every
//! stamp (a record's `at_ms`, a lease's expiry, a commit's time) comes from a clock a test or
//! a replay can fix.
//!
//! [`SystemClock`] is the one reading of the operating system's clock in the workspace; the
//! rest of core stays pure and takes times as arguments.

use std::time::{SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The operating system's clock; a clock set before 1970 reads as the epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// A clock that stands still at the time it holds: for tests and replays, which must stamp
/// the same time every run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FixedClock(pub u64);

impl Clock for FixedClock {
    fn now_ms(&self) -> u64 {
        self.0
    }
}

/// The system clock's reading, for code with no clock injected (a process's own stamps).
pub fn now_ms() -> u64 {
    SystemClock.now_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_is_after_2020_and_a_fixed_one_stands_still() {
        assert!(now_ms() > 1_577_836_800_000);
        let fixed = FixedClock(7);
        assert_eq!((fixed.now_ms(), fixed.now_ms()), (7, 7));
    }
}
