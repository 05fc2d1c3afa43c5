//! The indexed columns are the machine's projection: random transitions of many jobs,
//! through every write path the engine uses (claims with their busy keys, holders'
//! outcomes and heartbeats, locked commands, rescues, promotions of due jobs), and after
//! each one every row's indexed columns equal what the core says for the machine it
//! stores. The seed is printed; `SPINDLE_TEST_SEED` replays a run.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use spindle::store::sql::Ty;
use spindle::store::{Backend, IndexedColumns, JobRecord, JobWrite};
use spindle_core::step::Partial;
use spindle_core::{Actor, Job, JobEvent, SafeFailure, StepReport, Timestamp, transition};

use crate::fixture::{Db, HOST, TTL, at, claim_as, derive, held_fence, insert, keyed_job, load, new_job_with, rules};

on_both_backends!(random_transitions_keep_every_row_a_projection_of_its_machine);

const JOBS: usize = 24;
const OPERATIONS: usize = 3_000;

fn seed() -> u64 {
    let seed = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("SPINDLE_TEST_SEED={seed}");
    seed
}

/// A report a holder might make.
fn report(rng: &mut StdRng) -> StepReport {
    match rng.random_range(0..8) {
        0 | 1 => StepReport::Complete { output: b"{}".to_vec() },
        2 => StepReport::Skip { reason: "n/a".into() },
        3 => StepReport::More { cursor: "c".into(), partial: Partial { done: 1, total: Some(3) } },
        4 => StepReport::Snooze { delay: Duration::from_millis(rng.random_range(0..3_000)) },
        5 => StepReport::Retryable {
            failure: SafeFailure::transient("upstream", "corr"),
            backoff: Duration::from_millis(rng.random_range(0..2_000)),
        },
        6 => StepReport::Refused { failure: SafeFailure::permanent("declined", "declined") },
        _ => StepReport::Release,
    }
}

/// A command an operator might give.
fn command(rng: &mut StdRng) -> JobEvent {
    let actor = Actor::new("ops");
    match rng.random_range(0..4) {
        0 => JobEvent::Pause { actor },
        1 => JobEvent::Resume { actor },
        2 => JobEvent::Cancel { actor, reason: "stop".into() },
        _ => JobEvent::RequestRestart { actor },
    }
}

/// Every row's indexed columns against the projection of the machine it stores.
async fn check_every_row(db: &Db, step: usize, what: &str) {
    let sql = format!("SELECT id, machine, {} FROM jobs", IndexedColumns::COLUMNS);
    let tys = [&[Ty::Text, Ty::Text][..], &IndexedColumns::TYPES].concat();
    for r in db.sql().fetch(&sql, vec![], &tys).await.expect("read the jobs") {
        let job: Job =
            serde_json::from_str(&r.text(1, "test row").expect("a decodable row")).expect("a stored machine");
        let stored = IndexedColumns::from_row(&r, 2).expect("a decodable job row");
        assert_eq!(
            stored,
            IndexedColumns::of(&job),
            "after operation {step} ({what}), job {}",
            r.text(0, "test row").expect("a decodable row")
        );
    }
}

/// Writes `event` on `record` at `now` if the core accepts it; answers whether it landed.
async fn write_event(db: &Db, record: &JobRecord, event: &JobEvent, now: Timestamp) -> bool {
    match transition(&record.job, event, now) {
        Ok(t) if !t.is_noop(&record.job) => {}
        _ => return false,
    }
    let write = derive(record, event, now);
    matches!(db.write(vec![write], now).await.expect("write").pop(), Some(spindle::store::WriteOutcome::Written { .. }))
}

/// The `i`th job: some share lease keys, some are submitted for later, one to three steps.
fn random_job(rng: &mut StdRng, i: usize, now: Timestamp) -> spindle::store::NewJob {
    let keys: Vec<&str> = match i % 4 {
        0 => vec!["account:1"],
        1 => vec!["account:1", "account:2"],
        2 => vec!["account:2"],
        _ => vec![],
    };
    let run_at = if i.is_multiple_of(3) { now.plus(Duration::from_millis(rng.random_range(0..5_000))) } else { now };
    let mut new = new_job_with("sync", 1 + i % 3, rules(), run_at, now);
    new.lease_keys = keyed_job("sync", &keys, now).lease_keys;
    new
}

async fn random_transitions_keep_every_row_a_projection_of_its_machine(backend: Backend) {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let db = Db::new(backend).await;
    let mut now = at(0);
    let mut ids = Vec::new();
    for i in 0..JOBS {
        ids.push(insert(&db, random_job(&mut rng, i, now), now).await.job.id);
    }
    check_every_row(&db, 0, "submission").await;
    let mut landed = 0usize;
    for step in 1..=OPERATIONS {
        now = now.plus(Duration::from_millis(rng.random_range(0..400)));
        let id = ids[rng.random_range(0..ids.len())];
        let what = match rng.random_range(0..20) {
            0..=4 => {
                let owner = if rng.random_bool(0.5) { HOST } else { "host-b" };
                landed += claim_as(&db, owner, rng.random_range(1..6), now).await.len();
                "claim"
            }
            5..=10 => {
                let record = load(&db, id).await;
                if record.job.claim.is_some() {
                    let fence = held_fence(&record);
                    let event = if rng.random_bool(0.2) {
                        JobEvent::Heartbeat { fence, ttl: TTL, progress: None }
                    } else {
                        JobEvent::Report { fence, report: report(&mut rng) }
                    };
                    landed += usize::from(write_event(&db, &record, &event, now).await);
                }
                "holder's report"
            }
            11..=13 => {
                let event = command(&mut rng);
                let pick = |r: &JobRecord| -> Option<JobWrite> {
                    transition(&r.job, &event, now).ok().filter(|t| !t.is_noop(&r.job)).map(|_| derive(r, &event, now))
                };
                if let spindle::store::Updated::Wrote(..) = db.update_job(id, now, &pick).await.expect("update") {
                    landed += 1;
                }
                "command"
            }
            14 => {
                // Past every claim's lease: rescue what lapsed.
                now = now.plus(TTL);
                let record = load(&db, id).await;
                let rescue = JobEvent::Rescue { backoff: Duration::from_millis(rng.random_range(0..1_000)) };
                landed += usize::from(write_event(&db, &record, &rescue, now).await);
                "rescue"
            }
            15 | 16 => {
                landed += usize::try_from(db.promote_due(now).await.expect("promote")).unwrap_or(0);
                "promotion"
            }
            _ => {
                ids.push(insert(&db, random_job(&mut rng, ids.len(), now), now).await.job.id);
                landed += 1;
                "submission"
            }
        };
        check_every_row(&db, step, what).await;
    }
    eprintln!("{landed} of {OPERATIONS} operations changed jobs; every row checked after each");
    assert!(landed >= OPERATIONS / 3, "only {landed} of {OPERATIONS} operations changed a job (seed {seed})");
}
