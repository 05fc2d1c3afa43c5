//! Running claimed steps: claim, call the sandbox, turn what it answers into a step
//! report, and settle it under the claim's fence. Plus the hooks: the failure effect
//! before a failed settlement, and after-commit effects from the outbox.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use spindle_core::failure::SafeFailure;
use spindle_core::job::{JobEvent, StepReport};
use spindle_core::policy::backoff::Backoff;
use spindle_core::step::{Partial, StepState};
use spindle_core::{Fence, HistoryEvent, JobState, transition};
use spindle_runtime::{
    GuestOutcome, HeartbeatReply, Hook, HookRun, JobSummary, SandboxFault, StepControl, StepInput, StepRun,
};
use tokio::sync::Mutex;

use super::{Committed, Engine, EngineError, Writer, plan};
use crate::store::{JobRecord, JobWrite, OutboxEffect};

/// How running a claimed step ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The outcome was committed; the job is now in this state.
    Settled(JobState),
    /// The claim was stale when the outcome came back: nothing was committed.
    Stale,
    /// The engine could not commit (a store failure); the claim will lapse and be rescued.
    Failed(String),
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
    /// Claims up to `limit` ready jobs for this host (one transaction), best first.
    pub async fn claim(&self, limit: u32) -> Result<Vec<JobRecord>, EngineError> {
        self.claim_filtered(limit, &crate::store::ClaimFilter::default()).await
    }

    /// [`claim`](Self::claim) among the jobs `filter` admits.
    pub async fn claim_filtered(
        &self,
        limit: u32,
        filter: &crate::store::ClaimFilter,
    ) -> Result<Vec<JobRecord>, EngineError> {
        let now = self.now();
        let derive = self.claim_derive(now);
        let started = Instant::now();
        let claimed = self.store.claim_filtered(limit, now, filter, &derive).await?;
        self.counters.claims.fetch_add(1, Ordering::Relaxed);
        self.counters.claimed_jobs.fetch_add(claimed.len() as u64, Ordering::Relaxed);
        self.counters.claim_micros.fetch_add(super::group_commit::micros(started.elapsed()), Ordering::Relaxed);
        Ok(claimed)
    }

    /// How this host claims a job at `now`: the core's claim, planned as a write that
    /// takes the job's lease keys.
    pub(crate) fn claim_derive(
        &self,
        now: spindle_core::Timestamp,
    ) -> impl Fn(&JobRecord) -> Option<JobWrite> + Send + Sync + use<> {
        let owner = self.config.host_id.clone();
        let writer = Writer::Claimer { owner: owner.clone() };
        let event = JobEvent::Claim { owner, ttl: self.config.lease_ttl };
        move |record: &JobRecord| -> Option<JobWrite> {
            let t = transition(&record.job, &event, now).ok()?;
            plan(record, t, &writer, now).ok().map(|p| p.write)
        }
    }

    /// Runs the step `record`'s claim holds, and settles its outcome.
    pub async fn execute(self: &Arc<Self>, record: JobRecord) -> Executed {
        self.execute_then_claim(record, None).await.0
    }

    /// [`execute`](Self::execute), and when `next` is given, claims this worker's next
    /// job (among the jobs the filter admits) in the transaction that settles this one.
    pub async fn execute_then_claim(
        self: &Arc<Self>,
        record: JobRecord,
        next: Option<crate::store::ClaimFilter>,
    ) -> (Executed, Option<JobRecord>) {
        let job = record.job.id;
        let Some(claim) = record.job.claim.clone() else {
            return (Executed { job, outcome: Outcome::Failed("the record holds no claim".into()) }, None);
        };
        let supervisor = Arc::new(Supervisor {
            engine: self.clone(),
            fence: claim.fence,
            state: Mutex::new(Watch {
                record: record.clone(),
                renewed: Instant::now(),
                reply: HeartbeatReply::Proceed,
            }),
        });
        let report = self.run(&record, claim.step, supervisor.clone()).await;
        let latest = supervisor.state.lock().await.record.clone();
        let (outcome, claimed) = self.settle(latest, claim.fence, report, next).await;
        (Executed { job, outcome }, claimed)
    }

    /// Calls the sandbox for the step at `index` and maps its answer to a report.
    async fn run(&self, record: &JobRecord, index: usize, supervisor: Arc<Supervisor>) -> StepReport {
        let Some(step) = record.job.steps.get(index) else {
            return StepReport::Release;
        };
        let resolved = match self.registry.version(&record.tenant, &record.kind, record.kind_version).await {
            Ok(resolved) => resolved,
            Err(e) => {
                let corr = correlation();
                tracing::error!(job = %record.job.id, kind = %record.kind, version = record.kind_version, correlation = corr, error = %e, "kind version unavailable");
                let failure = SafeFailure {
                    code: "kind.unavailable".into(),
                    message: "the job's kind version could not be loaded".into(),
                    correlation: Some(corr),
                };
                return StepReport::Retryable { failure, backoff: self.config.rescue_backoff };
            }
        };
        let spec = &resolved.kind.spec;
        let policy = Backoff {
            initial: Duration::from_millis(u64::from(spec.retry.initial_backoff_ms)),
            max: Duration::from_millis(u64::from(spec.retry.max_backoff_ms)),
        };
        let prior = record
            .job
            .steps
            .iter()
            .filter(|s| s.state == StepState::Completed)
            .map(|s| (s.key.clone(), s.output.clone().unwrap_or_default()))
            .collect();
        let job_id = record.job.id.to_string();
        let input = StepInput {
            idempotency_key: format!("{job_id}/{}", step.key),
            job_id,
            step: step.key.clone(),
            attempt: step.attempts_made().max(1),
            payload: record.payload.clone(),
            prior,
            cursor: step.cursor.clone(),
        };
        let started = Instant::now();
        let run = self.registry.runtime().run_step(&resolved.kind, input, supervisor).await;
        self.counters.observe_step(started.elapsed());
        let attempt = step.attempts_made().max(1);
        match run {
            StepRun::Outcome(GuestOutcome::Complete(output)) => StepReport::Complete { output },
            StepRun::Outcome(GuestOutcome::Skip(reason)) => StepReport::Skip { reason },
            StepRun::Outcome(GuestOutcome::More { cursor, done, total }) => {
                StepReport::More { cursor, partial: Partial { done, total } }
            }
            StepRun::Outcome(GuestOutcome::Snooze(delay)) => StepReport::Snooze { delay },
            StepRun::Outcome(GuestOutcome::Refused { code, message }) => {
                StepReport::Refused { failure: SafeFailure::permanent(code, message) }
            }
            StepRun::Outcome(GuestOutcome::Retryable { code, message }) => {
                // The detail stays in the log; the record keeps the code and a reference.
                let corr = correlation();
                tracing::info!(job = %record.job.id, step = %step.key, attempt, code, correlation = corr, "retryable step failure: {message}");
                StepReport::Retryable {
                    failure: SafeFailure::transient(code, corr),
                    backoff: self.backoff(attempt, policy),
                }
            }
            StepRun::Fault { fault: SandboxFault::Capacity, detail } => {
                // The host was full, not the guest at fault: hand the step back unconsumed.
                tracing::warn!(job = %record.job.id, step = %step.key, "sandbox pool full: {detail}");
                StepReport::Release
            }
            StepRun::Fault { fault, detail } => {
                self.counters.sandbox_faults.fetch_add(1, Ordering::Relaxed);
                let corr = correlation();
                tracing::warn!(job = %record.job.id, step = %step.key, attempt, code = fault.code(), correlation = corr, "sandbox fault: {detail}");
                if let Err(e) = self.store.bump_counter(&format!("fault.{}", fault.code()), 1).await {
                    tracing::error!(error = %e, "could not count a sandbox fault");
                }
                let failure =
                    SafeFailure { code: fault.code().into(), message: fault.to_string(), correlation: Some(corr) };
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
        mut claim_next: Option<crate::store::ClaimFilter>,
    ) -> (Outcome, Option<JobRecord>) {
        let event = JobEvent::Report { fence, report };
        let mut claimed = None;
        for _ in 0..=self.config.conflict_retries {
            // Only the first try asks for a next job: one is enough.
            let mut next = None;
            let result = self.commit_next(&record, &event, &Writer::Holder, claim_next.take(), &mut next).await;
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

    /// Runs a hook of the job's kind; answers the failure code when it failed.
    pub(crate) async fn run_hook(&self, record: &JobRecord, hook: Hook) -> Option<String> {
        let resolved = match self.registry.version(&record.tenant, &record.kind, record.kind_version).await {
            Ok(resolved) => resolved,
            Err(e) => {
                tracing::error!(job = %record.job.id, error = %e, "cannot load the kind to run a hook");
                return Some("kind.unavailable".into());
            }
        };
        let summary = JobSummary {
            job_id: record.job.id.to_string(),
            payload: record.payload.clone(),
            outputs: record
                .job
                .steps
                .iter()
                .filter(|s| s.state == StepState::Completed)
                .map(|s| (s.key.clone(), s.output.clone().unwrap_or_default()))
                .collect(),
            failure: record.job.failure.as_ref().map(|f| (f.code.clone(), f.message.clone())),
        };
        match self.registry.runtime().run_hook(&resolved.kind, hook, summary).await {
            HookRun::Done => None,
            HookRun::Failed { code, message } => {
                tracing::warn!(job = %record.job.id, ?hook, code, "hook failed: {message}");
                Some(code)
            }
            HookRun::Fault { fault, detail } => {
                tracing::warn!(job = %record.job.id, ?hook, code = fault.code(), "hook faulted: {detail}");
                Some(fault.code().to_owned())
            }
        }
    }

    /// Seed 001: the business failure effect runs before the failed settlement is
    /// written. If it fails, the settlement still happens and the effect is retried
    /// from the outbox.
    pub(crate) async fn failure_effect_before(&self, write: &mut JobWrite) {
        let failed = self.run_hook(&write.record, Hook::OnFailure).await;
        let ran =
            HistoryEvent::EffectRan { effect: OutboxEffect::FailureEffect.as_str().into(), failed: failed.clone() };
        let at = write.history.iter().position(|h| matches!(h, HistoryEvent::Failed { .. })).unwrap_or(0);
        write.history.insert(at, ran);
        if failed.is_some() {
            self.counters.alerts.fetch_add(1, Ordering::Relaxed);
            write.outbox.push(OutboxEffect::FailureEffect);
        }
    }

    /// Runs due after-commit effects (success notifications, failure effects of
    /// corrected settlements, retried failure effects). Answers how many ran.
    pub async fn run_outbox(&self, limit: u32) -> Result<usize, EngineError> {
        const LEASE: Duration = Duration::from_secs(60);
        const MAX_ATTEMPTS: i64 = 5;
        let now = self.now();
        let items = self.store.outbox_claim(now, i64::try_from(LEASE.as_micros()).unwrap_or(i64::MAX), limit).await?;
        let count = items.len();
        for item in items {
            let Some(record) = self.store.job(item.job_id).await? else {
                self.store.outbox_done(item.id).await?;
                continue;
            };
            let hook = match item.effect {
                OutboxEffect::NotifySuccess => Hook::OnSuccess,
                OutboxEffect::FailureEffect => Hook::OnFailure,
            };
            let failed = self.run_hook(&record, hook).await;
            let ran = HistoryEvent::EffectRan { effect: item.effect.as_str().into(), failed: failed.clone() };
            self.store.append_history(item.job_id, &[ran], self.now()).await?;
            if failed.is_some() && item.attempts + 1 < MAX_ATTEMPTS {
                let delay = Duration::from_secs(2u64.saturating_pow(u32::try_from(item.attempts + 1).unwrap_or(10)));
                self.store.outbox_retry(item.id, self.now().plus(delay)).await?;
            } else {
                if failed.is_some() {
                    self.counters.alerts.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(job = %item.job_id, effect = item.effect.as_str(), "operational alert: an effect failed every attempt");
                }
                self.store.outbox_done(item.id).await?;
            }
        }
        Ok(count)
    }
}

/// What a supervisor knows about the step it watches.
#[derive(Debug)]
struct Watch {
    record: JobRecord,
    renewed: Instant,
    reply: HeartbeatReply,
}

/// The engine's side of a running step: heartbeats renew the claim (at most every
/// `heartbeat_interval`) and answer whether to stop.
#[derive(Debug)]
struct Supervisor {
    engine: Arc<Engine>,
    fence: Fence,
    state: Mutex<Watch>,
}

impl StepControl for Supervisor {
    fn heartbeat(
        &self,
        progress: Option<Partial>,
    ) -> std::pin::Pin<Box<dyn Future<Output = HeartbeatReply> + Send + '_>> {
        Box::pin(async move {
            let mut watch = self.state.lock().await;
            if watch.renewed.elapsed() < self.engine.config.heartbeat_interval || watch.reply != HeartbeatReply::Proceed
            {
                return watch.reply;
            }
            let event = JobEvent::Heartbeat { fence: self.fence, ttl: self.engine.config.lease_ttl, progress };
            let mut reply = HeartbeatReply::StopLeaseLost;
            for _ in 0..=self.engine.config.conflict_retries {
                match self.engine.commit(&watch.record, &event, &Writer::Holder).await {
                    Ok(Committed::Written(r) | Committed::Unchanged(r)) => {
                        reply = r.job.heartbeat_reply(self.fence);
                        watch.record = r;
                        break;
                    }
                    Ok(Committed::Conflict) => match self.engine.store.job(watch.record.job.id).await {
                        Ok(Some(fresh)) => watch.record = fresh,
                        _ => break,
                    },
                    Err(EngineError::Refused { refusal: spindle_core::Refusal::StaleFence { .. }, .. }) => {
                        // Another claim (or a lost lease key) supersedes this one.
                        reply = HeartbeatReply::StopLeaseLost;
                        break;
                    }
                    Err(EngineError::Refused { .. }) => {
                        if let Ok(Some(fresh)) = self.engine.store.job(watch.record.job.id).await {
                            reply = fresh.job.heartbeat_reply(self.fence);
                        }
                        break;
                    }
                    Err(e) => {
                        // A store hiccup is not the step's problem: let it go on; its
                        // claim lapses if the store stays away.
                        tracing::warn!(job = %watch.record.job.id, error = %e, "heartbeat not recorded");
                        reply = HeartbeatReply::Proceed;
                        break;
                    }
                }
            }
            watch.renewed = Instant::now();
            watch.reply = reply;
            reply
        })
    }
}
