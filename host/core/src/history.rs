//! History events: the job's audit trail, appended in the transaction that makes them.
//!
//! Everything here may be shown to the tenant, so it holds only operator-safe text.

use serde::{Deserialize, Serialize};

use crate::failure::SafeFailure;
use crate::ids::{Actor, Fence, JobId};
use crate::reconcile::Evidence;
use crate::time::Timestamp;
use crate::workflow::Met;

/// One entry of a job's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum HistoryEvent {
    /// The job was submitted.
    Submitted,
    /// The job retries `predecessor`.
    RetryOf {
        /// The failed or cancelled job it retries.
        predecessor: JobId,
    },
    /// A completed step was carried in from the predecessor.
    StepCarried {
        /// Its key.
        step: String,
    },
    /// A step attempt began. The first one also marks the job running (its
    /// `started_at`); no separate row says so.
    StepStarted {
        /// The step's key.
        step: String,
        /// The attempt's number.
        attempt: u32,
    },
    /// A step completed.
    StepCompleted {
        /// The step's key.
        step: String,
    },
    /// A step was skipped.
    StepSkipped {
        /// The step's key.
        step: String,
        /// Why.
        reason: String,
    },
    /// A step attempt failed transiently and will be retried.
    StepRetrying {
        /// The step's key.
        step: String,
        /// The attempt that failed.
        attempt: u32,
        /// Its safe account.
        failure: SafeFailure,
        /// When the next attempt may start.
        retry_at: Timestamp,
    },
    /// A step failed for good.
    StepFailed {
        /// The step's key.
        step: String,
        /// Its safe account.
        failure: SafeFailure,
    },
    /// A step asked to be called again later.
    Snoozed {
        /// The step's key.
        step: String,
        /// Until when.
        until: Timestamp,
    },
    /// A host handed a step back without an outcome.
    Released {
        /// The step's key.
        step: String,
    },
    /// A lapsed claim was taken back from a host that stopped renewing it.
    Rescued {
        /// The lapsed claim's token.
        fence: Fence,
        /// The host that held it.
        owner: String,
    },
    /// A pause was requested.
    PauseRequested {
        /// Who asked.
        actor: Actor,
    },
    /// The job paused.
    Paused,
    /// The job resumed (or a pending pause was withdrawn).
    Resumed {
        /// Who asked.
        actor: Actor,
    },
    /// A cancellation was requested.
    CancelRequested {
        /// Who asked.
        actor: Actor,
        /// Why.
        reason: String,
    },
    /// The job was cancelled.
    Cancelled,
    /// A restart was requested.
    RestartRequested {
        /// Who asked.
        actor: Actor,
    },
    /// A fresh pass began.
    PassStarted {
        /// Its number.
        pass: u32,
    },
    /// The job succeeded.
    Succeeded,
    /// The job failed.
    Failed {
        /// Why.
        failure: SafeFailure,
    },
    /// A reconciliation probe found no execution.
    ProbeMissed {
        /// Trailing misses so far.
        misses: u32,
    },
    /// The reconciler settled the job from execution evidence.
    Reconciled {
        /// What it found.
        evidence: Evidence,
    },
    /// The job was retried as `successor`.
    RetriedAs {
        /// The new job.
        successor: JobId,
    },
    /// The engine ran one of the kind's hooks (the failure effect, the success
    /// notification). Recorded by the engine, not by a transition.
    EffectRan {
        /// `failure_effect` or `notify_success`.
        effect: String,
        /// `None` when it succeeded; the safe failure code otherwise.
        failed: Option<String>,
    },
    /// An event this build does not know (written by a newer or older host sharing the
    /// database): kept in place so the rest of the history still reads.
    /// A step created children and waits for them.
    AwaitingChildren {
        /// The step.
        step: String,
        /// The fan-out.
        slot: String,
        /// How many children it created.
        children: u32,
    },
    /// A step waits for a signal.
    AwaitingSignal {
        /// The step.
        step: String,
        /// The signal's name.
        name: String,
        /// When the wait times out.
        until: Timestamp,
    },
    /// A step's wait is over; it will be called again.
    WaitOver {
        /// The step.
        step: String,
        /// Why.
        by: Met,
    },
    /// A signal was sent to the job.
    SignalReceived {
        /// Its name.
        name: String,
    },
    /// The job ended with signals no step consumed: they are discarded (kept in the
    /// signals table, no longer pending).
    SignalsDiscarded {
        /// How many of each name.
        signals: std::collections::BTreeMap<String, u32>,
    },
    /// The job was created by a parent's fan-out.
    ChildOf {
        /// The parent.
        parent: JobId,
        /// The fan-out.
        slot: String,
        /// Its index there.
        index: u32,
    },
    #[serde(other)]
    Unrecognised,
}

impl HistoryEvent {
    /// The event's name, as stored in its own column for filtering.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Submitted => "submitted",
            Self::RetryOf { .. } => "retry_of",
            Self::StepCarried { .. } => "step_carried",
            Self::StepStarted { .. } => "step_started",
            Self::StepCompleted { .. } => "step_completed",
            Self::StepSkipped { .. } => "step_skipped",
            Self::StepRetrying { .. } => "step_retrying",
            Self::StepFailed { .. } => "step_failed",
            Self::Snoozed { .. } => "snoozed",
            Self::Released { .. } => "released",
            Self::Rescued { .. } => "rescued",
            Self::PauseRequested { .. } => "pause_requested",
            Self::Paused => "paused",
            Self::Resumed { .. } => "resumed",
            Self::CancelRequested { .. } => "cancel_requested",
            Self::Cancelled => "cancelled",
            Self::RestartRequested { .. } => "restart_requested",
            Self::PassStarted { .. } => "pass_started",
            Self::Succeeded => "succeeded",
            Self::Failed { .. } => "failed",
            Self::ProbeMissed { .. } => "probe_missed",
            Self::Reconciled { .. } => "reconciled",
            Self::RetriedAs { .. } => "retried_as",
            Self::EffectRan { .. } => "effect_ran",
            Self::AwaitingChildren { .. } => "awaiting_children",
            Self::AwaitingSignal { .. } => "awaiting_signal",
            Self::WaitOver { .. } => "wait_over",
            Self::SignalReceived { .. } => "signal_received",
            Self::SignalsDiscarded { .. } => "signals_discarded",
            Self::ChildOf { .. } => "child_of",
            Self::Unrecognised => "unrecognised",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_this_build_does_not_know_still_reads() {
        let old: HistoryEvent = serde_json::from_str(r#"{"event":"started"}"#).expect("reads");
        assert_eq!(old, HistoryEvent::Unrecognised);
        let known: HistoryEvent = serde_json::from_str(r#"{"event":"succeeded"}"#).expect("reads");
        assert_eq!(known, HistoryEvent::Succeeded);
    }
}
