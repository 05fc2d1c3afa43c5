//! The engine: for each event, load the job, call the pure core, and write what it
//! answers in one version-checked transaction; on a conflict, reread and derive again
//! within a bounded budget (seed 001, concurrency).
//!
//! - [`Engine::submit`]: creates jobs pinned to the kind's current version.
//! - [`Engine::command`]: pause, resume, cancel, restart, retry.
//! - [`execute`]: runs a claimed step in the sandbox and settles its outcome.
//! - [`Engine::rescue_lapsed`], [`Engine::run_outbox`]: recovery and after-commit effects.

mod execute;
mod group_commit;
mod plan;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};
use spindle_core::job::{JobEvent, KindRules, Submission};
use spindle_core::policy::backoff::Backoff;
use spindle_core::policy::priority::Priority;
use spindle_core::{Actor, Job, JobId, JobState, Refusal, Timestamp, transition};
use thiserror::Error;
use tokio::sync::{Notify, broadcast};

use crate::clock::{Clock, new_job_id};
use crate::registry::{Registry, RegistryError};
use crate::store::{HistoryEntry, Inserted, JobRecord, NewJob, Storage, StoreError, TenantId, Updated, WriteOutcome};

pub use execute::{Executed, Outcome};
pub(crate) use plan::{Actor as Writer, Plan, plan};

/// Engine settings. Defaults are documented where they are defined.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// This host's name in claims and singleton leases.
    pub host_id: String,
    /// How long a claim lasts without renewal (default 60 s). It must outlast one step
    /// call (the sandbox's step timeout): a step that never heartbeats still commits
    /// before its claim lapses; a crashed host's claims lapse after it and are rescued.
    pub lease_ttl: Duration,
    /// Least time between two heartbeat writes of one step (default 250 ms): a chatty
    /// guest costs the database at most four writes a second, and sees a cancellation
    /// within that delay.
    pub heartbeat_interval: Duration,
    /// Rereads allowed when a write loses a version race (default 8).
    pub conflict_retries: u32,
    /// Largest job input accepted (default 1 MiB); inputs are stored and copied into
    /// every step call.
    pub max_payload_bytes: usize,
    /// Most exclusive lease keys per job (default 16).
    pub max_lease_keys: usize,
    /// Delay before a step whose claim lapsed runs again (default 1 s).
    pub rescue_backoff: Duration,
    /// Seed for the backoff jitter (default: from the OS). Tests fix it.
    pub rng_seed: Option<u64>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            host_id: format!("host-{}", uuid::Uuid::new_v4().simple()),
            lease_ttl: Duration::from_secs(60),
            heartbeat_interval: Duration::from_millis(250),
            conflict_retries: 8,
            max_payload_bytes: 1 << 20,
            max_lease_keys: 16,
            rescue_backoff: Duration::from_secs(1),
            rng_seed: None,
        }
    }
}

/// Why the engine refused or failed a request. Each has a stable code for APIs.
#[derive(Debug, Error)]
pub enum EngineError {
    /// The tenant has no such kind.
    #[error("unknown kind {0:?}")]
    UnknownKind(String),
    /// No such job (for this tenant).
    #[error("job not found")]
    NotFound,
    /// The input is over the cap.
    #[error("the input is {bytes} bytes, over the {cap}-byte limit")]
    PayloadTooLarge {
        /// Its size.
        bytes: usize,
        /// The cap.
        cap: usize,
    },
    /// The request is malformed (a lease key, a priority).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The event does not apply to the job in its current state.
    #[error("{refusal} (the job is {state})")]
    Refused {
        /// Why, as the core said it.
        refusal: Refusal,
        /// The job's state.
        state: JobState,
    },
    /// Too many concurrent writers kept changing the job; the request did nothing.
    #[error("the job kept changing under concurrent writers; try again")]
    Contention,
    /// The registry failed (unknown version, a component that does not load).
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store failed a group commit this write was part of.
    #[error(transparent)]
    StoreShared(Arc<StoreError>),
}

impl EngineError {
    /// A stable, machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::UnknownKind(_) => "unknown-kind",
            Self::NotFound => "not-found",
            Self::PayloadTooLarge { .. } => "payload-too-large",
            Self::Invalid(_) => "invalid-request",
            Self::Refused { .. } => "illegal-transition",
            Self::Contention => "contention",
            Self::Registry(RegistryError::UnknownKind(_)) => "unknown-kind",
            Self::Registry(RegistryError::UnknownVersion { .. }) => "unknown-version",
            Self::Registry(RegistryError::InvalidName(_)) => "invalid-request",
            Self::Registry(RegistryError::Invalid(_)) => "invalid-component",
            Self::Registry(RegistryError::Store(_)) | Self::Store(_) | Self::StoreShared(_) => "internal",
        }
    }
}

/// A submission.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmitRequest {
    /// The kind's name.
    pub kind: String,
    /// The job's input (JSON by convention).
    pub input: Vec<u8>,
    /// Its priority layer.
    pub priority: Priority,
    /// Not before this time.
    pub run_at: Option<Timestamp>,
    /// A second submission with the same key returns the first job.
    pub idempotency_key: Option<String>,
    /// Exclusive lease keys: no two jobs holding one of them run a step at once.
    pub lease_keys: Vec<String>,
}

/// A lease key as stored: the tenant's name, `/`, the key (tenant names hold no `/`).
pub fn tenant_key(tenant: &TenantId, key: &str) -> String {
    format!("{tenant}/{key}")
}

/// A stored lease key as its tenant sees it.
pub fn untenant_key<'a>(tenant: &TenantId, key: &'a str) -> &'a str {
    key.strip_prefix(&format!("{tenant}/")).unwrap_or(key)
}

/// A run-control request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Pause at the next step boundary.
    Pause,
    /// Resume.
    Resume,
    /// Cancel, with a reason.
    Cancel {
        /// Why (nonblank).
        reason: String,
    },
    /// Start a fresh pass.
    Restart,
    /// Retry a failed or cancelled job as a new, linked one.
    Retry,
}

/// Counters the engine keeps for metrics.
#[derive(Debug, Default)]
pub struct Counters {
    /// Step outcomes committed.
    pub steps_settled: AtomicU64,
    /// Sandbox faults.
    pub sandbox_faults: AtomicU64,
    /// Operational alerts (late success after failure, failed effects).
    pub alerts: AtomicU64,
    /// Writes that lost a version race and were derived again.
    pub conflicts: AtomicU64,
    /// Commits refused because the claim was stale.
    pub stale_commits: AtomicU64,
    /// Sum of step call durations, microseconds.
    pub step_micros: AtomicU64,
    /// Step call durations: how many fell at or under each of [`STEP_BUCKETS`].
    pub step_buckets: [AtomicU64; STEP_BUCKETS.len()],
    /// Step calls measured.
    pub step_calls: AtomicU64,
    /// Claim transactions, the jobs they took, and the time they took (µs).
    pub claims: AtomicU64,
    /// See [`claims`](Self::claims).
    pub claimed_jobs: AtomicU64,
    /// See [`claims`](Self::claims).
    pub claim_micros: AtomicU64,
    /// Group-commit transactions, the writes they carried, and their time (µs).
    pub flushes: AtomicU64,
    /// See [`flushes`](Self::flushes).
    pub flushed_writes: AtomicU64,
    /// See [`flushes`](Self::flushes).
    pub flush_micros: AtomicU64,
    /// Next jobs claimed inside group commits, for the workers whose outcome they carried.
    pub claimed_in_commits: AtomicU64,
}

/// Upper bounds (seconds) of the step-duration histogram's buckets.
pub const STEP_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, f64::INFINITY];

impl Counters {
    /// Records one step call's duration.
    pub fn observe_step(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.step_micros.fetch_add(micros, Ordering::Relaxed);
        self.step_calls.fetch_add(1, Ordering::Relaxed);
        let secs = took.as_secs_f64();
        for (bound, bucket) in STEP_BUCKETS.iter().zip(&self.step_buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The engine.
#[derive(Debug)]
pub struct Engine {
    store: Arc<dyn Storage>,
    registry: Arc<Registry>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    rng: std::sync::Mutex<StdRng>,
    wake: Arc<Notify>,
    changes: broadcast::Sender<StateChange>,
    counters: Counters,
    group: group_commit::GroupCommit,
}

/// A job changed state (sent after the change committed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateChange {
    /// The job.
    pub job: JobId,
    /// Its state before.
    pub from: JobState,
    /// Its state now.
    pub to: JobState,
}

impl Engine {
    /// An engine over `store` and `registry`.
    pub fn new(store: Arc<dyn Storage>, registry: Arc<Registry>, clock: Arc<dyn Clock>, config: EngineConfig) -> Self {
        let rng = config.rng_seed.map_or_else(StdRng::from_os_rng, StdRng::seed_from_u64);
        let group = group_commit::GroupCommit::new(store.backend());
        Self {
            store,
            registry,
            clock,
            config,
            rng: std::sync::Mutex::new(rng),
            wake: Arc::new(Notify::new()),
            changes: broadcast::channel(4096).0,
            counters: Counters::default(),
            group,
        }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Storage> {
        &self.store
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The current time, from the injected clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Notified whenever work may have become ready.
    pub fn wake_signal(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// State changes committed by this engine, as they happen: what tests and `wait`
    /// listen to instead of polling.
    pub fn subscribe(&self) -> broadcast::Receiver<StateChange> {
        self.changes.subscribe()
    }

    /// The engine's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Submits a job.
    pub async fn submit(&self, tenant: &TenantId, request: SubmitRequest) -> Result<Inserted, EngineError> {
        let mut out = self.submit_many(tenant, vec![request]).await?;
        out.pop().ok_or_else(|| EngineError::Store(StoreError::Corrupt("no job inserted".into())))
    }

    /// Submits several jobs in one transaction.
    pub async fn submit_many(
        &self,
        tenant: &TenantId,
        requests: Vec<SubmitRequest>,
    ) -> Result<Vec<Inserted>, EngineError> {
        let now = self.now();
        let mut jobs = Vec::with_capacity(requests.len());
        let mut resolved = std::collections::HashMap::new();
        for request in requests {
            self.check_request(&request)?;
            if !resolved.contains_key(&request.kind) {
                let current = match self.registry.current(tenant, &request.kind).await {
                    Err(RegistryError::UnknownKind(kind)) => return Err(EngineError::UnknownKind(kind)),
                    other => other?,
                };
                resolved.insert(request.kind.clone(), current);
            }
            let current = &resolved[&request.kind];
            let spec = &current.kind.spec;
            let rules = KindRules {
                cancellable: spec.cancellable,
                max_attempts: spec.retry.max_attempts,
                failure_effect: spec.has_failure_effect,
                notify_on_success: spec.notifies_on_success,
            };
            let submission = Submission {
                id: new_job_id(),
                rules,
                steps: spec.steps.iter().map(|s| (s.key.clone(), s.weight)).collect(),
                run_at: request.run_at.unwrap_or(now),
            };
            let (job, history) = Job::submit(submission, now);
            jobs.push(NewJob {
                job,
                tenant: tenant.clone(),
                kind: request.kind,
                kind_version: current.version.version,
                priority: request.priority,
                payload: request.input,
                idempotency_key: request.idempotency_key,
                // Keys are per tenant: another tenant's `account:42` is another resource.
                lease_keys: request.lease_keys.iter().map(|k| tenant_key(tenant, k)).collect(),
                history,
            });
        }
        let inserted = self.store.insert_jobs(jobs, now).await?;
        self.wake.notify_one();
        Ok(inserted)
    }

    fn check_request(&self, request: &SubmitRequest) -> Result<(), EngineError> {
        if request.input.len() > self.config.max_payload_bytes {
            return Err(EngineError::PayloadTooLarge {
                bytes: request.input.len(),
                cap: self.config.max_payload_bytes,
            });
        }
        if request.lease_keys.len() > self.config.max_lease_keys {
            return Err(EngineError::Invalid(format!("at most {} lease keys", self.config.max_lease_keys)));
        }
        for key in &request.lease_keys {
            if key.is_empty() || key.len() > 200 || key.chars().any(char::is_control) {
                return Err(EngineError::Invalid(format!("lease key {key:?}: 1-200 printable characters")));
            }
        }
        if let Some(key) = &request.idempotency_key
            && (key.is_empty() || key.len() > 200)
        {
            return Err(EngineError::Invalid("idempotency key: 1-200 characters".into()));
        }
        Ok(())
    }

    /// A tenant's job (another tenant's job is not found).
    pub async fn job(&self, tenant: &TenantId, id: JobId) -> Result<JobRecord, EngineError> {
        match self.store.job(id).await? {
            Some(record) if record.tenant == *tenant => Ok(record),
            _ => Err(EngineError::NotFound),
        }
    }

    /// A tenant's job's history.
    pub async fn history(&self, tenant: &TenantId, id: JobId) -> Result<Vec<HistoryEntry>, EngineError> {
        self.job(tenant, id).await?;
        Ok(self.store.history(id).await?)
    }

    /// Applies a run-control command for `actor`.
    pub async fn command(
        &self,
        tenant: &TenantId,
        id: JobId,
        command: Command,
        actor: &str,
    ) -> Result<JobRecord, EngineError> {
        let actor = Actor::new(actor);
        let successor = new_job_id();
        let event = match command {
            Command::Pause => JobEvent::Pause { actor },
            Command::Resume => JobEvent::Resume { actor },
            Command::Cancel { reason } => JobEvent::Cancel { actor, reason },
            Command::Restart => JobEvent::RequestRestart { actor },
            Command::Retry => JobEvent::Retry { successor },
        };
        let record = self.apply(Some(tenant), id, &Writer::Other, |_| Some(event.clone())).await?;
        Ok(record)
    }

    /// [`apply`](Self::apply) as the claim's holder (its lease keys are checked).
    pub(crate) async fn apply_holder(
        &self,
        id: JobId,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<JobRecord, EngineError> {
        self.apply(None, id, &Writer::Holder, event_for).await
    }

    /// [`apply`](Self::apply) under the row lock: for writers that never run a hook
    /// before committing (API commands, the rescuer), so a busy job cannot starve them.
    async fn apply_locked(
        &self,
        tenant: Option<&TenantId>,
        id: JobId,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<JobRecord, EngineError> {
        let now = self.now();
        let refused = std::sync::Mutex::new(None);
        let before = std::sync::Mutex::new(None);
        let foreign = std::sync::atomic::AtomicBool::new(false);
        let derive = |record: &JobRecord| -> Option<crate::store::JobWrite> {
            if tenant.is_some_and(|t| *t != record.tenant) {
                foreign.store(true, Ordering::Relaxed);
                return None;
            }
            let event = event_for(record)?;
            if let Ok(mut slot) = before.lock() {
                *slot = Some(record.job.state);
            }
            match transition(&record.job, &event, now) {
                Err(refusal) => {
                    if let Ok(mut slot) = refused.lock() {
                        *slot = Some((refusal, record.job.state));
                    }
                    None
                }
                Ok(t) if t.is_noop(&record.job) => None,
                Ok(t) => match plan(record, t, &Writer::Other, now) {
                    Ok(mut plan) => {
                        if plan.failure_effect_first {
                            // No hook runs inside a transaction: this writer's events do
                            // not fail jobs, but if one ever did, the effect still runs.
                            plan.write.outbox.push(crate::store::OutboxEffect::FailureEffect);
                        }
                        Some(plan.write)
                    }
                    Err(refusal) => {
                        if let Ok(mut slot) = refused.lock() {
                            *slot = Some((refusal, record.job.state));
                        }
                        None
                    }
                },
            }
        };
        let updated = self.store.update_job(id, now, &derive).await?;
        if foreign.load(Ordering::Relaxed) {
            return Err(EngineError::NotFound);
        }
        if let Some((refusal, state)) = refused.into_inner().ok().flatten() {
            return Err(EngineError::Refused { refusal, state });
        }
        match updated {
            Updated::Missing => Err(EngineError::NotFound),
            Updated::Skipped(record) => Ok(record),
            Updated::Wrote(record, WriteOutcome::Written { .. }) => {
                self.wake.notify_one();
                if let Some(from) = before.into_inner().ok().flatten()
                    && from != record.job.state
                {
                    let _ = self.changes.send(StateChange { job: id, from, to: record.job.state });
                }
                Ok(record)
            }
            Updated::Wrote(_, outcome) => {
                Err(EngineError::Store(StoreError::Corrupt(format!("a locked write did not commit: {outcome:?}"))))
            }
        }
    }

    /// Loads `id`, derives `event_for(record)` with the core, writes it; rereads and
    /// derives again when the write loses a version race. `None` from `event_for` means
    /// nothing to do.
    pub(crate) async fn apply(
        &self,
        tenant: Option<&TenantId>,
        id: JobId,
        writer: &Writer,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<JobRecord, EngineError> {
        if *writer == Writer::Other {
            return self.apply_locked(tenant, id, event_for).await;
        }
        for _ in 0..=self.config.conflict_retries {
            let record = match self.store.job(id).await? {
                Some(r) if tenant.is_none_or(|t| *t == r.tenant) => r,
                _ => return Err(EngineError::NotFound),
            };
            let Some(event) = event_for(&record) else { return Ok(record) };
            match self.commit(&record, &event, writer).await? {
                Committed::Written(record) | Committed::Unchanged(record) => return Ok(record),
                Committed::Conflict => {
                    self.counters.conflicts.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        Err(EngineError::Contention)
    }

    /// Derives `event` on `record` and writes it (running a failure effect first when
    /// the core asks for it).
    pub(crate) async fn commit(
        &self,
        record: &JobRecord,
        event: &JobEvent,
        writer: &Writer,
    ) -> Result<Committed, EngineError> {
        let mut next = None;
        self.commit_next(record, event, writer, None, &mut next).await
    }

    /// [`commit`](Self::commit); a holder's write may also claim its worker's next job
    /// (among the jobs `claim_next` admits) in the same transaction, put in `next`.
    pub(crate) async fn commit_next(
        &self,
        record: &JobRecord,
        event: &JobEvent,
        writer: &Writer,
        claim_next: Option<crate::store::ClaimFilter>,
        next: &mut Option<JobRecord>,
    ) -> Result<Committed, EngineError> {
        let now = self.now();
        let transition = match transition(&record.job, event, now) {
            Ok(t) => t,
            Err(refusal) => {
                if refusal.is_alert() {
                    self.alert(record, &refusal).await;
                }
                return Err(EngineError::Refused { refusal, state: record.job.state });
            }
        };
        if transition.is_noop(&record.job) {
            return Ok(Committed::Unchanged(record.clone()));
        }
        let Plan { mut write, failure_effect_first, wake } = plan(record, transition, writer, now)
            .map_err(|refusal| EngineError::Refused { refusal, state: record.job.state })?;
        if failure_effect_first {
            self.failure_effect_before(&mut write).await;
        }
        let new_record = write.record.clone();
        let outcome = if *writer == Writer::Holder {
            // Step outcomes and heartbeats share transactions under load.
            let (outcome, claimed) =
                self.group.write(self, write, claim_next).await.map_err(EngineError::StoreShared)?;
            *next = claimed;
            Some(outcome)
        } else {
            self.store.write(vec![write], now).await?.pop()
        };
        match outcome {
            Some(WriteOutcome::Written { version }) => {
                if wake {
                    self.wake.notify_one();
                }
                if record.job.state != new_record.job.state {
                    let _ = self.changes.send(StateChange {
                        job: record.job.id,
                        from: record.job.state,
                        to: new_record.job.state,
                    });
                }
                Ok(Committed::Written(JobRecord { version, ..new_record }))
            }
            Some(WriteOutcome::LeaseLost) => {
                self.counters.stale_commits.fetch_add(1, Ordering::Relaxed);
                Err(EngineError::Refused {
                    refusal: Refusal::StaleFence {
                        presented: record.job.claim.as_ref().map(|c| c.fence).unwrap_or_default(),
                        current: record.job.fence,
                    },
                    state: record.job.state,
                })
            }
            _ => Ok(Committed::Conflict),
        }
    }

    /// Raises an operational alert (seed 001: a late success after failure).
    async fn alert(&self, record: &JobRecord, refusal: &Refusal) {
        self.counters.alerts.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(job = %record.job.id, kind = %record.kind, code = refusal.code(), "operational alert: {refusal}");
        if let Err(e) = self.store.bump_counter(&format!("alert.{}", refusal.code()), 1).await {
            tracing::error!(error = %e, "could not record an alert");
        }
    }

    /// Takes back the steps whose claims lapsed (their host stopped renewing): the step
    /// runs again elsewhere, under a higher fence. Answers how many were rescued.
    pub async fn rescue_lapsed(&self, limit: u32) -> Result<usize, EngineError> {
        let now = self.now();
        let mut rescued = 0;
        for id in self.store.lapsed_claims(now, limit).await? {
            let backoff = self.config.rescue_backoff;
            let result = self
                .apply(None, id, &Writer::Rescuer, |r| {
                    r.job.claim.as_ref().filter(|c| c.expires_at <= now).map(|_| JobEvent::Rescue { backoff })
                })
                .await;
            match result {
                Ok(_) => rescued += 1,
                Err(EngineError::Refused { .. } | EngineError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(rescued)
    }

    /// Invalidates a tenant's lease key (its target was deleted, or it was revoked);
    /// answers the job that held it, which can no longer commit under it.
    pub async fn invalidate_lease(&self, tenant: &TenantId, key: &str) -> Result<Option<JobId>, EngineError> {
        let holder = self.store.invalidate_lease(&tenant_key(tenant, key)).await?;
        if holder.is_some() {
            self.wake.notify_one();
        }
        Ok(holder)
    }

    /// Makes delayed jobs whose time has come dispatchable.
    pub async fn promote_due(&self) -> Result<u64, EngineError> {
        let n = self.store.promote_due(self.now()).await?;
        if n > 0 {
            self.wake.notify_one();
        }
        Ok(n)
    }

    pub(crate) fn backoff(&self, rules_attempt: u32, policy: Backoff) -> Duration {
        let mut rng = match self.rng.lock() {
            Ok(rng) => rng,
            Err(poisoned) => poisoned.into_inner(),
        };
        policy.delay(rules_attempt, &mut *rng)
    }
}

/// How a commit ended.
#[derive(Debug)]
pub(crate) enum Committed {
    /// Written: the record as it now is.
    Written(JobRecord),
    /// Nothing to write (an identical repeat).
    Unchanged(JobRecord),
    /// The row changed since it was read.
    Conflict,
}
