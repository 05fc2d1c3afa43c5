//! Capacity decisions: a tenant's share of the hosts, decided from facts the store reads
//! under its locks and written back by the store as this module answers.
//!
//! - **Fair tags** (start-time fair queueing): a job submitted for tenant T in priority
//!   layer P is tagged `max(T's last tag in P, V) + TAG_UNIT / weight(T)`, where V is the
//!   layer's virtual time (the smallest tag ready in it). Claims take ready jobs by
//!   (priority, tag, sequence), so tenants with backlogs alternate by weight while one
//!   that arrives later starts at the head, not behind a backlog ([`fair_tags`]).
//! - **Submission quotas**: jobs queued (`max_queued`) and a rate (the generic cell rate
//!   algorithm, [`gcra`]); a batch over either is refused whole ([`admit`]).
//! - **Running limits**, per tenant and per (tenant, kind): a claim candidate over a full
//!   limit waits on the limit's gate, woken when a step under it ends ([`gate_claims`]).
//! - **A host's slots**: a tenant that holds its weighted share of the host's slots is
//!   passed over while another tenant's work is ready, and a few reserve slots beyond the
//!   pool go only to tenants under their share, so that one tenant's long steps never
//!   keep the others from starting ([`over_share`], [`SlotShare`]).
//!
//! Pure, like the machines: no clock, no I/O. Each rule is a row of a table test in
//! `host/core/tests/capacity.rs`.

use std::collections::HashMap;
use std::time::Duration;

/// A weight's share of virtual time: a job of a tenant of weight `w` advances the
/// tenant's tag by `TAG_UNIT / w`.
pub const TAG_UNIT: i64 = 1_000_000;

/// The largest weight (and so the finest share) a tenant may have.
pub const MAX_WEIGHT: u32 = 1_000;

/// A layer's fair-share clock as read: the smallest tag ready in it, and the largest
/// tag any tenant was given in it (the clock when nothing is ready).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayerClock {
    /// The head of the layer's ready jobs, if any is ready.
    pub head: Option<i64>,
    /// The largest last tag recorded in the layer, if any.
    pub latest: Option<i64>,
}

impl LayerClock {
    /// The layer's virtual time: its head, or when nothing is ready its latest tag, or 0.
    pub fn virtual_time(self) -> i64 {
        self.head.or(self.latest).unwrap_or(0)
    }
}

/// The tags of `n` jobs a tenant of `weight` submits to a layer whose clock is `clock`,
/// after its `last` tag there: each one `TAG_UNIT / weight` after the one before, the
/// first after the later of its last tag and the layer's virtual time. The last tag is
/// the tenant's new last tag in the layer.
pub fn fair_tags(clock: LayerClock, last: Option<i64>, weight: u32, n: usize) -> Vec<i64> {
    let step = TAG_UNIT / i64::from(weight.clamp(1, MAX_WEIGHT));
    let now = clock.virtual_time();
    let mut tag = last.map_or(now, |last| last.max(now));
    (0..n)
        .map(|_| {
            tag = tag.saturating_add(step);
            tag
        })
        .collect()
}

/// The generic cell rate algorithm: a tenant whose theoretical arrival time is `tat`
/// asks to submit `n` at `now` (µs), at `rate` per second with bursts of `burst`.
/// Answers the new arrival time, or how long to wait.
pub fn gcra(tat: i64, now: i64, n: u64, rate: u32, burst: u32) -> Result<i64, Duration> {
    let interval = 1_000_000 / i64::from(rate.max(1));
    let n = i64::try_from(n).unwrap_or(i64::MAX);
    let next = tat.max(now).saturating_add(interval.saturating_mul(n));
    let allowed = interval.saturating_mul(i64::from(burst.max(1)));
    let over = next - now - allowed;
    if over <= 0 {
        return Ok(next);
    }
    if n > i64::from(burst.max(1)) {
        // Never admissible: say when a burst's worth would be.
        return Err(Duration::from_secs(u64::try_from((allowed + 999_999) / 1_000_000).unwrap_or(1).max(1)));
    }
    Err(Duration::from_micros(u64::try_from(over).unwrap_or(0)))
}

/// A tenant's submission quotas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Quotas {
    /// Jobs queued (submitted, not yet started) at most.
    pub max_queued: Option<u64>,
    /// Submissions per second, sustained.
    pub rate_per_sec: Option<u32>,
    /// Submissions in a burst (default: one second's worth).
    pub rate_burst: Option<u32>,
}

impl Quotas {
    /// Whether a submission must lock the tenant's admission row to be checked.
    pub fn any(self) -> bool {
        self.max_queued.is_some() || self.rate_per_sec.is_some()
    }

    /// The burst the rate limiter allows.
    pub fn burst(self) -> Option<u32> {
        self.rate_per_sec.map(|rate| self.rate_burst.unwrap_or(rate).max(1))
    }
}

/// What admission read of one tenant, under its admission row's lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdmissionFacts {
    /// Its jobs queued now.
    pub queued: u64,
    /// Its rate limiter's theoretical arrival time (µs).
    pub tat: i64,
}

/// Which quota a refusal names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quota {
    /// Jobs queued.
    MaxQueued,
    /// The submission rate.
    Rate,
    /// Bytes of deployed components.
    MaxDeployedBytes,
}

impl Quota {
    /// As shown to callers.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxQueued => "max-queued",
            Self::Rate => "rate",
            Self::MaxDeployedBytes => "max-deployed-bytes",
        }
    }
}

impl std::fmt::Display for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a submission was refused: the quota, what to say, and when to try again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaRefusal {
    /// What was over.
    pub quota: Quota,
    /// What to tell the caller.
    pub message: String,
    /// When trying again may succeed.
    pub retry_after: Duration,
}

/// Admits `n` jobs of `tenant` at `now` (µs) under `quotas`, or refuses them all:
/// answers the rate limiter's new arrival time to store (`None`: no rate quota).
pub fn admit(
    tenant: &str,
    quotas: Quotas,
    facts: AdmissionFacts,
    n: u64,
    now: i64,
) -> Result<Option<i64>, QuotaRefusal> {
    if let Some(max) = quotas.max_queued
        && facts.queued.saturating_add(n) > max
    {
        return Err(QuotaRefusal {
            quota: Quota::MaxQueued,
            message: format!(
                "tenant {tenant} has {} jobs queued; {n} more would pass its limit of {max}",
                facts.queued
            ),
            retry_after: Duration::from_secs(1),
        });
    }
    let (Some(rate), Some(burst)) = (quotas.rate_per_sec, quotas.burst()) else { return Ok(None) };
    match gcra(facts.tat, now, n, rate, burst) {
        Ok(next) => Ok(Some(next)),
        Err(wait) => {
            let message = if n > u64::from(burst) {
                format!("a batch of {n} jobs is larger than tenant {tenant}'s burst of {burst} submissions")
            } else {
                format!("tenant {tenant} may submit {rate} jobs per second (bursts of {burst})")
            };
            Err(QuotaRefusal { quota: Quota::Rate, message, retry_after: wait })
        }
    }
}

/// Whether `tenant`, with `deployed` bytes of components and a limit of `max`, may
/// deploy `adding` more.
pub fn admit_component(tenant: &str, deployed: u64, adding: u64, max: Option<u64>) -> Result<(), QuotaRefusal> {
    let Some(max) = max else { return Ok(()) };
    if deployed.saturating_add(adding) <= max {
        return Ok(());
    }
    Err(QuotaRefusal {
        quota: Quota::MaxDeployedBytes,
        message: format!(
            "tenant {tenant} has {deployed} bytes of components deployed; {adding} more would pass its limit of {max}"
        ),
        retry_after: Duration::ZERO,
    })
}

/// The gate a tenant's running limit names (a [`crate::job::JobEvent::AtCapacity`]'s,
/// and the key a freed slot releases).
pub fn tenant_gate(tenant: &str) -> String {
    format!("@running/{tenant}")
}

/// The gate of a kind's running limit.
pub fn kind_gate(tenant: &str, kind: &str) -> String {
    format!("@running/{tenant}/{kind}")
}

/// What a claim transaction read of the running limits its candidates fall under, with
/// the limits' rows locked.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunningFacts {
    /// Tenants' running limits.
    pub tenant_limits: HashMap<String, i64>,
    /// (tenant, kind) running limits.
    pub kind_limits: HashMap<(String, String), i64>,
    /// Steps running, as committed by any host, per (tenant, kind).
    pub running: HashMap<(String, String), i64>,
    /// The transaction's own earlier claims, not yet written: (tenant, kind) each.
    pub admitted: Vec<(String, String)>,
    /// Slots the transaction's writes free (claims a limit counted, ending), per
    /// (tenant, kind): its claims may take them.
    pub freeing: HashMap<(String, String), i64>,
}

impl RunningFacts {
    /// Steps that count against each tenant's and each kind's limit: running, plus
    /// admitted, less freed.
    fn counts(&self) -> (HashMap<String, i64>, HashMap<(String, String), i64>) {
        let mut by_tenant: HashMap<String, i64> = HashMap::new();
        let mut by_kind: HashMap<(String, String), i64> = HashMap::new();
        let admitted = self.admitted.iter().map(|key| (key, 1));
        let freed = self.freeing.iter().map(|(key, n)| (key, -n));
        for (key, n) in self.running.iter().map(|(key, n)| (key, *n)).chain(admitted).chain(freed) {
            *by_tenant.entry(key.0.clone()).or_default() += n;
            *by_kind.entry(key.clone()).or_default() += n;
        }
        (by_tenant, by_kind)
    }
}

/// What the running limits say of a claim candidate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Claim it; `limited` when a limit counted it (its end frees a slot).
    Claim {
        /// See [`Verdict::Claim`].
        limited: bool,
    },
    /// A limit is full: wait on this gate.
    Wait(String),
}

/// Which of `candidates` (tenant, kind), in claim order, the running limits admit: each
/// one admitted counts against the limits of those after it.
pub fn gate_claims(candidates: &[(&str, &str)], facts: &RunningFacts) -> Vec<Verdict> {
    let (mut by_tenant, mut by_kind) = facts.counts();
    candidates
        .iter()
        .map(|&(tenant, kind)| {
            let key = (tenant.to_owned(), kind.to_owned());
            let tenant_max = facts.tenant_limits.get(tenant).copied();
            let kind_max = facts.kind_limits.get(&key).copied();
            if tenant_max.is_some_and(|max| by_tenant.get(tenant).copied().unwrap_or(0) >= max) {
                return Verdict::Wait(tenant_gate(tenant));
            }
            if kind_max.is_some_and(|max| by_kind.get(&key).copied().unwrap_or(0) >= max) {
                return Verdict::Wait(kind_gate(tenant, kind));
            }
            *by_tenant.entry(tenant.to_owned()).or_default() += 1;
            *by_kind.entry(key).or_default() += 1;
            Verdict::Claim { limited: tenant_max.is_some() || kind_max.is_some() }
        })
        .collect()
}

/// One tenant's hold on a host's slots: its steps running there, and its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding<T> {
    /// The tenant.
    pub tenant: T,
    /// Its steps running on the host.
    pub running: usize,
    /// Its weight (1 to [`MAX_WEIGHT`]).
    pub weight: u32,
}

/// A tenant's weighted share of `pool` slots among tenants whose weights add up to
/// `total`: at least one slot, at most the pool.
pub fn share(pool: usize, weight: u32, total: u64) -> usize {
    let weight = u64::from(weight.clamp(1, MAX_WEIGHT));
    let total = total.max(weight);
    let share = (pool as u64).saturating_mul(weight) / total;
    usize::try_from(share).unwrap_or(pool).clamp(1, pool.max(1))
}

/// The tenants holding at least their weighted share of `pool` slots among the tenants
/// running on the host. A claim takes their ready jobs only when no other tenant's job is
/// ready (the share binds only under contention), and reserve slots never go to them. A
/// tenant alone shares the pool with nobody: it is over its share only once it holds
/// every slot.
pub fn over_share<T: Clone>(pool: usize, holdings: &[Holding<T>]) -> Vec<T> {
    let active = holdings.iter().filter(|h| h.running > 0);
    let total: u64 = active.clone().map(|h| u64::from(h.weight.clamp(1, MAX_WEIGHT))).sum();
    active.filter(|h| h.running >= share(pool, h.weight, total)).map(|h| h.tenant.clone()).collect()
}

/// A host's execution slots: the pool every tenant draws on, and the reserve beyond it
/// that only tenants under their share may take while the pool is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotShare {
    /// Steps run at once from the pool.
    pub pool: usize,
    /// Steps run at once beyond it, for tenants under their share.
    pub reserve: usize,
}

impl SlotShare {
    /// The default reserve for a pool: a sixteenth of it, at least one slot (12 for the
    /// default 192): enough for a quiet tenant's jobs to start at once beside a noisy one,
    /// small against the pool it adds to.
    pub fn default_reserve(pool: usize) -> usize {
        (pool / 16).max(1)
    }
}
