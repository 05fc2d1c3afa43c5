//! Why an event does not apply to a job: typed, with a stable code for every boundary.

use std::time::Duration;

use thiserror::Error;

use super::state::JobState;
use crate::ids::{Fence, JobId};
use crate::queue::QueueState;
use crate::step::StepRefusal;
use crate::table::NotInTable;
use crate::time::Timestamp;

/// Why an event does not apply to a job. Each has a stable code for APIs.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Refusal {
    /// The job is final; final jobs never change.
    #[error("the job is {state} and final; nothing changes it")]
    Finished {
        /// Its final state.
        state: JobState,
    },
    /// A success reported for a failed job (seed 001: ignored, with an operational alert).
    #[error("late success reported for a failed job; ignored")]
    LateSuccessAfterFailure,
    /// The reporter does not hold the job's current claim.
    #[error("stale claim: {presented} presented, the job is at {current}")]
    StaleFence {
        /// The token presented.
        presented: Fence,
        /// The job's latest token.
        current: Fence,
    },
    /// A report under the same claim as the last accepted one, but different.
    #[error("a different report was already accepted under {fence}")]
    ConflictingReport {
        /// The claim's token.
        fence: Fence,
    },
    /// The job is claimed already.
    #[error("the job is already claimed ({fence})")]
    Claimed {
        /// The holder's token.
        fence: Fence,
    },
    /// Nothing holds the job, so there is nothing to rescue.
    #[error("the job is not claimed")]
    NotClaimed,
    /// The claim's lease is still live; its holder may yet report.
    #[error("the claim is live until {expires_at}")]
    ClaimLive {
        /// When it lapses.
        expires_at: Timestamp,
    },
    /// The job is not due yet.
    #[error("the job is not due until {run_at}")]
    NotDue {
        /// When it is due.
        run_at: Timestamp,
    },
    /// The job is paused.
    #[error("the job is paused")]
    Paused,
    /// A pause is already waiting for the step in flight.
    #[error("a pause is already requested")]
    AlreadyPausing,
    /// The job is already paused.
    #[error("the job is already paused")]
    AlreadyPaused,
    /// The job is neither paused nor pausing.
    #[error("the job is not paused")]
    NotPaused,
    /// A cancellation is recorded and waits for the step in flight.
    #[error("the job is being cancelled")]
    Cancelling,
    /// A cancellation is already recorded.
    #[error("a cancellation is already requested")]
    AlreadyCancelling,
    /// The kind does not allow cancellation.
    #[error("jobs of this kind cannot be cancelled")]
    NotCancellable,
    /// A cancellation needs a reason.
    #[error("a cancellation needs a nonblank reason")]
    BlankReason,
    /// A restart of a job that never started.
    #[error("the job has not started; there is nothing to restart")]
    NotStarted,
    /// No step is left to run.
    #[error("no step is left to run")]
    NothingToRun,
    /// A reconciliation probe of a job that has not been silent long enough.
    #[error("the job has been silent for {silent_for:?}, under the threshold")]
    NotSilent {
        /// How long it has been silent.
        silent_for: Duration,
    },
    /// Only failed or cancelled jobs can be retried.
    #[error("only a failed or cancelled job can be retried; the job is {state}")]
    NotRetryable {
        /// Its state.
        state: JobState,
    },
    /// The job has a retry already: a job is retried once, and its retry is what to retry
    /// next (on the current version too), so the words say so.
    #[error(
        "the job was already retried as {successor}: retry {successor} instead (with --on-current to run it on the \
         kind's current version)"
    )]
    AlreadyRetried {
        /// The retry job.
        successor: JobId,
    },
    /// A queue event (due, a busy or released key) that does not fit where the job
    /// waits.
    #[error("the job is not waiting for that (its queue is {queue})")]
    NotWaiting {
        /// Where it waits.
        queue: QueueState,
    },
    /// The job is waiting for children or a signal: it is not claimed, and its silence
    /// is not a lost execution.
    #[error("the job is waiting for children or a signal")]
    Waiting,
    /// The step machine refused the report.
    #[error(transparent)]
    Step(#[from] StepRefusal),
    /// A state change that is not a row of its machine's table (a defect, refused before
    /// anything is written).
    #[error(transparent)]
    NotInTable(#[from] NotInTable),
}

impl Refusal {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Finished { .. } => "finished",
            Self::LateSuccessAfterFailure => "late-success-after-failure",
            Self::StaleFence { .. } => "stale-fence",
            Self::ConflictingReport { .. } => "conflicting-report",
            Self::Claimed { .. } => "claimed",
            Self::NotClaimed => "not-claimed",
            Self::ClaimLive { .. } => "claim-live",
            Self::NotDue { .. } => "not-due",
            Self::Paused => "paused",
            Self::AlreadyPausing => "already-pausing",
            Self::AlreadyPaused => "already-paused",
            Self::NotPaused => "not-paused",
            Self::Cancelling => "cancelling",
            Self::AlreadyCancelling => "already-cancelling",
            Self::NotCancellable => "not-cancellable",
            Self::BlankReason => "blank-reason",
            Self::NotStarted => "not-started",
            Self::NothingToRun => "nothing-to-run",
            Self::NotSilent { .. } => "not-silent",
            Self::NotRetryable { .. } => "not-retryable",
            Self::AlreadyRetried { .. } => "already-retried",
            Self::NotWaiting { .. } => "not-waiting",
            Self::Waiting => "waiting",
            Self::Step(StepRefusal::Invalid { .. }) => "invalid-step-transition",
            Self::Step(StepRefusal::DifferentFinal { .. }) => "step-already-final",
            Self::Step(StepRefusal::NotInTable(_)) | Self::NotInTable(_) => "not-in-table",
        }
    }

    /// Every code [`code`](Self::code) answers, for documents and exhaustive tests.
    pub const CODES: &'static [&'static str] = &[
        "finished",
        "late-success-after-failure",
        "stale-fence",
        "conflicting-report",
        "claimed",
        "not-claimed",
        "claim-live",
        "not-due",
        "paused",
        "already-pausing",
        "already-paused",
        "not-paused",
        "cancelling",
        "already-cancelling",
        "not-cancellable",
        "blank-reason",
        "not-started",
        "nothing-to-run",
        "not-silent",
        "not-retryable",
        "already-retried",
        "not-waiting",
        "waiting",
        "invalid-step-transition",
        "step-already-final",
        "not-in-table",
    ];

    /// Whether the refusal must raise an operational alert (seed 001).
    pub fn is_alert(&self) -> bool {
        matches!(self, Self::LateSuccessAfterFailure)
    }
}
