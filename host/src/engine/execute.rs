//! Running claimed steps: claim, call the sandbox, turn what it answers into a step
//! report, and settle it under the claim's fence.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use spindle_core::failure::{SafeFailure, for_log};
use spindle_core::job::{JobEvent, StepReport};
use spindle_core::policy::backoff::Backoff;
use spindle_core::step::{Partial, StepState};
use spindle_core::{Fence, JobState};
use spindle_runtime::{GuestOutcome, HeartbeatReply, SandboxFault, StepCall, StepInput, StepRun};
use tokio::sync::Mutex;
use tracing::Instrument as _;

use super::meter::StepUsage;
use super::supervisor::{Supervisor, Watch};
use super::{Committed, Engine, EngineError, Writer};
use crate::store::{ClaimFilter, JobRecord};

/// How running a claimed step ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The outcome was committed; the job is now in this state.
    Settled(JobState),
    /// The claim was stale when the outcome came back: nothing was committed.
    Stale,
    /// The engine could not commit (a store failure); the claim will lapse and be rescued.
    Failed(String),
    /// The claim had lapsed (or would lapse before its first heartbeat) by the time its
    /// step was to run — its host paused, or waited on the database, between stamping
    /// the claim and starting the guest. Nothing ran: another host may already hold its
    /// lease keys. The claim is rescued like any lapsed one.
    Lapsed,
}

/// A finished step execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    /// The job.
    pub job: spindle_core::JobId,
    /// What happened.
    pub outcome: Outcome,
}

/// A short reference that ties a record's safe failure to the host log lines with detail.
fn correlation() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_owned()
}

impl Engine {
    /// The span of one step call under the job's trace parent, with the claim's span
    /// before it; none unless the host exports spans.
    async fn step_span(&self, record: &JobRecord, claim: &spindle_core::job::Claim) -> tracing::Span {
        if !crate::telemetry::enabled() {
            return tracing::Span::none();
        }
        let parent = match self.store.traceparent(record.job.id).await {
            Ok(parent) => parent,
            Err(e) => {
                tracing::warn!(job = %record.job.id, error = %e, "could not read the job's trace parent");
                None
            }
        };
        let step = record.job.steps.get(claim.step).map(|s| s.key.as_str()).unwrap_or_default();
        let claimed_at = std::time::UNIX_EPOCH + Duration::from_micros(claim.claimed_at.as_micros().max(0) as u64);
        crate::telemetry::claim_span(
            parent.as_deref(),
            claimed_at,
            vec![
                opentelemetry::KeyValue::new("job", record.job.id.to_string()),
                opentelemetry::KeyValue::new("kind", record.kind.clone()),
                opentelemetry::KeyValue::new("step", step.to_owned()),
                opentelemetry::KeyValue::new("fence", claim.fence.0 as i64),
            ],
        );
        let span = tracing::info_span!(
            target: "spindle::trace",
            "step",
            job = %record.job.id,
            tenant = %record.tenant,
            kind = %record.kind,
            version = record.kind_version,
            step,
            fence = claim.fence.0,
            outcome = tracing::field::Empty,
        );
        if let Some(parent) = parent {
            crate::telemetry::set_parent(&span, &parent);
        }
        span
    }

    /// Calls the sandbox for the step at `index` and maps its answer to a report.
    async fn run(&self, record: &JobRecord, index: usize, supervisor: Arc<Supervisor>) -> StepReport {
        let Some(step) = record.job.steps.get(index) else {
            return StepReport::Release;
        };
        let (resolved, input) = match self.step_input(record, index).await {
            Ok(prepared) => prepared,
            Err(report) => return report,
        };
        let spec = &resolved.kind.spec;
        let policy = Backoff {
            initial: Duration::from_millis(u64::from(spec.retry.initial_backoff_ms)),
            max: Duration::from_millis(u64::from(spec.retry.max_backoff_ms)),
        };
        let started = Instant::now();
        let sandbox_span = if crate::telemetry::enabled() {
            tracing::info_span!(target: "spindle::trace", "sandbox", attempt = input.attempt, sandbox_us = tracing::field::Empty)
        } else {
            tracing::Span::none()
        };
        let StepCall { run, stderr, lines } = self
            .registry
            .runtime()
            .run_step(&resolved.kind, input, supervisor.clone())
            .instrument(sandbox_span.clone())
            .await;
        sandbox_span.record("sandbox_us", super::group_commit::micros(started.elapsed()));
        self.account(record, step, &run, started.elapsed(), lines, &supervisor).await;
        let attempt = step.attempts_made().max(1);
        self.report_of(record, step, attempt, run, stderr, policy).await
    }

    /// What the step at `index` is called with, and the version it runs: a failure to
    /// read any of it (the version, its capabilities, what it awaited) is a retryable
    /// report, the detail in the log under a correlation id.
    async fn step_input(
        &self,
        record: &JobRecord,
        index: usize,
    ) -> Result<(crate::registry::Resolved, StepInput), StepReport> {
        let step = &record.job.steps[index];
        let unavailable = |code: &str, message: &str, error: &dyn std::fmt::Display| {
            let corr = correlation();
            tracing::error!(job = %record.job.id, kind = %record.kind, version = record.kind_version, correlation = corr, error = %error, "{message}");
            let failure =
                SafeFailure { code: code.into(), message: message.into(), correlation: Some(corr), guest_stderr: None };
            StepReport::Retryable { failure, backoff: self.config.rescue_backoff }
        };
        let resolved = self
            .registry
            .version(&record.tenant, &record.kind, record.kind_version)
            .await
            .map_err(|e| unavailable("kind.unavailable", "the job's kind version could not be loaded", &e))?;
        let prior = record
            .job
            .steps
            .iter()
            .filter(|s| s.state == StepState::Completed)
            .map(|s| (s.key.clone(), s.output.clone().unwrap_or_default()))
            .collect();
        let capabilities = self.capabilities(record, &resolved.deployment).await.map_err(|e| {
            unavailable("capabilities.unavailable", "the step's secrets or outbound rules could not be read", &e)
        })?;
        let awaited = self.awaited(record, index).await.map_err(|e| {
            unavailable("workflow.awaited-unavailable", "the results the step awaited could not be read", &e)
        })?;
        let job_id = record.job.id.to_string();
        let input = StepInput {
            idempotency_key: format!("{job_id}/{}", step.key),
            job_id,
            step: step.key.clone(),
            attempt: step.attempts_made().max(1),
            payload: record.payload.clone(),
            prior,
            cursor: step.cursor.clone(),
            capabilities,
            awaited,
            ceilings: self.ceilings(&record.tenant).await,
        };
        Ok((resolved, input))
    }

    /// What a call leaves besides its outcome: its log lines kept (before the outcome
    /// commits, so that a follower of the job's logs has every line of an attempt once
    /// it sees the attempt end), the kind's breaker told, usage metered, its outbound
    /// requests recorded.
    async fn account(
        &self,
        record: &JobRecord,
        step: &spindle_core::Step,
        run: &StepRun,
        sandbox: Duration,
        lines: Vec<spindle_runtime::GuestLine>,
        supervisor: &Supervisor,
    ) {
        let attempt = step.attempts_made().max(1);
        supervisor.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(lines);
        supervisor.keep_lines(record.job.id).await;
        self.counters.observe_step(sandbox);
        let calls = std::mem::take(&mut *supervisor.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let claimed_at = record.job.claim.as_ref().map_or(record.job.last_activity_at, |c| c.claimed_at);
        let fault = matches!(run, StepRun::Fault { fault, .. } if !matches!(fault, SandboxFault::Capacity));
        if !matches!(run, StepRun::Fault { fault: SandboxFault::Capacity, .. }) {
            let wake = self.breakers.report(&record.tenant, &record.kind, record.kind_version, fault, self.now());
            self.wake_held(wake.into_iter().collect()).await;
        }
        self.meter().record(
            &record.tenant,
            &record.kind,
            StepUsage { sandbox, wall: self.now().since(claimed_at), fault, outbound_requests: calls.len() as u64 },
        );
        if !calls.is_empty()
            && let Err(e) = self.store.record_calls(record.job.id, &step.key, attempt, &calls, self.now()).await
        {
            tracing::error!(job = %record.job.id, step = %step.key, error = %e, "could not record the step's outbound requests");
        }
    }

    /// The report a call's answer comes to.
    async fn report_of(
        &self,
        record: &JobRecord,
        step: &spindle_core::Step,
        attempt: u32,
        run: StepRun,
        stderr: Option<String>,
        policy: Backoff,
    ) -> StepReport {
        match run {
            StepRun::Outcome(GuestOutcome::Complete(output)) => StepReport::Complete { output },
            StepRun::Outcome(GuestOutcome::Skip(reason)) => StepReport::Skip { reason },
            StepRun::Outcome(GuestOutcome::More { cursor, done, total }) => {
                StepReport::More { cursor, partial: Partial { done, total } }
            }
            StepRun::Outcome(GuestOutcome::Snooze(delay)) => StepReport::Snooze { delay },
            StepRun::Outcome(GuestOutcome::AwaitChildren { children, join, leftover, cursor }) => {
                self.fan_out_report(record, children, join, leftover, cursor).await
            }
            StepRun::Outcome(GuestOutcome::AwaitSignal { name, timeout, cursor }) => {
                StepReport::AwaitSignal { name, timeout, cursor }
            }
            StepRun::Outcome(GuestOutcome::Refused { code, message }) => {
                StepReport::Refused { failure: SafeFailure::permanent(code, message).with_guest_stderr(stderr) }
            }
            StepRun::Outcome(GuestOutcome::Retryable { code, message }) => {
                // The detail stays in the log; the record keeps the code and a reference.
                let corr = correlation();
                tracing::info!(job = %record.job.id, step = %step.key, attempt, code, correlation = corr, "retryable step failure: {}", for_log(&message));
                StepReport::Retryable {
                    failure: SafeFailure::transient(code, corr).with_guest_stderr(stderr),
                    backoff: self.backoff(attempt, policy),
                }
            }
            StepRun::Fault { fault: SandboxFault::Capacity, detail } => {
                // The host was full, not the guest at fault: hand the step back unconsumed.
                tracing::warn!(job = %record.job.id, step = %step.key, "sandbox pool full: {}", for_log(&detail));
                StepReport::Release
            }
            StepRun::Fault { fault, detail } => {
                self.counters.sandbox_faults.fetch_add(1, Ordering::Relaxed);
                let corr = correlation();
                tracing::warn!(job = %record.job.id, step = %step.key, attempt, code = fault.code(), correlation = corr, "sandbox fault: {}", for_log(&detail));
                if let Err(e) = self.store.bump_counter(&format!("fault.{}", fault.code()), 1).await {
                    tracing::error!(error = %e, "could not count a sandbox fault");
                }
                self.raise_alert(record, fault.code(), &fault.to_string()).await;
                let failure = SafeFailure {
                    code: fault.code().into(),
                    message: fault.to_string(),
                    correlation: Some(corr),
                    guest_stderr: stderr,
                };
                StepReport::Retryable { failure, backoff: self.backoff(attempt, policy) }
            }
        }
    }

    /// Commits `report` under `fence`, deriving again from a fresh read when a
    /// concurrent write (a cancel, a pause) got there first.
    pub(crate) async fn settle(
        &self,
        mut record: JobRecord,
        fence: Fence,
        report: StepReport,
        mut claim_next: Option<ClaimFilter>,
    ) -> (Outcome, Option<JobRecord>) {
        let event = JobEvent::Report { fence, report };
        let mut claimed = None;
        for _ in 0..=self.config.conflict_retries {
            // Only the first try asks for a next job: one is enough.
            let mut next = None;
            let result = self.commit_next(&record, &event, Writer::Holder, claim_next.take(), &mut next).await;
            if next.is_some() {
                claimed = next;
            }
            match result {
                Ok(Committed::Written(r) | Committed::Unchanged(r)) => {
                    self.counters.steps_settled.fetch_add(1, Ordering::Relaxed);
                    return (Outcome::Settled(r.job.state), claimed);
                }
                Ok(Committed::Conflict) => {
                    self.counters.conflicts.fetch_add(1, Ordering::Relaxed);
                    match self.store.job(record.job.id).await {
                        Ok(Some(fresh)) => record = fresh,
                        Ok(None) => return (Outcome::Failed("the job disappeared".into()), claimed),
                        Err(e) => return (Outcome::Failed(e.to_string()), claimed),
                    }
                }
                Err(EngineError::Refused { refusal, .. }) => {
                    self.counters.stale_commits.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(job = %record.job.id, %fence, code = refusal.code(), "step outcome not committed: {refusal}");
                    return (Outcome::Stale, claimed);
                }
                Err(e) => {
                    tracing::error!(job = %record.job.id, error = %e, "could not commit a step outcome");
                    return (Outcome::Failed(e.to_string()), claimed);
                }
            }
        }
        (Outcome::Failed("contention".into()), claimed)
    }
}

/// Counts a step as running on this host while it lives (a step whose call is dropped
/// mid-way still leaves the count).
struct Running<'a>(&'a super::Counters);

impl<'a> Running<'a> {
    fn new(counters: &'a super::Counters) -> Self {
        counters.steps_running.fetch_add(1, Ordering::Relaxed);
        Self(counters)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.steps_running.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The filter of a worker's next claim, asked for when its step has run.
pub type NextFilter<'a> = Box<dyn FnOnce() -> ClaimFilter + Send + 'a>;

impl super::Execution<'_> {
    /// Claims up to `limit` ready jobs for this host (one transaction), best first.
    pub async fn claim(&self, limit: u32) -> Result<Vec<JobRecord>, EngineError> {
        self.claim_filtered(limit, &ClaimFilter::default()).await
    }

    /// [`claim`](Self::claim) among the jobs `filter` admits.
    pub async fn claim_filtered(&self, limit: u32, filter: &ClaimFilter) -> Result<Vec<JobRecord>, EngineError> {
        if self.config.draining || self.may_write().await.is_err() {
            // Draining, or the storage format gate refuses this host: nothing new.
            return Ok(Vec::new());
        }
        let now = self.now();
        let started = Instant::now();
        let claimed = self.store.claim(limit, now, filter, self.deriver()).await?;
        self.counters.claims.fetch_add(1, Ordering::Relaxed);
        self.counters.claimed_jobs.fetch_add(claimed.len() as u64, Ordering::Relaxed);
        self.counters.claim_micros.fetch_add(super::group_commit::micros(started.elapsed()), Ordering::Relaxed);
        Ok(claimed)
    }

    /// Whether a job `filter` admits is ready (a read: no claim, no write).
    pub async fn any_ready(&self, filter: &ClaimFilter) -> Result<bool, EngineError> {
        Ok(self.store.any_ready(filter).await?)
    }

    /// Runs the step `record`'s claim holds, and settles its outcome.
    pub async fn execute(&self, record: JobRecord) -> Executed {
        self.execute_then_claim(record, None).await.0
    }

    /// [`execute`](Self::execute), and when `next` is given, claims this worker's next
    /// job (among the jobs the filter admits) in the transaction that settles this one.
    /// The filter is asked for once the step has run: what the host's slots hold then
    /// decides which tenants a claim passes over.
    pub async fn execute_then_claim(
        &self,
        record: JobRecord,
        next: Option<NextFilter<'_>>,
    ) -> (Executed, Option<JobRecord>) {
        let job = record.job.id;
        let Some(claim) = record.job.claim.clone() else {
            return (Executed { job, outcome: Outcome::Failed("the record holds no claim".into()) }, None);
        };
        // A claim is never run past its lease: one that lapsed before its guest starts
        // (or cannot be renewed in time) is left to be rescued.
        let now = self.now();
        if claim.expires_at <= now.plus(self.config.heartbeat_interval) {
            self.counters.lapsed_before_run.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                job = %job,
                fence = %claim.fence,
                late_ms = now.since(claim.claimed_at).as_millis() as u64,
                "a claim lapsed before its step could run (the host paused or waited on the database); nothing ran, \
                 and it will be rescued"
            );
            return (Executed { job, outcome: Outcome::Lapsed }, None);
        }
        let supervisor = Arc::new(Supervisor {
            engine: self.shared(),
            fence: claim.fence,
            state: Mutex::new(Watch {
                record: record.clone(),
                renewed: Instant::now(),
                reply: HeartbeatReply::Proceed,
            }),
            calls: std::sync::Mutex::default(),
            step: record.job.steps.get(claim.step).map(|s| s.key.clone()).unwrap_or_default(),
            attempt: record.job.steps.get(claim.step).map_or(1, |s| s.attempts_made().max(1)),
            lines: std::sync::Mutex::default(),
        });
        let _running = Running::new(&self.counters);
        let span = self.step_span(&record, &claim).await;
        let report = self.run(&record, claim.step, supervisor.clone()).instrument(span.clone()).await;
        let latest = supervisor.state.lock().await.record.clone();
        let next = next.map(|filter| filter());
        let commit = if span.is_none() {
            tracing::Span::none()
        } else {
            tracing::info_span!(target: "spindle::trace", parent: &span, "commit", state = tracing::field::Empty)
        };
        let (outcome, claimed) = self.settle(latest, claim.fence, report, next).instrument(commit.clone()).await;
        if let Outcome::Settled(state) = &outcome {
            commit.record("state", state.as_str());
        }
        span.record("outcome", format!("{outcome:?}"));
        (Executed { job, outcome }, claimed)
    }
}
