//! What a step call ends with: the guest's own outcome, or a fault the sandbox caught.
//!
//! The WIT `step-outcome` variants map one-to-one onto [`GuestOutcome`]. Everything the
//! sandbox stops is a [`SandboxFault`] with a stable code and an operator-safe message;
//! its detail (a trap's backtrace) is for the host log only.

use std::time::Duration;

use thiserror::Error;

/// Input of one `run-step` call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepInput {
    /// The job's id.
    pub job_id: String,
    /// The step's key.
    pub step: String,
    /// 1-based attempt number.
    pub attempt: u32,
    /// Stable across attempts: job id + step key.
    pub idempotency_key: String,
    /// The job's input.
    pub payload: Vec<u8>,
    /// Outputs of completed steps, in declaration order.
    pub prior: Vec<(String, Vec<u8>)>,
    /// Cursor of the attempt's last checkpoint.
    pub cursor: Option<String>,
    /// What the step may reach outward beyond the operator's policy (default: nothing).
    pub capabilities: std::sync::Arc<crate::outbound::Capabilities>,
    /// What the step waited for, when it is called again after an await outcome
    /// (contract 0.2.0; a 0.1.0 component never reports one).
    pub awaited: Option<Awaited>,
    /// The step's tenant's sandbox ceilings: each tightens the host's limit, never
    /// loosens it.
    pub ceilings: Ceilings,
}

/// A tenant's sandbox ceilings for one step; `None` keeps the host's limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ceilings {
    /// Linear memory, bytes.
    pub max_memory_bytes: Option<usize>,
    /// The step's time.
    pub step_timeout: Option<std::time::Duration>,
    /// Fuel (where the host meters it).
    pub fuel: Option<u64>,
}

/// What a step that awaited is called again with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Awaited {
    /// The results of its latest fan-out's children, in order.
    Children(Vec<ChildResult>),
    /// The body of the signal it waited for.
    Signal(Vec<u8>),
    /// The signal's timeout passed first.
    SignalTimeout,
}

/// A child's final state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChildState {
    /// It succeeded.
    Succeeded,
    /// It failed.
    Failed,
    /// It was cancelled.
    Cancelled,
}

/// One child's result, as its parent's step receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildResult {
    /// Its job id.
    pub job_id: String,
    /// Its kind.
    pub kind: String,
    /// Its final state; none while it is still open.
    pub state: Option<ChildState>,
    /// Its last step's output, when it succeeded.
    pub output: Option<Vec<u8>>,
    /// Why it failed or was cancelled: code and message.
    pub failure: Option<(String, String)>,
}

/// A child an `await-children` outcome asks for, as the guest wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSpec {
    /// Its kind, in the parent's tenant.
    pub kind: String,
    /// Its input.
    pub input: Vec<u8>,
    /// Its idempotency key among the tenant's jobs.
    pub idempotency_key: Option<String>,
    /// Its priority layer.
    pub priority: spindle_core::policy::priority::Priority,
    /// Lease keys its claims take.
    pub lease_keys: Vec<String>,
}

/// What the hooks receive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSummary {
    /// The job's id.
    pub job_id: String,
    /// Its input.
    pub payload: Vec<u8>,
    /// Outputs of its completed steps.
    pub outputs: Vec<(String, Vec<u8>)>,
    /// Why it failed (`on-failure` only): code and message.
    pub failure: Option<(String, String)>,
}

/// A step's own report (the WIT `step-outcome`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestOutcome {
    /// Completed with this output.
    Complete(Vec<u8>),
    /// Does not apply; the reason.
    Skip(String),
    /// Transient failure.
    Retryable {
        /// Stable reason.
        code: String,
        /// Detail, for the host log only.
        message: String,
    },
    /// Permanent refusal.
    Refused {
        /// Stable reason.
        code: String,
        /// Operator-safe explanation.
        message: String,
    },
    /// Progress saved; call again with the cursor.
    More {
        /// Where to resume.
        cursor: String,
        /// Units done.
        done: u64,
        /// Units in all, if known.
        total: Option<u64>,
    },
    /// Call again after this long.
    Snooze(Duration),
    /// Create these children; call again (same attempt) when the join is met.
    AwaitChildren {
        /// The children, in order.
        children: Vec<ChildSpec>,
        /// When to call again.
        join: spindle_core::workflow::Join,
        /// What happens to children still open once the join is met early.
        leftover: spindle_core::workflow::Leftover,
        /// Where to resume.
        cursor: Option<String>,
    },
    /// Park until the named signal arrives or the timeout passes.
    AwaitSignal {
        /// The signal's name.
        name: String,
        /// How long at most.
        timeout: Duration,
        /// Where to resume.
        cursor: Option<String>,
    },
}

/// A fault the sandbox caught. None of them stops the host.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum SandboxFault {
    /// The step ran past its wall-clock budget and was interrupted.
    #[error("the step ran past its time limit and was stopped")]
    Deadline,
    /// The step used up its fuel.
    #[error("the step used up its instruction budget")]
    OutOfFuel,
    /// The step tried to grow memory (or a table) past its limit.
    #[error("the step tried to use more memory than allowed")]
    MemoryLimit,
    /// The step overflowed its wasm stack.
    #[error("the step overflowed its stack")]
    StackOverflow,
    /// The guest accessed memory out of bounds: a bug, or a language's shadow stack
    /// (kept in linear memory, as Rust's is) overflowing by deep recursion.
    #[error("the step accessed memory out of bounds (or overflowed its shadow stack)")]
    OutOfBounds,
    /// The guest panicked or aborted.
    #[error("the step panicked")]
    Panic,
    /// Any other trap.
    #[error("the step trapped")]
    Trap,
    /// The step's output exceeds the cap.
    #[error("the step's output is {bytes} bytes, over the {cap}-byte limit")]
    OutputTooLarge {
        /// Its size.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// With the step's output, the job's outputs together exceed their cap.
    #[error("with this output the job's outputs come to {bytes} bytes, over the {cap}-byte limit")]
    JobOutputsTooLarge {
        /// Their total with this output.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// The step answered something the contract does not allow.
    #[error("the step answered a malformed outcome: {0}")]
    MalformedOutput(&'static str),
    /// The sandbox pool is full.
    #[error("no sandbox slot was free")]
    Capacity,
    /// The component could not be instantiated.
    #[error("the component could not be instantiated")]
    Instantiation,
}

impl SandboxFault {
    /// A stable code for records and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Deadline => "sandbox.deadline",
            Self::OutOfFuel => "sandbox.out-of-fuel",
            Self::MemoryLimit => "sandbox.memory-limit",
            Self::StackOverflow => "sandbox.stack-overflow",
            Self::OutOfBounds => "sandbox.out-of-bounds",
            Self::Panic => "sandbox.panic",
            Self::Trap => "sandbox.trap",
            Self::OutputTooLarge { .. } => "sandbox.output-too-large",
            Self::JobOutputsTooLarge { .. } => "sandbox.job-outputs-too-large",
            Self::MalformedOutput(_) => "sandbox.malformed-output",
            Self::Capacity => "sandbox.capacity",
            Self::Instantiation => "sandbox.instantiation",
        }
    }
}

/// How a step call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StepRun {
    /// The guest reported an outcome.
    Outcome(GuestOutcome),
    /// The sandbox stopped the guest.
    Fault {
        /// What happened.
        fault: SandboxFault,
        /// Host-side detail for the log (never for the job's record).
        detail: String,
    },
}

impl StepRun {
    /// Whether the attempt failed: a fault, or a `retryable` or `refused` outcome.
    pub fn failed(&self) -> bool {
        matches!(
            self,
            Self::Fault { .. } | Self::Outcome(GuestOutcome::Retryable { .. } | GuestOutcome::Refused { .. })
        )
    }
}

/// One step call: how it ended, what the guest last wrote to stderr when the attempt
/// failed — the guest's own words (a traceback, a panic message), shown to its tenant —
/// and every line it logged or printed, for the job's logs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepCall {
    /// How it ended.
    pub run: StepRun,
    /// The last lines of stderr (capped), when the attempt failed and the guest printed.
    pub stderr: Option<String>,
    /// Its `log` lines, then its stdout's and its stderr's lines, each capped; a last
    /// line of the host's says what the caps dropped.
    pub lines: Vec<crate::GuestLine>,
}

/// How a hook call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookRun {
    /// The hook succeeded.
    Done,
    /// The hook reported a failure (code, message).
    Failed {
        /// Stable reason.
        code: String,
        /// Operator-safe explanation.
        message: String,
    },
    /// The sandbox stopped the hook.
    Fault {
        /// What happened.
        fault: SandboxFault,
        /// Host-side detail for the log.
        detail: String,
    },
}
