//! The job machine (seed 001) with run control folded in (seed 003).
//!
//! One function, [`transition`], checks the job's state against an event and answers
//! the job as it must be written, the history to append and the effects to carry out
//! (dispatch, lease release, failure effect, notification, retry job), or a typed
//! [`Refusal`]. It does no I/O and reads no clock; the engine loads the row, calls it,
//! and writes everything it answers in one version-checked transaction.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::failure::{SafeFailure, host_codes};
use crate::history::HistoryEvent;
use crate::ids::{Actor, Fence, JobId};
use crate::progress;
use crate::reconcile::{Evidence, ReconcilePolicy};
use crate::step::{Partial, Step, StepEvent, StepRefusal, StepState};
use crate::table::{Allowed, DiagramState, Forbidden, is_allowed};
use crate::time::Timestamp;

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Submitted with queued steps; no step has been reported.
    Pending,
    /// A step report began the run.
    Running,
    /// Paused by request; nothing is dispatched until it is resumed.
    Paused,
    /// Every step settled and the run succeeded. Final.
    Succeeded,
    /// The run failed; recovery creates another job. Final.
    Failed,
    /// A recorded cancellation was observed. Final.
    Cancelled,
}

impl JobState {
    /// Whether the state is final: final jobs never change state.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed | Self::Cancelled)
    }

    /// Lower-case name, as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s output.
    pub fn parse(s: &str) -> Option<Self> {
        Self::all().iter().copied().find(|state| state.as_str() == s)
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl DiagramState for JobState {
    fn name(self) -> &'static str {
        self.as_str()
    }
    fn is_final(self) -> bool {
        JobState::is_final(self)
    }
    fn all() -> &'static [Self] {
        &[Self::Pending, Self::Running, Self::Paused, Self::Succeeded, Self::Failed, Self::Cancelled]
    }
}

/// Every allowed job transition (seeds 001 and 003).
pub const JOB_TRANSITIONS: &[Allowed<JobState>] = {
    use JobState::*;
    &[
        Allowed { from: None, to: Pending, trigger: "submission recorded", seed: "001 lifecycle" },
        Allowed { from: Some(Pending), to: Running, trigger: "first step claimed", seed: "001 pending→running" },
        Allowed {
            from: Some(Running),
            to: Succeeded,
            trigger: "last step settles",
            seed: "001 running→succeeded (settleJob)",
        },
        Allowed {
            from: Some(Running),
            to: Failed,
            trigger: "refusal or exhausted retries",
            seed: "001 running→failed (failure handling)",
        },
        Allowed {
            from: Some(Running),
            to: Failed,
            trigger: "reconciler: terminal, missing or corrected",
            seed: "001 running→failed (reconciliation)",
        },
        Allowed {
            from: Some(Running),
            to: Succeeded,
            trigger: "reconciler: execution succeeded",
            seed: "001 running→succeeded (reconciliation)",
        },
        Allowed { from: Some(Pending), to: Failed, trigger: "reconciler: never started", seed: "001 pending→failed" },
        Allowed {
            from: Some(Pending),
            to: Cancelled,
            trigger: "cancel before execution",
            seed: "001 pending→cancelled",
        },
        Allowed {
            from: Some(Running),
            to: Cancelled,
            trigger: "recorded cancel observed",
            seed: "001 running→cancelled",
        },
        Allowed { from: Some(Pending), to: Paused, trigger: "pause", seed: "003 pause" },
        Allowed {
            from: Some(Running),
            to: Paused,
            trigger: "pause, at a step boundary",
            seed: "003 precedence: pausing",
        },
        Allowed { from: Some(Paused), to: Pending, trigger: "resume, never started", seed: "003 resume" },
        Allowed { from: Some(Paused), to: Running, trigger: "resume", seed: "003 resume" },
        Allowed { from: Some(Paused), to: Cancelled, trigger: "cancel while paused", seed: "003 cancel" },
    ]
};

/// Job transitions the seeds forbid, beyond "final states never change".
pub const JOB_FORBIDDEN: &[Forbidden<JobState>] = {
    use JobState::*;
    &[
        Forbidden {
            from: Succeeded,
            to: Running,
            why: "A final job cannot return to active execution; late reports leave the record unchanged.",
            seed: "001 invalid succeeded→running",
        },
        Forbidden {
            from: Failed,
            to: Succeeded,
            why: "A late successful step report for a failed job is ignored and raises an operational alert.",
            seed: "001 invalid failed→succeeded",
        },
        Forbidden {
            from: Failed,
            to: Pending,
            why: "Retry creates a linked job instead of reopening the failed record.",
            seed: "001 invalid failed→pending",
        },
        Forbidden {
            from: Cancelled,
            to: Running,
            why: "A cancelled job has a permanent recorded outcome.",
            seed: "001 invalid cancelled→running",
        },
        Forbidden {
            from: Running,
            to: Pending,
            why: "Ordinary step reporting advances pending to running and provides no return to pending.",
            seed: "001 invalid running→pending",
        },
    ]
};

/// The rules of a job's kind that the machine needs, fixed at submission (from the
/// component version the job is pinned to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindRules {
    /// Whether callers may cancel jobs of this kind.
    pub cancellable: bool,
    /// Attempts a step may make in all (at least 1).
    pub max_attempts: u32,
    /// Whether the kind has a business failure effect.
    pub failure_effect: bool,
    /// Whether the kind is notified on success.
    pub notify_on_success: bool,
}

/// A recorded request for a run-control action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Who asked.
    pub actor: Actor,
    /// When.
    pub at: Timestamp,
}

/// A recorded cancellation request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CancelRequest {
    /// Who asked.
    pub actor: Actor,
    /// Why, as they said it (nonblank).
    pub reason: String,
    /// When.
    pub at: Timestamp,
}

/// Requests waiting for the step in flight to end (seed 003's `pausing`, `cancelling`,
/// restart pending).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Requests {
    /// A pause waiting for the step boundary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Request>,
    /// A recorded cancellation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<CancelRequest>,
    /// A restart waiting for the step boundary (and for any pause or cancel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<Request>,
}

/// The current holder of a job: one step attempt in flight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The holder's fencing token.
    pub fence: Fence,
    /// Which host holds it (for operators; authority is the fence).
    pub owner: String,
    /// Index of the step being run.
    pub step: usize,
    /// When it was taken.
    pub claimed_at: Timestamp,
    /// When it lapses unless renewed by a heartbeat.
    pub expires_at: Timestamp,
}

/// The last report accepted, so that an identical repeat adds nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastReport {
    /// The claim it was made under.
    pub fence: Fence,
    /// A digest of the report.
    pub fingerprint: u64,
}

/// A job as the machine sees it: the job row and its current pass's steps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Its identity.
    pub id: JobId,
    /// Its kind's rules.
    pub rules: KindRules,
    /// Where it stands.
    pub state: JobState,
    /// The pass number: 1, and one more for every restart.
    pub pass: u32,
    /// The current pass's steps, in declaration order. Not serialised with the job:
    /// the store keeps each step in a row of its own.
    #[serde(skip)]
    pub steps: Vec<Step>,
    /// The last fencing token issued (0: never claimed).
    pub fence: Fence,
    /// The claim in flight, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<Claim>,
    /// The last accepted report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_report: Option<LastReport>,
    /// Requests waiting for a step boundary.
    pub requests: Requests,
    /// Progress in percent, derived from settled step weights.
    pub progress: u8,
    /// When the job may next be dispatched.
    pub run_at: Timestamp,
    /// When it was submitted.
    pub created_at: Timestamp,
    /// When its first step was claimed: the execution handle exists from then on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When it reached a final state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<Timestamp>,
    /// When anything last happened to it (silence is measured from here).
    pub last_activity_at: Timestamp,
    /// Why it failed (or, for cancelled jobs, which step was stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<SafeFailure>,
    /// Trailing reconciliation probes that found no execution.
    pub probe_misses: u32,
    /// The job this one retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predecessor: Option<JobId>,
    /// The job that retries this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub successor: Option<JobId>,
}

/// What a step attempt reports when it ends (or hands its claim back).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepReport {
    /// The step completed with this output.
    Complete {
        /// Its output.
        output: Vec<u8>,
    },
    /// The step does not apply.
    Skip {
        /// Why (operator-safe).
        reason: String,
    },
    /// Progress saved; dispatch again now to continue the same attempt.
    More {
        /// Where to resume.
        cursor: String,
        /// Work done so far.
        partial: Partial,
    },
    /// Dispatch again after a while; no attempt is consumed.
    Snooze {
        /// How long.
        delay: Duration,
    },
    /// A transient failure: retry after `backoff` while the budget lasts.
    Retryable {
        /// Safe account.
        failure: SafeFailure,
        /// Delay before the next attempt, drawn by the engine from the kind's policy.
        backoff: Duration,
    },
    /// A permanent refusal: the step and the job fail.
    Refused {
        /// Safe account.
        failure: SafeFailure,
    },
    /// The host hands the claim back without an outcome (shutting down): the attempt
    /// continues elsewhere, no attempt is consumed.
    Release,
}

impl StepReport {
    /// A digest of the report, to recognise an identical repeat.
    pub fn fingerprint(&self) -> u64 {
        let mut h = Fnv::new();
        match self {
            Self::Complete { output } => {
                h.write(&[1]);
                h.write(output);
            }
            Self::Skip { reason } => {
                h.write(&[2]);
                h.write(reason.as_bytes());
            }
            Self::More { cursor, partial } => {
                h.write(&[3]);
                h.write(cursor.as_bytes());
                h.write(&partial.done.to_le_bytes());
                h.write(&partial.total.unwrap_or(u64::MAX).to_le_bytes());
            }
            Self::Snooze { delay } => {
                h.write(&[4]);
                h.write(&delay.as_micros().to_le_bytes());
            }
            Self::Retryable { failure, .. } => {
                h.write(&[5]);
                h.write(failure.code.as_bytes());
            }
            Self::Refused { failure } => {
                h.write(&[6]);
                h.write(failure.code.as_bytes());
                h.write(failure.message.as_bytes());
            }
            Self::Release => h.write(&[7]),
        }
        h.finish()
    }

    /// A short name for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Complete { .. } => "complete",
            Self::Skip { .. } => "skip",
            Self::More { .. } => "more",
            Self::Snooze { .. } => "snooze",
            Self::Retryable { .. } => "retryable",
            Self::Refused { .. } => "refused",
            Self::Release => "release",
        }
    }
}

/// 64-bit FNV-1a: small, stable across builds and platforms (unlike `DefaultHasher`).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Everything that can happen to a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobEvent {
    /// A host is about to run the job's next step (seed 003 `claim`).
    Claim {
        /// The claiming host.
        owner: String,
        /// How long the claim lasts without a heartbeat.
        ttl: Duration,
    },
    /// The step in flight is alive (seed 003 `heartbeat`).
    Heartbeat {
        /// The holder's token.
        fence: Fence,
        /// Renew the claim for this long.
        ttl: Duration,
        /// Work done so far, if the step said.
        progress: Option<Partial>,
    },
    /// The step in flight ended (seed 003 `checkpoint`).
    Report {
        /// The holder's token.
        fence: Fence,
        /// What it reported.
        report: StepReport,
    },
    /// The claim's lease lapsed: its holder is gone (seed 003 `rescue`).
    Rescue {
        /// Delay before the step is tried again.
        backoff: Duration,
    },
    /// Pause at the next step boundary.
    Pause {
        /// Who asked.
        actor: Actor,
    },
    /// Resume a paused (or pausing) job.
    Resume {
        /// Who asked.
        actor: Actor,
    },
    /// Cancel the job.
    Cancel {
        /// Who asked.
        actor: Actor,
        /// Why (must not be blank).
        reason: String,
    },
    /// Start a fresh pass at the next step boundary (seed 003 `request_restart`).
    RequestRestart {
        /// Who asked.
        actor: Actor,
    },
    /// The reconciler probed the job's execution (seed 001 reconciliation).
    Reconcile {
        /// What the probe found.
        evidence: Evidence,
        /// Thresholds in force.
        policy: ReconcilePolicy,
    },
    /// Retry a final job as a new, linked one.
    Retry {
        /// The new job's id.
        successor: JobId,
    },
}

impl JobEvent {
    /// A short name for logs and refusals.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Claim { .. } => "claim",
            Self::Heartbeat { .. } => "heartbeat",
            Self::Report { .. } => "report",
            Self::Rescue { .. } => "rescue",
            Self::Pause { .. } => "pause",
            Self::Resume { .. } => "resume",
            Self::Cancel { .. } => "cancel",
            Self::RequestRestart { .. } => "restart",
            Self::Reconcile { .. } => "reconcile",
            Self::Retry { .. } => "retry",
        }
    }
}

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
    /// Make the job dispatchable at `at` (and wake a dispatcher if that is now).
    Dispatch {
        /// When.
        at: Timestamp,
    },
    /// The claim ended: release the job's lease and its exclusive lease keys.
    ReleaseLeases,
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
    },
}

/// What [`transition`] answers: the job to write, history to append, effects to run.
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
    /// The job has a retry already.
    #[error("the job was already retried as {successor}")]
    AlreadyRetried {
        /// The retry job.
        successor: JobId,
    },
    /// The step machine refused the report.
    #[error(transparent)]
    Step(#[from] StepRefusal),
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
            Self::Step(StepRefusal::Invalid { .. }) => "invalid-step-transition",
            Self::Step(StepRefusal::DifferentFinal { .. }) => "step-already-final",
        }
    }

    /// Whether the refusal must raise an operational alert (seed 001).
    pub fn is_alert(&self) -> bool {
        matches!(self, Self::LateSuccessAfterFailure)
    }
}

/// What a submission declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submission {
    /// The new job's id.
    pub id: JobId,
    /// Its kind's rules.
    pub rules: KindRules,
    /// Its steps: key and weight, in order.
    pub steps: Vec<(String, u32)>,
    /// When it may first run.
    pub run_at: Timestamp,
}

impl Job {
    /// A submitted job: pending, every declared step queued (seed 001, submission).
    pub fn submit(submission: Submission, now: Timestamp) -> (Self, Vec<HistoryEvent>) {
        let steps = submission.steps.iter().map(|(key, weight)| Step::new(key.clone(), *weight)).collect();
        let job = Self {
            id: submission.id,
            rules: submission.rules,
            state: JobState::Pending,
            pass: 1,
            steps,
            fence: Fence::default(),
            claim: None,
            last_report: None,
            requests: Requests::default(),
            progress: 0,
            run_at: submission.run_at.max(now),
            created_at: now,
            started_at: None,
            settled_at: None,
            last_activity_at: now,
            failure: None,
            probe_misses: 0,
            predecessor: None,
            successor: None,
        };
        (job, vec![HistoryEvent::Submitted])
    }

    /// The retry job of `predecessor` (which must have accepted [`JobEvent::Retry`]):
    /// pending, with the predecessor's completed steps carried in as completed so that
    /// execution bypasses them (seed 002 queued→completed).
    pub fn successor_of(predecessor: &Job, id: JobId, now: Timestamp) -> Result<(Self, Vec<HistoryEvent>), Refusal> {
        if predecessor.successor != Some(id) {
            return Err(match predecessor.successor {
                Some(successor) => Refusal::AlreadyRetried { successor },
                None => Refusal::NotRetryable { state: predecessor.state },
            });
        }
        let submission = Submission {
            id,
            rules: predecessor.rules,
            steps: predecessor.steps.iter().map(|s| (s.key.clone(), s.weight)).collect(),
            run_at: now,
        };
        let (mut job, mut history) = Self::submit(submission, now);
        job.predecessor = Some(predecessor.id);
        history.push(HistoryEvent::RetryOf { predecessor: predecessor.id });
        for (step, prior) in job.steps.iter_mut().zip(&predecessor.steps) {
            if let (StepState::Completed, Some(output)) = (prior.state, &prior.output) {
                step.apply(StepEvent::Carry { output: output.clone() }, now)?;
                history.push(HistoryEvent::StepCarried { step: step.key.clone() });
            }
        }
        if job.next_step().is_none() {
            return Err(Refusal::NothingToRun);
        }
        job.progress = progress::derive(&job.steps, 0, false);
        Ok((job, history))
    }

    /// The index of the step that runs next: the first one not settled.
    pub fn next_step(&self) -> Option<usize> {
        self.steps.iter().position(|s| !s.state.is_final())
    }

    /// Whether an execution handle exists (the job has been claimed at least once).
    pub fn has_execution(&self) -> bool {
        self.started_at.is_some()
    }

    /// The answer to a heartbeat under `fence`: keep going, or stop and why.
    pub fn heartbeat_reply(&self, fence: Fence) -> HeartbeatReply {
        match &self.claim {
            Some(claim) if claim.fence == fence && !self.state.is_final() => {
                if self.requests.cancel.is_some() {
                    HeartbeatReply::StopCancelled
                } else {
                    HeartbeatReply::Proceed
                }
            }
            _ if self.state == JobState::Cancelled => HeartbeatReply::StopCancelled,
            _ => HeartbeatReply::StopLeaseLost,
        }
    }
}

/// What a running step is told when it heartbeats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeartbeatReply {
    /// Keep working.
    Proceed,
    /// A cancellation is recorded: stop.
    StopCancelled,
    /// The claim is no longer this holder's: stop.
    StopLeaseLost,
}

/// Applies `event` to `job` at `now`: the job machine's one transition function.
pub fn transition(job: &Job, event: &JobEvent, now: Timestamp) -> Result<Transition, Refusal> {
    let mut t = Draft::new(job);
    match event {
        JobEvent::Claim { owner, ttl } => t.claim(owner, *ttl, now)?,
        JobEvent::Heartbeat { fence, ttl, progress } => t.heartbeat(*fence, *ttl, *progress, now)?,
        JobEvent::Report { fence, report } => t.report(*fence, report, now)?,
        JobEvent::Rescue { backoff } => t.rescue(*backoff, now)?,
        JobEvent::Pause { actor } => t.pause(actor, now)?,
        JobEvent::Resume { actor } => t.resume(actor, now)?,
        JobEvent::Cancel { actor, reason } => t.cancel(actor, reason, now)?,
        JobEvent::RequestRestart { actor } => t.request_restart(actor, now)?,
        JobEvent::Reconcile { evidence, policy } => t.reconcile(*evidence, policy, now)?,
        JobEvent::Retry { successor } => t.retry(*successor)?,
    }
    Ok(t.finish(job))
}

/// A transition being worked out: a copy of the job plus what to write and do.
struct Draft {
    job: Job,
    steps_changed: Vec<usize>,
    previous_pass: Option<Vec<Step>>,
    history: Vec<HistoryEvent>,
    effects: Vec<Effect>,
}

impl Draft {
    fn new(job: &Job) -> Self {
        Self {
            job: job.clone(),
            steps_changed: Vec::new(),
            previous_pass: None,
            history: Vec::new(),
            effects: Vec::new(),
        }
    }

    fn finish(mut self, before: &Job) -> Transition {
        let from = before.state;
        let to = self.job.state;
        debug_assert!(
            from == to || is_allowed(JOB_TRANSITIONS, from, to),
            "job transition {from:?} → {to:?} is not in JOB_TRANSITIONS"
        );
        self.steps_changed.sort_unstable();
        self.steps_changed.dedup();
        Transition {
            job: self.job,
            steps_changed: self.steps_changed,
            previous_pass: self.previous_pass,
            history: self.history,
            effects: self.effects,
        }
    }

    fn refuse_if_final(&self) -> Result<(), Refusal> {
        if self.job.state.is_final() { Err(Refusal::Finished { state: self.job.state }) } else { Ok(()) }
    }

    fn step_event(&mut self, index: usize, event: StepEvent, now: Timestamp) -> Result<(), Refusal> {
        let step = &mut self.job.steps[index];
        step.apply(event, now)?;
        self.steps_changed.push(index);
        Ok(())
    }

    fn touch(&mut self, now: Timestamp) {
        self.job.last_activity_at = now;
        self.job.probe_misses = 0;
    }

    fn refresh_progress(&mut self) {
        let succeeded = self.job.state == JobState::Succeeded;
        self.job.progress = progress::derive(&self.job.steps, self.job.progress, succeeded);
    }

    // --- claim and heartbeat -------------------------------------------------------

    fn claim(&mut self, owner: &str, ttl: Duration, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.state == JobState::Paused {
            return Err(Refusal::Paused);
        }
        if let Some(claim) = &self.job.claim {
            return Err(Refusal::Claimed { fence: claim.fence });
        }
        if self.job.requests.cancel.is_some() {
            return Err(Refusal::Cancelling);
        }
        if self.job.run_at > now {
            return Err(Refusal::NotDue { run_at: self.job.run_at });
        }
        if self.job.requests.restart.is_some() {
            self.fresh_pass(now);
        }
        let index = self.job.next_step().ok_or(Refusal::NothingToRun)?;
        let fence = self.job.fence.next();
        if self.job.state == JobState::Pending {
            self.job.state = JobState::Running;
            self.job.started_at.get_or_insert(now);
        }
        if self.job.steps[index].state == StepState::Running {
            // The attempt goes on after `more`, `snooze` or a release: no new attempt.
            self.step_event(index, StepEvent::Continue, now)?;
        } else {
            self.step_event(index, StepEvent::Start { fence }, now)?;
            let step = &self.job.steps[index];
            self.history.push(HistoryEvent::StepStarted { step: step.key.clone(), attempt: step.attempts_made() });
        }
        self.job.fence = fence;
        self.job.claim =
            Some(Claim { fence, owner: owner.to_owned(), step: index, claimed_at: now, expires_at: now.plus(ttl) });
        self.touch(now);
        Ok(())
    }

    fn held_claim(&self, fence: Fence) -> Result<&Claim, Refusal> {
        match &self.job.claim {
            Some(claim) if claim.fence == fence => Ok(claim),
            _ => Err(Refusal::StaleFence { presented: fence, current: self.job.fence }),
        }
    }

    fn heartbeat(
        &mut self,
        fence: Fence,
        ttl: Duration,
        partial: Option<Partial>,
        now: Timestamp,
    ) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        let index = self.held_claim(fence)?.step;
        if let Some(claim) = self.job.claim.as_mut() {
            claim.expires_at = now.plus(ttl);
        }
        if let Some(partial) = partial {
            self.job.steps[index].partial = Some(partial);
            self.steps_changed.push(index);
            self.refresh_progress();
        }
        self.touch(now);
        Ok(())
    }

    // --- the end of a step attempt ---------------------------------------------------

    fn report(&mut self, fence: Fence, report: &StepReport, now: Timestamp) -> Result<(), Refusal> {
        if self.job.state == JobState::Failed && matches!(report, StepReport::Complete { .. }) {
            return Err(Refusal::LateSuccessAfterFailure);
        }
        let held = self.job.claim.as_ref().is_some_and(|c| c.fence == fence);
        if let Some(last) = self.job.last_report.filter(|last| last.fence == fence && !held) {
            // The same claim reported before: an identical repeat adds nothing.
            return if last.fingerprint == report.fingerprint() {
                Ok(())
            } else {
                Err(Refusal::ConflictingReport { fence })
            };
        }
        self.refuse_if_final()?;
        let index = self.held_claim(fence)?.step;
        self.job.claim = None;
        self.job.last_report = Some(LastReport { fence, fingerprint: report.fingerprint() });
        self.effects.push(Effect::ReleaseLeases);
        self.touch(now);
        let key = self.job.steps[index].key.clone();
        let then = match report {
            StepReport::Complete { output } => {
                self.step_event(index, StepEvent::Complete { output: output.clone() }, now)?;
                self.history.push(HistoryEvent::StepCompleted { step: key });
                now
            }
            StepReport::Skip { reason } => {
                self.step_event(index, StepEvent::Skip { reason: reason.clone() }, now)?;
                self.history.push(HistoryEvent::StepSkipped { step: key, reason: reason.clone() });
                now
            }
            StepReport::More { cursor, partial } => {
                self.step_event(index, StepEvent::Checkpoint { cursor: cursor.clone(), partial: *partial }, now)?;
                now
            }
            StepReport::Snooze { delay } => {
                let until = now.plus(*delay);
                self.history.push(HistoryEvent::Snoozed { step: key, until });
                until
            }
            StepReport::Release => {
                self.history.push(HistoryEvent::Released { step: key });
                now
            }
            StepReport::Retryable { failure, backoff } => self.attempt_failed(index, failure.clone(), *backoff, now)?,
            StepReport::Refused { failure } => {
                self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now)?;
                self.history.push(HistoryEvent::StepFailed { step: key, failure: failure.clone() });
                now
            }
        };
        self.after_step(then, now);
        self.refresh_progress();
        Ok(())
    }

    /// A transient failure of the attempt at `index`: retry while the budget lasts.
    fn attempt_failed(
        &mut self,
        index: usize,
        failure: SafeFailure,
        backoff: Duration,
        now: Timestamp,
    ) -> Result<Timestamp, Refusal> {
        let step = &self.job.steps[index];
        let key = step.key.clone();
        if step.attempts_made() >= self.job.rules.max_attempts.max(1) {
            self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now)?;
            self.history.push(HistoryEvent::StepFailed { step: key, failure });
            Ok(now)
        } else {
            let attempt = step.attempts_made();
            let retry_at = now.plus(backoff);
            self.step_event(index, StepEvent::Retry { failure: failure.clone() }, now)?;
            self.history.push(HistoryEvent::StepRetrying { step: key, attempt, failure, retry_at });
            Ok(retry_at)
        }
    }

    /// Seed 003's precedence table: what the job does when a step attempt ends.
    /// `then` is when to dispatch again if nothing overrides.
    fn after_step(&mut self, then: Timestamp, now: Timestamp) {
        if self.job.requests.cancel.is_some() {
            // A cancel wins over everything, even a completed run.
            self.settle_cancelled(now);
        } else if let Some(failure) =
            self.job.steps.iter().find(|s| s.state == StepState::Failed).and_then(|s| s.failure.clone())
        {
            self.settle_failed(failure, EffectOrder::BeforeSettlement, now);
        } else if self.job.next_step().is_none() {
            if self.job.requests.restart.is_some() && self.job.requests.pause.is_none() {
                self.fresh_pass(now);
                self.dispatch(now);
            } else {
                self.settle_succeeded(now);
            }
        } else if self.job.requests.pause.take().is_some() {
            self.job.state = JobState::Paused;
            self.history.push(HistoryEvent::Paused);
        } else if self.job.requests.restart.is_some() {
            self.fresh_pass(now);
            self.dispatch(now);
        } else {
            self.dispatch(then);
        }
    }

    fn dispatch(&mut self, at: Timestamp) {
        self.job.run_at = at;
        self.effects.push(Effect::Dispatch { at });
    }

    fn rescue(&mut self, backoff: Duration, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        let claim = self.job.claim.clone().ok_or(Refusal::NotClaimed)?;
        if claim.expires_at > now {
            return Err(Refusal::ClaimLive { expires_at: claim.expires_at });
        }
        self.job.claim = None;
        self.effects.push(Effect::ReleaseLeases);
        self.history.push(HistoryEvent::Rescued { fence: claim.fence, owner: claim.owner.clone() });
        self.touch(now);
        let (code, message) = host_codes::LEASE_EXPIRED;
        let failure = SafeFailure { code: code.to_owned(), message: message.to_owned(), correlation: None };
        let then = self.attempt_failed(claim.step, failure, backoff, now)?;
        self.after_step(then, now);
        self.refresh_progress();
        Ok(())
    }

    // --- settlements -----------------------------------------------------------------

    fn settle_succeeded(&mut self, now: Timestamp) {
        self.job.state = JobState::Succeeded;
        self.job.settled_at = Some(now);
        self.job.requests = Requests::default();
        self.job.progress = 100;
        self.history.push(HistoryEvent::Succeeded);
        if self.job.rules.notify_on_success {
            self.effects.push(Effect::NotifySuccess);
        }
    }

    fn settle_failed(&mut self, failure: SafeFailure, order: EffectOrder, now: Timestamp) {
        if self.job.rules.failure_effect && order == EffectOrder::BeforeSettlement {
            self.effects.push(Effect::FailureEffect { order });
        }
        self.job.state = JobState::Failed;
        self.job.settled_at = Some(now);
        self.job.requests = Requests::default();
        self.job.claim = None;
        self.history.push(HistoryEvent::Failed { failure: failure.clone() });
        self.job.failure = Some(failure);
        if self.job.rules.failure_effect && order == EffectOrder::AfterSettlement {
            self.effects.push(Effect::FailureEffect { order });
        }
    }

    /// Fails every step in flight with `explanation` (seed 001: "fail running and
    /// retrying steps"; queued steps stay queued, seed 002).
    fn fail_in_flight(&mut self, explanation: (&'static str, &'static str), now: Timestamp) -> Option<SafeFailure> {
        let failure = SafeFailure::host(explanation.0, explanation.1);
        let mut any = None;
        for index in 0..self.job.steps.len() {
            if self.job.steps[index].state.is_in_flight() {
                // Running and retrying steps accept `Fail`; the error cannot occur.
                if self.step_event(index, StepEvent::Fail { failure: failure.clone() }, now).is_ok() {
                    let key = self.job.steps[index].key.clone();
                    self.history.push(HistoryEvent::StepFailed { step: key, failure: failure.clone() });
                    any = Some(failure.clone());
                }
            }
        }
        any
    }

    fn settle_cancelled(&mut self, now: Timestamp) {
        let stopped = self.fail_in_flight(host_codes::STOPPED, now);
        if self.job.claim.take().is_some() {
            self.effects.push(Effect::ReleaseLeases);
        }
        self.job.state = JobState::Cancelled;
        self.job.settled_at = Some(now);
        self.job.failure = stopped;
        self.job.requests.pause = None;
        self.job.requests.restart = None;
        self.history.push(HistoryEvent::Cancelled);
    }

    /// Begins a fresh pass (seed 003: "pass restarts (queued, counters reset)"). The old
    /// pass's steps keep their outcomes; those in flight end as superseded.
    fn fresh_pass(&mut self, now: Timestamp) {
        self.fail_in_flight(host_codes::SUPERSEDED, now);
        let next: Vec<Step> = self
            .job
            .steps
            .iter()
            .map(|s| if s.carried { s.clone() } else { Step::new(s.key.clone(), s.weight) })
            .collect();
        let old = std::mem::replace(&mut self.job.steps, next);
        self.previous_pass = Some(old);
        self.steps_changed = (0..self.job.steps.len()).collect();
        self.job.pass = self.job.pass.saturating_add(1);
        self.job.requests.restart = None;
        self.job.progress = progress::derive(&self.job.steps, 0, false);
        self.history.push(HistoryEvent::PassStarted { pass: self.job.pass });
    }

    // --- run control -----------------------------------------------------------------

    fn pause(&mut self, actor: &Actor, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.state == JobState::Paused {
            return Err(Refusal::AlreadyPaused);
        }
        if self.job.requests.cancel.is_some() {
            return Err(Refusal::Cancelling);
        }
        if self.job.requests.pause.is_some() {
            return Err(Refusal::AlreadyPausing);
        }
        self.history.push(HistoryEvent::PauseRequested { actor: actor.clone() });
        if self.job.claim.is_some() {
            self.job.requests.pause = Some(Request { actor: actor.clone(), at: now });
        } else {
            self.job.state = JobState::Paused;
            self.history.push(HistoryEvent::Paused);
        }
        self.touch(now);
        Ok(())
    }

    fn resume(&mut self, actor: &Actor, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.requests.pause.take().is_some() {
            // Still pausing: withdraw the request; the step in flight carries on.
            self.history.push(HistoryEvent::Resumed { actor: actor.clone() });
        } else if self.job.state == JobState::Paused {
            self.job.state = if self.job.has_execution() { JobState::Running } else { JobState::Pending };
            self.history.push(HistoryEvent::Resumed { actor: actor.clone() });
            let at = self.job.run_at.max(now);
            self.dispatch(at);
        } else {
            return Err(Refusal::NotPaused);
        }
        self.touch(now);
        Ok(())
    }

    fn cancel(&mut self, actor: &Actor, reason: &str, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if !self.job.rules.cancellable {
            return Err(Refusal::NotCancellable);
        }
        if reason.trim().is_empty() {
            return Err(Refusal::BlankReason);
        }
        if self.job.requests.cancel.is_some() {
            return Err(Refusal::AlreadyCancelling);
        }
        self.job.requests.cancel = Some(CancelRequest { actor: actor.clone(), reason: reason.to_owned(), at: now });
        self.history.push(HistoryEvent::CancelRequested { actor: actor.clone(), reason: reason.to_owned() });
        if self.job.claim.is_none() {
            // No attempt in flight: the request and the outcome are recorded together.
            self.settle_cancelled(now);
        }
        self.touch(now);
        Ok(())
    }

    fn request_restart(&mut self, actor: &Actor, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if !self.job.has_execution() {
            return Err(Refusal::NotStarted);
        }
        if self.job.requests.restart.is_some() {
            return Ok(());
        }
        self.history.push(HistoryEvent::RestartRequested { actor: actor.clone() });
        let waits = self.job.claim.is_some()
            || self.job.state == JobState::Paused
            || self.job.requests.pause.is_some()
            || self.job.requests.cancel.is_some();
        self.job.requests.restart = Some(Request { actor: actor.clone(), at: now });
        if !waits {
            self.fresh_pass(now);
            self.dispatch(now);
        }
        self.touch(now);
        Ok(())
    }

    // --- reconciliation and retry ------------------------------------------------------

    fn reconcile(&mut self, evidence: Evidence, policy: &ReconcilePolicy, now: Timestamp) -> Result<(), Refusal> {
        self.refuse_if_final()?;
        if self.job.state == JobState::Paused {
            return Err(Refusal::Paused);
        }
        let silent_for = now.since(self.job.last_activity_at);
        if silent_for < policy.silence {
            return Err(Refusal::NotSilent { silent_for });
        }
        let never_started = !self.job.has_execution();
        match evidence {
            Evidence::Alive => {
                self.job.probe_misses = 0;
            }
            Evidence::Missing => {
                self.job.probe_misses = self.job.probe_misses.saturating_add(1);
                let misses = self.job.probe_misses;
                if misses < policy.required_misses.max(1) {
                    self.history.push(HistoryEvent::ProbeMissed { misses });
                } else if never_started {
                    // Unstarted steps stay queued (seed 001 pending→failed).
                    self.history.push(HistoryEvent::Reconciled { evidence });
                    let (code, message) = host_codes::NEVER_STARTED;
                    self.settle_failed(SafeFailure::host(code, message), EffectOrder::BeforeSettlement, now);
                } else {
                    self.settle_from_lost_execution(evidence, host_codes::EXECUTION_LOST, now);
                }
            }
            Evidence::Failed => {
                if never_started {
                    self.history.push(HistoryEvent::Reconciled { evidence });
                    let (code, message) = host_codes::NEVER_STARTED;
                    self.settle_failed(SafeFailure::host(code, message), EffectOrder::BeforeSettlement, now);
                } else {
                    self.settle_from_lost_execution(evidence, host_codes::EXECUTION_FAILED, now);
                }
            }
            Evidence::Succeeded => {
                if never_started {
                    // Success without any execution is no evidence at all: count a miss.
                    self.job.probe_misses = self.job.probe_misses.saturating_add(1);
                    self.history.push(HistoryEvent::ProbeMissed { misses: self.job.probe_misses });
                    return Ok(());
                }
                self.history.push(HistoryEvent::Reconciled { evidence });
                if self.job.requests.cancel.is_some() {
                    self.settle_cancelled(now);
                } else if self.job.steps.iter().any(|s| s.state.is_in_flight()) {
                    // Success with steps in flight is corrected to failure; the effect
                    // runs after the corrected settlement (seed 001).
                    let failure = self.fail_in_flight(host_codes::SUCCESS_CORRECTED, now);
                    self.release_claim();
                    let (code, message) = host_codes::SUCCESS_CORRECTED;
                    let failure = failure.unwrap_or_else(|| SafeFailure::host(code, message));
                    self.settle_failed(failure, EffectOrder::AfterSettlement, now);
                } else {
                    self.release_claim();
                    self.settle_succeeded(now);
                }
            }
        }
        Ok(())
    }

    fn release_claim(&mut self) {
        if self.job.claim.take().is_some() {
            self.effects.push(Effect::ReleaseLeases);
        }
    }

    fn settle_from_lost_execution(
        &mut self,
        evidence: Evidence,
        explanation: (&'static str, &'static str),
        now: Timestamp,
    ) {
        self.history.push(HistoryEvent::Reconciled { evidence });
        if self.job.requests.cancel.is_some() {
            // The execution is gone and a cancel was recorded: it is confirmed.
            self.settle_cancelled(now);
            return;
        }
        self.fail_in_flight(explanation, now);
        self.release_claim();
        self.settle_failed(SafeFailure::host(explanation.0, explanation.1), EffectOrder::BeforeSettlement, now);
    }

    fn retry(&mut self, successor: JobId) -> Result<(), Refusal> {
        match self.job.state {
            JobState::Failed | JobState::Cancelled => {}
            state => return Err(Refusal::NotRetryable { state }),
        }
        if let Some(existing) = self.job.successor {
            return Err(Refusal::AlreadyRetried { successor: existing });
        }
        self.job.successor = Some(successor);
        self.history.push(HistoryEvent::RetriedAs { successor });
        self.effects.push(Effect::SpawnRetry { successor });
        Ok(())
    }
}
