//! How long to wait before trying a failed request again: a pure decision.
//!
//! Exponential backoff with "equal jitter": try `n` (from 1) waits between half and all of
//! `base · 2^(n-1)`, capped at `max`. The jitter is a deterministic function of a seed, the
//! request's idempotency key and the try, so two agents retrying at once spread apart while a
//! test can predict every delay. A `retry-after` from the provider wins over the computed
//! delay, capped at `max_retry_after` so a hostile header cannot park the agent for a day.
//!
//! # Layout
//! - [`Backoff`]: the policy's numbers.
//! - [`Backoff::delay`]: the decision.

use std::time::Duration;

/// The numbers of the retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The wait before the first retry, before jitter.
    pub base: Duration,
    /// The longest computed wait.
    pub max: Duration,
    /// The longest wait a provider's `retry-after` may ask for.
    pub max_retry_after: Duration,
    /// Mixed into the jitter; tests fix it, a binary may vary it per process.
    pub seed: u64,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(500),
            max: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
            seed: 0,
        }
    }
}

impl Backoff {
    /// The wait before retry number `retry` (from 1) of the request keyed `key`, given the
    /// provider's `retry-after` if it sent one.
    pub fn delay(&self, retry: u32, key: &str, retry_after: Option<Duration>) -> Duration {
        if let Some(asked) = retry_after {
            return asked.min(self.max_retry_after);
        }
        let doublings = retry.saturating_sub(1).min(30);
        let ceiling = self
            .base
            .saturating_mul(1u32 << doublings)
            .min(self.max)
            .as_nanos();
        let ceiling = u64::try_from(ceiling).unwrap_or(u64::MAX);
        let half = ceiling / 2;
        let spread = ceiling - half;
        let roll = splitmix64(self.seed ^ fnv1a(key) ^ u64::from(retry));
        let jitter = if spread == 0 { 0 } else { roll % (spread + 1) };
        Duration::from_nanos(half + jitter)
    }
}

/// FNV-1a: a stable hash of the key (std's hasher may change between releases).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One step of splitmix64, a well-mixed function of its input.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Backoff {
        Backoff {
            base: Duration::from_millis(100),
            max: Duration::from_secs(1),
            max_retry_after: Duration::from_secs(10),
            seed: 7,
        }
    }

    #[test]
    fn delays_grow_within_their_band_and_stop_at_the_cap() {
        let p = policy();
        for retry in 1..=10 {
            let ceiling = (Duration::from_millis(100) * 2u32.pow(retry - 1)).min(p.max);
            let d = p.delay(retry, "l3m-call-1", None);
            assert!(d >= ceiling / 2 && d <= ceiling, "retry {retry}: {d:?}");
        }
    }

    #[test]
    fn jitter_is_deterministic_and_depends_on_key_and_seed() {
        let p = policy();
        assert_eq!(p.delay(3, "a", None), p.delay(3, "a", None));
        let keys: std::collections::HashSet<_> = (0..20)
            .map(|i| p.delay(3, &format!("call-{i}"), None))
            .collect();
        assert!(keys.len() > 1, "jitter spreads different keys apart");
        let other = Backoff { seed: 8, ..p };
        let differs = (0..20).any(|i| {
            let key = format!("call-{i}");
            p.delay(3, &key, None) != other.delay(3, &key, None)
        });
        assert!(differs);
    }

    #[test]
    fn retry_after_wins_and_is_capped() {
        let p = policy();
        assert_eq!(
            p.delay(1, "k", Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, "k", Some(Duration::from_secs(3600))),
            Duration::from_secs(10)
        );
    }

    #[test]
    fn huge_retry_numbers_do_not_overflow() {
        let d = policy().delay(u32::MAX, "k", None);
        assert!(d <= Duration::from_secs(1));
    }
}
