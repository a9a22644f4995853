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

/// `ms` since the epoch as `YYYY-MM-DDTHH:MM:SS.mmmZ` (proleptic Gregorian, UTC): how every
/// instant is shown to a model or a human, without a date library.
pub fn rfc3339(ms: u64) -> String {
    let days = ms / 86_400_000;
    let in_day = ms % 86_400_000;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

/// The calendar date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`, for
/// non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_764_621_538_123), "2025-12-01T20:38:58.123Z");
        assert_eq!(rfc3339(1_798_761_599_999), "2026-12-31T23:59:59.999Z");
        assert_eq!(rfc3339(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn the_system_clock_is_after_2020_and_a_fixed_one_stands_still() {
        assert!(now_ms() > 1_577_836_800_000);
        let fixed = FixedClock(7);
        assert_eq!((fixed.now_ms(), fixed.now_ms()), (7, 7));
    }
}
