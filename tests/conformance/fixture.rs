//! What the conformance tests share: a fresh store behind `&dyn Storage`, explicit
//! instants, submitted jobs, and job writes derived from core transitions exactly as the
//! engine derives them (`spindle::engine::plan`, `HostDeriver`): lease-key operations
//! come from the core's effects, never from the test.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use spindle::engine::{HostDeriver, plan};
use spindle::store::prelude::*;
use spindle::store::sql::{Ty, Value};
use spindle::store::{
    Backend, ClaimFilter, Deriver, Inserted, JobRecord, JobWrite, NewJob, SqlStore, Storage, TenantId, Updated,
    WriteOutcome,
};
use spindle_core::policy::priority::Priority;
use spindle_core::step::Step;
use spindle_core::{Job, JobEvent, JobId, KindRules, StepReport, Submission, Timestamp, transition};
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

/// A claim's choice of candidates, as tests state it: the write for a candidate, or
/// `None` to leave it.
pub type Pick<'a> = &'a (dyn Fn(&JobRecord) -> Option<JobWrite> + Send + Sync);

/// A deriver whose claims a test picks; its other answers (due, busy and released keys)
/// are [`HOST`]'s.
struct Picky<'a> {
    pick: Pick<'a>,
    host: HostDeriver,
}

impl Deriver for Picky<'_> {
    fn claim(&self, record: &JobRecord, _now: Timestamp) -> Option<JobWrite> {
        (self.pick)(record)
    }
    fn key_busy(&self, record: &JobRecord, key: &str, held_until: Timestamp, now: Timestamp) -> Option<JobWrite> {
        self.host.key_busy(record, key, held_until, now)
    }
    fn key_released(&self, record: &JobRecord, key: &str, now: Timestamp) -> Option<JobWrite> {
        self.host.key_released(record, key, now)
    }
    fn due(&self, record: &JobRecord, now: Timestamp) -> Option<JobWrite> {
        self.host.due(record, now)
    }
    fn children_settled(&self, record: &JobRecord, slot: &str, settled: u32, now: Timestamp) -> Option<JobWrite> {
        self.host.children_settled(record, slot, settled, now)
    }
    fn at_capacity(&self, record: &JobRecord, gate: &str, recheck_at: Timestamp, now: Timestamp) -> Option<JobWrite> {
        self.host.at_capacity(record, gate, recheck_at, now)
    }
}

/// [`HOST`]'s deriver.
pub fn host() -> HostDeriver {
    HostDeriver::new(HOST, TTL)
}

/// The store's operations with the deriver of [`HOST`] (or a test's pick of claims)
/// filled in, so that tests state only what they are about.
impl Db {
    /// The store itself, to share with other tasks.
    pub fn shared(&self) -> Arc<SqlStore> {
        self.store.clone()
    }

    /// The connection pools, to read tables directly.
    pub fn sql(&self) -> &spindle::store::sql::Db {
        self.store.db()
    }

    /// Claims up to `limit` candidates at `now` as `pick` chooses.
    pub async fn claim(
        &self,
        limit: u32,
        now: Timestamp,
        pick: Pick<'_>,
    ) -> Result<Vec<JobRecord>, spindle::store::StoreError> {
        self.claim_filtered(limit, now, &ClaimFilter::default(), pick).await
    }

    /// [`claim`](Self::claim) among the jobs `filter` admits.
    pub async fn claim_filtered(
        &self,
        limit: u32,
        now: Timestamp,
        filter: &ClaimFilter,
        pick: Pick<'_>,
    ) -> Result<Vec<JobRecord>, spindle::store::StoreError> {
        self.store.claim(limit, now, filter, &Picky { pick, host: host() }).await
    }

    /// Commits `writes` and claims up to `limit` as `pick` chooses, in one transaction.
    pub async fn write_and_claim(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
        limit: u32,
        filter: &ClaimFilter,
        pick: Pick<'_>,
    ) -> Result<(Vec<WriteOutcome>, Vec<JobRecord>), spindle::store::StoreError> {
        self.store.write_and_claim(writes, now, limit, filter, &Picky { pick, host: host() }).await
    }

    /// Commits `writes` in one transaction.
    pub async fn write(
        &self,
        writes: Vec<JobWrite>,
        now: Timestamp,
    ) -> Result<Vec<WriteOutcome>, spindle::store::StoreError> {
        self.store.write(writes, now, &host()).await
    }

    /// Promotes every delayed or blocked job due at `now`; answers how many.
    pub async fn promote_due(&self, now: Timestamp) -> Result<u64, spindle::store::StoreError> {
        self.store.promote_due(now, 10_000, &host()).await
    }

    /// A locked read-modify-write of job `id`.
    pub async fn update_job(
        &self,
        id: JobId,
        now: Timestamp,
        derive: Pick<'_>,
    ) -> Result<Updated, spindle::store::StoreError> {
        self.store.update_job(id, now, derive, &host()).await
    }

    /// Who holds lease `key`, and with which token (read from the table: no store
    /// operation needs to answer it).
    pub async fn lease_holder(&self, key: &str) -> Option<(JobId, i64)> {
        let rows = self
            .store
            .db()
            .fetch(
                "SELECT job_id, token FROM leases WHERE key = $1 AND job_id <> ''",
                vec![Value::from(key)],
                &[Ty::Text, Ty::Int],
            )
            .await
            .expect("read the leases table");
        rows.first().map(|r| {
            (
                r.text(0, "test row").expect("a decodable row").parse().expect("a job id"),
                r.int(1, "test row").expect("a decodable row"),
            )
        })
    }

    /// The steps of `id`'s pass `pass`, as stored: in step rows, or for a lean job (which
    /// has none, as this checks) in its row, which holds its current pass alone.
    pub async fn pass_steps(&self, id: JobId, pass: u32) -> Vec<Step> {
        if lean() {
            assert_eq!(self.step_rows(id).await, 0, "a lean job {id} has step rows");
            return match self.job(id).await.expect("load job") {
                Some(record) if record.job.pass == pass => record.job.steps,
                _ => Vec::new(),
            };
        }
        let rows = self
            .store
            .db()
            .fetch(
                "SELECT body, output FROM steps WHERE job_id = $1 AND pass = $2 ORDER BY position",
                vec![Value::from(id.to_string()), Value::from(i64::from(pass))],
                &[Ty::Text, Ty::OptBlob],
            )
            .await
            .expect("read the steps table");
        rows.into_iter()
            .map(|mut r| {
                let mut step: Step =
                    serde_json::from_str(&r.text(0, "test row").expect("a decodable row")).expect("a step");
                step.output = r.take_opt_blob(1, "steps.output").expect("a decodable row");
                step
            })
            .collect()
    }

    /// How many step rows job `id` has, in every pass.
    pub async fn step_rows(&self, id: JobId) -> i64 {
        self.count("SELECT count(*) FROM steps WHERE job_id = $1", id).await
    }

    /// How many history rows job `id` has.
    pub async fn history_rows(&self, id: JobId) -> i64 {
        self.count("SELECT count(*) FROM history WHERE job_id = $1", id).await
    }

    async fn count(&self, sql: &str, id: JobId) -> i64 {
        let rows = self.store.db().fetch(sql, vec![Value::from(id.to_string())], &[Ty::Int]).await.expect(sql);
        rows[0].int(0, "count").expect("a count")
    }

    /// The history the store kept of job `id`, oldest first; `None` in a lean run, after
    /// checking that the store kept none (a lean kind keeps no history).
    pub async fn kept_history(&self, id: JobId) -> Option<Vec<spindle_core::HistoryEvent>> {
        let entries = self.history(id).await.expect("read history");
        if lean() {
            assert!(entries.is_empty(), "a lean job {id} has history: {entries:?}");
            assert_eq!(self.history_rows(id).await, 0);
            return None;
        }
        Some(entries.into_iter().map(|e| e.event).collect())
    }

    /// The indexed columns of job `id`'s row, as stored.
    pub async fn indexed_columns(&self, id: JobId) -> spindle::store::IndexedColumns {
        let sql = format!("SELECT {} FROM jobs WHERE id = $1", spindle::store::IndexedColumns::COLUMNS);
        let rows = self
            .sql()
            .fetch(&sql, vec![Value::from(id.to_string())], &spindle::store::IndexedColumns::TYPES)
            .await
            .expect("read the job row");
        spindle::store::IndexedColumns::from_row(rows.first().unwrap_or_else(|| panic!("job {id} has no row")), 0)
            .expect("a decodable job row")
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

tokio::task_local! {
    /// Whether the test runs with every job a lean kind's (see `on_both_backends!`).
    pub static LEAN: bool;
}

/// Whether this test's jobs are a lean kind's.
pub fn lean() -> bool {
    LEAN.try_with(|lean| *lean).unwrap_or(false)
}

/// Kind rules for tests: cancellable, three attempts, no hooks; lean in a lean run.
pub fn rules() -> KindRules {
    KindRules { cancellable: true, max_attempts: 3, failure_effect: false, notify_on_success: false, lean: lean() }
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

/// The claim fence `record` holds.
pub fn held_fence(record: &JobRecord) -> spindle_core::Fence {
    record.job.claim.as_ref().unwrap_or_else(|| panic!("job {} holds no claim", record.job.id)).fence
}

/// The write of `event` on `before` at `now`, as the engine plans it; the core must
/// accept the event.
pub fn derive(before: &JobRecord, event: &JobEvent, now: Timestamp) -> JobWrite {
    let t = transition(&before.job, event, now)
        .unwrap_or_else(|refusal| panic!("the core refused {} on job {}: {refusal}", event.name(), before.job.id));
    plan(before, t, now).expect("the transition plans").write
}

/// A claim of `before` by `owner` at `now`, taking its lease keys (what a dispatcher's
/// deriver answers); `None` when the core refuses the claim.
pub fn claim_write(before: &JobRecord, owner: &str, now: Timestamp) -> Option<JobWrite> {
    HostDeriver::new(owner, TTL).claim(before, now)
}

/// Claims up to `limit` ready jobs for `owner` at `now`.
pub async fn claim_as(db: &Db, owner: &str, limit: u32, now: Timestamp) -> Vec<JobRecord> {
    db.store.claim(limit, now, &ClaimFilter::default(), &HostDeriver::new(owner, TTL)).await.expect("claim")
}

/// Claims up to `limit` ready jobs for [`HOST`] at `now`.
pub async fn claim(db: &Db, limit: u32, now: Timestamp) -> Vec<JobRecord> {
    claim_as(db, HOST, limit, now).await
}

/// The holder's report of `report` on its claimed `before`, releasing its keys after
/// checking it still holds them (what a step's host commits when the attempt ends).
pub fn settle(before: &JobRecord, report: StepReport, now: Timestamp) -> JobWrite {
    let fence = held_fence(before);
    derive(before, &JobEvent::Report { fence, report }, now)
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
/// submission fields.
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
