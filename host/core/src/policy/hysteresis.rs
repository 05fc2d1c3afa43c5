//! A hysteresis switch for anything driven by a threshold (circuit breakers, autoscaling,
//! throttles, alerts): separate engage and release thresholds plus a cooldown, so a
//! signal hovering around one threshold cannot make it flap (seed 000).

use std::time::Duration;

use crate::time::Timestamp;

/// A two-state switch with hysteresis and a cooldown between changes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hysteresis {
    engage_at: f64,
    release_at: f64,
    cooldown: Duration,
    engaged: bool,
    last_change: Option<Timestamp>,
}

impl Hysteresis {
    /// A released switch that engages when the signal reaches `engage_at` and releases
    /// when it falls to `release_at` (which must be lower), at most once per `cooldown`.
    pub fn new(engage_at: f64, release_at: f64, cooldown: Duration) -> Self {
        assert!(release_at < engage_at, "the release threshold must be below the engage threshold");
        Self { engage_at, release_at, cooldown, engaged: false, last_change: None }
    }

    /// Whether the switch is engaged.
    pub fn is_engaged(&self) -> bool {
        self.engaged
    }

    /// Feeds one reading at `now`; answers the new state when it changed.
    pub fn observe(&mut self, signal: f64, now: Timestamp) -> Option<bool> {
        let cooled = self.last_change.is_none_or(|at| now.since(at) >= self.cooldown);
        let flip = if self.engaged { signal <= self.release_at } else { signal >= self.engage_at };
        if flip && cooled {
            self.engaged = !self.engaged;
            self.last_change = Some(now);
            Some(self.engaged)
        } else {
            None
        }
    }
}
