//! Work discovery: the dispatch queue as the store indexes it, and the writes that move
//! jobs through it.
//!
//! Every change of a job's queue state is the core's answer: the store selects
//! candidates through its indexes and asks a [`Deriver`] (the engine, which asks the
//! pure core) for each job's write — a claim, a promotion of a due job, a wait on a busy
//! lease key, a wake when the key is released — then commits what it answers,
//! version-checked. It never sets a queue column itself.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_trait::async_trait;
use spindle_core::Timestamp;

use super::capacity::{CAPACITY_RECHECK, Freeing, Verdict, freeing_failed, gate_claims};
use super::jobs::JobRecord;
use super::rows::{JOB_COLS, JOB_TYS, attach_steps, fetch_jobs, job_from_row, placeholders};
use super::sql::{Backend, Db, Tx, Ty, Value, on_live_connection};
use super::tenants::TenantId;
use super::writes::{JobWrite, TRANSACTION_ATTEMPTS, WriteOutcome, apply_writes, finish, queue_code, retryable};
use super::{SqlStore, StoreError};

/// The core's answers the store asks for inside its transactions. The engine implements
/// it with the job machine; each answer is a version-checked write of the job as read,
/// or `None` when the core refuses the event (the job is left as it is).
pub trait Deriver: Send + Sync {
    /// The claim of a ready job.
    fn claim(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite>;
    /// A ready job whose claim found `key` held by another job until `held_until`.
    fn key_busy(&self, record: &JobRecord, key: &str, held_until: Timestamp, now: Timestamp) -> Option<JobWrite>;
    /// A job blocked on `key`, which was released.
    fn key_released(&self, record: &JobRecord, key: &str, now: Timestamp) -> Option<JobWrite>;
    /// A delayed or blocked job whose time has come.
    fn due(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite>;
    /// A parent waiting for fan-out `slot`, `settled` of whose children are now final.
    fn children_settled(&self, record: &JobRecord, slot: &str, settled: u32, now: Timestamp) -> Option<JobWrite>;
    /// A ready job whose claim found the running limit `gate` full: it waits for a slot
    /// until `recheck_at` at the latest.
    fn at_capacity(&self, record: &JobRecord, gate: &str, recheck_at: Timestamp, now: Timestamp) -> Option<JobWrite>;
    /// Whether the host holds a candidate back (its kind's breaker is open): the gate it
    /// waits on and when to try again, or `None` to claim it.
    fn hold(&self, _record: &JobRecord, _now: Timestamp) -> Option<(String, Timestamp)> {
        None
    }
}

/// Which ready jobs a host takes: empty lists admit everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimFilter {
    /// Only these kinds.
    pub kinds: Vec<String>,
    /// Only these tenants.
    pub tenants: Vec<TenantId>,
}

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
}

/// "Work is ready" signals from writes this host's engine did not make or cannot see
/// the effect of: PostgreSQL's `LISTEN spindle_ready`, relayed over a connection of its
/// own that reconnects when lost; on an embedded SQLite store, the writer's own signal
/// for jobs a write woke (a parent whose last child settled, a key released).
#[derive(Debug)]
pub struct ReadySignals {
    pool: Option<sqlx::PgPool>,
    listener: Option<sqlx::postgres::PgListener>,
    local: Option<tokio::sync::watch::Receiver<u64>>,
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
        let Some(pool) = &self.pool else { return std::future::pending().await };
        loop {
            if self.listener.is_none() {
                match listen(pool).await {
                    Ok(listener) => self.listener = Some(listener),
                    Err(e) => {
                        tracing::warn!(error = %e, "LISTEN connection failed; retrying");
                        tokio::time::sleep(RELISTEN_AFTER).await;
                        continue;
                    }
                }
            }
            let Some(listener) = self.listener.as_mut() else { continue };
            match listener.recv().await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e, "LISTEN connection lost; reconnecting");
                    self.listener = None;
                    tokio::time::sleep(RELISTEN_AFTER).await;
                }
            }
        }
    }
}

/// A listener on a pooled connection (one the server ended while pooled is passed over).
pub(super) async fn listen(pool: &sqlx::PgPool) -> Result<sqlx::postgres::PgListener, sqlx::Error> {
    on_live_connection(pool, "LISTEN", || async {
        let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
        listener.listen("spindle_ready").await?;
        Ok(listener)
    })
    .await
}

/// Tells other hosts (LISTEN spindle_ready) that work is ready.
pub(super) async fn notify_ready(tx: &mut Tx) -> Result<(), StoreError> {
    if tx.backend() == Backend::Postgres {
        tx.fetch("SELECT pg_notify('spindle_ready', '')::text", vec![], &[Ty::Text]).await?;
    }
    Ok(())
}

/// Wakes the jobs blocked on any of `keys` (just released), each through the core;
/// answers whether any became ready. On PostgreSQL a blocked job another transaction
/// holds is skipped: its recheck time wakes it instead.
pub(super) async fn wake_blocked(
    tx: &mut Tx,
    keys: &BTreeSet<String>,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<bool, StoreError> {
    if keys.is_empty() {
        return Ok(false);
    }
    let keys: Vec<&String> = keys.iter().collect();
    let sql = format!(
        "SELECT {JOB_COLS} FROM jobs WHERE queue = {} AND blocked_on IN ({}) ORDER BY priority, seq{}",
        queue_code(spindle_core::QueueState::Blocked),
        placeholders(1, keys.len()),
        skip_locked(tx.backend())
    );
    let blocked = fetch_jobs(tx, &sql, keys.iter().map(|k| Value::from(k.as_str())).collect()).await?;
    let writes: Vec<JobWrite> = blocked
        .iter()
        .filter_map(|r| deriver.key_released(r, r.job.blocked_on.as_deref().unwrap_or_default(), now))
        .collect();
    if writes.is_empty() {
        return Ok(false);
    }
    let writes: Vec<&JobWrite> = writes.iter().collect();
    let applied = apply_writes(tx, &writes, now).await?;
    Ok(applied.ready)
}

/// Wakes the parents in `parents` (of children the transaction settled) whose join their
/// final children now meet, each through the core, in the transaction that settled the
/// last of them: the parent's next step is dispatched with that commit, not after a
/// relay pass. Each parent's row is locked before its children are counted, so of two
/// transactions settling its last two children on two hosts, the second counts after
/// the first committed and sees both. A count that does not meet the join writes
/// nothing here (the relay records progress). Answers whether a parent became ready.
pub(super) async fn wake_parents(
    tx: &mut Tx,
    parents: &BTreeSet<spindle_core::JobId>,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<bool, StoreError> {
    if parents.is_empty() {
        return Ok(false);
    }
    let lock = match tx.backend() {
        Backend::Sqlite => "",
        Backend::Postgres => " FOR UPDATE",
    };
    let sql = format!("SELECT {JOB_COLS} FROM jobs WHERE id IN ({}) ORDER BY id{lock}", placeholders(1, parents.len()));
    let waiting = fetch_jobs(tx, &sql, parents.iter().map(|p| Value::from(p.to_string())).collect()).await?;
    let mut writes = Vec::new();
    for record in &waiting {
        let Some(wait) = record.job.wait.as_ref() else { continue };
        let spindle_core::workflow::WaitFor::Children { slot, .. } = &wait.what else { continue };
        let rows = tx
            .fetch(
                "SELECT count(*) FROM jobs WHERE parent_id = $1 AND parent_slot = $2 AND settled_at IS NOT NULL",
                vec![Value::from(record.job.id.to_string()), Value::from(slot.as_str())],
                &[Ty::Int],
            )
            .await?;
        let settled = rows.first().map_or(0, |r| u32::try_from(r.int(0)).unwrap_or(u32::MAX));
        if spindle_core::workflow::join_met(wait, settled) {
            writes.extend(deriver.children_settled(record, slot, settled, now));
        }
    }
    if writes.is_empty() {
        return Ok(false);
    }
    let applied = apply_writes(tx, &writes.iter().collect::<Vec<_>>(), now).await?;
    Ok(applied.ready)
}

/// Wakes, for each running-limit gate in `freed`, as many of the jobs waiting on it as
/// slots were freed (best first), each through the core; answers whether any became
/// ready. Only claims a limit counted free slots, so commits of unlimited tenants' steps
/// never come here.
pub(super) async fn wake_gated(
    tx: &mut Tx,
    freed: &BTreeMap<String, u32>,
    now: Timestamp,
    deriver: &dyn Deriver,
) -> Result<bool, StoreError> {
    if freed.is_empty() {
        return Ok(false);
    }
    let sql = format!(
        "SELECT {JOB_COLS} FROM jobs WHERE queue = {} AND blocked_on = $1 ORDER BY priority, fair_tag, seq LIMIT $2{}",
        queue_code(spindle_core::QueueState::Blocked),
        skip_locked(tx.backend())
    );
    let mut writes = Vec::new();
    for (gate, slots) in freed {
        // One indexed read per gate (`jobs_blocked` holds the order): a gate with a
        // tenant's whole backlog behind it gives its best few without a sort.
        let waiting = fetch_jobs(tx, &sql, vec![Value::from(gate.as_str()), Value::from(i64::from(*slots))]).await?;
        writes.extend(waiting.iter().filter_map(|record| deriver.key_released(record, gate, now)));
    }
    if writes.is_empty() {
        return Ok(false);
    }
    let applied = apply_writes(tx, &writes.iter().collect::<Vec<_>>(), now).await?;
    Ok(applied.ready)
}

fn skip_locked(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => "",
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
    }
}

/// The candidates a claim considers: filter (ready; kind; tenant) → order by the cheap
/// score the index holds (priority, fair tag, sequence) → a finalist set of `limit`,
/// each row locked (skipping rows other claims hold). The exact checks are the running
/// limits' and the deriver's.
///
/// No `run_at` condition: a ready job is due by the core's answer, and on PostgreSQL a
/// second condition turned the ordered index scan that stops at `limit` into a scan of
/// every ready row and a sort (group commits took 25% longer at 20,000 ready jobs).
async fn candidates(
    tx: &mut Tx,
    limit: u32,
    filter: &ClaimFilter,
    taken: &[i64],
) -> Result<(Vec<JobRecord>, Vec<bool>), StoreError> {
    let mut args = vec![Value::from(i64::from(limit))];
    let mut extra = String::new();
    if !taken.is_empty() {
        // This claim's earlier rounds chose these; they are still ready until it commits.
        extra.push_str(&format!(" AND seq NOT IN ({})", placeholders(2, taken.len())));
        args.extend(taken.iter().map(|seq| Value::from(*seq)));
    }
    for (column, values) in
        [("kind", filter.kinds.clone()), ("tenant_id", filter.tenants.iter().map(|t| t.0.clone()).collect())]
    {
        if values.is_empty() {
            continue;
        }
        extra.push_str(&format!(" AND {column} IN ({})", placeholders(args.len() + 1, values.len())));
        args.extend(values.into_iter().map(Value::from));
    }
    // Whether a running limit applies to the candidate, read with it: a claim of jobs no
    // limit applies to costs no statement more.
    let sql = format!(
        "SELECT {JOB_COLS}, {LIMITED} FROM jobs WHERE queue = {}{extra} ORDER BY priority, fair_tag, seq LIMIT $1{}",
        queue_code(spindle_core::QueueState::Ready),
        skip_locked(tx.backend())
    );
    let mut tys = JOB_TYS.to_vec();
    tys.push(Ty::Int);
    let rows = tx.fetch(&sql, args, &tys).await?;
    let limited: Vec<bool> = rows.iter().map(|r| r.int(JOB_TYS.len()) != 0).collect();
    let mut records = rows.into_iter().map(job_from_row).collect::<Result<Vec<_>, _>>()?;
    attach_steps(tx, &mut records).await?;
    Ok((records, limited))
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
            let (candidates, limited) = candidates(tx, wanted, filter, &taken).await?;
            let exhausted = candidates.len() < wanted as usize;
            let verdicts = gate_claims(tx, &candidates, &limited, &claims.read, freeing).await?;
            let mut gated = Vec::new();
            for (candidate, verdict) in candidates.into_iter().zip(verdicts) {
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
            if gated.is_empty() {
                break;
            }
            // A wait writes the job alone: no key, no running slot.
            apply_writes(tx, &gated.iter().collect::<Vec<_>>(), now).await?;
            if exhausted {
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
            skip_locked(self.db.backend())
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

    async fn next_due(&self) -> Result<Option<Timestamp>, StoreError> {
        let sql =
            format!("SELECT MIN(run_at) FROM jobs WHERE queue >= {}", queue_code(spindle_core::QueueState::Delayed));
        let rows = self.db.fetch(&sql, vec![], &[Ty::OptInt]).await?;
        Ok(rows.first().and_then(|r| r.opt_int(0)).map(Timestamp::from_micros))
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
            Db::Postgres(pool) => ReadySignals { pool: Some(pool.clone()), listener: None, local: None },
            Db::Sqlite { turns, .. } => ReadySignals { pool: None, listener: None, local: Some(turns.ready_signals()) },
        }
    }
}
