//! Reconciliation inputs (seed 001): what a probe of a silent job found, and the
//! thresholds that decide when a silent job is settled from that evidence.
//!
//! The decision itself is [`crate::job::transition`] with [`crate::job::JobEvent::Reconcile`];
//! the engine gathers the evidence from the store.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a reconciliation probe found about a job's execution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// An execution is alive (a live claim, or the job is dispatchable and its
    /// component can run): nothing to settle, trailing misses reset.
    Alive,
    /// No execution handle was found (nothing can run the job, or its claim lapsed
    /// without a rescue). Counted; settled after `required_misses` trailing misses.
    Missing,
    /// The execution ended in failure without the job settling.
    Failed,
    /// The execution ended in success without the job settling.
    Succeeded,
}

/// Thresholds for reconciliation. Defaults are the seed's: a job silent for fifteen
/// minutes is a candidate; three trailing misses settle it; passes run every five minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReconcilePolicy {
    /// How long a job must be silent before a probe may settle it.
    pub silence: Duration,
    /// Trailing probe misses that settle a job with no execution.
    pub required_misses: u32,
    /// How often a reconciliation pass runs.
    pub interval: Duration,
    /// Most candidates one pass examines (bounded work per pass).
    pub batch: u32,
}

impl Default for ReconcilePolicy {
    fn default() -> Self {
        Self {
            silence: Duration::from_secs(15 * 60),
            required_misses: 3,
            interval: Duration::from_secs(5 * 60),
            batch: 500,
        }
    }
}
