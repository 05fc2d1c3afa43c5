//! What the conformance tests share: a fresh store behind `&dyn Storage`, explicit
//! instants, submitted jobs, and job writes derived from core transitions the way the
//! engine derives them (`host/src/engine/plan.rs`), but by hand, so each test states
//! the lease operation it commits.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spindle::store::{
    Backend, Inserted, JobRecord, JobWrite, LeaseOp, NewJob, OutboxEffect, SqlStore, Storage, TenantId, WriteOutcome,
};
use spindle_core::policy::priority::Priority;
use spindle_core::{
    Effect, EffectOrder, Job, JobEvent, JobId, KindRules, StepReport, Submission, Timestamp, Transition, transition,
};
use spindle_tests::harness::{Scratch, fresh_store};

/// A fresh, migrated store on one backend, seen only through [`Storage`].
#[derive(Debug)]
pub struct Db {
    store: Arc<SqlStore>,
    _scratch: Scratch,
}

impl Db {
    /// A fresh store on `backend`.
    pub async fn new(backend: Backend) -> Self {
        let (store, _url, scratch) = fresh_store(backend).await;
        assert_eq!(store.backend(), backend);
        Self { store, _scratch: scratch }
    }
}

impl Deref for Db {
    type Target = dyn Storage;
    fn deref(&self) -> &Self::Target {
        self.store.as_ref()
    }
}

/// Milliseconds since the Unix epoch of the suite's "start of time".
const T0_MS: i64 = 1_750_000_000_000;

/// The instant `ms` milliseconds after the suite's start of time.
pub fn at(ms: i64) -> Timestamp {
    Timestamp::from_millis(T0_MS + ms)
}

/// How long a claim lasts without a heartbeat.
pub const TTL: Duration = Duration::from_secs(30);

/// The host that claims unless a test names another.
pub const HOST: &str = "host-a";

/// The tenant jobs belong to unless a test names another.
pub fn acme() -> TenantId {
    TenantId("acme".to_owned())
}

/// Another tenant.
pub fn globex() -> TenantId {
    TenantId("globex".to_owned())
}

/// A new job id. Deterministic within a run: ids only need to be unique.
pub fn job_id() -> JobId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    JobId(uuid::Uuid::from_u128(
        0x0190_0000_0000_7000_8000_0000_0000_0000 | u128::from(NEXT.fetch_add(1, Ordering::Relaxed)),
    ))
}

/// Kind rules for tests: cancellable, three attempts, no hooks.
pub fn rules() -> KindRules {
    KindRules { cancellable: true, max_attempts: 3, failure_effect: false, notify_on_success: false }
}

/// A job of `kind` with `steps` steps, submitted at `now` under `acme`, normal
/// priority, due at once, no idempotency key, no lease keys.
pub fn new_job(kind: &str, steps: usize, now: Timestamp) -> NewJob {
    new_job_with(kind, steps, rules(), now, now)
}

/// A job as [`new_job`], with its rules and first due time given.
pub fn new_job_with(kind: &str, steps: usize, rules: KindRules, run_at: Timestamp, now: Timestamp) -> NewJob {
    let id = job_id();
    let keys = ["fetch", "transform", "store", "notify", "archive"];
    let submission = Submission {
        id,
        rules,
        steps: (0..steps).map(|i| (keys[i % keys.len()].to_owned(), u32::try_from(i + 1).unwrap())).collect(),
        run_at,
    };
    let (job, history) = Job::submit(submission, now);
    NewJob {
        job,
        tenant: acme(),
        kind: kind.to_owned(),
        kind_version: 1,
        priority: Priority::Normal,
        payload: format!("{{\"job\":\"{id}\"}}").into_bytes(),
        idempotency_key: None,
        lease_keys: Vec::new(),
        history,
    }
}

/// A job as [`new_job`] whose claims take the exclusive `keys`.
pub fn keyed_job(kind: &str, keys: &[&str], now: Timestamp) -> NewJob {
    NewJob { lease_keys: keys.iter().map(|k| (*k).to_owned()).collect(), ..new_job(kind, 1, now) }
}

/// Inserts one job that must be new; answers its record.
pub async fn insert(db: &Db, job: NewJob, now: Timestamp) -> JobRecord {
    let mut out = db.insert_jobs(vec![job], now).await.expect("insert job");
    assert_eq!(out.len(), 1);
    match out.remove(0) {
        Inserted::Created(record) => record,
        Inserted::Existing(record) => panic!("expected a new job, got existing {}", record.job.id),
    }
}

/// Loads a job that must exist.
pub async fn load(db: &Db, id: JobId) -> JobRecord {
    db.job(id).await.expect("load job").unwrap_or_else(|| panic!("job {id} is missing"))
}

/// The ids of `records`, in order.
pub fn ids(records: &[JobRecord]) -> Vec<JobId> {
    records.iter().map(|r| r.job.id).collect()
}

/// A core fence as the store's integer.
pub fn fence_of(fence: spindle_core::Fence) -> i64 {
    i64::try_from(fence.0).expect("fence fits in i64")
}

/// The claim fence `record` holds.
pub fn held_fence(record: &JobRecord) -> spindle_core::Fence {
    record.job.claim.as_ref().unwrap_or_else(|| panic!("job {} holds no claim", record.job.id)).fence
}

/// Turns a core transition of `before` into the write the engine would commit, with
/// the lease operation `leases`. After-commit effects become outbox rows, a retry
/// becomes the spawned job; dispatch and lease-release effects are the caller's
/// `leases` and the job's `run_at`.
pub fn write_of(before: &JobRecord, t: Transition, now: Timestamp, leases: LeaseOp) -> JobWrite {
    let Transition { job, steps_changed, previous_pass, history, effects } = t;
    let mut outbox = Vec::new();
    let mut spawn = None;
    for effect in &effects {
        match effect {
            Effect::NotifySuccess => outbox.push(OutboxEffect::NotifySuccess),
            Effect::FailureEffect { order: EffectOrder::AfterSettlement } => outbox.push(OutboxEffect::FailureEffect),
            Effect::SpawnRetry { successor } => {
                let (retry, history) = Job::successor_of(&job, *successor, now).expect("successor");
                spawn = Some(before.retry_job(retry, history));
            }
            Effect::Dispatch { .. } | Effect::ReleaseLeases | Effect::FailureEffect { .. } => {}
        }
    }
    JobWrite {
        record: JobRecord { job, ..before.clone() },
        expected_version: before.version,
        steps_changed,
        previous_pass: previous_pass.map(|steps| (before.job.pass, steps)),
        history,
        leases,
        outbox,
        spawn,
        preserve_queue: false,
        at: now,
    }
}

/// The write of `event` on `before` at `now`, which the core must accept.
pub fn derive(before: &JobRecord, event: &JobEvent, now: Timestamp, leases: LeaseOp) -> JobWrite {
    let t = transition(&before.job, event, now)
        .unwrap_or_else(|refusal| panic!("the core refused {} on job {}: {refusal}", event.name(), before.job.id));
    write_of(before, t, now, leases)
}

/// A claim of `before` by `owner` at `now`, taking its lease keys (what a dispatcher's
/// `derive` answers); `None` when the core refuses the claim.
pub fn claim_write(before: &JobRecord, owner: &str, now: Timestamp) -> Option<JobWrite> {
    let t = transition(&before.job, &JobEvent::Claim { owner: owner.to_owned(), ttl: TTL }, now).ok()?;
    let claim = t.job.claim.clone()?;
    let leases =
        LeaseOp::Acquire { fence: fence_of(claim.fence), owner: owner.to_owned(), expires_at: claim.expires_at };
    Some(write_of(before, t, now, leases))
}

/// Claims up to `limit` ready jobs for `owner` at `now`.
pub async fn claim_as(db: &Db, owner: &str, limit: u32, now: Timestamp) -> Vec<JobRecord> {
    let owner = owner.to_owned();
    let derive = move |record: &JobRecord| claim_write(record, &owner, now);
    db.claim(limit, now, &derive).await.expect("claim")
}

/// Claims up to `limit` ready jobs for [`HOST`] at `now`.
pub async fn claim(db: &Db, limit: u32, now: Timestamp) -> Vec<JobRecord> {
    claim_as(db, HOST, limit, now).await
}

/// The holder's report of `report` on its claimed `before`, releasing its keys after
/// checking it still holds them (what a step's host commits when the attempt ends).
pub fn settle(before: &JobRecord, report: StepReport, now: Timestamp) -> JobWrite {
    let fence = held_fence(before);
    derive(before, &JobEvent::Report { fence, report }, now, LeaseOp::Release { fence: fence_of(fence), verify: true })
}

/// A completed step with `output`.
pub fn complete(output: &[u8]) -> StepReport {
    StepReport::Complete { output: output.to_vec() }
}

/// Commits one write; answers its outcome.
pub async fn write(db: &Db, w: JobWrite, now: Timestamp) -> WriteOutcome {
    let mut out = db.write(vec![w], now).await.expect("write");
    assert_eq!(out.len(), 1, "one outcome per write");
    out.remove(0)
}

/// Commits one write that must land; answers the new version.
pub async fn write_ok(db: &Db, w: JobWrite, now: Timestamp) -> i64 {
    let expected = w.expected_version + 1;
    match write(db, w, now).await {
        WriteOutcome::Written { version } => {
            assert_eq!(version, expected, "a write bumps the version by one");
            version
        }
        other => panic!("expected the write to land, got {other:?}"),
    }
}

/// Claims `record` alone (it must be the only ready job) and completes its current
/// step with `output`; answers the job as written.
pub async fn run_step(db: &Db, record: &JobRecord, output: &[u8], now: Timestamp) -> JobRecord {
    let claimed = claim(db, 1, now).await;
    assert_eq!(ids(&claimed), vec![record.job.id], "the job is claimable");
    let w = settle(&claimed[0], complete(output), now);
    let after = w.record.clone();
    let version = write_ok(db, w, now).await;
    JobRecord { version, ..after }
}

/// What a write stores of a record and a read gives back: the job, its version and its
/// submission fields. (A record may also carry what the store observed about the row
/// as it read it; a write's record, cloned from the record it was derived from, cannot
/// know that, so comparisons of a write with a read use this.)
pub type Stored<'a> =
    (&'a Job, i64, i64, &'a TenantId, &'a str, i64, Priority, &'a [u8], Option<&'a str>, &'a [String]);

/// The stored content of `r`.
pub fn stored(r: &JobRecord) -> Stored<'_> {
    (
        &r.job,
        r.version,
        r.seq,
        &r.tenant,
        &r.kind,
        r.kind_version,
        r.priority,
        &r.payload,
        r.idempotency_key.as_deref(),
        &r.lease_keys,
    )
}
