//! Submissions applications make inside their own PostgreSQL transactions
//! (`spindle.submit`, migration 0019), the roles mapped to tenants that may make them,
//! and each submission's fate once a host looked at it. The store decides nothing: the
//! engine admits each through the path `POST /v1/jobs` takes and says what to record.

use async_trait::async_trait;
use spindle_core::{JobId, Timestamp};

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::TenantId;
use super::rows::{Columns, parse_id};
use super::sql::{Backend, Row, Ty, Value};

/// Where a submission stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlVerdict {
    /// Committed by its application, not yet looked at by a host.
    Queued,
    /// Admitted: the job it made (or the one its idempotency key already named).
    Admitted(JobId),
    /// Refused, nothing else written: the API's code, a message, and the input's
    /// violations as JSON when the schema refused it.
    Refused {
        /// The API's code (`invalid-input`, `unknown-kind`, `quota-exceeded`, …).
        code: String,
        /// What was wrong.
        message: String,
        /// The schema's violations, as the API lists them (JSON), if any.
        violations: Option<String>,
    },
}

/// A submission made through `spindle.submit`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlSubmission {
    /// Its id, which `spindle.submit` answered.
    pub id: String,
    /// The tenant its role is mapped to.
    pub tenant: TenantId,
    /// The kind.
    pub kind: String,
    /// The input, as JSON text.
    pub input: String,
    /// The options object, as JSON text.
    pub options: String,
    /// The role that submitted it.
    pub submitted_by: String,
    /// When its transaction called the function.
    pub submitted_at: Timestamp,
    /// Where it stands.
    pub verdict: SqlVerdict,
}

/// The door for applications' own transactions.
#[async_trait]
pub trait SqlSubmissionStore: Send + Sync {
    /// Maps database role `role` to `tenant`, and lets it execute `spindle.submit` (and
    /// nothing else). PostgreSQL only; the role must exist.
    async fn grant_sql(&self, tenant: &TenantId, role: &str, now: Timestamp) -> Result<(), StoreError>;
    /// Takes up to `limit` queued submissions no other host holds, oldest first, for
    /// `lease_micros` (another host takes them when the lease ends without a verdict).
    async fn take_sql_submissions(
        &self,
        limit: u32,
        now: Timestamp,
        lease_micros: i64,
    ) -> Result<Vec<SqlSubmission>, StoreError>;
    /// Records queued submissions' verdicts (by id), in one transaction; answers how many
    /// were still queued.
    async fn settle_sql_submissions(
        &self,
        verdicts: &[(String, SqlVerdict)],
        now: Timestamp,
    ) -> Result<u64, StoreError>;
    /// A tenant's submission by id.
    async fn sql_submission(&self, tenant: &TenantId, id: &str) -> Result<Option<SqlSubmission>, StoreError>;
    /// Deletes up to `limit` submissions whose verdict was recorded before `before`;
    /// answers how many.
    async fn prune_sql_submissions(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError>;
}

static SUBMISSION: Columns = Columns {
    table: "sql_submissions",
    names: &[
        "id",
        "tenant_id",
        "kind",
        "input",
        "options",
        "submitted_by",
        "submitted_at",
        "state",
        "job_id",
        "code",
        "message",
        "violations",
    ],
    tys: &[
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Text,
        Ty::Int,
        Ty::Text,
        Ty::OptText,
        Ty::OptText,
        Ty::OptText,
        Ty::OptText,
    ],
};

fn submission_from_row(mut row: Row) -> Result<SqlSubmission, StoreError> {
    let r = SUBMISSION.read(&mut row);
    let verdict = match r.text("state")?.as_str() {
        "queued" => SqlVerdict::Queued,
        "admitted" => {
            let job =
                r.opt_text("job_id")?.ok_or_else(|| r.corrupt("job_id", "an admitted submission names no job"))?;
            SqlVerdict::Admitted(parse_id(&job, "sql_submissions.job_id")?)
        }
        "refused" => SqlVerdict::Refused {
            code: r.opt_text("code")?.unwrap_or_default(),
            message: r.opt_text("message")?.unwrap_or_default(),
            violations: r.opt_text("violations")?,
        },
        other => return Err(r.corrupt("state", format!("unknown state {other:?}"))),
    };
    Ok(SqlSubmission {
        id: r.text("id")?,
        tenant: TenantId(r.text("tenant_id")?),
        kind: r.text("kind")?,
        input: r.text("input")?,
        options: r.text("options")?,
        submitted_by: r.text("submitted_by")?,
        submitted_at: r.ts("submitted_at")?,
        verdict,
    })
}

/// Whether `role` is a plain role name (what `grant_sql` quotes into its statements).
fn plain_role(role: &str) -> bool {
    !role.is_empty()
        && role.len() <= 63
        && role.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !role.starts_with(|c: char| c.is_ascii_digit())
}

#[async_trait]
impl SqlSubmissionStore for SqlStore {
    async fn grant_sql(&self, tenant: &TenantId, role: &str, now: Timestamp) -> Result<(), StoreError> {
        if self.db.backend() != Backend::Postgres {
            return Err(StoreError::Unsupported("submitting through SQL needs PostgreSQL".into()));
        }
        if !plain_role(role) {
            return Err(StoreError::Unsupported(format!(
                "role {role:?}: 1-63 characters of a-z, 0-9 and _, not starting with a digit"
            )));
        }
        let mut tx = self.db.begin().await?;
        tx.execute(
            "INSERT INTO sql_roles (role, tenant_id, granted_at) VALUES ($1, $2, $3) \
             ON CONFLICT (role) DO UPDATE SET tenant_id = excluded.tenant_id, granted_at = excluded.granted_at",
            vec![Value::from(role), Value::from(tenant.0.as_str()), Value::from(now.as_micros())],
        )
        .await?;
        for grant in [
            format!("GRANT USAGE ON SCHEMA spindle TO \"{role}\""),
            format!("GRANT EXECUTE ON FUNCTION spindle.submit(text, jsonb, jsonb) TO \"{role}\""),
        ] {
            tx.execute(&grant, vec![]).await.map_err(|e| match e.as_database_error().and_then(|d| d.code()) {
                Some(code) if code == "42704" => StoreError::NotFound(format!("database role {role:?}")),
                _ => e.into(),
            })?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn take_sql_submissions(
        &self,
        limit: u32,
        now: Timestamp,
        lease_micros: i64,
    ) -> Result<Vec<SqlSubmission>, StoreError> {
        if self.db.backend() != Backend::Postgres {
            return Ok(Vec::new());
        }
        let mut tx = self.db.begin().await?;
        let rows = tx
            .fetch(
                &format!(
                    "UPDATE sql_submissions SET leased_until = $2 WHERE id IN (SELECT id FROM sql_submissions \
                     WHERE state = 'queued' AND (leased_until IS NULL OR leased_until <= $1) \
                     ORDER BY submitted_at LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING {}",
                    SUBMISSION.list()
                ),
                vec![
                    Value::from(now.as_micros()),
                    Value::from(now.as_micros().saturating_add(lease_micros)),
                    Value::from(i64::from(limit)),
                ],
                SUBMISSION.tys,
            )
            .await
            .map_err(|e| SUBMISSION.in_table(e))?;
        tx.commit().await?;
        let mut taken = rows.into_iter().map(submission_from_row).collect::<Result<Vec<_>, _>>()?;
        taken.sort_by_key(|s| s.submitted_at);
        Ok(taken)
    }

    async fn settle_sql_submissions(
        &self,
        verdicts: &[(String, SqlVerdict)],
        now: Timestamp,
    ) -> Result<u64, StoreError> {
        if verdicts.is_empty() {
            return Ok(0);
        }
        let mut tx = self.db.begin().await?;
        let mut changed = 0;
        for (id, verdict) in verdicts {
            let (state, job, code, message, violations) = match verdict {
                SqlVerdict::Queued => continue,
                SqlVerdict::Admitted(job) => ("admitted", Some(job.to_string()), None, None, None),
                SqlVerdict::Refused { code, message, violations } => {
                    ("refused", None, Some(code.clone()), Some(message.clone()), violations.clone())
                }
            };
            changed += tx
                .execute(
                    "UPDATE sql_submissions SET state = $2, job_id = $3, code = $4, message = $5, violations = $6, \
                     settled_at = $7 WHERE id = $1 AND state = 'queued'",
                    vec![
                        Value::from(id.as_str()),
                        Value::from(state),
                        Value::from(job),
                        Value::from(code),
                        Value::from(message),
                        Value::from(violations),
                        Value::from(now.as_micros()),
                    ],
                )
                .await?;
        }
        tx.commit().await?;
        Ok(changed)
    }

    async fn prune_sql_submissions(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        if self.db.backend() != Backend::Postgres {
            return Ok(0);
        }
        Ok(self
            .db
            .execute(
                "DELETE FROM sql_submissions WHERE id IN (SELECT id FROM sql_submissions \
                 WHERE state <> 'queued' AND settled_at < $1 LIMIT $2)",
                vec![Value::from(before.as_micros()), Value::from(i64::from(limit))],
            )
            .await?)
    }

    async fn sql_submission(&self, tenant: &TenantId, id: &str) -> Result<Option<SqlSubmission>, StoreError> {
        if self.db.backend() != Backend::Postgres {
            return Ok(None);
        }
        let rows = self
            .db
            .fetch(
                &format!("SELECT {} FROM sql_submissions WHERE id = $1 AND tenant_id = $2", SUBMISSION.list()),
                vec![Value::from(id), Value::from(tenant.0.as_str())],
                SUBMISSION.tys,
            )
            .await
            .map_err(|e| SUBMISSION.in_table(e))?;
        rows.into_iter().next().map(submission_from_row).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::Phase;
    use crate::store::test_db::fresh;

    /// What a host takes, settles and prunes, as the store keeps it: a taken submission is
    /// not taken again while its lease runs, a verdict is recorded once, a queued
    /// submission is never pruned.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn submissions_are_taken_settled_and_pruned_as_the_engine_says() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        let store = SqlStore::on(test.db.clone());
        store.migrate(&[Phase::Expand]).await.expect("migrate");
        for (id, at) in [("s-1", 10), ("s-2", 20), ("s-3", 30)] {
            test.db
                .execute(
                    "INSERT INTO sql_submissions (id, tenant_id, kind, input, options, submitted_by, submitted_at, state) \
                     VALUES ($1, 'acme', 'noop', '{}', '{}', 'app', $2, 'queued')",
                    vec![Value::from(id), Value::from(at)],
                )
                .await
                .expect("a submission");
        }
        let t = Timestamp::from_micros;
        let taken = store.take_sql_submissions(2, t(100), 1_000).await.expect("take");
        let ids: Vec<&str> = taken.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["s-1", "s-2"], "oldest first");
        let again = store.take_sql_submissions(10, t(500), 1_000).await.expect("take");
        assert_eq!(again.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), ["s-3"], "the leased ones wait");
        let job = JobId(uuid::Uuid::from_u128(7));
        let refused = SqlVerdict::Refused { code: "unknown-kind".into(), message: "no".into(), violations: None };
        let verdicts = vec![("s-1".to_owned(), SqlVerdict::Admitted(job)), ("s-2".to_owned(), refused.clone())];
        assert_eq!(store.settle_sql_submissions(&verdicts, t(1_000)).await.expect("settle"), 2);
        assert_eq!(store.settle_sql_submissions(&verdicts, t(2_000)).await.expect("settle"), 0, "once");
        let acme = TenantId("acme".into());
        let read = store.sql_submission(&acme, "s-1").await.expect("read").expect("s-1");
        assert_eq!(read.verdict, SqlVerdict::Admitted(job));
        assert_eq!(store.sql_submission(&acme, "s-2").await.expect("read").expect("s-2").verdict, refused);
        assert_eq!(store.sql_submission(&TenantId("globex".into()), "s-1").await.expect("read"), None, "tenant's own");
        // Leases over: the queued one is taken again; pruning never touches it.
        assert_eq!(store.take_sql_submissions(10, t(5_000), 1_000).await.expect("take").len(), 1);
        assert_eq!(store.prune_sql_submissions(t(1_500), 10).await.expect("prune"), 2);
        assert_eq!(store.prune_sql_submissions(t(i64::MAX), 10).await.expect("prune"), 0);
        assert!(store.sql_submission(&acme, "s-3").await.expect("read").is_some());
        test.drop().await;
    }
}
