//! When a refused call is tried again: only answers the API promises wrote nothing (429
//! `quota-exceeded`, 503 `busy`/`contention`/`storage-format`), after the host's
//! `Retry-After` when it gave one, else with exponential backoff.

use std::time::Duration;

/// How 429 and 503 answers are tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Tries in all, the first included (1: never again).
    pub attempts: u32,
    /// The wait before the second try when the host gave no `Retry-After`; doubled for each
    /// try after.
    pub initial: Duration,
    /// The longest wait between two tries, `Retry-After` included.
    pub max: Duration,
}

impl Default for Retry {
    /// Five tries, from 200 ms, at most 30 s apart.
    fn default() -> Self {
        Self { attempts: 5, initial: Duration::from_millis(200), max: Duration::from_secs(30) }
    }
}

impl Retry {
    /// Never try again.
    pub const NEVER: Self = Self { attempts: 1, initial: Duration::ZERO, max: Duration::ZERO };

    /// How long to wait before try `attempt + 1`, after try `attempt` was answered
    /// `status` with `retry_after`; `None`: do not try again.
    pub fn delay(&self, attempt: u32, status: u16, retry_after: Option<Duration>) -> Option<Duration> {
        if !matches!(status, 429 | 503) || attempt >= self.attempts {
            return None;
        }
        let backoff = self.initial.saturating_mul(1u32 << (attempt - 1).min(16));
        Some(retry_after.unwrap_or(backoff).min(self.max))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_answers_that_wrote_nothing_are_tried_again_and_only_so_often() {
        let retry = Retry::default();
        for status in [400, 401, 403, 404, 409, 413, 422, 500, 502] {
            assert_eq!(retry.delay(1, status, None), None, "{status}");
        }
        assert!(retry.delay(1, 429, None).is_some());
        assert!(retry.delay(4, 503, None).is_some());
        assert_eq!(retry.delay(5, 503, None), None, "five tries in all");
        assert_eq!(Retry::NEVER.delay(1, 429, None), None);
    }

    #[test]
    fn the_hosts_retry_after_wins_over_backoff_up_to_the_longest_wait() {
        let retry = Retry::default();
        assert_eq!(retry.delay(1, 429, Some(Duration::from_secs(3))), Some(Duration::from_secs(3)));
        assert_eq!(retry.delay(1, 429, Some(Duration::from_secs(300))), Some(Duration::from_secs(30)));
        assert_eq!(retry.delay(1, 503, None), Some(Duration::from_millis(200)));
        assert_eq!(retry.delay(3, 503, None), Some(Duration::from_millis(800)));
    }
}
