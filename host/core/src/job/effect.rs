//! What a transition answers besides the job: history to append and effects for the
//! engine to carry out, as data.

use serde::{Deserialize, Serialize};

use super::Job;
use super::event::RetryOnto;
use super::state::JobState;
use crate::history::HistoryEvent;
use crate::ids::{Fence, JobId};
use crate::step::Step;
use crate::time::Timestamp;
use crate::workflow::ChildOrder;

/// When the engine carries out the business failure effect relative to writing the
/// failed settlement (seed 001: before an explicit failure, after a corrected success).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectOrder {
    /// Run it first; write the settlement after it ran.
    BeforeSettlement,
    /// Write the settlement first; run it afterwards (durably queued with it).
    AfterSettlement,
}

/// Something the engine must do besides writing the job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "effect", rename_all = "snake_case")]
pub enum Effect {
    /// The job entered the dispatch queue, dispatchable from `at`: wake a dispatcher
    /// when that is now.
    Dispatch {
        /// When.
        at: Timestamp,
    },
    /// A claim began: take the job's exclusive lease keys under its fence until
    /// `expires_at`. If one is held by another job, the claim does not commit.
    AcquireLeaseKeys {
        /// The claim's fence.
        fence: Fence,
        /// Until when.
        expires_at: Timestamp,
    },
    /// The claim's holder is alive: extend the keys held under `fence`. The write
    /// commits only if the holder still holds every key (one taken over after it lapsed
    /// means another job may be using the resource).
    RenewLeaseKeys {
        /// The claim's fence.
        fence: Fence,
        /// Until when.
        expires_at: Timestamp,
    },
    /// The claim ended: release the keys held under `fence` (or an earlier fence).
    ReleaseLeaseKeys {
        /// The claim's fence.
        fence: Fence,
        /// The holder itself reported: the write commits only if it still holds every
        /// key. A rescue, a settlement by the reconciler or a cancellation releases
        /// without that check.
        verify: bool,
    },
    /// Run the kind's business failure effect.
    FailureEffect {
        /// Before or after the failed settlement is written.
        order: EffectOrder,
    },
    /// Run the kind's success notification, after the settlement is written.
    NotifySuccess,
    /// Create the retry job `successor`, carrying the completed steps.
    SpawnRetry {
        /// Its id.
        successor: JobId,
        /// The version it runs on, when not the failed job's own.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        onto: Option<RetryOnto>,
    },
    /// Create these children of the job's fan-out `slot`, with the write.
    SpawnChildren {
        /// The fan-out.
        slot: String,
        /// The children, in order (their index in the fan-out).
        children: Vec<ChildOrder>,
    },
    /// Cancel the job's open children (of one fan-out, or all), after the write.
    CancelChildren {
        /// Only this fan-out's; none: every open child.
        slot: Option<String>,
        /// Why, for the children's history.
        reason: String,
    },
    /// The job (a child) is final: count its parent's children again, after the write.
    NotifyParent {
        /// The parent.
        parent: JobId,
    },
    /// A signal was sent: store it, pending, with the write (so the job's count of
    /// pending signals and the stored signals never disagree).
    StoreSignal {
        /// Its name.
        name: String,
        /// Its body.
        body: Vec<u8>,
        /// The sender's idempotency key.
        key: Option<String>,
    },
    /// The oldest pending signal of this name was delivered and the step's report is
    /// accepted: mark it consumed, with the write.
    ConsumeSignal {
        /// The signal's name.
        name: String,
    },
}

/// What [`transition`](super::transition) answers: the job to write, history to append, effects to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The job as it must be written.
    pub job: Job,
    /// Indexes of steps (of `job.steps`) whose rows changed.
    pub steps_changed: Vec<usize>,
    /// When a restart began a fresh pass: the previous pass's steps as they ended.
    pub previous_pass: Option<Vec<Step>>,
    /// History to append, in order.
    pub history: Vec<HistoryEvent>,
    /// Effects to carry out, in order.
    pub effects: Vec<Effect>,
}

impl Transition {
    /// Whether nothing changed (an identical repeat, a probe that found life).
    pub fn is_noop(&self, before: &Job) -> bool {
        self.history.is_empty() && self.effects.is_empty() && self.job == *before
    }

    /// The state change, if the state changed.
    pub fn state_change(&self, before: &Job) -> Option<(JobState, JobState)> {
        (before.state != self.job.state).then_some((before.state, self.job.state))
    }
}
