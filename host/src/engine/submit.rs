//! Submission: jobs pinned to their kind's current version, checked before anything
//! is written.

use serde::{Deserialize, Serialize};
use spindle_core::job::{KindRules, Submission};
use spindle_core::policy::priority::Priority;
use spindle_core::{Job, Timestamp};

use super::{Engine, EngineError};
use crate::clock::new_job_id;
use crate::registry::RegistryError;
use crate::store::{Inserted, NewJob, StoreError, TenantId};

/// Longest a submission may be delayed (`delay_secs`, or `run_at` from now): ten years.
pub const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(10 * 365 * 86_400);

/// What a submission asks for besides its kind and input, as both doors name it — the
/// API's `POST /v1/jobs` body and `spindle.submit`'s options object — read and judged in
/// this one place, with the same refusals, whichever door it came through.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Asked {
    /// The priority class (`forced`, `critical`, `scheduled`, `normal`, `background`).
    #[serde(default)]
    pub priority: Option<String>,
    /// Not before this time (RFC 3339); not with `delay_secs`.
    #[serde(default)]
    pub run_at: Option<String>,
    /// Not before this many seconds from now; not with `run_at`.
    #[serde(default)]
    pub delay_secs: Option<f64>,
    /// A second submission with the same key answers the first job.
    #[serde(default)]
    pub idempotency_key: Option<String>,
    /// Exclusive lease keys.
    #[serde(default)]
    pub lease_keys: Vec<String>,
    /// The caller's W3C `traceparent`.
    #[serde(default)]
    pub traceparent: Option<String>,
}

impl Asked {
    /// The request for a job of `kind` with `input` asked for at `now`, or why it is
    /// refused (`invalid-request`). The input's size, its schema and the quotas are the
    /// engine's to judge at submission, for both doors alike.
    pub fn request(self, kind: String, input: Vec<u8>, now: Timestamp) -> Result<SubmitRequest, EngineError> {
        let invalid = |message: &str| EngineError::Invalid(message.to_owned());
        let priority = match self.priority.as_deref() {
            None => Priority::Normal,
            Some(p) => Priority::parse(p)
                .ok_or_else(|| invalid("priority is one of forced, critical, scheduled, normal, background"))?,
        };
        let run_at = match (self.run_at.as_deref(), self.delay_secs) {
            (Some(_), Some(_)) => return Err(invalid("give run_at or delay_secs, not both")),
            (Some(text), None) => Some(spindle_core::time::parse_rfc3339(text).ok_or_else(|| {
                invalid("run_at: an RFC 3339 date-time such as 2026-11-30T12:00:00Z, years 0 to 9999")
            })?),
            (None, Some(secs)) => Some(now.plus(
                std::time::Duration::try_from_secs_f64(secs).ok().filter(|delay| *delay <= MAX_DELAY).ok_or_else(
                    || {
                        EngineError::Invalid(format!(
                            "delay_secs: a number of seconds from 0 to {}",
                            MAX_DELAY.as_secs()
                        ))
                    },
                )?,
            )),
            (None, None) => None,
        };
        if self.idempotency_key.as_deref().is_some_and(|key| key.starts_with(spindle_core::schedule::FIRING_KEY_PREFIX))
        {
            return Err(invalid(
                "idempotency key: keys that start `schedule:` are the scheduler's (they name a schedule's firings)",
            ));
        }
        if run_at.is_some_and(|at| at.as_micros() > now.plus(MAX_DELAY).as_micros()) {
            return Err(EngineError::Invalid(format!("run_at: at most {} seconds from now", MAX_DELAY.as_secs())));
        }
        Ok(SubmitRequest {
            kind,
            input,
            priority,
            run_at,
            idempotency_key: self.idempotency_key,
            lease_keys: self.lease_keys,
            traceparent: self.traceparent,
        })
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
    /// The caller's W3C `traceparent`: the job's spans join its trace (kept only while
    /// the host exports spans).
    #[serde(default)]
    pub traceparent: Option<String>,
}

/// A lease key as stored: the tenant's name, `/`, the key (tenant names hold no `/`).
pub fn tenant_key(tenant: &TenantId, key: &str) -> String {
    format!("{tenant}/{key}")
}

/// A stored lease key as its tenant sees it.
pub fn untenant_key<'a>(tenant: &TenantId, key: &'a str) -> &'a str {
    key.strip_prefix(&format!("{tenant}/")).unwrap_or(key)
}

/// The rules of a kind version that its jobs' machines need. A lean kind's jobs are
/// written lean only once the storage format gate is at 3 (`lean_ok`): below it a host of
/// an older build may be running, and it would read a lean job as one without steps.
pub(crate) fn kind_rules(current: &crate::registry::Resolved, lean_ok: bool) -> KindRules {
    let spec = &current.kind.spec;
    KindRules {
        cancellable: spec.cancellable,
        max_attempts: spec.retry.max_attempts,
        failure_effect: spec.has_failure_effect,
        notify_on_success: spec.notifies_on_success,
        lean: lean_ok && current.deployment.record == spindle_core::Record::Lean,
    }
}

impl Engine {
    /// The rules of `current` for a job written now ([`kind_rules`]).
    pub(crate) fn rules_of(&self, current: &crate::registry::Resolved) -> KindRules {
        let lean_ok = self.gate.check().is_ok_and(spindle_core::upgrade::writes_lean);
        kind_rules(current, lean_ok)
    }
}

/// How many times a submission goes while the versions it pinned keep moving (each
/// try reads them afresh); the last refusal is answered.
const SUBMIT_TRIES: u32 = 3;

impl Engine {
    /// One try of [`submit_many`](Self::submit_many).
    async fn submit_pinned(&self, tenant: &TenantId, requests: &[SubmitRequest]) -> Result<Vec<Inserted>, EngineError> {
        self.may_write().await?;
        let now = self.now();
        let mut jobs = Vec::with_capacity(requests.len());
        let mut parents = Vec::new();
        let mut resolved = std::collections::HashMap::new();
        let bulk = requests.len() > 1;
        for (index, request) in requests.iter().enumerate() {
            self.check_request(request)?;
            if !resolved.contains_key(&request.kind) {
                let current = match self.registry.last_current(tenant, &request.kind).await {
                    Err(RegistryError::UnknownKind(kind)) => return Err(EngineError::UnknownKind(kind)),
                    other => other?,
                };
                resolved.insert(request.kind.clone(), current);
            }
            let current = &resolved[&request.kind];
            if let Some(schema) = &current.kind.input_schema
                && let Err(violations) = schema.check(&request.input)
            {
                let index = bulk.then_some(index);
                return Err(EngineError::InvalidInput { kind: request.kind.clone(), index, violations });
            }
            let spec = &current.kind.spec;
            let rules = self.rules_of(current);
            let submission = Submission {
                id: new_job_id(),
                rules,
                steps: spec.steps.iter().map(|s| (s.key.clone(), s.weight)).collect(),
                run_at: request.run_at.unwrap_or(now),
            };
            let (job, history) = Job::submit(submission, now);
            if let Some(parent) = request
                .traceparent
                .as_ref()
                .filter(|p| crate::telemetry::enabled() && crate::telemetry::is_traceparent(p))
            {
                parents.push((job.id, parent.clone()));
            }
            jobs.push(NewJob {
                job,
                tenant: tenant.clone(),
                kind: request.kind.clone(),
                kind_version: current.version.version,
                priority: request.priority,
                payload: request.input.clone(),
                idempotency_key: request.idempotency_key.clone(),
                // Keys are per tenant: another tenant's `account:42` is another resource.
                lease_keys: request.lease_keys.iter().map(|k| tenant_key(tenant, k)).collect(),
                history,
            });
        }
        // Before the jobs: one claimed the moment it is written must find its parent.
        self.store.keep_traceparents(&parents).await?;
        let inserted = match self.store.submit_jobs(jobs, now).await {
            Ok(inserted) => inserted,
            Err(e) => {
                self.forget_traceparents(&parents, &[]).await;
                return Err(e.into());
            }
        };
        self.forget_traceparents(&parents, &inserted).await;
        self.wake.notify_one();
        Ok(inserted)
    }

    /// Forgets the kept trace parents of jobs that `inserted` does not hold as created
    /// (an idempotency key found an earlier job, or the insert failed).
    async fn forget_traceparents(&self, parents: &[(spindle_core::JobId, String)], inserted: &[Inserted]) {
        if parents.is_empty() {
            return;
        }
        let created: std::collections::HashSet<_> =
            inserted.iter().filter(|i| matches!(i, Inserted::Created(_))).map(|i| i.record().job.id).collect();
        let unused: Vec<_> = parents.iter().map(|(id, _)| *id).filter(|id| !created.contains(id)).collect();
        if !unused.is_empty()
            && let Err(e) = self.store.forget_traceparents(&unused).await
        {
            tracing::warn!(error = %e, "could not forget unused trace parents");
        }
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
}

impl super::Submission<'_> {
    /// Submits a job.
    pub async fn submit(&self, tenant: &TenantId, request: SubmitRequest) -> Result<Inserted, EngineError> {
        let mut out = self.submit_many(tenant, vec![request]).await?;
        out.pop().ok_or_else(|| EngineError::Store(StoreError::Corrupt("no job inserted".into())))
    }

    /// Submits several jobs in one transaction.
    ///
    /// Jobs are pinned to the version of their kind this host last knew as current,
    /// and the insert checks it still is. When another host has deployed or rolled
    /// back since, nothing is written; the submission reads the current version and
    /// goes again (a few times at most: each try reads afresh).
    pub async fn submit_many(
        &self,
        tenant: &TenantId,
        requests: Vec<SubmitRequest>,
    ) -> Result<Vec<Inserted>, EngineError> {
        let mut tries = 1;
        loop {
            match self.submit_pinned(tenant, &requests).await {
                Err(EngineError::Store(StoreError::VersionMoved { kind, .. })) if tries < SUBMIT_TRIES => {
                    self.registry.forget_current(tenant, &kind);
                    tries += 1;
                }
                other => return other,
            }
        }
    }
}
