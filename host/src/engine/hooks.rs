//! The kind's hooks: the business failure effect before a failed settlement is written
//! (seed 001), and after-commit effects (success notifications, corrected failures,
//! retried effects) from the outbox.

use std::sync::atomic::Ordering;
use std::time::Duration;

use spindle_core::HistoryEvent;
use spindle_core::failure::for_log;
use spindle_core::step::StepState;
use spindle_runtime::{Hook, HookRun, JobSummary, Recording};

use super::{Engine, EngineError};
use crate::store::{JobRecord, JobWrite, OutboxEffect};

impl Engine {
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
        // Hooks reach what the kind's steps reach: a failure effect that voids a payment
        // calls the same service, with the same secrets and settings.
        let capabilities = match self.capabilities(record, &resolved.deployment).await {
            Ok(capabilities) => capabilities,
            Err(e) => {
                tracing::error!(job = %record.job.id, error = %e, "cannot read the hook's capabilities");
                return Some("capabilities.unavailable".into());
            }
        };
        let recording = std::sync::Arc::new(Recording::default());
        let run =
            self.registry.runtime().run_hook(&resolved.kind, hook, summary, capabilities, recording.clone()).await;
        let calls = std::mem::take(&mut *recording.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if !calls.is_empty()
            && let Err(e) = self.store.record_calls(record.job.id, hook.name(), 1, &calls, self.now()).await
        {
            tracing::error!(job = %record.job.id, ?hook, error = %e, "could not record the hook's outbound requests");
        }
        match run {
            HookRun::Done => None,
            HookRun::Failed { code, message } => {
                tracing::warn!(job = %record.job.id, ?hook, code, "hook failed: {}", for_log(&message));
                Some(code)
            }
            HookRun::Fault { fault, detail } => {
                tracing::warn!(job = %record.job.id, ?hook, code = fault.code(), "hook faulted: {}", for_log(&detail));
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
}

impl super::Execution<'_> {
    /// Runs due after-commit effects (success notifications, failure effects of
    /// corrected settlements, retried failure effects). Answers how many ran.
    pub async fn run_outbox(&self, limit: u32) -> Result<usize, EngineError> {
        if self.refusing() {
            return Ok(0);
        }
        const LEASE: Duration = Duration::from_secs(60);
        const MAX_ATTEMPTS: i64 = 5;
        let now = self.now();
        let lease = i64::try_from(LEASE.as_micros()).unwrap_or(i64::MAX);
        let items = self.store.outbox_claim(OutboxEffect::HOOKS, now, lease, limit).await?;
        let count = items.len();
        for item in items {
            let Some(record) = self.store.job(item.job_id).await? else {
                self.store.outbox_done(&[item.id]).await?;
                continue;
            };
            let hook = match item.effect {
                OutboxEffect::NotifySuccess => Hook::OnSuccess,
                OutboxEffect::FailureEffect => Hook::OnFailure,
                // The workflow relay's, never claimed here.
                OutboxEffect::ChildSettled | OutboxEffect::CancelChildren => continue,
            };
            let failed = self.run_hook(&record, hook).await;
            let ran = HistoryEvent::EffectRan { effect: item.effect.as_str().into(), failed: failed.clone() };
            if !record.job.rules.lean {
                // A lean kind keeps no history: a failed effect is retried, and one that
                // fails every attempt is counted and logged below, as for any job.
                self.store.append_history(item.job_id, &[ran], self.now()).await?;
            }
            if failed.is_some() && item.attempts + 1 < MAX_ATTEMPTS {
                let delay = Duration::from_secs(2u64.saturating_pow(u32::try_from(item.attempts + 1).unwrap_or(10)));
                self.store.outbox_retry(&[item.id], self.now().plus(delay)).await?;
            } else {
                if failed.is_some() {
                    self.counters.alerts.fetch_add(1, Ordering::Relaxed);
                    tracing::error!(job = %item.job_id, effect = item.effect.as_str(), "operational alert: an effect failed every attempt");
                }
                self.store.outbox_done(&[item.id]).await?;
            }
        }
        Ok(count)
    }
}
