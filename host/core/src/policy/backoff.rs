//! Capped exponential backoff with jitter drawn from an injected RNG (seed 000).
//!
//! Jitter spreads retries of many jobs that failed together (an upstream outage) so
//! they do not return together; the cap bounds how long a job waits between attempts.

use std::time::Duration;

use rand_core::RngCore;
use serde::{Deserialize, Serialize};

/// A retry delay policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Backoff {
    /// Delay before the second attempt (before jitter).
    pub initial: Duration,
    /// Ceiling on any delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial: Duration::from_secs(1), max: Duration::from_secs(300) }
    }
}

impl Backoff {
    /// The ceiling for the delay after attempt `failed_attempt` (1-based): the initial
    /// delay doubled per earlier attempt, capped.
    pub fn ceiling(&self, failed_attempt: u32) -> Duration {
        let doublings = failed_attempt.saturating_sub(1).min(62);
        let factor = 1u64 << doublings;
        let micros = u64::try_from(self.initial.as_micros()).unwrap_or(u64::MAX).saturating_mul(factor);
        Duration::from_micros(micros).min(self.max)
    }

    /// The delay after attempt `failed_attempt`: "equal jitter", uniform in
    /// `[ceiling/2, ceiling]`, so a retry never comes back immediately yet is spread.
    pub fn delay(&self, failed_attempt: u32, rng: &mut impl RngCore) -> Duration {
        let ceiling = u64::try_from(self.ceiling(failed_attempt).as_micros()).unwrap_or(u64::MAX);
        let half = ceiling / 2;
        let spread = ceiling - half;
        let jitter = if spread == 0 { 0 } else { rng.next_u64() % (spread + 1) };
        Duration::from_micros(half + jitter)
    }
}
