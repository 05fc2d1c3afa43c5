//! The step machine (seed 002): one declared step of a job within one pass.
//!
//! `queued → running → completed | skipped | retrying | failed`, `retrying → running |
//! failed`, and `queued → completed` when a retry job carries a predecessor's completed
//! step. A final step never changes: replaying its own report adds nothing, a different
//! report is refused.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::failure::SafeFailure;
use crate::ids::Fence;
use crate::table::{Allowed, DiagramState, Forbidden, NotInTable, change};
use crate::time::Timestamp;

/// Where a step stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepState {
    /// Created at submission; no attempt started.
    Queued,
    /// The current attempt has begun (and may be paused between slices).
    Running,
    /// The current attempt reported an await outcome: it holds no claim and is called
    /// again, in the same attempt, once its children or its signal are in.
    Waiting,
    /// A transient failure is waiting for the next attempt.
    Retrying,
    /// Finished successfully. Final.
    Completed,
    /// Not applicable, or bypassed. Final.
    Skipped,
    /// Finished unsuccessfully. Final.
    Failed,
}

impl StepState {
    /// Whether the state is final.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Completed | Self::Skipped | Self::Failed)
    }

    /// Whether the step has settled in a way that earns its progress weight.
    pub fn is_settled_ok(self) -> bool {
        matches!(self, Self::Completed | Self::Skipped)
    }

    /// Whether an attempt is in flight, parked, or waiting to be retried.
    pub fn is_in_flight(self) -> bool {
        matches!(self, Self::Running | Self::Waiting | Self::Retrying)
    }

    /// Lower-case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Waiting => "waiting",
            Self::Retrying => "retrying",
            Self::Completed => "completed",
            Self::Skipped => "skipped",
            Self::Failed => "failed",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s output.
    pub fn parse(s: &str) -> Option<Self> {
        Self::all().iter().copied().find(|state| state.as_str() == s)
    }
}

impl DiagramState for StepState {
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn is_final(self) -> bool {
        StepState::is_final(self)
    }
    fn all() -> &'static [Self] {
        &[Self::Queued, Self::Running, Self::Waiting, Self::Retrying, Self::Completed, Self::Skipped, Self::Failed]
    }
}

/// Every allowed step transition (seed 002, "transitions").
pub const STEP_TRANSITIONS: &[Allowed<StepState>] = {
    use StepState::*;
    &[
        Allowed { from: None, to: Queued, trigger: "submission creates step", seed: "002 states: queued" },
        Allowed { from: Some(Queued), to: Running, trigger: "attempt starts", seed: "002 queued→running" },
        Allowed {
            from: Some(Queued),
            to: Completed,
            trigger: "carried from predecessor",
            seed: "002 queued→completed",
        },
        Allowed { from: Some(Running), to: Completed, trigger: "complete", seed: "002 running→completed" },
        Allowed { from: Some(Running), to: Skipped, trigger: "skip", seed: "002 running→skipped" },
        Allowed { from: Some(Running), to: Retrying, trigger: "retryable error", seed: "002 running→retrying" },
        Allowed { from: Some(Retrying), to: Running, trigger: "next attempt", seed: "002 retrying→running" },
        Allowed {
            from: Some(Running),
            to: Failed,
            trigger: "refused, exhausted or stopped",
            seed: "002 running→failed",
        },
        Allowed { from: Some(Retrying), to: Failed, trigger: "reconciled or stopped", seed: "002 retrying→failed" },
        Allowed {
            from: Some(Running),
            to: Waiting,
            trigger: "await children or a signal",
            seed: "issue 14 await outcomes",
        },
        Allowed { from: Some(Waiting), to: Running, trigger: "woken and claimed", seed: "issue 14 await outcomes" },
        Allowed { from: Some(Waiting), to: Failed, trigger: "stopped while waiting", seed: "issue 14 cancel" },
    ]
};

/// Step transitions the seed forbids (seed 002, "invalid"), beyond "final is final".
pub const STEP_FORBIDDEN: &[Forbidden<StepState>] = {
    use StepState::*;
    &[
        Forbidden {
            from: Completed,
            to: Running,
            why: "A final step rejects a different status; replaying its existing status adds no history.",
            seed: "002 invalid completed→running",
        },
        Forbidden {
            from: Failed,
            to: Retrying,
            why: "A failed step is final and requires a separate retry job for recovery.",
            seed: "002 invalid failed→retrying",
        },
        Forbidden {
            from: Queued,
            to: Failed,
            why: "Reconciliation does not fail queued steps.",
            seed: "002 invalid queued→failed",
        },
        Forbidden {
            from: Waiting,
            to: Completed,
            why: "A parked step completes only when it is called again with what it awaited.",
            seed: "issue 14 await outcomes",
        },
        Forbidden {
            from: Waiting,
            to: Retrying,
            why: "A parked step holds no claim and runs nothing, so nothing of it can fail transiently.",
            seed: "issue 14 await outcomes",
        },
    ]
};

/// Work done within a step that reports in slices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partial {
    /// Units done so far.
    pub done: u64,
    /// Units in all, when known.
    pub total: Option<u64>,
}

/// How an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum AttemptEnd {
    /// The step completed.
    Completed,
    /// The step was skipped.
    Skipped,
    /// A transient failure; another attempt may follow.
    Retryable {
        /// The safe account of it.
        failure: SafeFailure,
    },
    /// The step failed for good (refused, budget exhausted, stopped, reconciled).
    Failed {
        /// The safe account of it.
        failure: SafeFailure,
    },
}

/// One attempt at a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// 1 for the first attempt.
    pub number: u32,
    /// The claim under which the attempt began.
    pub fence: Fence,
    /// When it began.
    pub started_at: Timestamp,
    /// When it ended, if it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// How it ended, if it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<AttemptEnd>,
}

/// One declared step of a job, within the job's current pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// The step's key, unique within its kind.
    pub key: String,
    /// Its share of the job's progress.
    pub weight: u32,
    /// Where it stands.
    pub state: StepState,
    /// Every attempt so far, oldest first.
    pub attempts: Vec<Attempt>,
    /// The output it completed with. Not serialised with the step: the store keeps it
    /// in a column of its own.
    #[serde(skip)]
    pub output: Option<Vec<u8>>,
    /// Why it was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<SafeFailure>,
    /// The last committed checkpoint cursor of the step in this pass: kept across
    /// attempts, rescues and releases (seed 003), cleared when the step settles; a
    /// restart's fresh pass starts without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Work done within the current attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
    /// When its first attempt began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When it reached a final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<Timestamp>,
    /// Whether it was carried, completed, from a predecessor job.
    pub carried: bool,
    /// Checkpoints (`more`) made by the current attempt (see `policy::budget`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub slices: u32,
    /// Snoozes of the current attempt: the first one is in the job's history, the rest
    /// are counted here.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub snoozes: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What happens to a step. Each is a report or a decision about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepEvent {
    /// A claim begins a new attempt.
    Start {
        /// The claim's fencing token.
        fence: Fence,
    },
    /// A claim continues the current attempt (after `more`, `snooze`, a release, or a
    /// wait that is over).
    Continue,
    /// The attempt awaits children or a signal: it is parked, holding no claim.
    Park {
        /// Where to resume, if the outcome said.
        cursor: Option<String>,
    },
    /// The attempt saved progress and wants to be called again.
    Checkpoint {
        /// Where to resume.
        cursor: String,
        /// Work done so far.
        partial: Partial,
    },
    /// The attempt completed the step.
    Complete {
        /// The step's output.
        output: Vec<u8>,
    },
    /// The step does not apply.
    Skip {
        /// Why, operator-safe.
        reason: String,
    },
    /// The attempt failed transiently; another attempt will follow.
    Retry {
        /// Safe account of the failure.
        failure: SafeFailure,
    },
    /// The step fails for good.
    Fail {
        /// Safe account of the failure.
        failure: SafeFailure,
    },
    /// A retry job takes the predecessor's completed step as its own.
    Carry {
        /// The predecessor step's output.
        output: Vec<u8>,
    },
}

impl StepEvent {
    /// A short name for refusals and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Start { .. } => "start",
            Self::Continue => "continue",
            Self::Park { .. } => "park",
            Self::Checkpoint { .. } => "checkpoint",
            Self::Complete { .. } => "complete",
            Self::Skip { .. } => "skip",
            Self::Retry { .. } => "retry",
            Self::Fail { .. } => "fail",
            Self::Carry { .. } => "carry",
        }
    }
}

/// Why a step event does not apply.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StepRefusal {
    /// The event has no transition from the step's state.
    #[error("step `{step}` cannot {event} while {from}", from = from.as_str())]
    Invalid {
        /// The step's key.
        step: String,
        /// Its state.
        from: StepState,
        /// The event's name.
        event: &'static str,
    },
    /// The step is final and the report differs from the one it settled with.
    #[error("step `{step}` is already {state} and refuses a different report", state = state.as_str())]
    DifferentFinal {
        /// The step's key.
        step: String,
        /// Its final state.
        state: StepState,
    },
    /// A state change that is not a row of [`STEP_TRANSITIONS`] (a defect).
    #[error(transparent)]
    NotInTable(#[from] NotInTable),
}

/// The one way a step's state changes: `to` when `from → to` is a row of
/// [`STEP_TRANSITIONS`] (or no change), otherwise [`StepRefusal::NotInTable`], in
/// release builds too.
pub fn change_state(from: StepState, to: StepState) -> Result<StepState, StepRefusal> {
    Ok(change("step", STEP_TRANSITIONS, from, to)?)
}

/// Whether an event changed the step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepChange {
    /// The step changed (and history should say so).
    Changed,
    /// The event repeated what the step already records: no change, no history.
    Unchanged,
}

impl Step {
    /// A queued step, as submission creates it.
    pub fn new(key: impl Into<String>, weight: u32) -> Self {
        Self {
            key: key.into(),
            weight,
            state: StepState::Queued,
            attempts: Vec::new(),
            output: None,
            skip_reason: None,
            failure: None,
            cursor: None,
            partial: None,
            started_at: None,
            settled_at: None,
            carried: false,
            slices: 0,
            snoozes: 0,
        }
    }

    /// Attempts begun so far.
    pub fn attempts_made(&self) -> u32 {
        u32::try_from(self.attempts.len()).unwrap_or(u32::MAX)
    }

    /// The step's weight for progress; 0 counts as 1 so that every step counts.
    pub fn effective_weight(&self) -> u64 {
        u64::from(self.weight.max(1))
    }

    /// Applies `event` at `now`: the step's transition function.
    pub fn apply(&mut self, event: StepEvent, now: Timestamp) -> Result<StepChange, StepRefusal> {
        use StepState::*;
        let from = self.state;
        if from.is_final() {
            return if self.repeats_final(&event) {
                Ok(StepChange::Unchanged)
            } else {
                Err(StepRefusal::DifferentFinal { step: self.key.clone(), state: from })
            };
        }
        // The table decides before anything changes: an event with no row from this
        // state is refused whole.
        let to = match (from, &event) {
            (Queued | Retrying, StepEvent::Start { .. }) => Running,
            (Running, StepEvent::Continue | StepEvent::Checkpoint { .. }) | (Waiting, StepEvent::Continue) => Running,
            (Running, StepEvent::Park { .. }) => Waiting,
            (Running, StepEvent::Complete { .. }) | (Queued, StepEvent::Carry { .. }) => Completed,
            (Running, StepEvent::Skip { .. }) => Skipped,
            (Running, StepEvent::Retry { .. }) => Retrying,
            (Running | Waiting | Retrying, StepEvent::Fail { .. }) => Failed,
            (_, event) => return Err(StepRefusal::Invalid { step: self.key.clone(), from, event: event.name() }),
        };
        let to = change_state(from, to)?;
        match event {
            StepEvent::Start { fence } => {
                let number = self.attempts_made().saturating_add(1);
                self.attempts.push(Attempt { number, fence, started_at: now, ended_at: None, end: None });
                self.started_at.get_or_insert(now);
                // The cursor stays: a new attempt resumes from the last committed slice.
                self.slices = 0;
                self.snoozes = 0;
                self.state = to;
            }
            StepEvent::Continue => self.state = to,
            StepEvent::Park { cursor } => {
                // The contract: the step is called again with the await outcome's cursor
                // (none if it gave none), as after `more`.
                self.cursor = cursor;
                self.state = to;
            }
            StepEvent::Checkpoint { cursor, partial } => {
                self.cursor = Some(cursor);
                self.partial = Some(partial);
                self.slices = self.slices.saturating_add(1);
            }
            StepEvent::Complete { output } => {
                self.end_attempt(AttemptEnd::Completed, now);
                self.output = Some(output);
                self.settle(to, now);
            }
            StepEvent::Skip { reason } => {
                self.end_attempt(AttemptEnd::Skipped, now);
                self.skip_reason = Some(reason);
                self.settle(to, now);
            }
            StepEvent::Retry { failure } => {
                // Progress earned so far is retained (seed 002 running→retrying), and so
                // is the cursor: the next attempt resumes from it (seed 003).
                self.end_attempt(AttemptEnd::Retryable { failure }, now);
                self.state = to;
            }
            StepEvent::Fail { failure } => {
                if matches!(from, Running | Waiting) {
                    self.end_attempt(AttemptEnd::Failed { failure: failure.clone() }, now);
                }
                self.failure = Some(failure);
                self.settle(to, now);
            }
            StepEvent::Carry { output } => {
                self.output = Some(output);
                self.carried = true;
                self.settle(to, now);
            }
        }
        Ok(StepChange::Changed)
    }

    fn settle(&mut self, state: StepState, now: Timestamp) {
        self.state = state;
        self.settled_at = Some(now);
        self.cursor = None;
    }

    fn end_attempt(&mut self, end: AttemptEnd, now: Timestamp) {
        if let Some(attempt) = self.attempts.last_mut().filter(|a| a.end.is_none()) {
            attempt.ended_at = Some(now);
            attempt.end = Some(end);
        }
    }

    /// Whether `event` reports exactly what this final step already records.
    fn repeats_final(&self, event: &StepEvent) -> bool {
        match (self.state, event) {
            (StepState::Completed, StepEvent::Complete { output } | StepEvent::Carry { output }) => {
                self.output.as_ref() == Some(output)
            }
            (StepState::Skipped, StepEvent::Skip { reason }) => self.skip_reason.as_ref() == Some(reason),
            (StepState::Failed, StepEvent::Fail { failure }) => self.failure.as_ref() == Some(failure),
            _ => false,
        }
    }
}
