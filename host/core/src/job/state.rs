//! The job's states and its table: every allowed transition of seeds 001 and 003, and
//! the ones the seeds forbid.

use serde::{Deserialize, Serialize};

use crate::table::{Allowed, DiagramState, Forbidden};

/// Where a job stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Submitted with queued steps; no step has been reported.
    Pending,
    /// A step report began the run.
    Running,
    /// A step awaits children or a signal: no claim is held and nothing is dispatched
    /// until the wait is over (or its timeout passes). Not silent, not lost.
    Waiting,
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
            Self::Waiting => "waiting",
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
        &[Self::Pending, Self::Running, Self::Waiting, Self::Paused, Self::Succeeded, Self::Failed, Self::Cancelled]
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
        Allowed {
            from: Some(Running),
            to: Waiting,
            trigger: "a step awaits children or a signal",
            seed: "issue 14 await outcomes",
        },
        Allowed {
            from: Some(Waiting),
            to: Running,
            trigger: "join met, signal or timeout",
            seed: "issue 14 await outcomes",
        },
        Allowed { from: Some(Waiting), to: Paused, trigger: "pause while waiting", seed: "issue 14 run control" },
        Allowed { from: Some(Paused), to: Waiting, trigger: "resume, the wait not over", seed: "issue 14 run control" },
        Allowed { from: Some(Waiting), to: Cancelled, trigger: "cancel while waiting", seed: "issue 14 cancel" },
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
            from: Waiting,
            to: Succeeded,
            why: "A waiting step is called again with what it awaited before its job can succeed.",
            seed: "issue 14 await outcomes",
        },
        Forbidden {
            from: Waiting,
            to: Failed,
            why: "A waiting job holds no claim: silence is not a lost execution, and the reconciler leaves it alone.",
            seed: "issue 14 reconciliation",
        },
        Forbidden {
            from: Pending,
            to: Waiting,
            why: "Only a step's await outcome parks a job; a job that never ran has nothing waiting.",
            seed: "issue 14 await outcomes",
        },
        Forbidden {
            from: Running,
            to: Pending,
            why: "Ordinary step reporting advances pending to running and provides no return to pending.",
            seed: "001 invalid running→pending",
        },
    ]
};

/// The one way a job's state changes: `to` when `from → to` is a row of
/// [`JOB_TRANSITIONS`] (or no change), otherwise a [`Refusal::NotInTable`](super::Refusal::NotInTable) — in release
/// builds too, so a defect that asks for an unlisted change writes nothing.
pub fn change_state(from: JobState, to: JobState) -> Result<JobState, super::Refusal> {
    Ok(crate::table::change("job", JOB_TRANSITIONS, from, to)?)
}
