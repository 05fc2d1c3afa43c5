//! The job machine (seed 001) with run control folded in (seed 003) and the queue
//! machine beside it.
//!
//! One function, [`transition`], checks the job's state against an event and answers
//! the job as it must be written, the history to append and the effects to carry out
//! (lease keys to take, renew or release, failure effect, notification, retry job), or a
//! typed [`Refusal`]. It does no I/O and reads no clock; the engine loads the row, calls
//! it, and writes everything it answers in one version-checked transaction.
//!
//! - [`state`]: the states and the table of allowed and forbidden transitions.
//! - [`event`]: what can happen to a job.
//! - [`effect`]: what a transition answers.
//! - [`refusal`]: why an event does not apply.
//! - `machine`: the transition function.

pub mod effect;
pub mod event;
mod machine;
pub mod refusal;
pub mod state;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use effect::{Effect, EffectOrder, Transition};
pub use event::{JobEvent, RetryOnto, StepReport};
pub use machine::transition;
pub use refusal::Refusal;
pub use state::{JOB_FORBIDDEN, JOB_TRANSITIONS, JobState, change_state};

use crate::failure::SafeFailure;
use crate::history::HistoryEvent;
use crate::ids::{Actor, Fence, JobId};
use crate::progress;
use crate::queue::QueueState;
use crate::step::{Step, StepEvent, StepState};
use crate::time::Timestamp;
use crate::workflow::Leftover;
use crate::workflow::{ParentLink, Wait};

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
    /// Whether the job's record is lean ([`Record::Lean`]): its steps are kept in its
    /// row, and no history is written for it. Absent (full) in every older row.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lean: bool,
}

/// What a kind keeps of its jobs, as its deployment declares it.
///
/// The machine is the same for both: every transition, guard, fence and lease holds. A
/// lean record only stores less: a job's steps (state, attempts, checkpoint cursor,
/// output, failure) ride in its one row, and no history entries are written, so a
/// high-volume kind pays one row write per transition instead of a job row, step rows
/// and history rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// The job row, a row per step and the history entries (the default).
    #[default]
    Full,
    /// The job row alone.
    Lean,
}

impl Record {
    /// Its name, as deployments and views spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::Lean => "lean",
        }
    }

    /// The record `rules` keep.
    pub fn of(rules: &KindRules) -> Self {
        if rules.lean { Self::Lean } else { Self::Full }
    }
}

impl std::str::FromStr for Record {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "full" => Ok(Self::Full),
            "lean" => Ok(Self::Lean),
            other => Err(format!("a record is `full` or `lean`, not {other:?}")),
        }
    }
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
    /// Whether a running limit (its tenant's or its kind's) counted it when it was taken:
    /// its end frees a slot that jobs waiting on the limit's gate are woken for. The host
    /// sets it on the claim it writes; the machine only carries it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub limited: bool,
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
    /// Where it waits for its next step (the queue machine); the store indexes it.
    pub queue: QueueState,
    /// The lease key it waits for, while its queue is `blocked`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked_on: Option<String>,
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
    /// The parent whose fan-out created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
    /// How deep it nests: 0 for a submitted job, the parent's plus one for a child.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub depth: u32,
    /// Fan-outs its steps made so far (numbers the next one's slot).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fan_outs: u32,
    /// What happens to its open children when it fails or is cancelled (set by its
    /// latest fan-out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children_on_close: Option<Leftover>,
    /// The wait of a parked step, until a report of the woken step is accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// Signals sent and not yet consumed, by name (the bodies are stored beside).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub signals: BTreeMap<String, u32>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
            queue: if submission.run_at <= now { QueueState::Ready } else { QueueState::Delayed },
            blocked_on: None,
            created_at: now,
            started_at: None,
            settled_at: None,
            last_activity_at: now,
            failure: None,
            probe_misses: 0,
            predecessor: None,
            successor: None,
            parent: None,
            depth: 0,
            fan_outs: 0,
            children_on_close: None,
            wait: None,
            signals: BTreeMap::new(),
        };
        (job, vec![HistoryEvent::Submitted])
    }

    /// The retry job of `predecessor` (which must have accepted [`JobEvent::Retry`]):
    /// pending, with the predecessor's completed steps carried in as completed so that
    /// execution bypasses them (seed 002 queued→completed). On another version (`onto`)
    /// it has that version's steps and rules, and a completed step is carried when the
    /// version has a step of the same key: a step the fix added runs, one it removed is
    /// left behind.
    pub fn successor_of(
        predecessor: &Job,
        id: JobId,
        onto: Option<&RetryOnto>,
        now: Timestamp,
    ) -> Result<(Self, Vec<HistoryEvent>), Refusal> {
        if predecessor.successor != Some(id) {
            return Err(match predecessor.successor {
                Some(successor) => Refusal::AlreadyRetried { successor },
                None => Refusal::NotRetryable { state: predecessor.state },
            });
        }
        let (rules, steps) = match onto {
            Some(onto) => (onto.rules, onto.steps.clone()),
            None => (predecessor.rules, predecessor.steps.iter().map(|s| (s.key.clone(), s.weight)).collect()),
        };
        let submission = Submission { id, rules, steps, run_at: now };
        let (mut job, mut history) = Self::submit(submission, now);
        job.predecessor = Some(predecessor.id);
        // A retry is not its predecessor's parent's child (that fan-out is counted), but
        // it nests as deep.
        job.depth = predecessor.depth;
        history.push(HistoryEvent::RetryOf { predecessor: predecessor.id });
        for step in &mut job.steps {
            let Some(prior) = predecessor.steps.iter().find(|prior| prior.key == step.key) else { continue };
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

    /// A child of `parent`'s fan-out `slot`, at `index` there: a submitted job one level
    /// deeper, whose history says where it came from.
    pub fn child_of(
        submission: Submission,
        parent: &Job,
        slot: &str,
        index: u32,
        now: Timestamp,
    ) -> (Self, Vec<HistoryEvent>) {
        let (mut job, mut history) = Self::submit(submission, now);
        job.parent = Some(ParentLink { job: parent.id, slot: slot.to_owned(), index });
        job.depth = parent.depth.saturating_add(1);
        history.push(HistoryEvent::ChildOf { parent: parent.id, slot: slot.to_owned(), index });
        (job, history)
    }

    /// Restores the attempt a held claim began on its step. A claim that starts a new
    /// attempt writes the job row alone: the claim itself records the step, the fence
    /// and the time, so the step's own row is written when the step next changes or the
    /// claim ends (one row rewrite fewer per step). A store calls this on every job it
    /// reads; it changes nothing once the step's row holds the attempt.
    pub fn restore_claimed_step(&mut self) {
        let Some(claim) = &self.claim else { return };
        let Some(step) = self.steps.get_mut(claim.step) else { return };
        if matches!(step.state, StepState::Queued | StepState::Retrying) {
            // A queued or retrying step always starts: the event cannot be refused.
            let started = step.apply(StepEvent::Start { fence: claim.fence }, claim.claimed_at);
            debug_assert!(started.is_ok(), "{started:?}");
        }
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
