//! Admitting what applications submitted in their own PostgreSQL transactions
//! (`spindle.submit`): each queued submission goes through the very path `POST /v1/jobs`
//! takes — kind and version, the input's schema, quotas and rate, fair tags — and its
//! verdict (the job, or the refusal's code and violations) is recorded on it.
//!
//! Admission is idempotent by the job's idempotency key: the application's own, or
//! `sql:<submission id>`. A host that dies between inserting the job and recording the
//! verdict, or two hosts admitting one submission at once, find the job the key already
//! names: one job, whatever happens.

use std::collections::BTreeMap;

use spindle_core::Timestamp;

use super::{Asked, EngineError, Submission, SubmitRequest, Tenancy};
use crate::store::{SqlSubmission, SqlTake, SqlText, SqlVerdict, StoreError, TakenSql, TenantId};

/// How long a host holds the submissions it took before another may take them (a host
/// that died while admitting them). A slower pass is no harm: a submission admitted
/// twice finds its job by its key.
const LEASE_MICROS: i64 = 5_000_000;

/// What one admission pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdmissionPass {
    /// Submissions admitted (a job made, or found by its key).
    pub admitted: usize,
    /// Submissions refused, with their reasons recorded.
    pub refused: usize,
    /// Submissions left queued for a later pass (the store or the host failed).
    pub deferred: usize,
    /// Submissions over a quota of their tenant's, waiting until it allows them.
    pub waiting: usize,
}

fn refused(code: &str, message: impl Into<String>) -> SqlVerdict {
    SqlVerdict::Refused { code: code.to_owned(), message: message.into(), violations: None }
}

/// Bytes of inputs and options one admission pass reads at most: with the input cap, what
/// bounds the host's memory for a pass whatever applications commit.
const PASS_BYTES: u64 = 16 << 20;

/// Bytes of an options object a host reads at most (its fields are a few short values).
const OPTIONS_CAP: u64 = 64 << 10;

/// The request a submission stands for, or the refusal of its options or its size.
/// `max_input` is the engine's cap on an input, which the API measures on the input's
/// compact JSON: so is this one, whatever spacing the database's text gave it.
fn request_of(taken: TakenSql, now: Timestamp, max_input: usize) -> Result<SubmitRequest, SqlVerdict> {
    let submission = &taken.submission;
    let options = match taken.options {
        SqlText::Read(text) => text,
        SqlText::Unread { bytes } => {
            return Err(refused(
                "invalid-request",
                format!("options: {bytes} bytes, over the {OPTIONS_CAP} a host reads"),
            ));
        }
    };
    let input = match taken.input {
        SqlText::Read(text) => serde_json::from_str::<serde_json::Value>(&text)
            .and_then(|value| serde_json::to_vec(&value))
            .map_err(|e| refused("invalid-request", format!("input: {e}")))?,
        SqlText::Unread { bytes } => {
            return Err(refused("payload-too-large", format!("the input is {bytes} bytes; the cap is {max_input}")));
        }
    };
    if input.len() > max_input {
        return Err(refused(
            "payload-too-large",
            format!("the input is {} bytes; the cap is {max_input}", input.len()),
        ));
    }
    let options: Asked =
        serde_json::from_str(&options).map_err(|e| refused("invalid-request", format!("options: {e}")))?;
    let idempotency_key = options.idempotency_key.clone().unwrap_or_else(|| format!("sql:{}", submission.id));
    let mut request = options
        .request(submission.kind.clone(), input, now)
        .map_err(|e| verdict_of(&e).unwrap_or_else(|| refused("invalid-request", e.to_string())))?;
    request.idempotency_key = Some(idempotency_key);
    Ok(request)
}

/// The verdict an engine error gives a submission: the code `POST /v1/jobs` answers for
/// it ([`EngineError::api_code`]), or `None` for what waiting can fix — a quota (the
/// submission waits) — or a failure of the host or the store (it stays queued).
fn verdict_of(error: &EngineError) -> Option<SqlVerdict> {
    use spindle_views::ErrorCode;
    let code = error.api_code();
    match code {
        ErrorCode::QuotaExceeded
        | ErrorCode::Internal
        | ErrorCode::Busy
        | ErrorCode::Contention
        | ErrorCode::StorageFormat => None,
        _ => Some(SqlVerdict::Refused {
            code: code.as_str().to_owned(),
            message: error.to_string(),
            violations: match error {
                EngineError::InvalidInput { violations, .. } => serde_json::to_string(violations).ok(),
                _ => None,
            },
        }),
    }
}

impl Submission<'_> {
    /// Admits up to `limit` queued SQL submissions, oldest first, reading at most
    /// [`PASS_BYTES`] of their inputs.
    pub async fn admit_sql(&self, limit: u32) -> Result<AdmissionPass, EngineError> {
        let mut pass = AdmissionPass::default();
        if self.refusing() {
            return Ok(pass);
        }
        let now = self.now();
        let mut verdicts = Vec::new();
        // Each tenant's submissions go in one insert, as a bulk `POST /v1/jobs` would.
        let mut groups: BTreeMap<TenantId, Vec<(String, SubmitRequest)>> = BTreeMap::new();
        let max_input = self.config.max_payload_bytes;
        let take = SqlTake {
            rows: limit,
            bytes: PASS_BYTES,
            // The database's text of a JSON value spaces it (`{"a": 1, "b": 2}`): one up
            // to twice the cap may still be within it once compact, so it is read.
            input_cap: u64::try_from(max_input).unwrap_or(u64::MAX).saturating_mul(2),
            options_cap: OPTIONS_CAP,
        };
        for taken in self.store.take_sql_submissions(take, now, LEASE_MICROS).await? {
            let (id, tenant) = (taken.submission.id.clone(), taken.submission.tenant.clone());
            match request_of(taken, now, max_input) {
                Ok(request) => groups.entry(tenant).or_default().push((id, request)),
                Err(verdict) => verdicts.push((id, verdict)),
            }
        }
        for (tenant, group) in groups {
            self.admit_group(&tenant, group, &mut verdicts, &mut pass).await;
        }
        for (_, verdict) in &verdicts {
            match verdict {
                SqlVerdict::Admitted(_) => pass.admitted += 1,
                SqlVerdict::Waiting { .. } => pass.waiting += 1,
                _ => pass.refused += 1,
            }
        }
        self.store.settle_sql_submissions(&verdicts, now).await?;
        Ok(pass)
    }

    /// Admits one tenant's submissions together; one the schema refuses is taken out and
    /// the rest go again; any other refusal sends each alone, for its own verdict.
    async fn admit_group(
        &self,
        tenant: &TenantId,
        mut group: Vec<(String, SubmitRequest)>,
        verdicts: &mut Vec<(String, SqlVerdict)>,
        pass: &mut AdmissionPass,
    ) {
        while !group.is_empty() {
            let requests = group.iter().map(|(_, r)| r.clone()).collect();
            match self.submit_many(tenant, requests).await {
                Ok(inserted) => {
                    // The jobs are in; their verdicts are not (a crash here: the next
                    // pass finds each job by its key).
                    crate::failpoints::reach("admission.admitted").await;
                    for ((id, _), inserted) in group.drain(..).zip(inserted) {
                        verdicts.push((id, SqlVerdict::Admitted(inserted.record().job.id)));
                    }
                }
                Err(EngineError::InvalidInput { kind, index: Some(i), violations }) if i < group.len() => {
                    let (id, _) = group.remove(i);
                    let refusal = EngineError::InvalidInput { kind, index: None, violations };
                    verdicts.push((id, verdict_of(&refusal).unwrap_or_else(|| refused("invalid-input", ""))));
                }
                Err(e) => {
                    for (id, request) in group.drain(..) {
                        match self.submit(tenant, request).await {
                            Ok(inserted) => verdicts.push((id, SqlVerdict::Admitted(inserted.record().job.id))),
                            Err(EngineError::Store(StoreError::QuotaExceeded(quota))) => {
                                let until =
                                    self.now().plus(quota.retry_after.max(std::time::Duration::from_millis(10)));
                                let reason = format!("{} ({})", quota.message, quota.quota.as_str());
                                verdicts.push((id, SqlVerdict::Waiting { until, reason }));
                            }
                            Err(e) => match verdict_of(&e) {
                                Some(verdict) => verdicts.push((id, verdict)),
                                None => {
                                    tracing::warn!(submission = %id, error = %e, "a SQL submission waits for a later pass");
                                    pass.deferred += 1;
                                }
                            },
                        }
                    }
                    tracing::debug!(error = %e, "a tenant's SQL submissions went one by one");
                }
            }
        }
    }

    /// Whether this store has the SQL door (PostgreSQL).
    pub fn has_sql_door(&self) -> bool {
        self.store.backend() == crate::store::Backend::Postgres
    }

    /// Signals that applications committed SQL submissions.
    pub fn sql_submission_signals(&self) -> crate::store::ReadySignals {
        self.store.sql_submission_signals()
    }

    /// A tenant's SQL submission by id.
    pub async fn sql_submission(&self, tenant: &TenantId, id: &str) -> Result<SqlSubmission, EngineError> {
        self.store.sql_submission(tenant, id).await?.ok_or(EngineError::NotFound)
    }
}

impl Tenancy<'_> {
    /// Maps database role `role` to `tenant`: it may then call `spindle.submit`, which
    /// submits as `tenant`, and nothing else of Spindle's schema.
    pub async fn grant_sql(&self, tenant: &TenantId, role: &str) -> Result<(), EngineError> {
        if self.store.tenant(tenant).await?.is_none() {
            return Err(EngineError::Store(StoreError::NotFound(format!("tenant {tenant}"))));
        }
        Ok(self.store.grant_sql(tenant, role, self.now()).await?)
    }

    /// Unmaps database role `role` from `tenant`: its next `spindle.submit` is refused.
    /// What it already committed is still admitted.
    pub async fn revoke_sql(&self, tenant: &TenantId, role: &str) -> Result<(), EngineError> {
        if self.store.revoke_sql(tenant, role).await? {
            Ok(())
        } else {
            Err(EngineError::Store(StoreError::NotFound(format!("role {role:?} mapped to tenant {tenant}"))))
        }
    }
}
