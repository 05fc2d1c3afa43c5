//! Spindle's pure core: the job, step and run-control state machines and the policies
//! around them.
//!
//! Nothing here does I/O, reads a clock, draws randomness or awaits. Every transition
//! takes the state, an event and `now`, and answers what to write and what to do as data
//! (see [`job::transition`]); the engine owns the I/O. This is what makes every rule of
//! the seeds testable in microseconds, exhaustively, with no database.
//!
//! - [`job`]: the job machine (seed 001) with run control (seed 003).
//! - [`step`]: the step machine (seed 002).
//! - [`queue`]: where an open job waits for its next step (part of the job machine).
//! - [`reconcile`]: what the reconciler feeds the job machine.
//! - [`capacity`]: fair tags, submission quotas and running limits, decided from facts.
//! - [`breaker`]: the per (tenant, kind) fault breaker, with hysteresis.
//! - [`policy`]: priority layers and candidate order, backoff, hysteresis.
//! - [`table`]: the machines as tables, and their mermaid diagrams.
//! - [`reports`]: what a step's sandbox reports besides its outcome: log lines, requests.
//! - [`schedule`]: the cron schedule machine: exact firing times, catch-up and overlap.
//! - [`workflow`]: waits for children and signals, as data the job machine carries.
//! - [`upgrade`]: the storage format gate, for hosts of two builds on one database.

pub mod breaker;
pub mod capacity;
pub mod failure;
pub mod history;
pub mod ids;
pub mod job;
pub mod policy;
pub mod progress;
pub mod queue;
pub mod reconcile;
pub mod reports;
pub mod schedule;
pub mod step;
pub mod table;
pub mod time;
pub mod upgrade;
pub mod workflow;

pub use failure::SafeFailure;
pub use history::HistoryEvent;
pub use ids::{Actor, Fence, JobId};
pub use job::{
    Effect, EffectOrder, Job, JobEvent, JobState, KindRules, Record, Refusal, StepReport, Submission, Transition,
    transition,
};
pub use queue::QueueState;
pub use reconcile::{Evidence, ReconcilePolicy};
pub use step::{Step, StepState};
pub use time::Timestamp;
