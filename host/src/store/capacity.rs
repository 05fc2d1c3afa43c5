//! A tenant's share of the hosts, as the store enforces it across every host sharing the
//! database: the facts the core's capacity decisions need ([`spindle_core::capacity`]:
//! fair tags, submission quotas, running limits), read under the locks that make them
//! hold, and the answers written back; plus tenant and kind limits and usage counters.
//! The store decides nothing here: every tag, verdict and arrival time is the core's.
//!
//! - **Fair claiming**: a layer's clock and a tenant's last tag are read, the core tags
//!   the jobs, and the last tag is recorded with them. Claims take ready jobs by
//!   (priority, tag, sequence) through one index.
//! - **Running limits**: the limits' rows are locked (in key order) and the steps running
//!   under them counted inside the claim's transaction, so hosts admit one at a time and
//!   a limit is never exceeded; the core says which candidates wait on which gate.
//! - **Submission quotas**: the tenant's admission row is locked, its queued jobs counted
//!   and its rate limiter's arrival time read; the core admits the batch or refuses it
//!   whole, before anything is written.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use spindle_core::Timestamp;

use super::error::StoreError;
use super::handle::SqlStore;
use super::records::{JobRecord, NewJob, TenantId};
use super::rows::{Columns, Reader, placeholders};
use super::sql::{Backend, Tx, Ty, Value};

use spindle_core::capacity::{AdmissionFacts, LayerClock, Quotas, RunningFacts};
pub use spindle_core::capacity::{MAX_WEIGHT, QuotaRefusal, TAG_UNIT, Verdict};

/// How long a job waiting for a running slot waits at most before its claim is tried
/// again, if no step under its gate ends first (a release no host saw: a crashed host's
/// claims are rescued by the reconciler, which wakes the gate then).
pub const CAPACITY_RECHECK: Duration = Duration::from_secs(10);

/// What the operator allows a tenant. `None` is "no limit" (the host's own, for the
/// sandbox ceilings, which may only tighten it).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantLimits {
    /// Its share of claims within a priority layer (1 to [`MAX_WEIGHT`]; default 1).
    pub weight: u32,
    /// Steps running at once, on all hosts together.
    pub max_running: Option<u32>,
    /// Jobs queued (submitted, not yet started).
    pub max_queued: Option<u64>,
    /// Submissions per second, sustained.
    pub rate_per_sec: Option<u32>,
    /// Submissions in a burst (default: one second's worth).
    pub rate_burst: Option<u32>,
    /// Bytes of deployed components, all versions together.
    pub max_deployed_bytes: Option<u64>,
    /// A step's linear memory.
    pub max_memory_bytes: Option<u64>,
    /// A step's time.
    pub max_step_timeout_ms: Option<u64>,
    /// A step's fuel.
    pub max_fuel: Option<u64>,
}

impl TenantLimits {
    /// No limits, weight 1.
    pub fn unlimited() -> Self {
        Self { weight: 1, ..Self::default() }
    }

    /// The burst the rate limiter allows.
    pub fn burst(&self) -> Option<u32> {
        self.quotas().burst()
    }

    /// Its submission quotas, as the core decides on them.
    pub fn quotas(&self) -> Quotas {
        Quotas { max_queued: self.max_queued, rate_per_sec: self.rate_per_sec, rate_burst: self.rate_burst }
    }
}

/// A tenant's and kind's usage, as metered (sums over every host).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The tenant.
    pub tenant: TenantId,
    /// The kind.
    pub kind: String,
    /// Steps run (every attempt).
    pub steps: u64,
    /// Steps that faulted in the sandbox or ran out of time.
    pub faults: u64,
    /// Time inside the sandbox (µs).
    pub sandbox_micros: u64,
    /// Time from claim to outcome (µs).
    pub wall_micros: u64,
    /// Outbound HTTP requests sent.
    pub outbound_requests: u64,
}

impl Usage {
    /// Nothing used yet by `tenant`'s `kind`.
    pub fn new(tenant: &TenantId, kind: &str) -> Self {
        Self {
            tenant: tenant.clone(),
            kind: kind.to_owned(),
            steps: 0,
            faults: 0,
            sandbox_micros: 0,
            wall_micros: 0,
            outbound_requests: 0,
        }
    }

    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Usage) {
        self.steps += other.steps;
        self.faults += other.faults;
        self.sandbox_micros += other.sandbox_micros;
        self.wall_micros += other.wall_micros;
        self.outbound_requests += other.outbound_requests;
    }
}

/// What is queued and running now, per tenant and kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCount {
    /// The tenant.
    pub tenant: TenantId,
    /// The kind.
    pub kind: String,
    /// Jobs submitted and not yet started.
    pub queued: u64,
    /// Steps running (claimed).
    pub running: u64,
}

/// Tenant limits, kind limits and usage.
#[async_trait]
pub trait CapacityStore: Send + Sync {
    /// Sets a tenant's limits (replacing what was set).
    async fn set_tenant_limits(
        &self,
        tenant: &TenantId,
        limits: &TenantLimits,
        now: Timestamp,
    ) -> Result<(), StoreError>;
    /// A tenant's limits (unlimited, weight 1, when none were set).
    async fn tenant_limits(&self, tenant: &TenantId) -> Result<TenantLimits, StoreError>;
    /// Sets (or, with `None`, lifts) a kind's running limit.
    async fn set_kind_limit(&self, tenant: &TenantId, kind: &str, max_running: Option<u32>) -> Result<(), StoreError>;
    /// A tenant's kinds' running limits.
    async fn kind_limits(&self, tenant: &TenantId) -> Result<BTreeMap<String, u32>, StoreError>;
    /// Adds metered usage.
    async fn add_usage(&self, usage: &[Usage]) -> Result<(), StoreError>;
    /// Usage so far, of one tenant or all.
    async fn usage(&self, tenant: Option<&TenantId>) -> Result<Vec<Usage>, StoreError>;
    /// Queued and running now, of one tenant or all.
    async fn live_counts(&self, tenant: Option<&TenantId>) -> Result<Vec<LiveCount>, StoreError>;
    /// Bytes of a tenant's deployed components.
    async fn deployed_bytes(&self, tenant: &TenantId) -> Result<u64, StoreError>;
}

fn opt_u(v: Option<impl Into<u64>>) -> Value {
    Value::from(v.map(|v| i64::try_from(v.into()).unwrap_or(i64::MAX)))
}

const LIMIT_COLS: &str = "weight, max_running, max_queued, rate_per_sec, rate_burst, max_deployed_bytes, \
                          max_memory_bytes, max_step_timeout_ms, max_fuel";

/// The columns a tenant's limits are read from ([`LIMIT_COLS`]).
static LIMITS: Columns = Columns {
    table: "tenant_limits",
    names: &[
        "weight",
        "max_running",
        "max_queued",
        "rate_per_sec",
        "rate_burst",
        "max_deployed_bytes",
        "max_memory_bytes",
        "max_step_timeout_ms",
        "max_fuel",
    ],
    tys: &[Ty::Int, Ty::OptInt, Ty::OptInt, Ty::OptInt, Ty::OptInt, Ty::OptInt, Ty::OptInt, Ty::OptInt, Ty::OptInt],
};

/// What admission reads: each (tenant, layer) asked for, the layer's clock and the
/// tenant's last tag there, and the tenant's limits when it has a row of them.
static ADMISSION: Columns = Columns {
    table: "tenant_limits",
    names: &[
        "tenant",
        "layer",
        "head",
        "latest",
        "last_tag",
        "tenant_id",
        "weight",
        "max_running",
        "max_queued",
        "rate_per_sec",
        "rate_burst",
        "max_deployed_bytes",
        "max_memory_bytes",
        "max_step_timeout_ms",
        "max_fuel",
    ],
    tys: &[
        Ty::Text,
        Ty::Int,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptText,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
        Ty::OptInt,
    ],
};

/// A tenant's limits, read by column name.
fn limits_from(r: &Reader<'_>) -> Result<TenantLimits, StoreError> {
    Ok(TenantLimits {
        weight: r.num("weight")?,
        max_running: r.opt_num("max_running")?,
        max_queued: r.opt_num("max_queued")?,
        rate_per_sec: r.opt_num("rate_per_sec")?,
        rate_burst: r.opt_num("rate_burst")?,
        max_deployed_bytes: r.opt_num("max_deployed_bytes")?,
        max_memory_bytes: r.opt_num("max_memory_bytes")?,
        max_step_timeout_ms: r.opt_num("max_step_timeout_ms")?,
        max_fuel: r.opt_num("max_fuel")?,
    })
}

#[async_trait]
impl CapacityStore for SqlStore {
    async fn set_tenant_limits(
        &self,
        tenant: &TenantId,
        limits: &TenantLimits,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let sql = format!(
            "INSERT INTO tenant_limits (tenant_id, {LIMIT_COLS}, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11) \
             ON CONFLICT (tenant_id) DO UPDATE SET weight = $2, max_running = $3, max_queued = $4, rate_per_sec = $5, \
             rate_burst = $6, max_deployed_bytes = $7, max_memory_bytes = $8, max_step_timeout_ms = $9, max_fuel = $10, \
             updated_at = $11"
        );
        let args = vec![
            Value::from(tenant.0.as_str()),
            Value::from(i64::from(limits.weight)),
            opt_u(limits.max_running),
            opt_u(limits.max_queued),
            opt_u(limits.rate_per_sec),
            opt_u(limits.rate_burst),
            opt_u(limits.max_deployed_bytes),
            opt_u(limits.max_memory_bytes),
            opt_u(limits.max_step_timeout_ms),
            opt_u(limits.max_fuel),
            Value::from(now.as_micros()),
        ];
        self.db.execute(&sql, args).await?;
        Ok(())
    }

    async fn tenant_limits(&self, tenant: &TenantId) -> Result<TenantLimits, StoreError> {
        let sql = format!("SELECT {LIMIT_COLS} FROM tenant_limits WHERE tenant_id = $1");
        let rows = self
            .db
            .fetch(&sql, vec![Value::from(tenant.0.as_str())], LIMITS.tys)
            .await
            .map_err(|e| LIMITS.in_table(e))?;
        match rows.into_iter().next() {
            Some(mut row) => limits_from(&LIMITS.read(&mut row)),
            None => Ok(TenantLimits::unlimited()),
        }
    }

    async fn set_kind_limit(&self, tenant: &TenantId, kind: &str, max_running: Option<u32>) -> Result<(), StoreError> {
        let args = vec![Value::from(tenant.0.as_str()), Value::from(kind)];
        match max_running {
            Some(max) => {
                let mut args = args;
                args.push(Value::from(i64::from(max)));
                self.db
                    .execute(
                        "INSERT INTO kind_limits (tenant_id, kind, max_running) VALUES ($1, $2, $3) \
                         ON CONFLICT (tenant_id, kind) DO UPDATE SET max_running = $3",
                        args,
                    )
                    .await?
            }
            None => self.db.execute("DELETE FROM kind_limits WHERE tenant_id = $1 AND kind = $2", args).await?,
        };
        Ok(())
    }

    async fn kind_limits(&self, tenant: &TenantId) -> Result<BTreeMap<String, u32>, StoreError> {
        let rows = self
            .db
            .fetch(
                "SELECT kind, max_running FROM kind_limits WHERE tenant_id = $1",
                vec![Value::from(tenant.0.as_str())],
                &[Ty::Text, Ty::Int],
            )
            .await?;
        rows.iter().map(|r| Ok((r.text(0, "kind_limits.kind")?, r.num(1, "kind_limits.max_running")?))).collect()
    }

    async fn add_usage(&self, usage: &[Usage]) -> Result<(), StoreError> {
        if usage.is_empty() {
            return Ok(());
        }
        let mut tx = self.db.begin().await?;
        // One row at a time, in key order: hosts adding at once lock rows in one order.
        let mut sorted: Vec<&Usage> = usage.iter().collect();
        sorted.sort_by(|a, b| (&a.tenant, &a.kind).cmp(&(&b.tenant, &b.kind)));
        for u in sorted {
            let n = |v: u64| Value::from(i64::try_from(v).unwrap_or(i64::MAX));
            tx.execute(
                "INSERT INTO usage (tenant_id, kind, steps, faults, sandbox_micros, wall_micros, outbound_requests) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (tenant_id, kind) DO UPDATE SET \
                 steps = usage.steps + $3, faults = usage.faults + $4, sandbox_micros = usage.sandbox_micros + $5, \
                 wall_micros = usage.wall_micros + $6, outbound_requests = usage.outbound_requests + $7",
                vec![
                    Value::from(u.tenant.0.as_str()),
                    Value::from(u.kind.as_str()),
                    n(u.steps),
                    n(u.faults),
                    n(u.sandbox_micros),
                    n(u.wall_micros),
                    n(u.outbound_requests),
                ],
            )
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn usage(&self, tenant: Option<&TenantId>) -> Result<Vec<Usage>, StoreError> {
        let (filter, args) = tenant_filter(tenant);
        static USAGE: Columns = Columns {
            table: "usage",
            names: &["tenant_id", "kind", "steps", "faults", "sandbox_micros", "wall_micros", "outbound_requests"],
            tys: &[Ty::Text, Ty::Text, Ty::Int, Ty::Int, Ty::Int, Ty::Int, Ty::Int],
        };
        let sql = format!("SELECT {} FROM usage{filter} ORDER BY tenant_id, kind", USAGE.list());
        let rows = self.db.fetch(&sql, args, USAGE.tys).await.map_err(|e| USAGE.in_table(e))?;
        rows.into_iter()
            .map(|mut row| {
                let r = USAGE.read(&mut row);
                Ok(Usage {
                    tenant: TenantId(r.text("tenant_id")?),
                    kind: r.text("kind")?,
                    steps: r.num("steps")?,
                    faults: r.num("faults")?,
                    sandbox_micros: r.num("sandbox_micros")?,
                    wall_micros: r.num("wall_micros")?,
                    outbound_requests: r.num("outbound_requests")?,
                })
            })
            .collect()
    }

    async fn live_counts(&self, tenant: Option<&TenantId>) -> Result<Vec<LiveCount>, StoreError> {
        let (filter, args) = tenant_filter(tenant);
        let and = if filter.is_empty() { " WHERE" } else { " AND" };
        let sql = format!(
            "SELECT tenant_id, kind, SUM(CASE WHEN state = 'pending' THEN 1 ELSE 0 END), \
             SUM(CASE WHEN claim_expires_at IS NOT NULL THEN 1 ELSE 0 END) FROM jobs{filter}{and} \
             state IN ('pending', 'running') GROUP BY tenant_id, kind ORDER BY tenant_id, kind"
        );
        static LIVE: Columns = Columns {
            table: "jobs",
            names: &["tenant_id", "kind", "queued", "running"],
            tys: &[Ty::Text, Ty::Text, Ty::Int, Ty::Int],
        };
        let rows = self.db.fetch(&sql, args, LIVE.tys).await.map_err(|e| LIVE.in_table(e))?;
        rows.into_iter()
            .map(|mut row| {
                let r = LIVE.read(&mut row);
                Ok(LiveCount {
                    tenant: TenantId(r.text("tenant_id")?),
                    kind: r.text("kind")?,
                    queued: r.num("queued")?,
                    running: r.num("running")?,
                })
            })
            .collect()
    }

    async fn deployed_bytes(&self, tenant: &TenantId) -> Result<u64, StoreError> {
        let rows = self
            .db
            .fetch(
                // PostgreSQL sums BIGINTs as NUMERIC: read back as a number of bytes.
                "SELECT CAST(COALESCE(SUM(size + COALESCE(compiled_size, 0)), 0) AS BIGINT) FROM components \
                 WHERE digest IN (SELECT digest FROM kind_versions WHERE tenant_id = $1)",
                vec![Value::from(tenant.0.as_str())],
                &[Ty::Int],
            )
            .await?;
        rows.first().map_or(Ok(0), |r| r.num(0, "components.size (sum)"))
    }
}

fn tenant_filter(tenant: Option<&TenantId>) -> (&'static str, Vec<Value>) {
    match tenant {
        Some(t) => (" WHERE tenant_id = $1", vec![Value::from(t.0.as_str())]),
        None => ("", vec![]),
    }
}

// --- inside transactions ------------------------------------------------------------

/// The fair tags of jobs about to be inserted, in order (all 0 when fairness is off: then
/// claims take jobs in submission order within a priority layer), and each tenant's last
/// tag per layer, to be recorded with the jobs (never lowered: a concurrent submission may
/// have recorded a later one).
///
/// Only reads: the `fair_tags` row is written with the jobs, at the end of the
/// submission (on PostgreSQL in the one statement that inserts them), so the row lock
/// that write takes is held from there to the commit, not across the submission's reads
/// (concurrent submissions of one tenant wait on that lock).
///
/// `admitted`, when the jobs went through [`admit`], saves reading again what it read:
/// the weights, and the clocks it kept.
pub(super) async fn fair_tags(
    tx: &mut Tx,
    jobs: &[&NewJob],
    fair: bool,
    admitted: Option<&Admitted>,
) -> Result<FairTags, StoreError> {
    let mut tags = FairTags { tags: vec![0; jobs.len()], last: Vec::new() };
    if !fair || jobs.is_empty() {
        return Ok(tags);
    }
    // Group by (tenant, layer), keeping submission order inside each group.
    let mut groups: BTreeMap<(&str, i64), Vec<usize>> = BTreeMap::new();
    for (i, job) in jobs.iter().enumerate() {
        groups.entry((job.tenant.0.as_str(), i64::from(job.priority.rank()))).or_default().push(i);
    }
    let read;
    let weights = match admitted {
        Some(known) => &known.weights,
        None => {
            let tenants: BTreeSet<&str> = groups.keys().map(|(t, _)| *t).collect();
            read = weights_of(tx, &tenants).await?;
            &read
        }
    };
    for ((tenant, priority), members) in groups {
        let known = admitted.and_then(|a| a.clocks.get(&(tenant.to_owned(), priority)).copied());
        let (clock, last) = match known {
            Some(read) => read,
            None => clock_and_last_tag(tx, tenant, priority).await?,
        };
        let weight = weights.get(tenant).copied().unwrap_or(1);
        let given = spindle_core::capacity::fair_tags(clock, last, weight, members.len());
        for (i, tag) in members.iter().zip(&given) {
            tags.tags[*i] = *tag;
        }
        if let Some(&tag) = given.last() {
            tags.last.push((tenant.to_owned(), priority, tag));
        }
    }
    Ok(tags)
}

/// The tags [`fair_tags`] gave, and the last of each tenant's layer.
#[derive(Debug)]
pub(super) struct FairTags {
    /// Each job's tag, in the order the jobs were given.
    pub tags: Vec<i64>,
    /// (tenant, layer, the last tag given in it).
    last: Vec<(String, i64, i64)>,
}

impl FairTags {
    /// (tenant, layer, last tag) rows, as the submission records them.
    pub(super) fn last_rows(&self) -> Vec<Vec<Value>> {
        self.last
            .iter()
            .map(|(tenant, priority, tag)| {
                vec![Value::from(tenant.as_str()), Value::from(*priority), Value::from(*tag)]
            })
            .collect()
    }
}

/// Tenants' fair-share weights, by tenant id; a tenant without limits weighs 1.
pub(super) type Weights = HashMap<String, u32>;

async fn weights_of(tx: &mut Tx, tenants: &BTreeSet<&str>) -> Result<Weights, StoreError> {
    let sql =
        format!("SELECT tenant_id, weight FROM tenant_limits WHERE tenant_id IN ({})", placeholders(1, tenants.len()));
    let rows = tx.fetch(&sql, tenants.iter().map(|t| Value::from(*t)).collect(), &[Ty::Text, Ty::Int]).await?;
    rows.iter().map(|r| Ok((r.text(0, "tenant_limits.tenant_id")?, r.num(1, "tenant_limits.weight")?))).collect()
}

/// A layer's virtual time (the smallest tag ready in it, the head of the claim index, or
/// when nothing is ready the largest tag any tenant was given in it) and the tenant's
/// last tag in the layer, in one round trip.
async fn clock_and_last_tag(tx: &mut Tx, tenant: &str, priority: i64) -> Result<(LayerClock, Option<i64>), StoreError> {
    let rows = tx
        .fetch(
            &format!("SELECT {}", clock_columns("$2", "$1")),
            vec![Value::from(priority), Value::from(tenant)],
            &[Ty::OptInt, Ty::OptInt, Ty::OptInt],
        )
        .await?;
    clock_of(rows.first(), 0)
}

/// The three values [`clock_of`] makes a layer's clock and a tenant's last tag of, for
/// the tenant and the layer (priority) the expressions `tenant` and `priority` name.
fn clock_columns(tenant: &str, priority: &str) -> String {
    format!(
        "(SELECT fair_tag FROM jobs WHERE queue = 1 AND priority = {priority} ORDER BY fair_tag, seq LIMIT 1), \
         (SELECT MAX(last_tag) FROM fair_tags WHERE priority = {priority}), \
         (SELECT last_tag FROM fair_tags WHERE tenant_id = {tenant} AND priority = {priority})"
    )
}

/// The clock and the last tag from [`clock_columns`]' values at `first` in `row`.
fn clock_of(row: Option<&super::sql::Row>, first: usize) -> Result<(LayerClock, Option<i64>), StoreError> {
    let Some(row) = row else { return Ok((LayerClock { head: None, latest: None }, None)) };
    let clock = LayerClock {
        head: row.opt_int(first, "fair_tags.last_tag (head)")?,
        latest: row.opt_int(first + 1, "fair_tags.last_tag (latest)")?,
    };
    Ok((clock, row.opt_int(first + 2, "fair_tags.last_tag")?))
}

/// What admission read that the submission's fair tags need: the tenants' weights, and
/// each (tenant, layer)'s clock and last tag where they are still as read.
#[derive(Debug, Default)]
pub(super) struct Admitted {
    weights: Weights,
    clocks: HashMap<(String, i64), (LayerClock, Option<i64>)>,
}

/// What [`admit`] answers.
#[derive(Debug)]
pub(super) enum Admission {
    /// Admitted, with what the submission's fair tags need.
    Admitted(Admitted),
    /// Refused whole: nothing may be written.
    Refused(QuotaRefusal),
    /// A tenant has a queue or rate quota, whose admission row must stay locked until
    /// the jobs are written: statements outside a transaction cannot hold it. Nothing was
    /// written; the submission goes again in a transaction.
    NeedsTransaction,
}

/// Admits a submission of `jobs`, or refuses it whole: each tenant's admission row is
/// locked (concurrent submissions count one at a time), its queued jobs counted against
/// `max_queued`, and its rate metered (GCRA). Answers, when admitted, what the
/// submission's fair tags need.
///
/// The tenants' limits and, with `fair`, each (tenant, layer)'s clock and last tag are one
/// statement: one round trip, one hand-off on SQLite. On PostgreSQL the clock of a tenant
/// whose admission row this locks is read again after the lock (the fair tags find it
/// gone from `clocks`), so that tenant's concurrent submissions tag one after another,
/// as they always did; SQLite's writer holds the whole database from the start.
pub(super) async fn admit(tx: &mut Tx, jobs: &[&NewJob], fair: bool, now: Timestamp) -> Result<Admission, StoreError> {
    let mut admitted = Admitted::default();
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    let mut groups: BTreeSet<(&str, i64)> = BTreeSet::new();
    for new in jobs {
        *counts.entry(new.tenant.0.as_str()).or_default() += 1;
        groups.insert((new.tenant.0.as_str(), if fair { i64::from(new.priority.rank()) } else { 0 }));
    }
    if counts.is_empty() {
        return Ok(Admission::Admitted(admitted));
    }
    let clocks = if fair { clock_columns("g.column1", "g.column2") } else { "NULL, NULL, NULL".to_owned() };
    let sql = format!(
        "SELECT g.column1, g.column2, {clocks}, l.tenant_id, {LIMIT_COLS} FROM (VALUES {}) AS g \
         LEFT JOIN tenant_limits l ON l.tenant_id = g.column1 ORDER BY g.column1, g.column2",
        super::sql::values_list(groups.len(), 2, 1)
    );
    let args = groups.iter().flat_map(|(t, p)| [Value::from(*t), Value::from(*p)]).collect();
    let read = tx.fetch(&sql, args, ADMISSION.tys).await.map_err(|e| ADMISSION.in_table(e))?;
    // Each tenant's limits once, in tenant order: admission rows are locked in that order.
    let mut limited: BTreeMap<String, TenantLimits> = BTreeMap::new();
    for mut row in read {
        let r = ADMISSION.read(&mut row);
        let tenant = r.text("tenant")?;
        if fair {
            let clock = LayerClock { head: r.opt_int("head")?, latest: r.opt_int("latest")? };
            admitted.clocks.insert((tenant.clone(), r.int("layer")?), (clock, r.opt_int("last_tag")?));
        }
        if r.opt_text("tenant_id")?.is_some() {
            limited.insert(tenant, limits_from(&r)?);
        }
    }
    let weights = &mut admitted.weights;
    for (tenant, limits) in limited {
        weights.insert(tenant.clone(), limits.weight);
        if limits.max_queued.is_none() && limits.rate_per_sec.is_none() {
            continue;
        }
        if !tx.in_transaction() {
            return Ok(Admission::NeedsTransaction);
        }
        if tx.backend() == Backend::Postgres {
            admitted.clocks.retain(|(t, _), _| *t != tenant);
        }
        let n = counts.get(tenant.as_str()).copied().unwrap_or(0);
        tx.execute(
            "INSERT INTO tenant_admission (tenant_id, rate_tat) VALUES ($1, 0) ON CONFLICT (tenant_id) DO NOTHING",
            vec![Value::from(tenant.as_str())],
        )
        .await?;
        let lock = tx.backend().for_update();
        let tat = tx
            .fetch(
                &format!("SELECT rate_tat FROM tenant_admission WHERE tenant_id = $1{lock}"),
                vec![Value::from(tenant.as_str())],
                &[Ty::Int],
            )
            .await?
            .first()
            .map_or(Ok(0), |r| r.int(0, "tenant_admission.rate_tat"))?;
        let queued = match limits.max_queued {
            Some(_) => tx
                .fetch(
                    "SELECT COUNT(*) FROM jobs WHERE tenant_id = $1 AND state = 'pending'",
                    vec![Value::from(tenant.as_str())],
                    &[Ty::Int],
                )
                .await?
                .first()
                .map_or(Ok(0), |r| r.num(0, "jobs.count (pending)"))?,
            None => 0,
        };
        let facts = AdmissionFacts { queued, tat };
        match spindle_core::capacity::admit(&tenant, limits.quotas(), facts, n, now.as_micros()) {
            Ok(Some(next)) => {
                tx.execute(
                    "UPDATE tenant_admission SET rate_tat = $2 WHERE tenant_id = $1",
                    vec![Value::from(tenant.as_str()), Value::from(next)],
                )
                .await?;
            }
            Ok(None) => {}
            Err(refusal) => return Ok(Admission::Refused(refusal)),
        }
    }
    Ok(Admission::Admitted(admitted))
}

/// The gate a tenant's running limit names.
pub fn tenant_gate(tenant: &TenantId) -> String {
    spindle_core::capacity::tenant_gate(&tenant.0)
}

/// The gate of a kind's running limit.
pub fn kind_gate(tenant: &TenantId, kind: &str) -> String {
    spindle_core::capacity::kind_gate(&tenant.0, kind)
}

/// The running slots a batch's writes free (claims a limit counted, ending), per
/// (tenant, kind): claims in the same transaction may take them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Freeing {
    slots: HashMap<(String, String), i64>,
}

impl Freeing {
    /// What `writes` free.
    pub(super) fn of(writes: &[super::JobWrite]) -> Self {
        let mut freeing = Self::default();
        for w in writes.iter().filter(|w| w.frees_slot) {
            *freeing.slots.entry((w.record.tenant.0.clone(), w.record.kind.clone())).or_default() += 1;
        }
        freeing
    }

    /// Whether any slot is counted free.
    pub(super) fn counted(&self) -> bool {
        !self.slots.is_empty()
    }
}

/// Whether a write that frees a slot did not land (its slot is still taken).
pub(super) fn freeing_failed(writes: &[super::JobWrite], outcomes: &[super::WriteOutcome]) -> bool {
    writes
        .iter()
        .zip(outcomes)
        .any(|(w, outcome)| w.frees_slot && !matches!(outcome, super::WriteOutcome::Written { .. }))
}

/// Which claim candidates their running limits admit, in order. `limited` says, per
/// candidate, whether a limit applies (read with it); only then are the limits' rows
/// locked (in key order) and the steps running under them counted, so that concurrent
/// claims on any host see each other. `admitted` are this transaction's earlier claims,
/// not yet written; `freeing` the slots its writes free.
pub(super) async fn gate_claims(
    tx: &mut Tx,
    candidates: &[JobRecord],
    limited: &[bool],
    admitted: &[JobRecord],
    freeing: &Freeing,
) -> Result<Vec<Verdict>, StoreError> {
    let verdicts = vec![Verdict::Claim { limited: false }; candidates.len()];
    if !limited.iter().any(|l| *l) {
        return Ok(verdicts);
    }
    let tenants: BTreeSet<&str> =
        candidates.iter().zip(limited).filter(|(_, l)| **l).map(|(c, _)| c.tenant.0.as_str()).collect();
    let lock = tx.backend().for_update();
    let args = || tenants.iter().map(|t| Value::from(*t)).collect::<Vec<_>>();
    let tenant_limits: HashMap<String, i64> = tx
        .fetch(
            &format!(
                "SELECT tenant_id, max_running FROM tenant_limits WHERE max_running IS NOT NULL AND tenant_id IN ({}) \
                 ORDER BY tenant_id{lock}",
                placeholders(1, tenants.len())
            ),
            args(),
            &[Ty::Text, Ty::Int],
        )
        .await?
        .iter()
        .map(|r| Ok((r.text(0, "tenant_limits.tenant_id")?, r.int(1, "tenant_limits.max_running")?)))
        .collect::<Result<_, StoreError>>()?;
    let kinds: BTreeSet<(&str, &str)> = candidates.iter().map(|c| (c.tenant.0.as_str(), c.kind.as_str())).collect();
    let kind_limits: HashMap<(String, String), i64> = tx
        .fetch(
            &format!(
                "SELECT tenant_id, kind, max_running FROM kind_limits WHERE tenant_id IN ({}) \
                 ORDER BY tenant_id, kind{lock}",
                placeholders(1, tenants.len())
            ),
            args(),
            &[Ty::Text, Ty::Text, Ty::Int],
        )
        .await?
        .iter()
        .map(|r| {
            Ok((
                (r.text(0, "kind_limits.tenant_id")?, r.text(1, "kind_limits.kind")?),
                r.int(2, "kind_limits.max_running")?,
            ))
        })
        .filter(|row: &Result<_, StoreError>| {
            row.as_ref().map_or(true, |((t, k), _)| kinds.contains(&(t.as_str(), k.as_str())))
        })
        .collect::<Result<_, StoreError>>()?;
    if tenant_limits.is_empty() && kind_limits.is_empty() {
        return Ok(verdicts);
    }
    // The steps running under those limits now, committed by any host: read through the
    // index of claimed jobs (a few hundred rows: the range makes SQLite take it), never
    // the tenant's (its whole backlog: `tenant_id || ''` keeps both planners off it).
    let limited: BTreeSet<&str> =
        tenant_limits.keys().map(String::as_str).chain(kind_limits.keys().map(|(t, _)| t.as_str())).collect();
    let rows = tx
        .fetch(
            &format!(
                "SELECT tenant_id, kind, COUNT(*) FROM jobs WHERE claim_expires_at IS NOT NULL \
                 AND claim_expires_at >= 0 AND (tenant_id || '') IN ({}) GROUP BY tenant_id, kind",
                placeholders(1, limited.len())
            ),
            limited.iter().map(|t| Value::from(*t)).collect(),
            &[Ty::Text, Ty::Text, Ty::Int],
        )
        .await?;
    let facts = RunningFacts {
        tenant_limits,
        kind_limits,
        running: rows
            .iter()
            .map(|r| Ok(((r.text(0, "jobs.tenant_id")?, r.text(1, "jobs.kind")?), r.int(2, "jobs.count (running)")?)))
            .collect::<Result<_, StoreError>>()?,
        admitted: admitted.iter().map(|a| (a.tenant.0.clone(), a.kind.clone())).collect(),
        freeing: freeing.slots.clone(),
    };
    let pairs: Vec<(&str, &str)> = candidates.iter().map(|c| (c.tenant.0.as_str(), c.kind.as_str())).collect();
    Ok(spindle_core::capacity::gate_claims(&pairs, &facts))
}
