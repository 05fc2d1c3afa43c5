//! Events applied to one job: run-control commands, and the load → derive → write
//! loop every writer goes through (under the row lock, optimistically with rereads,
//! or in a group commit for a claim's holder).

use std::sync::atomic::{AtomicBool, Ordering};

use spindle_core::job::{JobEvent, RetryOnto};
use spindle_core::{Actor, JobId, Refusal, transition};

use super::{Engine, EngineError, Plan, plan};
use crate::clock::new_job_id;
use crate::registry::RegistryError;
use crate::store::{
    ClaimFilter, HistoryEntry, JobRecord, JobWrite, OutboxEffect, StoreError, TenantId, Updated, WriteOutcome,
};

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
    /// Retry a failed or cancelled job as a new, linked one, on the version it ran on.
    Retry,
    /// Retry it on its kind's current version instead (a fix deployed since): that
    /// version's steps and rules, the input checked against its schema.
    RetryOnCurrent,
}

/// Each run-control command, as the job's machine would answer it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandChecks {
    /// Cancel.
    pub cancel: Result<(), String>,
    /// Pause.
    pub pause: Result<(), String>,
    /// Resume.
    pub resume: Result<(), String>,
    /// Restart.
    pub restart: Result<(), String>,
    /// Retry.
    pub retry: Result<(), String>,
}

/// Who writes, which decides how the write travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writer {
    /// The claim's holder reporting or heartbeating: its writes share group commits.
    Holder,
    /// The rescuer or the reconciler: optimistic, rereading on a version conflict.
    Recovery,
    /// An API command: under the row lock, so a busy job cannot starve it.
    Command,
}

impl Engine {
    /// [`apply`](Self::apply) as the claim's holder (its lease keys are checked).
    pub(crate) async fn apply_holder(
        &self,
        id: JobId,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<JobRecord, EngineError> {
        self.apply(None, id, Writer::Holder, event_for).await
    }

    /// Loads `id`, derives `event_for(record)` with the core, writes it; `None` from
    /// `event_for` means nothing to do. A command writes under the row lock; other
    /// writers reread and derive again when the write loses a version race.
    pub(crate) async fn apply(
        &self,
        tenant: Option<&TenantId>,
        id: JobId,
        writer: Writer,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<JobRecord, EngineError> {
        self.may_write().await?;
        if writer == Writer::Command {
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

    /// [`apply`](Self::apply) under the row lock: for writers that never run a hook
    /// before committing (API commands), so a busy job cannot starve them.
    async fn apply_locked(
        &self,
        tenant: Option<&TenantId>,
        id: JobId,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<JobRecord, EngineError> {
        self.apply_locked_keyed(tenant, id, None, event_for).await.map(|(record, _)| record)
    }

    /// [`apply_locked`](Self::apply_locked) for a signal with the sender's idempotency
    /// key: under the same row lock, a key already stored for the job derives nothing
    /// and answers the job as it is, with `true` (a repeat).
    pub(crate) async fn apply_locked_keyed(
        &self,
        tenant: Option<&TenantId>,
        id: JobId,
        signal_key: Option<&str>,
        event_for: impl Fn(&JobRecord) -> Option<JobEvent> + Send + Sync,
    ) -> Result<(JobRecord, bool), EngineError> {
        self.may_write().await?;
        let now = self.now();
        let refused = std::sync::Mutex::new(None);
        let before = std::sync::Mutex::new(None);
        let foreign = AtomicBool::new(false);
        let derive = |record: &JobRecord| -> Option<JobWrite> {
            if tenant.is_some_and(|t| *t != record.tenant) {
                foreign.store(true, Ordering::Relaxed);
                return None;
            }
            let event = event_for(record)?;
            if let Ok(mut slot) = before.lock() {
                *slot = Some(record.job.state);
            }
            let planned = transition(&record.job, &event, now)
                .and_then(|t| if t.is_noop(&record.job) { Ok(None) } else { plan(record, t, now).map(Some) });
            match planned {
                Ok(Some(mut plan)) => {
                    if plan.failure_effect_first {
                        // No hook runs inside a transaction: this writer's events do not
                        // fail jobs, but if one ever did, the effect still runs.
                        plan.write.outbox.push(OutboxEffect::FailureEffect);
                    }
                    Some(plan.write)
                }
                Ok(None) => None,
                Err(refusal) => {
                    if let Ok(mut slot) = refused.lock() {
                        *slot = Some((refusal, record.job.state));
                    }
                    None
                }
            }
        };
        let updated = match signal_key {
            Some(key) => self.store.signal_job(id, Some(key), now, &derive, self.deriver()).await?,
            None => self.store.update_job(id, now, &derive, self.deriver()).await?,
        };
        if foreign.load(Ordering::Relaxed) {
            return Err(EngineError::NotFound);
        }
        if let Some((refusal, state)) = refused.into_inner().ok().flatten() {
            return Err(EngineError::Refused { refusal, state });
        }
        match updated {
            Updated::Missing => Err(EngineError::NotFound),
            Updated::Repeated(record) if tenant.is_some_and(|t| *t != record.tenant) => Err(EngineError::NotFound),
            Updated::Repeated(record) => Ok((record, true)),
            Updated::Skipped(record) => Ok((record, false)),
            Updated::Wrote(record, WriteOutcome::Written { .. }) => {
                self.wake.notify_one();
                self.relay_wake.notify_one();
                if let Some(from) = before.into_inner().ok().flatten() {
                    self.announce(id, from, record.job.state);
                }
                Ok((record, false))
            }
            Updated::Wrote(_, outcome) => {
                Err(EngineError::Store(StoreError::Corrupt(format!("a locked write did not commit: {outcome:?}"))))
            }
        }
    }

    /// Derives `event` on `record` and writes it (running a failure effect first when
    /// the core asks for it).
    pub(crate) async fn commit(
        &self,
        record: &JobRecord,
        event: &JobEvent,
        writer: Writer,
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
        writer: Writer,
        claim_next: Option<ClaimFilter>,
        next: &mut Option<JobRecord>,
    ) -> Result<Committed, EngineError> {
        self.may_write().await?;
        // A draining host finishes what it holds and claims nothing new.
        let claim_next = claim_next.filter(|_| !self.config.draining);
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
        let Plan { mut write, failure_effect_first, wake, relay } = plan(record, transition, now)
            .map_err(|refusal| EngineError::Refused { refusal, state: record.job.state })?;
        if failure_effect_first {
            self.failure_effect_before(&mut write).await;
        }
        let new_record = write.record.clone();
        let outcome = if writer == Writer::Holder {
            // Step outcomes and heartbeats share transactions under load.
            let (outcome, claimed) = self.group.write(write, claim_next).await.map_err(EngineError::StoreShared)?;
            *next = claimed;
            Some(outcome)
        } else {
            self.store.write(vec![write], now, self.deriver()).await?.pop()
        };
        match outcome {
            Some(WriteOutcome::Written { version }) => {
                if wake {
                    self.wake.notify_one();
                }
                if relay {
                    self.relay_wake.notify_one();
                }
                self.announce(record.job.id, record.job.state, new_record.job.state);
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
        self.raise_alert(record, refusal.code(), &refusal.to_string()).await;
    }

    /// Keeps an alert for operators to read (`GET /v1/alerts`): alerts of one tenant,
    /// kind and code within a minute are one, counted.
    pub(crate) async fn raise_alert(&self, record: &JobRecord, code: &str, message: &str) {
        let now = self.now();
        let alert = crate::store::Alert {
            at: now,
            last_at: now,
            tenant: record.tenant.clone(),
            kind: record.kind.clone(),
            job: Some(record.job.id.to_string()),
            code: code.to_owned(),
            message: spindle_core::failure::clip(message.to_owned(), spindle_core::failure::MAX_MESSAGE_LEN),
            count: 1,
        };
        if let Err(e) = self.store.raise_alert(&alert).await {
            tracing::error!(error = %e, "could not keep an alert");
        }
    }
}

impl super::Operations<'_> {
    /// A tenant's job (another tenant's job is not found).
    pub async fn job(&self, tenant: &TenantId, id: JobId) -> Result<JobRecord, EngineError> {
        match self.store.job(id).await? {
            Some(record) if record.tenant == *tenant => Ok(record),
            _ => Err(EngineError::NotFound),
        }
    }

    /// A job's history, oldest first; `None` for a lean job, whose kind keeps none.
    pub async fn history(&self, tenant: &TenantId, id: JobId) -> Result<Option<Vec<HistoryEntry>>, EngineError> {
        if self.job(tenant, id).await?.job.rules.lean {
            return Ok(None);
        }
        Ok(Some(self.store.history(id).await?))
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
        let onto = match command {
            Command::RetryOnCurrent => Some(self.current_version_for_retry(tenant, id).await?),
            _ => None,
        };
        let event = match command {
            Command::Pause => JobEvent::Pause { actor },
            Command::Resume => JobEvent::Resume { actor },
            Command::Cancel { reason } => JobEvent::Cancel { actor, reason },
            Command::Restart => JobEvent::RequestRestart { actor },
            Command::Retry => JobEvent::Retry { successor, onto: None },
            Command::RetryOnCurrent => JobEvent::Retry { successor, onto },
        };
        self.apply(Some(tenant), id, Writer::Command, |_| Some(event.clone())).await
    }

    /// The current version of the kind of a tenant's job `id`, for a retry on it: the
    /// job's input must fit the version's input schema (`invalid-input` otherwise).
    async fn current_version_for_retry(&self, tenant: &TenantId, id: JobId) -> Result<RetryOnto, EngineError> {
        let record = self.job(tenant, id).await?;
        let current = match self.registry.last_current(tenant, &record.kind).await {
            Err(RegistryError::UnknownKind(kind)) => return Err(EngineError::UnknownKind(kind)),
            other => other?,
        };
        if let Some(schema) = &current.kind.input_schema
            && let Err(violations) = schema.check(&record.payload)
        {
            return Err(EngineError::InvalidInput { kind: record.kind, index: None, violations });
        }
        let spec = &current.kind.spec;
        Ok(RetryOnto {
            version: current.version.version,
            rules: self.rules_of(&current),
            steps: spec.steps.iter().map(|s| (s.key.clone(), s.weight)).collect(),
        })
    }

    /// What each run-control command would come to on `record` now, as the job's machine
    /// answers it: `Ok` where it would change the job, the refusal's words where not (a
    /// dashboard disables a button with them).
    pub fn actions(&self, record: &JobRecord) -> CommandChecks {
        let now = self.now();
        let actor = Actor::new("api:check");
        let check = |event: JobEvent| match transition(&record.job, &event, now) {
            Ok(t) if t.is_noop(&record.job) => Err("it would change nothing".to_owned()),
            Ok(_) => Ok(()),
            Err(refusal) => Err(refusal.to_string()),
        };
        CommandChecks {
            cancel: check(JobEvent::Cancel { actor: actor.clone(), reason: "checked".into() }),
            pause: check(JobEvent::Pause { actor: actor.clone() }),
            resume: check(JobEvent::Resume { actor: actor.clone() }),
            restart: check(JobEvent::RequestRestart { actor }),
            retry: check(JobEvent::Retry { successor: new_job_id(), onto: None }),
        }
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
