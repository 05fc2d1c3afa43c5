//! Submissions applications make inside their own PostgreSQL transactions
//! (`spindle.submit`, migrations 0019 and 0020), the roles mapped to tenants that may make
//! them, and each submission's fate once a host looked at it. The store decides nothing:
//! the engine admits each through the path `POST /v1/jobs` takes and says what to record.
//!
//! Everything of the door lives in the schema `spindle`, which only Spindle's role
//! creates in (0020), and every statement here names it: nothing a caller plants in
//! `public` is ever resolved. PostgreSQL only; rows are read by their column labels.

use async_trait::async_trait;
use spindle_core::{JobId, Timestamp};
use sqlx::Row as _;
use sqlx::postgres::PgRow;

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::TenantId;
use super::rows::parse_id;
use super::sql::Db;

/// Where a submission stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlVerdict {
    /// Committed by its application, not yet looked at by a host.
    Queued,
    /// Committed, and over one of its tenant's quotas (its submission rate, its jobs
    /// queued): a committed submission is never refused for capacity, it waits, and is
    /// admitted once the quota allows. Taken again at `until`.
    Waiting {
        /// When a host looks at it again.
        until: Timestamp,
        /// Which quota, as the API's refusal would say it.
        reason: String,
    },
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

/// A submission made through `spindle.submit`, as its tenant reads it (its input stays in
/// the database: no reader needs it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SqlSubmission {
    /// Its id, which `spindle.submit` answered.
    pub id: String,
    /// The tenant its role is mapped to.
    pub tenant: TenantId,
    /// The kind.
    pub kind: String,
    /// The role that submitted it.
    pub submitted_by: String,
    /// When its transaction called the function.
    pub submitted_at: Timestamp,
    /// Where it stands.
    pub verdict: SqlVerdict,
}

/// A text column of a taken submission: read, or left in the database because it is
/// over what a host reads (its size is all the host learns; the engine refuses it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlText {
    /// The text, as `spindle.submit` stored it.
    Read(String),
    /// Not read: this many bytes.
    Unread {
        /// Its size in bytes, as the database counts it.
        bytes: u64,
    },
}

/// A queued submission a host took to admit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TakenSql {
    /// The submission.
    pub submission: SqlSubmission,
    /// Its input (JSON text).
    pub input: SqlText,
    /// Its options object (JSON text).
    pub options: SqlText,
}

/// How much one admission pass takes: a host's memory for a pass is bounded by these,
/// whatever applications commit (a 25 MiB input must not be read to be refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SqlTake {
    /// Submissions at most.
    pub rows: u32,
    /// Bytes of inputs and options read at most (at least one submission is taken).
    pub bytes: u64,
    /// An input over this many bytes is not read.
    pub input_cap: u64,
    /// An options object over this many bytes is not read.
    pub options_cap: u64,
}

/// The door for applications' own transactions.
#[async_trait]
pub trait SqlSubmissionStore: Send + Sync {
    /// Maps database role `role` to `tenant`, and lets it execute `spindle.submit` (and
    /// nothing else). PostgreSQL only; the role must exist.
    async fn grant_sql(&self, tenant: &TenantId, role: &str, now: Timestamp) -> Result<(), StoreError>;
    /// Unmaps `role` from `tenant` and takes back what `grant_sql` gave it: its next
    /// `spindle.submit` is refused. Answers whether it was mapped to `tenant`;
    /// submissions it already committed stay (and are admitted).
    async fn revoke_sql(&self, tenant: &TenantId, role: &str) -> Result<bool, StoreError>;
    /// Takes queued submissions no other host holds, oldest first, within `take`, for
    /// `lease_micros` (another host takes them when the lease ends without a verdict).
    async fn take_sql_submissions(
        &self,
        take: SqlTake,
        now: Timestamp,
        lease_micros: i64,
    ) -> Result<Vec<TakenSql>, StoreError>;
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

/// The columns a reader of a submission sees (never its input or options).
const SUBMISSION: &str =
    "id, tenant_id, kind, submitted_by, submitted_at, state, job_id, code, message, violations, leased_until";

fn submission_from_row(row: &PgRow) -> Result<SqlSubmission, StoreError> {
    let corrupt = |column: &str, what: &str| StoreError::Corrupt(format!("spindle.sql_submissions.{column}: {what}"));
    let state: String = row.try_get("state")?;
    let code: Option<String> = row.try_get("code")?;
    let verdict = match state.as_str() {
        "queued" if code.is_none() => SqlVerdict::Queued,
        "queued" => SqlVerdict::Waiting {
            until: Timestamp::from_micros(
                row.try_get::<Option<i64>, _>("leased_until")?
                    .ok_or_else(|| corrupt("leased_until", "a waiting submission without its time"))?,
            ),
            reason: row.try_get::<Option<String>, _>("message")?.unwrap_or_default(),
        },
        "admitted" => {
            let job: Option<String> = row.try_get("job_id")?;
            let job = job.ok_or_else(|| corrupt("job_id", "an admitted submission names no job"))?;
            SqlVerdict::Admitted(parse_id(&job, "spindle.sql_submissions.job_id")?)
        }
        "refused" => SqlVerdict::Refused {
            code: row
                .try_get::<Option<String>, _>("code")?
                .ok_or_else(|| corrupt("code", "a refusal without its code"))?,
            message: row.try_get::<Option<String>, _>("message")?.unwrap_or_default(),
            violations: row.try_get("violations")?,
        },
        other => return Err(corrupt("state", &format!("unknown state {other:?}"))),
    };
    Ok(SqlSubmission {
        id: row.try_get("id")?,
        tenant: TenantId(row.try_get("tenant_id")?),
        kind: row.try_get("kind")?,
        submitted_by: row.try_get("submitted_by")?,
        submitted_at: Timestamp::from_micros(row.try_get("submitted_at")?),
        verdict,
    })
}

/// A text column read only when it fits (`{column}` holds it, `{column}_bytes` its size).
fn text_from_row(row: &PgRow, column: &str) -> Result<SqlText, StoreError> {
    let bytes: i64 = row.try_get(format!("{column}_bytes").as_str())?;
    Ok(match row.try_get::<Option<String>, _>(column)? {
        Some(text) => SqlText::Read(text),
        None => SqlText::Unread { bytes: u64::try_from(bytes).unwrap_or(0) },
    })
}

/// Whether `role` is a plain role name (what `grant_sql` quotes into its statements).
fn plain_role(role: &str) -> bool {
    !role.is_empty()
        && role.len() <= 63
        && role.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !role.starts_with(|c: char| c.is_ascii_digit())
}

impl SqlStore {
    /// The PostgreSQL pool, or the refusal a store without the door gives.
    fn door(&self) -> Result<&sqlx::PgPool, StoreError> {
        match &self.db {
            Db::Postgres(pool) => Ok(pool),
            Db::Sqlite { .. } => Err(StoreError::Unsupported("submitting through SQL needs PostgreSQL".into())),
        }
    }
}

/// `role`, checked to be a plain name (it is quoted into `GRANT`/`REVOKE`).
fn checked_role(role: &str) -> Result<&str, StoreError> {
    if plain_role(role) {
        Ok(role)
    } else {
        Err(StoreError::Unsupported(format!(
            "role {role:?}: 1-63 characters of a-z, 0-9 and _, not starting with a digit"
        )))
    }
}

/// A missing role (`42704`) as not found; anything else as the database failing.
fn missing_role(role: &str, e: sqlx::Error) -> StoreError {
    match e.as_database_error().and_then(|d| d.code()) {
        Some(code) if code == "42704" => StoreError::NotFound(format!("database role {role:?}")),
        _ => e.into(),
    }
}

#[async_trait]
impl SqlSubmissionStore for SqlStore {
    async fn grant_sql(&self, tenant: &TenantId, role: &str, now: Timestamp) -> Result<(), StoreError> {
        let pool = self.door()?;
        let role = checked_role(role)?;
        let mut tx = pool.begin().await?;
        sqlx::query(
            "INSERT INTO spindle.sql_roles (role, tenant_id, granted_at) VALUES ($1, $2, $3) \
             ON CONFLICT (role) DO UPDATE SET tenant_id = excluded.tenant_id, granted_at = excluded.granted_at",
        )
        .bind(role)
        .bind(tenant.0.as_str())
        .bind(now.as_micros())
        .execute(&mut *tx)
        .await?;
        for grant in [
            format!("GRANT USAGE ON SCHEMA spindle TO \"{role}\""),
            format!("GRANT EXECUTE ON FUNCTION spindle.submit(text, jsonb, jsonb) TO \"{role}\""),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(grant)).execute(&mut *tx).await.map_err(|e| missing_role(role, e))?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn revoke_sql(&self, tenant: &TenantId, role: &str) -> Result<bool, StoreError> {
        let pool = self.door()?;
        let role = checked_role(role)?;
        let mut tx = pool.begin().await?;
        let unmapped = sqlx::query("DELETE FROM spindle.sql_roles WHERE role = $1 AND tenant_id = $2")
            .bind(role)
            .bind(tenant.0.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if unmapped == 0 {
            return Ok(false);
        }
        for revoke in [
            format!("REVOKE EXECUTE ON FUNCTION spindle.submit(text, jsonb, jsonb) FROM \"{role}\""),
            format!("REVOKE USAGE ON SCHEMA spindle FROM \"{role}\""),
        ] {
            match sqlx::query(sqlx::AssertSqlSafe(revoke)).execute(&mut *tx).await.map_err(|e| missing_role(role, e)) {
                // A role dropped since it was mapped has nothing left to take back.
                Ok(_) | Err(StoreError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn take_sql_submissions(
        &self,
        take: SqlTake,
        now: Timestamp,
        lease_micros: i64,
    ) -> Result<Vec<TakenSql>, StoreError> {
        let Db::Postgres(pool) = &self.db else { return Ok(Vec::new()) };
        let cap = |cap: u64| i64::try_from(cap).unwrap_or(i64::MAX);
        let mut tx = pool.begin().await?;
        // First the candidates' sizes (the database knows them without reading the
        // values), locked; then the prefix that fits the pass's bytes is leased and read.
        let sizes: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT id, octet_length(input)::int8, octet_length(options)::int8 FROM spindle.sql_submissions \
             WHERE state = 'queued' AND (leased_until IS NULL OR leased_until <= $1) \
             ORDER BY submitted_at LIMIT $2 FOR UPDATE SKIP LOCKED",
        )
        .bind(now.as_micros())
        .bind(i64::from(take.rows))
        .fetch_all(&mut *tx)
        .await?;
        let read = |bytes: i64, limit: u64| if u64::try_from(bytes).unwrap_or(u64::MAX) > limit { 0 } else { bytes };
        let mut chosen = Vec::new();
        let mut total: u64 = 0;
        for (id, input, options) in sizes {
            let bytes = u64::try_from(read(input, take.input_cap) + read(options, take.options_cap)).unwrap_or(0);
            if !chosen.is_empty() && total.saturating_add(bytes) > take.bytes {
                break;
            }
            total = total.saturating_add(bytes);
            chosen.push(id);
        }
        if chosen.is_empty() {
            tx.commit().await?;
            return Ok(Vec::new());
        }
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE spindle.sql_submissions SET leased_until = $2 WHERE id = ANY($1) RETURNING {SUBMISSION}, \
             CASE WHEN octet_length(input) <= $3 THEN input END AS input, octet_length(input)::int8 AS input_bytes, \
             CASE WHEN octet_length(options) <= $4 THEN options END AS options, \
             octet_length(options)::int8 AS options_bytes"
        )))
        .bind(&chosen)
        .bind(now.as_micros().saturating_add(lease_micros))
        .bind(cap(take.input_cap))
        .bind(cap(take.options_cap))
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        let mut taken = rows
            .iter()
            .map(|row| {
                Ok(TakenSql {
                    submission: submission_from_row(row)?,
                    input: text_from_row(row, "input")?,
                    options: text_from_row(row, "options")?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        taken.sort_by_key(|t| t.submission.submitted_at);
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
        let pool = self.door()?;
        let mut tx = pool.begin().await?;
        let mut changed = 0;
        for (id, verdict) in verdicts {
            let (state, job, code, message, violations) = match verdict {
                SqlVerdict::Queued => continue,
                SqlVerdict::Waiting { until, reason } => {
                    // Still queued: its reason kept, and no host takes it before `until`.
                    changed += sqlx::query(
                        "UPDATE spindle.sql_submissions SET code = 'quota-exceeded', message = $2, leased_until = $3 \
                         WHERE id = $1 AND state = 'queued'",
                    )
                    .bind(id.as_str())
                    .bind(reason.as_str())
                    .bind(until.as_micros())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                    continue;
                }
                SqlVerdict::Admitted(job) => ("admitted", Some(job.to_string()), None, None, None),
                SqlVerdict::Refused { code, message, violations } => {
                    ("refused", None, Some(code.as_str()), Some(message.as_str()), violations.as_deref())
                }
            };
            changed += sqlx::query(
                "UPDATE spindle.sql_submissions SET state = $2, job_id = $3, code = $4, message = $5, \
                 violations = $6, settled_at = $7 WHERE id = $1 AND state = 'queued'",
            )
            .bind(id.as_str())
            .bind(state)
            .bind(job)
            .bind(code)
            .bind(message)
            .bind(violations)
            .bind(now.as_micros())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        }
        tx.commit().await?;
        Ok(changed)
    }

    async fn prune_sql_submissions(&self, before: Timestamp, limit: u32) -> Result<u64, StoreError> {
        let Db::Postgres(pool) = &self.db else { return Ok(0) };
        Ok(sqlx::query(
            "DELETE FROM spindle.sql_submissions WHERE id IN (SELECT id FROM spindle.sql_submissions \
             WHERE state <> 'queued' AND settled_at < $1 LIMIT $2)",
        )
        .bind(before.as_micros())
        .bind(i64::from(limit))
        .execute(pool)
        .await?
        .rows_affected())
    }

    async fn sql_submission(&self, tenant: &TenantId, id: &str) -> Result<Option<SqlSubmission>, StoreError> {
        let Db::Postgres(pool) = &self.db else { return Ok(None) };
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {SUBMISSION} FROM spindle.sql_submissions WHERE id = $1 AND tenant_id = $2"
        )))
        .bind(id)
        .bind(tenant.0.as_str())
        .fetch_optional(pool)
        .await?;
        row.as_ref().map(submission_from_row).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::QueueStore as _;
    use crate::store::schema::Phase;
    use crate::store::sql::Backend;
    use crate::store::test_db::fresh;

    const TAKE: SqlTake = SqlTake { rows: 2, bytes: 1 << 20, input_cap: 1 << 10, options_cap: 1 << 10 };

    async fn queued(pool: &sqlx::PgPool, id: &str, at: i64, input: &str) {
        sqlx::query(
            "INSERT INTO spindle.sql_submissions (id, tenant_id, kind, input, options, submitted_by, submitted_at, state) \
             VALUES ($1, 'acme', 'noop', $2, '{}', 'app', $3, 'queued')",
        )
        .bind(id)
        .bind(input)
        .bind(at)
        .execute(pool)
        .await
        .expect("a submission");
    }

    fn ids(taken: &[TakenSql]) -> Vec<&str> {
        taken.iter().map(|t| t.submission.id.as_str()).collect()
    }

    /// What a host takes, settles and prunes, as the store keeps it: a taken submission is
    /// not taken again while its lease runs, a verdict is recorded once, a queued
    /// submission is never pruned.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn submissions_are_taken_settled_and_pruned_as_the_engine_says() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        let store = SqlStore::on(test.db.clone());
        store.migrate(&[Phase::Expand]).await.expect("migrate");
        let Db::Postgres(pool) = &test.db else { unreachable!("a PostgreSQL store") };
        for (id, at) in [("s-1", 10), ("s-2", 20), ("s-3", 30)] {
            queued(pool, id, at, "{}").await;
        }
        let t = Timestamp::from_micros;
        let taken = store.take_sql_submissions(TAKE, t(100), 1_000).await.expect("take");
        assert_eq!(ids(&taken), ["s-1", "s-2"], "oldest first");
        assert_eq!(taken[0].input, SqlText::Read("{}".into()));
        let again = store.take_sql_submissions(SqlTake { rows: 10, ..TAKE }, t(500), 1_000).await.expect("take");
        assert_eq!(ids(&again), ["s-3"], "the leased ones wait");
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
        assert_eq!(store.take_sql_submissions(TAKE, t(5_000), 1_000).await.expect("take").len(), 1);
        assert_eq!(store.prune_sql_submissions(t(1_500), 10).await.expect("prune"), 2);
        assert_eq!(store.prune_sql_submissions(t(i64::MAX), 10).await.expect("prune"), 0);
        assert!(store.sql_submission(&acme, "s-3").await.expect("read").is_some());
        // A refusal stored without its code is corrupt, not a refusal with an empty code.
        sqlx::query("UPDATE spindle.sql_submissions SET state = 'refused', code = NULL WHERE id = 's-3'")
            .execute(pool)
            .await
            .expect("damage");
        assert!(matches!(store.sql_submission(&acme, "s-3").await, Err(StoreError::Corrupt(_))));
        test.drop().await;
    }

    /// Only the door's own notifications wake a host: a role mapped to nothing may
    /// `NOTIFY spindle_submissions` as it likes (junk, a forged tag, a replay of a real
    /// one), and each is ignored; each `spindle.submit` wakes it once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_the_doors_own_notifications_wake_a_host() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        let store = SqlStore::on(test.db.clone());
        store.migrate(&[Phase::Expand]).await.expect("migrate");
        let Db::Postgres(pool) = &test.db else { unreachable!("a PostgreSQL store") };
        let (app, stranger) = (format!("door_app_{}", std::process::id()), format!("door_x_{}", std::process::id()));
        for role in [&app, &stranger] {
            let create =
                format!("DO $$ BEGIN CREATE ROLE {role} LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$");
            sqlx::raw_sql(sqlx::AssertSqlSafe(create)).execute(pool).await.expect("a role");
        }
        store.grant_sql(&TenantId("acme".into()), &app, Timestamp::from_micros(1)).await.expect("map");
        let url = |role: &str| {
            let options = pool.connect_options();
            (*options).clone().username(role)
        };
        let app = sqlx::PgPool::connect_with(url(&app)).await.expect("connect as the app");
        let stranger = sqlx::PgPool::connect_with(url(&stranger)).await.expect("connect as a stranger");
        // What the test sees of the channel: the door's real payloads, to replay.
        // (On a pool of its own: the store's has two connections, and the host's listener
        // holds one.)
        let own = sqlx::PgPool::connect_with((*pool.connect_options()).clone()).await.expect("connect");
        let mut seen = sqlx::postgres::PgListener::connect_with(&own).await.expect("listen");
        seen.listen("spindle_submissions").await.expect("listen");
        let mut signals = store.sql_submission_signals();
        signals.listening().await;
        let notify = |payload: String| {
            let stranger = stranger.clone();
            async move {
                sqlx::query("SELECT pg_notify('spindle_submissions', $1)")
                    .bind(payload)
                    .execute(&stranger)
                    .await
                    .expect("a stranger notifies");
            }
        };
        let submit = || async {
            sqlx::query("SELECT spindle.submit('noop', '{}')").execute(&app).await.expect("submit");
        };
        for n in 0..50 {
            notify(format!("junk-{n}")).await;
        }
        notify(format!("{}.1.{}", uuid::Uuid::from_u128(9), "ab".repeat(32))).await;
        submit().await;
        signals.next().await;
        assert_eq!(signals.ignored(), 51, "each forged notification ignored, the door's one woke it");
        let real = loop {
            let notification = seen.recv().await.expect("a notification");
            if notification.payload().contains('.') && !notification.payload().starts_with("junk") {
                let payload = notification.payload().to_owned();
                if payload.starts_with(&uuid::Uuid::from_u128(9).to_string()) {
                    continue;
                }
                break payload;
            }
        };
        for _ in 0..3 {
            notify(real.clone()).await;
        }
        submit().await;
        signals.next().await;
        assert_eq!(signals.ignored(), 54, "a replayed notification wakes nobody");
        // The listener holds a connection of the store's pool, which closes once it is back.
        drop((signals, seen));
        for pool in [app, stranger, own] {
            pool.close().await;
        }
        test.drop().await;
    }

    /// A pass reads at most its bytes: an input over the cap is never read (its size
    /// is), and submissions past the pass's budget wait, unleased, for the next pass.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_is_bounded_in_bytes_and_never_reads_an_oversized_input() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        let store = SqlStore::on(test.db.clone());
        store.migrate(&[Phase::Expand]).await.expect("migrate");
        let Db::Postgres(pool) = &test.db else { unreachable!("a PostgreSQL store") };
        let big = format!("\"{}\"", "x".repeat(5_000));
        let mid = format!("\"{}\"", "y".repeat(600));
        let wide = format!("\"{}\"", "z".repeat(900));
        queued(pool, "huge", 10, &big).await;
        queued(pool, "mid-1", 20, &mid).await;
        queued(pool, "mid-2", 30, &wide).await;
        queued(pool, "small", 40, "1").await;
        let take = SqlTake { rows: 10, bytes: 700, input_cap: 1_024, options_cap: 64 };
        let t = Timestamp::from_micros;
        let first = store.take_sql_submissions(take, t(100), 1_000).await.expect("take");
        assert_eq!(ids(&first), ["huge", "mid-1"], "the budget ends the pass before mid-2");
        assert_eq!(first[0].input, SqlText::Unread { bytes: big.len() as u64 });
        assert_eq!(first[1].input, SqlText::Read(mid.clone()));
        let second = store.take_sql_submissions(take, t(200), 1_000).await.expect("take");
        assert_eq!(ids(&second), ["mid-2"], "one over the budget still goes alone");
        let third = store.take_sql_submissions(take, t(300), 1_000).await.expect("take");
        assert_eq!(ids(&third), ["small"]);
        test.drop().await;
    }
}
