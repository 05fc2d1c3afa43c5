//! What can happen to a job, and what a step attempt reports when it ends.

use std::time::Duration;

use crate::failure::SafeFailure;
use crate::ids::{Actor, Fence, JobId};
use crate::reconcile::{Evidence, ReconcilePolicy};
use crate::step::Partial;
use crate::time::Timestamp;
use crate::workflow::{ChildOrder, Join, Leftover};

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
    /// Create these children and park the step until the join is met.
    AwaitChildren {
        /// The children, resolved by the engine (ids, pinned versions).
        children: Vec<ChildOrder>,
        /// When to call the step again.
        join: Join,
        /// What happens to children still open once it is met early.
        leftover: Leftover,
        /// Where to resume, if the step said.
        cursor: Option<String>,
    },
    /// Park the step until a signal of this name is pending or the timeout passes.
    AwaitSignal {
        /// The signal's name.
        name: String,
        /// How long to wait at most.
        timeout: Duration,
        /// Where to resume, if the step said.
        cursor: Option<String>,
    },
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
            Self::AwaitChildren { children, join, leftover, cursor } => {
                // The children's ids are drawn afresh for each report: a repeat is
                // recognised by what it asks for.
                h.write(&[8]);
                for child in children {
                    h.write(child.kind.as_bytes());
                    h.write(&child.payload);
                    h.write(child.idempotency_key.as_deref().unwrap_or_default().as_bytes());
                }
                h.write(format!("{join:?}{leftover:?}").as_bytes());
                h.write(cursor.as_deref().unwrap_or_default().as_bytes());
            }
            Self::AwaitSignal { name, timeout, cursor } => {
                h.write(&[9]);
                h.write(name.as_bytes());
                h.write(&timeout.as_micros().to_le_bytes());
                h.write(cursor.as_deref().unwrap_or_default().as_bytes());
            }
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
            Self::AwaitChildren { .. } => "await-children",
            Self::AwaitSignal { .. } => "await-signal",
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

/// The kind version a retry runs on instead of the failed job's own (`spindle retry
/// --on-current`): its steps, rules and number, as the host read them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RetryOnto {
    /// The version's number (the host's to pin; the machine only carries it).
    pub version: i64,
    /// Its rules.
    pub rules: super::KindRules,
    /// Its steps in order, with their weights.
    pub steps: Vec<(String, u32)>,
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
        /// What the claim writes: the storage format the database is at decides
        /// (`upgrade::ClaimRecord`).
        record: crate::upgrade::ClaimRecord,
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
        /// Another version of the kind to run it on (its steps and rules), or `None` for
        /// the failed job's own.
        onto: Option<RetryOnto>,
    },
    /// A delayed job's `run_at` has come, or a blocked job's recheck time: it becomes
    /// ready.
    Due,
    /// The job's claim found one of its exclusive lease keys held by another job until
    /// `held_until`: it waits for the key (queue `blocked`).
    KeyBusy {
        /// The key.
        key: String,
        /// When the holder's lease lapses unless renewed.
        held_until: Timestamp,
    },
    /// The job's claim found a running limit full (its tenant's, or its kind's): it waits
    /// for a slot under the gate's name, released like a key when one of the gate's steps
    /// ends, and is tried again at `recheck_at` at the latest (queue `blocked`).
    AtCapacity {
        /// The gate, named like a key (`@running/TENANT` or `@running/TENANT/KIND`).
        gate: String,
        /// When to try again if no release wakes it first.
        recheck_at: Timestamp,
    },
    /// The key a blocked job waits for was released: it becomes ready.
    KeyReleased {
        /// The key.
        key: String,
    },
    /// A signal was sent to the job: it is stored with this transition
    /// ([`Effect::StoreSignal`](super::Effect::StoreSignal)) and pending until a wait for
    /// its name consumes it.
    Signal {
        /// Its name.
        name: String,
        /// Its body (JSON by convention).
        body: Vec<u8>,
        /// The sender's idempotency key, if it gave one.
        key: Option<String>,
    },
    /// Children of the fan-out `slot` were counted final: `settled` of them (counts only
    /// grow, so an old count changes nothing).
    ChildrenSettled {
        /// The fan-out.
        slot: String,
        /// How many of its children are final.
        settled: u32,
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
            Self::Due => "due",
            Self::KeyBusy { .. } => "key-busy",
            Self::AtCapacity { .. } => "at-capacity",
            Self::KeyReleased { .. } => "key-released",
            Self::Signal { .. } => "signal",
            Self::ChildrenSettled { .. } => "children-settled",
        }
    }
}
