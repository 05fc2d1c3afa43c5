//! The queue machine: where an open job waits for its next step.
//!
//! It is part of the job machine, not a column the store decides: every job transition
//! answers the job's queue state with the rest of the write, and the store's indexed
//! columns (`queue`, `run_at`, `blocked_on`) are a projection of it. Work discovery then
//! reads one truth, whichever host wrote the job.
//!
//! `idle` (claimed, paused or final) · `ready` (dispatchable now) · `delayed` (from its
//! `run_at`) · `blocked` (its claim found an exclusive lease key held by another job; it
//! waits for the key's release, or until its `run_at` at the latest).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::table::{Allowed, DiagramState, Forbidden};

/// Where a job waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueState {
    /// Not dispatchable: a step is in flight, the job is paused, or it is final.
    Idle,
    /// Dispatchable now (its `run_at` has come).
    Ready,
    /// Dispatchable from its `run_at` (a delayed submission, a backoff, a snooze).
    Delayed,
    /// Waiting for an exclusive lease key another job holds, or for its `run_at`.
    Blocked,
}

impl QueueState {
    /// Lower-case name, as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Ready => "ready",
            Self::Delayed => "delayed",
            Self::Blocked => "blocked",
        }
    }

    /// Whether the job is in the dispatch queue (ready, or waiting to be).
    pub fn is_waiting(self) -> bool {
        self != Self::Idle
    }
}

impl std::fmt::Display for QueueState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl DiagramState for QueueState {
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn is_final(self) -> bool {
        false
    }
    fn all() -> &'static [Self] {
        &[Self::Idle, Self::Ready, Self::Delayed, Self::Blocked]
    }
}

/// Every allowed queue transition.
pub const QUEUE_TRANSITIONS: &[Allowed<QueueState>] = {
    use QueueState::*;
    &[
        Allowed { from: None, to: Ready, trigger: "submitted, due now", seed: "000 work discovery" },
        Allowed { from: None, to: Delayed, trigger: "submitted for later", seed: "000 work discovery" },
        Allowed { from: Some(Ready), to: Idle, trigger: "claimed, paused or settled", seed: "003 claim" },
        Allowed {
            from: Some(Ready),
            to: Blocked,
            trigger: "a lease key is held, or a running limit is full",
            seed: "000 leases and locks",
        },
        Allowed { from: Some(Delayed), to: Ready, trigger: "due", seed: "000 work discovery" },
        Allowed { from: Some(Delayed), to: Idle, trigger: "claimed, paused or settled", seed: "003 pause" },
        Allowed {
            from: Some(Blocked),
            to: Ready,
            trigger: "the key was released, or recheck time",
            seed: "000 leases and locks",
        },
        Allowed { from: Some(Blocked), to: Idle, trigger: "paused or settled", seed: "003 pause" },
        Allowed { from: Some(Idle), to: Ready, trigger: "a step ended, resumed", seed: "003 precedence" },
        Allowed { from: Some(Idle), to: Delayed, trigger: "backoff, snooze, resumed early", seed: "003 snooze" },
    ]
};

/// Queue transitions that may never happen.
pub const QUEUE_FORBIDDEN: &[Forbidden<QueueState>] = {
    use QueueState::*;
    &[
        Forbidden {
            from: Idle,
            to: Blocked,
            why: "Only a claim finds a lease key held, and only a ready job is claimed.",
            seed: "000 leases and locks",
        },
        Forbidden {
            from: Delayed,
            to: Blocked,
            why: "A job not yet due is not claimed, so it cannot find a key held.",
            seed: "000 work discovery",
        },
        Forbidden {
            from: Blocked,
            to: Delayed,
            why: "A blocked job waits for its key or its recheck time, then becomes ready.",
            seed: "000 leases and locks",
        },
        Forbidden {
            from: Ready,
            to: Delayed,
            why: "A ready job stays ready until it is claimed, paused or settled.",
            seed: "000 work discovery",
        },
    ]
};

/// Longest a job blocked on a lease key waits before its claim is tried again, even if
/// the holder's lease lasts longer: a release that no host saw (a crashed holder) delays
/// a waiting job by at most this much.
pub const BLOCKED_RECHECK: Duration = Duration::from_secs(1);
