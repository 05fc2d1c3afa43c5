//! Jobs: submission, reads, version-checked writes, history, listings and the indexes
//! recovery searches (lapsed claims, silent jobs).

use std::collections::HashMap;

use async_trait::async_trait;
use spindle_core::table::DiagramState;
use spindle_core::{HistoryEvent, JobId, JobState, Timestamp};

use super::capacity::Admission;
use super::error::StoreError;
use super::handle::SqlStore;
use super::inserts::insert_new_jobs;
use super::job_rows::{JOB, JOB_COLS, STEP, fetch_jobs, history_rows, job_from_row, restore_claim, step_from};
use super::records::{
    Depth, Derive, Deriver, HistoryEntry, Inserted, JobFilter, JobRecord, JobWrite, NewJob, PruneScope, QueueDepth,
    TenantId, Updated, WriteOutcome,
};
use super::rows::{Columns, MAX_PARAMS, corrupt, insert_rows, parse_id};
use super::sql::{Tx, Ty, Value, retire_if_stale};
use super::writes::{TRANSACTION_ATTEMPTS, commit_writes, retryable};

/// How far submission times may run out of sequence order: submissions of different
/// hosts stamp their own clocks. Time filters bound the scan by sequence this far beyond
/// the times asked for, then filter by the times themselves.
const CLOCK_SKEW_MICROS: i64 = 60_000_000;

/// Jobs.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Inserts submitted jobs; a job whose idempotency key exists yields the existing one.
    async fn insert_jobs(&self, jobs: Vec<NewJob>, now: Timestamp) -> Result<Vec<Inserted>, StoreError>;
    /// [`insert_jobs`](Self::insert_jobs) for a submission: in the same transaction,
    /// every job's kind version is checked to be its kind's current one, so a host may
    /// pin jobs to the version it last knew without reading it first. A version no
    /// longer current (another host deployed or rolled back) writes nothing and answers
    /// [`StoreError::VersionMoved`].
    async fn submit_jobs(&self, jobs: Vec<NewJob>, now: Timestamp) -> Result<Vec<Inserted>, StoreError>;
    /// A job by id.
    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, StoreError>;
    /// Reads a job with its row locked (PostgreSQL `FOR UPDATE`; SQLite's write lock),
    /// derives a write from it and commits it in the same transaction: no concurrent
    /// writer can slip in between, so a busy job never starves the caller.
    async fn update_job(
        &self,
        id: JobId,
        now: Timestamp,
        derive: Derive<'_>,
        deriver: &dyn Deriver,
    ) -> Result<Updated, StoreError>;
    /// [`update_job`](Self::update_job) for a signal: when `key` is given and a signal
    /// with that key was stored for the job already, nothing is derived
    /// ([`Updated::Repeated`]); the check and the write share the row lock, so two
    /// sends of one key store one signal.
    async fn signal_job(
        &self,
        id: JobId,
        key: Option<&str>,
        now: Timestamp,
        derive: Derive<'_>,
        deriver: &dyn Deriver,
    ) -> Result<Updated, StoreError>;
    /// Commits writes in one transaction; each is checked against its version. Jobs
    /// blocked on keys the writes release are woken through `deriver`.
    async fn write(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<Vec<WriteOutcome>, StoreError>;
    /// Jobs whose claim has lapsed (expired at or before `now`, as the core decides).
    async fn lapsed_claims(&self, now: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError>;
    /// Open jobs whose last activity is at or before `before`, oldest first.
    async fn silent_jobs(&self, before: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError>;
    /// A job's history, oldest first.
    async fn history(&self, id: JobId) -> Result<Vec<HistoryEntry>, StoreError>;
    /// Appends history that no job change goes with (an after-commit effect ran).
    async fn append_history(&self, id: JobId, events: &[HistoryEvent], now: Timestamp) -> Result<(), StoreError>;
    /// A tenant's jobs, newest first.
    async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError>;
    /// A tenant's jobs by state and kind, each state's rows read up to `cap` (so a count
    /// costs at most `cap` index entries per state, however many jobs there are).
    async fn count_jobs(&self, tenant: &TenantId, cap: u64) -> Result<Vec<(JobState, String, u64)>, StoreError>;
    /// One kind's jobs by state, from its newest `cap` jobs (the `(tenant_id, kind, seq)`
    /// index): exact while the kind has fewer, a lower bound once it has that many.
    async fn count_kind_jobs(
        &self,
        tenant: &TenantId,
        kind: &str,
        cap: u64,
    ) -> Result<Vec<(JobState, u64)>, StoreError>;
    /// Jobs by tenant, kind and state, for metrics.
    async fn depths(&self) -> Result<Vec<Depth>, StoreError>;
    /// A tenant's open jobs by kind and priority class, by where each waits.
    async fn queue_depth(&self, tenant: &TenantId) -> Result<Vec<QueueDepth>, StoreError>;
    /// Steps running now (claims held), by tenant, through the claimed jobs' index.
    async fn running_by_tenant(&self) -> Result<Vec<(TenantId, u64)>, StoreError>;
    /// Deletes up to `limit` jobs of `scope` settled before `before`, oldest first, with
    /// their steps, history and queued effects; answers how many.
    async fn prune(&self, before: Timestamp, scope: &PruneScope, limit: u32) -> Result<u64, StoreError>;
    /// Makes the space pruned jobs held reusable at once, instead of when autovacuum
    /// next comes by (PostgreSQL; SQLite reuses freed pages by itself).
    async fn reclaim_pruned(&self) -> Result<(), StoreError>;
}

impl SqlStore {
    /// Locks job `id`'s row (PostgreSQL; SQLite's writer holds the database), answers a
    /// repeat when a signal with `signal_key` was stored for it already, otherwise
    /// derives the write from the locked row and commits it, in one transaction.
    async fn update_locked(
        &self,
        id: JobId,
        signal_key: Option<&str>,
        now: Timestamp,
        derive: Derive<'_>,
        deriver: &dyn Deriver,
    ) -> Result<Updated, StoreError> {
        let mut tx = self.db.begin().await?;
        let lock = self.db.backend().for_update();
        let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1{lock}");
        let mut records = fetch_jobs(&mut tx, &sql, vec![Value::from(id.to_string())]).await?;
        // Nothing to write: end the transaction now. A dropped one rolls back only when
        // its pooled connection is next used, and until then PostgreSQL keeps the row
        // locked (claims would skip it, other updates would wait for it).
        let Some(record) = records.pop() else {
            tx.commit().await?;
            return Ok(Updated::Missing);
        };
        if let Some(key) = signal_key {
            let seen = tx
                .fetch(
                    "SELECT id FROM signals WHERE job_id = $1 AND idempotency_key = $2",
                    vec![Value::from(id.to_string()), Value::from(key)],
                    &[Ty::Int],
                )
                .await?;
            if !seen.is_empty() {
                tx.commit().await?;
                return Ok(Updated::Repeated(record));
            }
        }
        let Some(write) = derive(&record) else {
            tx.commit().await?;
            return Ok(Updated::Skipped(record));
        };
        let mut new_record = write.record.clone();
        let outcome = commit_writes(&mut tx, &[&write], now, deriver).await?.pop().unwrap_or(WriteOutcome::Conflict);
        if let WriteOutcome::Written { version } = outcome {
            new_record.version = version;
        }
        tx.commit().await?;
        Ok(Updated::Wrote(new_record, outcome))
    }
}

/// A tenant's jobs in sequence order, for `arm`: one query per state, each an ordered
/// scan of the `(tenant_id, state, seq)` index, merged by `order` (which sorts by `seq`
/// and limits). The table keeps no index of a tenant's jobs by sequence alone: it would be
/// one more entry on every job write, and no job row update is heap-only.
fn every_state(arm: impl Fn(&str) -> String, order: &str) -> String {
    let arms: Vec<String> = <JobState as DiagramState>::all()
        .iter()
        .enumerate()
        .map(|(i, state)| format!("SELECT * FROM ({}) AS s{i}", arm(&format!("state = '{}'", state.as_str()))))
        .collect();
    format!("{} {order}", arms.join(" UNION ALL "))
}

/// The tenant's first job at or after sequence number `from`, or its last job when `from`
/// is `None`: the job's sequence number and submission time.
async fn tenant_seq_probe(tx: &mut Tx, tenant: &TenantId, from: Option<i64>) -> Result<Option<(i64, i64)>, StoreError> {
    let (cond, order, mut args) = match from {
        Some(seq) => (" AND seq >= $2", "ASC", vec![Value::from(seq)]),
        None => ("", "DESC", Vec::new()),
    };
    args.insert(0, Value::from(tenant.0.as_str()));
    let sql = every_state(
        |state| {
            format!(
                "SELECT seq, created_at FROM jobs WHERE tenant_id = $1 AND {state}{cond} ORDER BY seq {order} LIMIT 1"
            )
        },
        &format!("ORDER BY seq {order} LIMIT 1"),
    );
    let rows = tx.fetch(&sql, args, &[Ty::Int, Ty::Int]).await?;
    rows.first().map(|row| Ok((row.int(0, "jobs.seq")?, row.int(1, "jobs.created_at")?))).transpose()
}

/// The first sequence number of `tenant`'s jobs submitted at or after `micros` (one past
/// the last when none was), by bisection over the tenant's jobs in sequence order: a few
/// dozen probes of its index whatever the number of jobs.
async fn seq_at(tx: &mut Tx, tenant: &TenantId, micros: i64) -> Result<i64, StoreError> {
    let (Some((mut lo, _)), Some((max, _))) =
        (tenant_seq_probe(tx, tenant, Some(i64::MIN)).await?, tenant_seq_probe(tx, tenant, None).await?)
    else {
        return Ok(0);
    };
    let mut hi = max + 1;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        // The tenant's first job at or after `mid`: before the time, the answer lies past
        // it; else (or none) it lies before `mid`, or is `mid` (no job of the tenant's
        // lies between `mid` and the one found).
        match tenant_seq_probe(tx, tenant, Some(mid)).await? {
            Some((seq, created_at)) if created_at < micros => lo = seq + 1,
            _ => hi = mid,
        }
    }
    Ok(lo)
}

/// The sequence numbers a listing's time filters come to: from `from` (inclusive), until
/// `until` (exclusive).
#[derive(Clone, Copy, Debug, Default)]
struct SeqBounds {
    from: Option<i64>,
    until: Option<i64>,
}

/// A page of `tenant`'s jobs that `filter` admits, newest first: the query and its
/// arguments. A listing of one state reads that state's part of the tenant's index; a
/// listing of every state merges one such read per state.
fn listing(tenant: &TenantId, filter: &JobFilter, bounds: SeqBounds) -> (String, Vec<Value>) {
    // The conditions beside the tenant and the state.
    let mut conds = String::new();
    let mut args = vec![Value::from(tenant.0.as_str())];
    let mut cond = |sql: &str, value: Value| {
        args.push(value);
        conds.push_str(&sql.replace("$n", &format!("${}", args.len())));
    };
    if let Some(kind) = &filter.kind {
        cond(" AND kind = $n", Value::from(kind.as_str()));
    }
    if let Some(parent) = filter.parent {
        cond(" AND parent_id = $n", Value::from(parent.to_string()));
    }
    if let Some(before) = filter.before_seq {
        cond(" AND seq < $n", Value::from(before));
    }
    if let Some(priority) = filter.priority {
        cond(" AND priority = $n", Value::from(i64::from(priority.rank())));
    }
    if let Some(text) = &filter.text {
        if let Ok(id) = text.parse::<JobId>() {
            cond(" AND id = $n", Value::from(id.to_string()));
        } else {
            // A prefix of the key, through the tenant's key index.
            cond(" AND idempotency_key >= $n", Value::from(text.as_str()));
            cond(" AND idempotency_key < $n", Value::from(format!("{text}\u{10ffff}")));
        }
    }
    if let (Some(from), Some(after)) = (bounds.from, filter.created_after) {
        cond(" AND seq >= $n", Value::from(from));
        cond(" AND created_at >= $n", Value::from(after.as_micros()));
    }
    if let (Some(until), Some(before)) = (bounds.until, filter.created_before) {
        cond(" AND seq < $n", Value::from(until));
        cond(" AND created_at < $n", Value::from(before.as_micros()));
    }
    args.push(Value::from(i64::from(filter.limit.clamp(1, 1000))));
    let page = format!("ORDER BY seq DESC LIMIT ${}", args.len());
    let arm = |state: &str| format!("SELECT {JOB_COLS} FROM jobs WHERE tenant_id = $1 AND {state}{conds} {page}");
    let sql = if filter.dead_letters {
        arm("state = 'failed' AND successor IS NULL")
    } else if let Some(state) = filter.state {
        arm(&format!("state = '{}'", state.as_str()))
    } else {
        every_state(arm, &page)
    };
    (sql, args)
}

/// Most jobs a submission may carry and still go before the group commits waiting for
/// SQLite's writer (see `store::turns`): a submission of a few jobs is short.
const URGENT_SUBMISSION: usize = 16;

/// A submission pinned to its versions, from [`SubmissionQueue`](super::submissions::SubmissionQueue).
#[async_trait]
impl super::submissions::Insert for SqlStore {
    async fn insert(&self, jobs: Vec<NewJob>, now: Timestamp, urgent: bool) -> Result<Vec<Inserted>, StoreError> {
        self.write_submission(jobs, now, true, urgent).await
    }
}

/// Most idempotency keys one read looks up (its tenant takes one more parameter).
const KEYS_PER_READ: usize = MAX_PARAMS - 1;

/// The job each of `jobs`' idempotency keys already names (`None` for a job without a
/// key, or whose key names no job yet): one read per tenant and [`KEYS_PER_READ`] keys,
/// not one per key (a merged or bulk submission of keyed jobs paid a round trip each).
async fn jobs_by_keys(tx: &mut Tx, jobs: &[NewJob]) -> Result<Vec<Option<JobRecord>>, StoreError> {
    let mut wanted: HashMap<&TenantId, Vec<&str>> = HashMap::new();
    for new in jobs {
        if let Some(key) = &new.idempotency_key {
            wanted.entry(&new.tenant).or_default().push(key);
        }
    }
    let mut found: HashMap<&TenantId, HashMap<String, JobRecord>> = HashMap::new();
    for (tenant, mut keys) in wanted {
        keys.sort_unstable();
        keys.dedup();
        let of_tenant = found.entry(tenant).or_default();
        for chunk in keys.chunks(KEYS_PER_READ) {
            // The list padded to a power of two with its own keys again: a few statement texts,
            // not one per count, so keyed submissions do not churn the statement cache.
            let padded = chunk.len().next_power_of_two().min(KEYS_PER_READ);
            let sql = format!(
                "SELECT {JOB_COLS} FROM jobs WHERE tenant_id = $1 AND idempotency_key IN ({})",
                super::rows::placeholders(2, padded)
            );
            let mut args = vec![Value::from(tenant.0.as_str())];
            args.extend(chunk.iter().cycle().take(padded).map(|key| Value::from(*key)));
            for record in fetch_jobs(tx, &sql, args).await? {
                if let Some(key) = record.idempotency_key.clone() {
                    of_tenant.insert(key, record);
                }
            }
        }
    }
    Ok(jobs
        .iter()
        .map(|new| {
            let key = new.idempotency_key.as_deref()?;
            found.get(&new.tenant)?.get(key).cloned()
        })
        .collect())
}

async fn job_by_key(tx: &mut Tx, tenant: &TenantId, key: &str) -> Result<Option<JobRecord>, StoreError> {
    let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE tenant_id = $1 AND idempotency_key = $2");
    Ok(fetch_jobs(tx, &sql, vec![Value::from(tenant.0.as_str()), Value::from(key)]).await?.pop())
}

fn ids_of(rows: Vec<super::sql::Row>) -> Result<Vec<JobId>, StoreError> {
    rows.iter().map(|r| parse_id(&r.text(0, "jobs.id")?, "jobs.id")).collect()
}

impl SqlStore {
    /// Inserts jobs; with `pinned`, only if their kind versions are current
    /// ([`insert_new_jobs`] checks).
    ///
    /// On PostgreSQL a submission goes first without a transaction ([`Db::autocommit`]):
    /// its writes are one statement ([`insert_in_one_statement`]), which commits whole or
    /// not at all, and its reads (idempotency keys, limits, fair-share clocks) lock
    /// nothing, so a transaction around them added only its `BEGIN` and `COMMIT`: two of
    /// a single submission's four round trips. A tenant with a queue or rate quota needs
    /// its admission row locked until the jobs are written; then, having written nothing,
    /// the submission goes again in a transaction.
    ///
    /// [`Db::autocommit`]: super::sql::Db::autocommit
    ///
    /// With `urgent` (a few jobs, or a few submissions of a few merged), SQLite lets the
    /// submission go before the group commits waiting for its writer; a bulk one waits
    /// its turn as they do.
    async fn write_submission(
        &self,
        jobs: Vec<NewJob>,
        now: Timestamp,
        pinned: bool,
        urgent: bool,
    ) -> Result<Vec<Inserted>, StoreError> {
        let mut jobs = match self.db.autocommit() {
            Some(each) => match self.insert_in(each, jobs, now, pinned).await? {
                Ok(inserted) => return Ok(inserted),
                Err(jobs) => jobs,
            },
            None => jobs,
        };
        for _ in 0..TRANSACTION_ATTEMPTS {
            let tx = if urgent { self.db.begin_urgent().await? } else { self.db.begin().await? };
            match self.insert_in(tx, jobs, now, pinned).await? {
                Ok(inserted) => return Ok(inserted),
                // Statements gone stale under a migration: written nothing; again.
                Err(back) => jobs = back,
            }
        }
        Err(StoreError::Interrupted("a submission's statements kept going stale under migrations".into()))
    }

    /// [`write_submission`](Self::write_submission) in `tx`; gives the jobs back, having written nothing,
    /// when `tx` is no transaction and a tenant's quota needs one
    /// ([`Admission::NeedsTransaction`](super::capacity::Admission::NeedsTransaction)), or when a
    /// statement before the insert's end met statements a migration made stale
    /// (`sql::retire_if_stale`: the connections that cached them are retired).
    async fn insert_in(
        &self,
        mut tx: Tx,
        jobs: Vec<NewJob>,
        now: Timestamp,
        pinned: bool,
    ) -> Result<Result<Vec<Inserted>, Vec<NewJob>>, StoreError> {
        // Up to the insert, a failed statement wrote nothing (outside a transaction the
        // insert is the one statement that writes).
        let written = async {
            // Jobs whose idempotency key already names a job answer that job.
            let existing = jobs_by_keys(&mut tx, &jobs).await?;
            let fresh: Vec<&NewJob> = jobs.iter().zip(&existing).filter(|(_, e)| e.is_none()).map(|(j, _)| j).collect();
            let any_ready = fresh.iter().any(|j| j.job.queue == spindle_core::QueueState::Ready);
            // Quotas first: a refused batch writes nothing (the transaction is dropped).
            let admitted = match super::capacity::admit(&mut tx, &fresh, self.fair, now).await? {
                Admission::Admitted(admitted) => admitted,
                Admission::Refused(refusal) => return Err(StoreError::QuotaExceeded(refusal)),
                Admission::NeedsTransaction => return Ok(None),
            };
            let seqs = insert_new_jobs(&mut tx, &fresh, now, self.fair, Some(&admitted), any_ready, pinned).await?;
            Ok(Some((existing, seqs)))
        }
        .await;
        let (existing, seqs) = match written {
            Ok(Some(written)) => written,
            Ok(None) => return Ok(Err(jobs)),
            Err(StoreError::Database(e)) if retire_if_stale(&e) => return Ok(Err(jobs)),
            Err(e) => return Err(e),
        };
        let mut seqs = seqs.into_iter();
        let mut out = Vec::with_capacity(jobs.len());
        for (new, found) in jobs.into_iter().zip(existing) {
            if let Some(found) = found {
                out.push(Inserted::Existing(found));
                continue;
            }
            match seqs.next().flatten() {
                Some(seq) => out.push(Inserted::Created(new.into_record(seq))),
                None => {
                    // Another submission (concurrent, or earlier in this batch) took the key.
                    let key = new.idempotency_key.as_deref().unwrap_or_default();
                    let found = job_by_key(&mut tx, &new.tenant, key)
                        .await?
                        .ok_or_else(|| corrupt("idempotency conflict without a job"))?;
                    out.push(Inserted::Existing(found));
                }
            }
        }
        tx.commit().await?;
        Ok(Ok(out))
    }
}

#[async_trait]
impl JobStore for SqlStore {
    async fn insert_jobs(&self, jobs: Vec<NewJob>, now: Timestamp) -> Result<Vec<Inserted>, StoreError> {
        let urgent = jobs.len() <= URGENT_SUBMISSION;
        self.write_submission(jobs, now, false, urgent).await
    }

    async fn submit_jobs(&self, jobs: Vec<NewJob>, now: Timestamp) -> Result<Vec<Inserted>, StoreError> {
        self.submissions.submit(self, jobs, now).await
    }

    async fn job(&self, id: JobId) -> Result<Option<JobRecord>, StoreError> {
        let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id = $1");
        let rows =
            self.db.fetch(&sql, vec![Value::from(id.to_string())], JOB.tys).await.map_err(|e| JOB.in_table(e))?;
        let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
        let Some(mut record) = records.pop() else { return Ok(None) };
        if record.job.rules.lean {
            // Its steps came with its row.
            restore_claim(&mut record.job);
            return Ok(Some(record));
        }
        let steps = self
            .db
            .fetch(
                &format!("SELECT {} FROM steps WHERE job_id = $1 AND pass = $2 ORDER BY position", STEP.list()),
                vec![Value::from(id.to_string()), Value::from(i64::from(record.job.pass))],
                STEP.tys,
            )
            .await
            .map_err(|e| STEP.in_table(e))?;
        for mut row in steps {
            record.job.steps.push(step_from(&mut STEP.read(&mut row))?);
        }
        restore_claim(&mut record.job);
        Ok(Some(record))
    }

    async fn update_job(
        &self,
        id: JobId,
        now: Timestamp,
        derive: Derive<'_>,
        deriver: &dyn Deriver,
    ) -> Result<Updated, StoreError> {
        self.update_locked(id, None, now, derive, deriver).await
    }

    async fn signal_job(
        &self,
        id: JobId,
        key: Option<&str>,
        now: Timestamp,
        derive: Derive<'_>,
        deriver: &dyn Deriver,
    ) -> Result<Updated, StoreError> {
        self.update_locked(id, key, now, derive, deriver).await
    }

    async fn write(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<Vec<WriteOutcome>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let writes: Vec<&JobWrite> = writes.iter().collect();
        let mut attempt = 1;
        loop {
            let run = async {
                let mut tx = self.db.begin().await?;
                let outcomes = commit_writes(&mut tx, &writes, now, deriver).await?;
                tx.commit().await?;
                Ok(outcomes)
            };
            match run.await {
                Err(e) if attempt < TRANSACTION_ATTEMPTS && retryable(&e) => {
                    tracing::warn!(error = %e, attempt, "a write transaction failed for a passing reason; running it again");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn lapsed_claims(&self, now: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id FROM jobs WHERE claim_expires_at IS NOT NULL AND claim_expires_at <= $1 \
                 ORDER BY claim_expires_at LIMIT $2",
                vec![Value::from(now.as_micros()), Value::from(i64::from(limit))],
                &[Ty::Text],
            )
            .await?;
        ids_of(rows)
    }

    async fn silent_jobs(&self, before: Timestamp, limit: u32) -> Result<Vec<JobId>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT id FROM jobs WHERE state IN ('pending', 'running') AND last_activity_at <= $1 \
                 ORDER BY last_activity_at LIMIT $2",
                vec![Value::from(before.as_micros()), Value::from(i64::from(limit))],
                &[Ty::Text],
            )
            .await?;
        ids_of(rows)
    }

    async fn history(&self, id: JobId) -> Result<Vec<HistoryEntry>, StoreError> {
        static HISTORY: Columns =
            Columns { table: "history", names: &["id", "at", "body"], tys: &[Ty::Int, Ty::Int, Ty::Text] };
        let rows = self
            .db
            .fetch(
                &format!("SELECT {} FROM history WHERE job_id = $1 ORDER BY id", HISTORY.list()),
                vec![Value::from(id.to_string())],
                HISTORY.tys,
            )
            .await
            .map_err(|e| HISTORY.in_table(e))?;
        rows.into_iter()
            .map(|mut row| {
                let r = HISTORY.read(&mut row);
                Ok(HistoryEntry { id: r.int("id")?, at: r.ts("at")?, event: r.json("body")? })
            })
            .collect()
    }

    async fn append_history(&self, id: JobId, events: &[HistoryEvent], now: Timestamp) -> Result<(), StoreError> {
        let mut tx = self.db.begin().await?;
        let rows = history_rows(&id.to_string(), now, events)?;
        insert_rows(&mut tx, "INSERT INTO history (job_id, at, event, body)", "", 4, rows).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_jobs(&self, tenant: &TenantId, filter: &JobFilter) -> Result<Vec<JobRecord>, StoreError> {
        let mut tx = self.db.begin().await?;
        // Sequence numbers follow submission: a time filter bounds the scan by the
        // sequence numbers of the times asked for (found by bisection), then by the times
        // themselves.
        let mut bounds = SeqBounds::default();
        if let Some(after) = filter.created_after {
            bounds.from = Some(seq_at(&mut tx, tenant, after.as_micros() - CLOCK_SKEW_MICROS).await?);
        }
        if let Some(before) = filter.created_before {
            bounds.until = Some(seq_at(&mut tx, tenant, before.as_micros() + CLOCK_SKEW_MICROS).await?);
        }
        let (sql, args) = listing(tenant, filter, bounds);
        let records = fetch_jobs(&mut tx, &sql, args).await?;
        tx.commit().await?;
        Ok(records)
    }

    async fn reclaim_pruned(&self) -> Result<(), StoreError> {
        Ok(self.db.vacuum(&["jobs", "steps", "history", "outbox", "outbound_calls", "signals"]).await?)
    }

    async fn prune(&self, before: Timestamp, scope: &PruneScope, limit: u32) -> Result<u64, StoreError> {
        let mut args = vec![Value::from(before.as_micros()), Value::from(i64::from(limit))];
        let tenants = match scope {
            PruneScope::Tenant(tenant) => {
                args.push(Value::from(tenant.0.as_str()));
                " AND tenant_id = $3".to_owned()
            }
            PruneScope::AllBut(kept) if kept.is_empty() => String::new(),
            PruneScope::AllBut(kept) => {
                let first = args.len() + 1;
                args.extend(kept.iter().map(|t| Value::from(t.0.as_str())));
                format!(" AND tenant_id NOT IN ({})", super::rows::placeholders(first, kept.len()))
            }
        };
        let lock = self.db.backend().skip_locked();
        let mut tx = self.db.begin().await?;
        let sql = format!(
            "SELECT id FROM jobs WHERE settled_at IS NOT NULL AND settled_at < $1{tenants} ORDER BY settled_at LIMIT $2{lock}"
        );
        let ids: Vec<String> =
            tx.fetch(&sql, args, &[Ty::Text]).await?.iter().map(|r| r.text(0, "jobs.id")).collect::<Result<_, _>>()?;
        if ids.is_empty() {
            tx.commit().await?;
            return Ok(0);
        }
        for chunk in ids.chunks(MAX_PARAMS) {
            let list = super::rows::placeholders(1, chunk.len());
            let args = || chunk.iter().map(|id| Value::from(id.as_str())).collect::<Vec<_>>();
            for table in
                ["steps", "history", "outbox", "outbound_calls", "signals", "job_logs", "job_log_totals", "job_traces"]
            {
                tx.execute(&format!("DELETE FROM {table} WHERE job_id IN ({list})"), args()).await?;
            }
            tx.execute(&format!("DELETE FROM jobs WHERE id IN ({list})"), args()).await?;
        }
        tx.commit().await?;
        Ok(ids.len() as u64)
    }

    async fn count_jobs(&self, tenant: &TenantId, cap: u64) -> Result<Vec<(JobState, String, u64)>, StoreError> {
        // One arm per state, each a bounded scan of the `(tenant_id, state, seq)` index.
        let arms: Vec<String> = <JobState as DiagramState>::all()
            .iter()
            .enumerate()
            .map(|(i, state)| {
                let state = state.as_str();
                format!(
                    "SELECT '{state}' AS state, kind, COUNT(*) AS n FROM \
                     (SELECT kind FROM jobs WHERE tenant_id = $1 AND state = '{state}' LIMIT {cap}) AS c{i} GROUP BY kind"
                )
            })
            .collect();
        let rows = self
            .db
            .fetch(&arms.join(" UNION ALL "), vec![Value::from(tenant.0.as_str())], &[Ty::Text, Ty::Text, Ty::Int])
            .await?;
        rows.iter()
            .map(|r| {
                let state = r.text(0, "jobs.state")?;
                let state = JobState::parse(&state).ok_or_else(|| corrupt(format!("job state {state:?}")))?;
                Ok((state, r.text(1, "jobs.kind")?, r.num(2, "jobs.count (by state)")?))
            })
            .collect()
    }

    async fn count_kind_jobs(
        &self,
        tenant: &TenantId,
        kind: &str,
        cap: u64,
    ) -> Result<Vec<(JobState, u64)>, StoreError> {
        let sql = format!(
            "SELECT state, COUNT(*) FROM (SELECT state FROM jobs WHERE tenant_id = $1 AND kind = $2 \
             ORDER BY seq DESC LIMIT {cap}) AS newest GROUP BY state"
        );
        let rows =
            self.db.fetch(&sql, vec![Value::from(tenant.0.as_str()), Value::from(kind)], &[Ty::Text, Ty::Int]).await?;
        rows.iter()
            .map(|r| {
                let state = r.text(0, "jobs.state")?;
                let state = JobState::parse(&state).ok_or_else(|| corrupt(format!("job state {state:?}")))?;
                Ok((state, r.num(1, "jobs.count (of a kind)")?))
            })
            .collect()
    }

    async fn queue_depth(&self, tenant: &TenantId) -> Result<Vec<QueueDepth>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT kind, priority, SUM(CASE WHEN queue = 1 THEN 1 ELSE 0 END), \
                 SUM(CASE WHEN queue = 2 THEN 1 ELSE 0 END), SUM(CASE WHEN queue = 3 THEN 1 ELSE 0 END), \
                 SUM(CASE WHEN state = 'waiting' THEN 1 ELSE 0 END), \
                 SUM(CASE WHEN claim_expires_at IS NOT NULL THEN 1 ELSE 0 END), \
                 SUM(CASE WHEN state = 'paused' THEN 1 ELSE 0 END) FROM jobs \
                 WHERE tenant_id = $1 AND state IN ('pending', 'running', 'paused', 'waiting') \
                 GROUP BY kind, priority ORDER BY kind, priority",
                vec![Value::from(tenant.0.as_str())],
                &[Ty::Text, Ty::Int, Ty::Int, Ty::Int, Ty::Int, Ty::Int, Ty::Int, Ty::Int],
            )
            .await?;
        let count = |r: &super::sql::Row, i| r.num::<u64>(i, "jobs.count (queue depth)");
        rows.iter()
            .map(|r| {
                let rank = r.int(1, "jobs.priority")?;
                let priority = spindle_core::policy::priority::Priority::ALL
                    .iter()
                    .copied()
                    .find(|p| i64::from(p.rank()) == rank)
                    .ok_or_else(|| corrupt(format!("priority rank {rank}")))?;
                Ok(QueueDepth {
                    kind: r.text(0, "jobs.kind")?,
                    priority,
                    ready: count(r, 2)?,
                    delayed: count(r, 3)?,
                    blocked: count(r, 4)?,
                    waiting: count(r, 5)?,
                    running: count(r, 6)?,
                    paused: count(r, 7)?,
                })
            })
            .collect()
    }

    async fn running_by_tenant(&self) -> Result<Vec<(TenantId, u64)>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT tenant_id, COUNT(*) FROM jobs WHERE claim_expires_at IS NOT NULL GROUP BY tenant_id",
                vec![],
                &[Ty::Text, Ty::Int],
            )
            .await?;
        rows.iter().map(|r| Ok((TenantId(r.text(0, "jobs.tenant_id")?), r.num(1, "jobs.count (running)")?))).collect()
    }

    async fn depths(&self) -> Result<Vec<Depth>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT tenant_id, kind, state, COUNT(*) FROM jobs WHERE state IN ('pending', 'running', 'paused') \
                 GROUP BY tenant_id, kind, state",
                vec![],
                &[Ty::Text, Ty::Text, Ty::Text, Ty::Int],
            )
            .await?;
        rows.iter()
            .map(|r| {
                Ok(Depth {
                    tenant: TenantId(r.text(0, "jobs.tenant_id")?),
                    kind: r.text(1, "jobs.kind")?,
                    state: r.text(2, "jobs.state")?,
                    count: r.int(3, "jobs.count (depth)")?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::store::sql::Backend;
    use spindle_core::Job;
    use spindle_core::job::{KindRules, Submission};
    use spindle_core::policy::priority::Priority;

    use super::*;
    use crate::store::sql::Db;
    use crate::store::test_db::fresh;

    fn new_job(run_at: Timestamp, now: Timestamp) -> NewJob {
        let rules = KindRules {
            cancellable: true,
            max_attempts: 1,
            failure_effect: false,
            notify_on_success: false,
            lean: false,
        };
        let id = JobId(uuid::Uuid::now_v7());
        let (job, history) = Job::submit(Submission { id, rules, steps: vec![("run".into(), 1)], run_at }, now);
        NewJob {
            job,
            tenant: TenantId::default_tenant(),
            kind: "noop".into(),
            kind_version: 1,
            priority: Priority::Normal,
            payload: Vec::new(),
            idempotency_key: None,
            lease_keys: Vec::new(),
            history,
        }
    }

    /// The ready signal travels in the submission's one statement on PostgreSQL: a host
    /// listening hears of a job submitted ready, and (the statement still writing
    /// everything) the job is there to claim.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_submission_of_ready_work_signals_listening_hosts() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        crate::store::schema::migrate(&test.db).await.unwrap();
        let Db::Postgres(pool) = &test.db else { unreachable!("a PostgreSQL database") };
        let mut listener = sqlx::postgres::PgListener::connect_with(pool).await.unwrap();
        listener.listen("spindle_ready").await.unwrap();
        let store = SqlStore::on(test.db.clone());
        let now = Timestamp::from_micros(1_000_000);
        let job = new_job(now, now);
        let inserted = store.insert_jobs(vec![job.clone()], now).await.unwrap();
        assert!(matches!(inserted[..], [Inserted::Created(_)]), "{inserted:?}");
        let heard = tokio::time::timeout(std::time::Duration::from_secs(30), listener.recv()).await;
        assert_eq!(heard.expect("heard in time").unwrap().channel(), "spindle_ready");
        assert_eq!(store.job(job.job.id).await.unwrap().map(|r| r.job.steps.len()), Some(1));
        drop(listener);
        test.drop().await;
    }

    /// A tenant's listing of every state reads its `(tenant_id, state, seq)` index one
    /// state at a time and merges the pages (the table keeps no index by tenant and
    /// sequence alone), and the time filters find their sequence bounds by bisection over
    /// the same index.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_tenant_listing_reads_its_index_one_state_at_a_time() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { continue };
            crate::store::schema::migrate(&test.db).await.unwrap();
            let store = SqlStore::on(test.db.clone());
            let minute = 60_000_000;
            let base = 1_000 * minute;
            let at = |batch: i64| Timestamp::from_micros(base + batch * minute);
            // Twenty submissions of fifty jobs, a minute apart.
            for batch in 0..20 {
                let jobs = (0..50).map(|_| new_job(at(batch), at(batch))).collect();
                store.insert_jobs(jobs, at(batch)).await.unwrap();
            }
            let tenant = TenantId::default_tenant();
            let page = JobFilter { limit: 1000, ..JobFilter::default() };

            let (sql, args) = listing(&tenant, &JobFilter { limit: 50, ..page.clone() }, SeqBounds::default());
            let plan = crate::store::test_db::plan(&test.db, &sql, args).await;
            let states = <JobState as DiagramState>::all().len();
            // An ordered read of the index (its pages merged after): no sort of the
            // tenant's rows.
            let read = match backend {
                Backend::Sqlite => "SEARCH jobs USING INDEX jobs_tenant_state",
                Backend::Postgres => "Index Scan Backward using jobs_tenant_state",
            };
            assert_eq!(plan.matches(read).count(), states, "{backend:?}: one read of the index per state:\n{plan}");
            assert!(
                !plan.contains("Seq Scan") && !plan.contains("SCAN jobs"),
                "{backend:?}: the table is scanned:\n{plan}"
            );

            let all = store.list_jobs(&tenant, &page).await.unwrap();
            assert_eq!(all.len(), 1000);
            assert!(all.windows(2).all(|w| w[0].seq > w[1].seq), "{backend:?}: newest first");
            let newest = store.list_jobs(&tenant, &JobFilter { limit: 50, ..page.clone() }).await.unwrap();
            assert_eq!(newest, all[..50].to_vec(), "{backend:?}: the first page is the newest fifty");

            let between = |after: Option<i64>, before: Option<i64>| {
                let filter = JobFilter { created_after: after.map(at), created_before: before.map(at), ..page.clone() };
                let store = &store;
                async move { store.list_jobs(&TenantId::default_tenant(), &filter).await.unwrap() }
            };
            let ids = |records: Vec<JobRecord>| records.into_iter().map(|r| r.job.id).collect::<Vec<_>>();
            assert_eq!(
                ids(between(Some(5), Some(8)).await),
                ids(all[600..750].to_vec()),
                "{backend:?}: submitted in minutes 5 to 7"
            );
            assert_eq!(ids(between(Some(18), None).await), ids(all[..100].to_vec()), "{backend:?}: from minute 18 on");
            assert_eq!(ids(between(None, Some(1)).await), ids(all[950..].to_vec()), "{backend:?}: before minute 1");
            assert!(between(Some(20), None).await.is_empty(), "{backend:?}: after the last submission");
            assert!(between(None, Some(0)).await.is_empty(), "{backend:?}: before the first");
            test.drop().await;
        }
    }
}
