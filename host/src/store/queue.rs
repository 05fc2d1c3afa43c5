//! Work discovery: the dispatch queue as the store indexes it, and the writes that move
//! jobs through it.
//!
//! Every change of a job's queue state is the core's answer: the store selects
//! candidates through its indexes and asks a [`Deriver`] (the engine, which asks the
//! pure core) for each job's write — a claim, a promotion of a due job, a wait on a busy
//! lease key, a wake when the key is released — then commits what it answers,
//! version-checked. It never sets a queue column itself.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use spindle_core::Timestamp;

use super::capacity::{CAPACITY_RECHECK, Freeing, Verdict, freeing_failed, gate_claims};
use super::door_tags::DoorTags;
use super::error::StoreError;
use super::handle::SqlStore;
use super::job_rows::{JOB_COLS, JOB_TYS, attach_steps, fetch_jobs, job_from_row};
use super::records::{ClaimFilter, Deriver, JobRecord, JobWrite, TenantId, WriteOutcome, queue_code};
use super::rows::placeholders;
use super::sql::{Db, Tx, Ty, Value, on_live_connection};
use super::writes::{TRANSACTION_ATTEMPTS, apply_writes, finish, notify_ready, retryable, wake_gated};

/// The dispatch queue.
#[async_trait]
pub trait QueueStore: Send + Sync {
    /// Takes up to `limit` ready jobs that `filter` admits, best first (priority, then
    /// fair tag, then sequence), each claim derived by `deriver` inside the transaction;
    /// answers the claimed records. A candidate whose lease key is held waits for it
    /// (blocked), as does one whose tenant's or kind's running limit is full.
    async fn claim(
        &self,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        deriver: &dyn Deriver,
    ) -> Result<Vec<JobRecord>, StoreError>;
    /// Commits `writes` and claims up to `claim_limit` ready jobs in one transaction (a
    /// step's outcome and its worker's next job share a commit); answers the writes'
    /// outcomes and the claimed records.
    async fn write_and_claim(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        claim_limit: u32,
        filter: &ClaimFilter,
        deriver: &dyn Deriver,
    ) -> Result<(Vec<WriteOutcome>, Vec<JobRecord>), StoreError>;
    /// Whether any job `filter` admits (never its `except`ed tenants) is ready: a read, so
    /// that a claim that would find nothing need not take the writer's turn.
    async fn any_ready(&self, filter: &ClaimFilter) -> Result<bool, StoreError>;
    /// Makes up to `limit` delayed or blocked jobs whose time has come ready, each
    /// through `deriver`; answers how many.
    async fn promote_due(&self, now: Timestamp, limit: u32, deriver: &dyn Deriver) -> Result<u64, StoreError>;
    /// When the next delayed or blocked job becomes due.
    async fn next_due(&self) -> Result<Option<Timestamp>, StoreError>;
    /// Wakes up to `count` of the jobs waiting on `gate` (best first), each through
    /// `deriver`; answers whether any became ready.
    async fn wake_gate(
        &self,
        gate: &str,
        count: u32,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<bool, StoreError>;
    /// Signals that other hosts made work ready.
    fn ready_signals(&self) -> ReadySignals;
    /// Signals that an application submitted through SQL (`LISTEN spindle_submissions`);
    /// never on SQLite, which has no such door.
    fn sql_submission_signals(&self) -> ReadySignals;
}

/// "Work is ready" signals from writes this host's engine did not make or cannot see
/// the effect of: PostgreSQL's `LISTEN spindle_ready`, relayed over a connection of its
/// own that reconnects when lost; on an embedded SQLite store, the writer's own signal
/// for jobs a write woke (a parent whose last child settled, a key released).
#[derive(Debug)]
pub struct ReadySignals {
    pool: Option<sqlx::PgPool>,
    channel: &'static str,
    listener: Option<sqlx::postgres::PgListener>,
    local: Option<tokio::sync::watch::Receiver<u64>>,
    /// The door's channel: a notification counts only with the door's tag (read with
    /// the key when the listener connects).
    door: Option<Option<DoorTags>>,
    ignored: u64,
}

/// How long a lost `LISTEN` connection waits before it connects again.
const RELISTEN_AFTER: Duration = Duration::from_secs(1);

impl ReadySignals {
    /// The next signal.
    pub async fn next(&mut self) {
        if let Some(local) = self.local.as_mut() {
            if local.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            return;
        }
        if self.pool.is_none() {
            return std::future::pending().await;
        }
        loop {
            self.listening().await;
            let Some(listener) = self.listener.as_mut() else { continue };
            match listener.recv().await {
                Ok(notification) => {
                    let door = self.door.as_mut().and_then(Option::as_mut);
                    if door.is_none_or(|tags| tags.accepts(notification.payload())) {
                        return;
                    }
                    self.ignored += 1;
                    tracing::trace!(channel = self.channel, "a notification without the door's tag; ignored");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                    self.listener = None;
                    tokio::time::sleep(RELISTEN_AFTER).await;
                }
            }
        }
    }

    /// Connects the listener (and reads the door's key, on its channel) unless it is
    /// connected; a failure is logged and tried again after a pause.
    pub async fn listening(&mut self) {
        let Some(pool) = &self.pool else { return };
        while self.listener.is_none() {
            let listener = match listen(pool, self.channel).await {
                Ok(listener) => listener,
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN connection failed; retrying");
                    tokio::time::sleep(RELISTEN_AFTER).await;
                    continue;
                }
            };
            if let Some(door) = self.door.as_mut() {
                match sqlx::query_scalar::<_, String>("SELECT key FROM spindle.door_key").fetch_one(pool).await {
                    Ok(key) => *door = Some(DoorTags::new(key)),
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the SQL door's key failed; retrying");
                        tokio::time::sleep(RELISTEN_AFTER).await;
                        continue;
                    }
                }
            }
            self.listener = Some(listener);
        }
    }

    /// Notifications ignored so far: on the door's channel, those without its tag (or
    /// seen before).
    pub fn ignored(&self) -> u64 {
        self.ignored
    }
}

/// A listener on a pooled connection (one the server ended while pooled is passed over).
pub(super) async fn listen(
    pool: &sqlx::PgPool,
    channel: &'static str,
) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    on_live_connection(pool, "LISTEN", || async {
        let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
        listener.listen(channel).await?;
        Ok(listener)
    })
    .await
}

/// The candidates a claim considers: filter (ready; kind; tenant) → order by the cheap
/// score the index holds (priority, fair tag, sequence) → a finalist set of `limit`,
/// each row locked (skipping rows other claims hold). The exact checks are the running
/// limits' and the deriver's. `taken`: rows this claim's earlier rounds chose.
///
/// A claim that passes over tenants at their share or turns some away (`filter`'s
/// `pass_over` and `except`) reads [`HEAD_WINDOW`] rows more at the head of the order and
/// chooses among them: the others' jobs first, the passed-over tenants' after, the
/// turned-away never. A condition on the tenant in SQL would walk a noisy tenant's whole
/// backlog whenever nobody else has work ready (100,000 rows for each settled step);
/// with fair claiming, another tenant's ready job is at the head.
///
/// No `run_at` condition: a ready job is due by the core's answer, and on PostgreSQL a
/// second condition turned the ordered index scan that stops at `limit` into a scan of
/// every ready row and a sort (group commits took 25% longer at 20,000 ready jobs).
async fn candidates(tx: &mut Tx, limit: u32, filter: &ClaimFilter, taken: &[i64]) -> Result<Candidates, StoreError> {
    let choosing = !filter.pass_over.is_empty() || !filter.except.is_empty();
    let read = if choosing { limit.saturating_add(HEAD_WINDOW) } else { limit };
    let mut args = vec![Value::from(i64::from(read))];
    let mut extra = String::new();
    if !taken.is_empty() {
        // This claim's earlier rounds chose these; they are still ready until it commits.
        extra.push_str(&format!(" AND seq NOT IN ({})", placeholders(2, taken.len())));
        args.extend(taken.iter().map(|seq| Value::from(*seq)));
    }
    filter_conditions(filter, &mut extra, &mut args);
    // Whether a running limit applies to the candidate, read with it: a claim of jobs no
    // limit applies to costs no statement more.
    let sql = format!(
        "SELECT {JOB_COLS}, {LIMITED} FROM jobs WHERE queue = {}{extra} ORDER BY priority, fair_tag, seq LIMIT $1{}",
        queue_code(spindle_core::QueueState::Ready),
        tx.backend().skip_locked()
    );
    let mut tys = JOB_TYS.to_vec();
    tys.push(Ty::Int);
    let rows = tx.fetch(&sql, args, &tys).await?;
    let exhausted = rows.len() < read as usize;
    let mut chosen = Vec::with_capacity(rows.len());
    for row in rows {
        let limited = row.int(JOB_TYS.len(), "jobs.limited")? != 0;
        chosen.push((job_from_row(row)?, limited));
    }
    if choosing {
        chosen.retain(|(record, _)| !filter.except.contains(&record.tenant));
        // A stable sort: each group keeps the claim order.
        chosen.sort_by_key(|(record, _)| filter.pass_over.contains(&record.tenant));
        chosen.truncate(limit as usize);
    }
    let (mut records, limited): (Vec<JobRecord>, Vec<bool>) = chosen.into_iter().unzip();
    attach_steps(tx, &mut records).await?;
    Ok(Candidates { records, limited, exhausted })
}

/// Rows a claim that passes over or turns away tenants reads past its `limit`, and that
/// a reserve's probe reads: the head of the claim order it chooses among.
const HEAD_WINDOW: u32 = 16;

/// What [`candidates`] read: the records, whether a running limit applies to each, and
/// whether the ready queue ran out before the read did.
struct Candidates {
    records: Vec<JobRecord>,
    limited: Vec<bool>,
    exhausted: bool,
}

/// The conditions of `filter` (its kinds and tenants), appended to `sql` as `AND …` with
/// their values after `args`. Tenants it passes over or turns away are chosen among the
/// rows read (see [`candidates`]).
fn filter_conditions(filter: &ClaimFilter, sql: &mut String, args: &mut Vec<Value>) {
    for (column, values) in
        [("kind", filter.kinds.clone()), ("tenant_id", filter.tenants.iter().map(|t| t.0.clone()).collect())]
    {
        if values.is_empty() {
            continue;
        }
        sql.push_str(&format!(" AND {column} IN ({})", placeholders(args.len() + 1, values.len())));
        args.extend(values.into_iter().map(Value::from));
    }
}

/// 1 when a running limit applies to the job row (its tenant's or its kind's), else 0.
const LIMITED: &str = "CAST(CASE WHEN EXISTS (SELECT 1 FROM tenant_limits l WHERE l.tenant_id = jobs.tenant_id \
                       AND l.max_running IS NOT NULL) OR EXISTS (SELECT 1 FROM kind_limits k \
                       WHERE k.tenant_id = jobs.tenant_id AND k.kind = jobs.kind) THEN 1 ELSE 0 END AS BIGINT)";

/// A claim being committed: each candidate as read, and as its claim makes it.
struct Claims {
    read: Vec<JobRecord>,
    claimed: Vec<JobRecord>,
}

/// How many times one claim looks past candidates that running limits turned away.
const GATE_ROUNDS: usize = 4;

impl Claims {
    /// The claims of up to `limit` candidates, and their writes. Candidates a running
    /// limit turns away wait for a slot (written at once, so that the next round's
    /// candidates are others): a full tenant's backlog never hides other tenants' jobs
    /// behind it for more than [`GATE_ROUNDS`] rounds of one claim.
    async fn derive(
        tx: &mut Tx,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        freeing: &Freeing,
        deriver: &dyn Deriver,
    ) -> Result<(Self, Vec<JobWrite>), StoreError> {
        let mut claims = Self { read: Vec::new(), claimed: Vec::new() };
        let mut writes = Vec::new();
        for _ in 0..GATE_ROUNDS {
            let wanted = limit.saturating_sub(u32::try_from(claims.read.len()).unwrap_or(u32::MAX));
            if wanted == 0 {
                break;
            }
            let taken: Vec<i64> = claims.read.iter().map(|r| r.seq).collect();
            let Candidates { records, limited, exhausted } = candidates(tx, wanted, filter, &taken).await?;
            let verdicts = gate_claims(tx, &records, &limited, &claims.read, freeing).await?;
            let mut gated = Vec::new();
            for (candidate, verdict) in records.into_iter().zip(verdicts) {
                let limited = match verdict {
                    Verdict::Wait(gate) => {
                        gated.extend(deriver.at_capacity(&candidate, &gate, now.plus(CAPACITY_RECHECK), now));
                        continue;
                    }
                    Verdict::Claim { limited } => limited,
                };
                if let Some((gate, recheck_at)) = deriver.hold(&candidate, now) {
                    gated.extend(deriver.at_capacity(&candidate, &gate, recheck_at, now));
                } else if let Some(mut write) = deriver.claim(&candidate, now) {
                    if let Some(claim) = write.record.job.claim.as_mut() {
                        claim.limited = limited;
                    }
                    claims.claimed.push(write.record.clone());
                    writes.push(write);
                    claims.read.push(candidate);
                }
            }
            if !gated.is_empty() {
                // A wait writes the job alone: no key, no running slot.
                apply_writes(tx, &gated.iter().collect::<Vec<_>>(), now).await?;
            }
            if gated.is_empty() || exhausted {
                break;
            }
        }
        Ok((claims, writes))
    }

    /// What the claim writes came to: the claimed records at their new version. A
    /// candidate whose lease key is held waits for it, as the core answers.
    async fn settle(
        self,
        tx: &mut Tx,
        outcomes: Vec<WriteOutcome>,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut claimed = Vec::with_capacity(self.claimed.len());
        let mut waits = Vec::new();
        for ((read, record), outcome) in self.read.iter().zip(self.claimed).zip(outcomes) {
            match outcome {
                WriteOutcome::Written { version } => claimed.push(JobRecord { version, ..record }),
                WriteOutcome::LeaseBusy { key, held_until } => {
                    waits.extend(deriver.key_busy(read, &key, held_until, now));
                }
                WriteOutcome::Conflict | WriteOutcome::LeaseLost => {}
            }
        }
        if !waits.is_empty() {
            // A wait writes the job alone: it takes, renews and releases no key.
            apply_writes(tx, &waits.iter().collect::<Vec<_>>(), now).await?;
        }
        Ok(claimed)
    }
}

#[async_trait]
impl QueueStore for SqlStore {
    async fn claim(
        &self,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        deriver: &dyn Deriver,
    ) -> Result<Vec<JobRecord>, StoreError> {
        let mut attempt = 1;
        loop {
            let run = async {
                let mut tx = self.db.begin().await?;
                let (claims, writes) =
                    Claims::derive(&mut tx, limit, now, filter, &Freeing::default(), deriver).await?;
                if writes.is_empty() {
                    tx.commit().await?;
                    return Ok(Vec::new());
                }
                let mut applied = apply_writes(&mut tx, &writes.iter().collect::<Vec<_>>(), now).await?;
                let outcomes = std::mem::take(&mut applied.outcomes);
                let claimed = claims.settle(&mut tx, outcomes, now, deriver).await?;
                finish(&mut tx, &applied, now, deriver).await?;
                tx.commit().await?;
                Ok(claimed)
            };
            match run.await {
                Err(e) if attempt < TRANSACTION_ATTEMPTS && retryable(&e) => {
                    tracing::warn!(error = %e, attempt, "a claim failed for a passing reason; running it again");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    async fn write_and_claim(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        claim_limit: u32,
        filter: &ClaimFilter,
        deriver: &dyn Deriver,
    ) -> Result<(Vec<WriteOutcome>, Vec<JobRecord>), StoreError> {
        let mut attempt = 1;
        // The slots the batch's writes free count as free for its claims, unless one of
        // those writes did not land: then the transaction is dropped and run again
        // without counting them, so a limit is never exceeded.
        let mut trust_freeing = true;
        loop {
            let freeing = if trust_freeing { Freeing::of(&writes) } else { Freeing::default() };
            let run = async {
                let mut tx = self.db.begin().await?;
                // The candidates are read before the outcomes are written: a job settled
                // here is still claimed as read, so it is never its own successor's
                // candidate.
                let (claims, claim_writes) =
                    Claims::derive(&mut tx, claim_limit, now, filter, &freeing, deriver).await?;
                let all: Vec<&JobWrite> = writes.iter().chain(&claim_writes).collect();
                let mut applied = apply_writes(&mut tx, &all, now).await?;
                let claim_outcomes = applied.outcomes.split_off(writes.len());
                let outcomes = std::mem::take(&mut applied.outcomes);
                if freeing.counted() && freeing_failed(&writes, &outcomes) {
                    return Ok(None);
                }
                let claimed = claims.settle(&mut tx, claim_outcomes, now, deriver).await?;
                finish(&mut tx, &applied, now, deriver).await?;
                tx.commit().await?;
                Ok(Some((outcomes, claimed)))
            };
            match run.await {
                Ok(Some(result)) => return Ok(result),
                Ok(None) => trust_freeing = false,
                Err(e) if attempt < TRANSACTION_ATTEMPTS && retryable(&e) => {
                    tracing::warn!(error = %e, attempt, "a group commit failed for a passing reason; running it again");
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn promote_due(&self, now: Timestamp, limit: u32, deriver: &dyn Deriver) -> Result<u64, StoreError> {
        let mut tx = self.db.begin().await?;
        let sql = format!(
            "SELECT {JOB_COLS} FROM jobs WHERE queue >= {} AND run_at <= $1 ORDER BY run_at LIMIT $2{}",
            queue_code(spindle_core::QueueState::Delayed),
            self.db.backend().skip_locked()
        );
        let due = fetch_jobs(&mut tx, &sql, vec![Value::from(now.as_micros()), Value::from(i64::from(limit))]).await?;
        let writes: Vec<JobWrite> = due.iter().filter_map(|r| deriver.due(r, now)).collect();
        if writes.is_empty() {
            tx.commit().await?;
            return Ok(0);
        }
        let applied = apply_writes(&mut tx, &writes.iter().collect::<Vec<_>>(), now).await?;
        let promoted = applied.outcomes.iter().filter(|o| matches!(o, WriteOutcome::Written { .. })).count();
        finish(&mut tx, &applied, now, deriver).await?;
        tx.commit().await?;
        Ok(promoted as u64)
    }

    async fn any_ready(&self, filter: &ClaimFilter) -> Result<bool, StoreError> {
        let mut sql =
            format!("SELECT tenant_id FROM jobs WHERE queue = {}", queue_code(spindle_core::QueueState::Ready));
        let mut args = Vec::new();
        filter_conditions(filter, &mut sql, &mut args);
        sql.push_str(&format!(" ORDER BY priority, fair_tag, seq LIMIT {HEAD_WINDOW}"));
        for row in self.db.fetch(&sql, args, &[Ty::Text]).await? {
            if !filter.except.contains(&TenantId(row.text(0, "jobs.tenant_id")?)) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let sql =
            format!("SELECT MIN(run_at) FROM jobs WHERE queue >= {}", queue_code(spindle_core::QueueState::Delayed));
        let rows = self.db.fetch(&sql, vec![], &[Ty::OptInt]).await?;
        Ok(rows
            .first()
            .map(|r| r.opt_int(0, "jobs.run_at (soonest)"))
            .transpose()?
            .flatten()
            .map(Timestamp::from_micros))
    }

    async fn wake_gate(
        &self,
        gate: &str,
        count: u32,
        now: Timestamp,
        deriver: &dyn Deriver,
    ) -> Result<bool, StoreError> {
        let mut tx = self.db.begin().await?;
        let woke = wake_gated(&mut tx, &BTreeMap::from([(gate.to_owned(), count)]), now, deriver).await?;
        if woke {
            notify_ready(&mut tx).await?;
        }
        tx.commit().await?;
        Ok(woke)
    }

    fn ready_signals(&self) -> ReadySignals {
        match &self.db {
            Db::Postgres(pool) => ReadySignals {
                pool: Some(pool.clone()),
                channel: "spindle_ready",
                listener: None,
                local: None,
                door: None,
                ignored: 0,
            },
            Db::Sqlite { turns, .. } => ReadySignals {
                pool: None,
                channel: "spindle_ready",
                listener: None,
                local: Some(turns.ready_signals()),
                door: None,
                ignored: 0,
            },
        }
    }

    fn sql_submission_signals(&self) -> ReadySignals {
        let pool = match &self.db {
            Db::Postgres(pool) => Some(pool.clone()),
            Db::Sqlite { .. } => None,
        };
        ReadySignals { pool, channel: "spindle_submissions", listener: None, local: None, door: Some(None), ignored: 0 }
    }
}
