//! The row's place in the dispatch queue is the projection of the machine it stores
//! (claims, busy and released keys, promotions all answered by the core), and locked
//! read-modify-writes (`update_job`).

use std::time::Duration;

use spindle::store::{Backend, IndexedColumns, JobRecord, JobWrite, Updated, WriteOutcome};
use spindle_core::{Actor, Evidence, HistoryEvent, JobEvent, QueueState, ReconcilePolicy};

use crate::fixture::{
    Db, at, claim, complete, derive, ids, insert, job_id, keyed_job, load, new_job, new_job_with, rules, settle,
    stored, write_ok,
};

on_both_backends!(the_queue_columns_are_the_machines_projection, update_job_derives_and_commits_under_the_row_lock);

/// The jobs a claim at `now` considers (it takes none of them).
async fn candidates(db: &Db, now: spindle_core::Timestamp) -> Vec<spindle_core::JobId> {
    let seen = std::sync::Mutex::new(Vec::new());
    let look = |r: &JobRecord| {
        seen.lock().unwrap().push(r.job.id);
        None
    };
    assert_eq!(db.claim(10, now, &look).await.unwrap(), vec![]);
    seen.into_inner().unwrap()
}

/// A reconciliation probe that finds no execution (one miss of three) at `now`.
fn probe(before: &JobRecord, now: spindle_core::Timestamp) -> JobWrite {
    let policy = ReconcilePolicy { silence: Duration::from_secs(60), required_misses: 3, ..ReconcilePolicy::default() };
    derive(before, &JobEvent::Reconcile { evidence: Evidence::Missing, policy }, now)
}

async fn the_queue_columns_are_the_machines_projection(backend: Backend) {
    let db = Db::new(backend).await;
    let ready = insert(&db, new_job("sync", 1, at(0)), at(0)).await;
    let delayed = insert(&db, new_job_with("sync", 1, rules(), at(600_000), at(0)), at(0)).await;
    let holder = insert(&db, keyed_job("sync", &["key:1"], at(0)), at(0)).await;
    let blocked = insert(&db, keyed_job("sync", &["key:1"], at(0)), at(0)).await;
    let queue = |id| {
        let db = &db;
        async move { (load(db, id).await.job.queue, db.indexed_columns(id).await) }
    };
    for (record, expect) in [(&ready, QueueState::Ready), (&delayed, QueueState::Delayed), (&holder, QueueState::Ready)]
    {
        let (machine, columns) = queue(record.job.id).await;
        assert_eq!(machine, expect);
        assert_eq!(columns, IndexedColumns::of(&load(&db, record.job.id).await.job), "written as the core answered");
    }

    // The holder takes the key; the other job's claim finds it held and, as the core
    // answers, waits for it: blocked on the key, rechecked at the holder's expiry or
    // within a second.
    let both = |r: &JobRecord| {
        (r.job.id == holder.job.id || r.job.id == blocked.job.id)
            .then(|| crate::fixture::claim_write(r, "host-a", at(1_000)))
            .flatten()
    };
    let claimed = db.claim(10, at(1_000), &both).await.unwrap();
    assert_eq!(ids(&claimed), vec![holder.job.id]);
    let (machine, columns) = queue(blocked.job.id).await;
    assert_eq!(machine, QueueState::Blocked);
    let waiting = load(&db, blocked.job.id).await.job;
    assert_eq!((waiting.blocked_on.as_deref(), waiting.run_at), (Some("key:1"), at(2_000)));
    assert_eq!(columns, IndexedColumns::of(&waiting));
    assert_eq!(queue(holder.job.id).await.0, QueueState::Idle, "claimed");
    assert_eq!(queue(ready.job.id).await.0, QueueState::Ready, "left where it was");

    // The holder's outcome releases the key, and the blocked job is woken through the
    // core in the same transaction.
    write_ok(&db, settle(&claimed[0], complete(b"done"), at(1_500)), at(1_500)).await;
    let (machine, columns) = queue(blocked.job.id).await;
    assert_eq!(machine, QueueState::Ready);
    let woken = load(&db, blocked.job.id).await.job;
    assert_eq!((woken.blocked_on, woken.run_at), (None, at(1_500)));
    assert_eq!(columns, IndexedColumns::of(&load(&db, blocked.job.id).await.job));

    // Pausing takes a job out of the queue; a reconciliation probe changes nothing of it.
    let paused = insert(&db, new_job("sync", 1, at(2_000)), at(2_000)).await;
    write_ok(&db, derive(&paused, &JobEvent::Pause { actor: Actor::new("ops") }, at(2_000)), at(2_000)).await;
    assert_eq!(queue(paused.job.id).await.0, QueueState::Idle, "paused");
    write_ok(&db, probe(&load(&db, ready.job.id).await, at(100_000)), at(100_000)).await;
    let probed = load(&db, ready.job.id).await;
    assert_eq!((probed.job.queue, probed.job.probe_misses), (QueueState::Ready, 1));
    assert_eq!(db.indexed_columns(ready.job.id).await, IndexedColumns::of(&probed.job));

    // A delayed job is promoted through the core when due, not before.
    assert_eq!(db.promote_due(at(599_999)).await.unwrap(), 0);
    assert_eq!(db.promote_due(at(600_000)).await.unwrap(), 1);
    let promoted = load(&db, delayed.job.id).await;
    assert_eq!(promoted.job.queue, QueueState::Ready);
    assert_eq!(db.indexed_columns(delayed.job.id).await, IndexedColumns::of(&promoted.job));
}

async fn update_job_derives_and_commits_under_the_row_lock(backend: Backend) {
    let db = Db::new(backend).await;
    let job = insert(&db, new_job("sync", 2, at(0)), at(0)).await;

    let never = |_: &JobRecord| -> Option<JobWrite> { panic!("no job to derive from") };
    // A skipped update writes nothing and lets go of the row at once: a claim right
    // after it sees the job (on PostgreSQL a lock left behind makes claims skip it).
    let skip = |_: &JobRecord| None;
    assert_eq!(db.update_job(job_id(), at(1_000), &never).await.unwrap(), Updated::Missing);
    for _ in 0..25 {
        assert_eq!(db.update_job(job.job.id, at(1_000), &skip).await.unwrap(), Updated::Skipped(job.clone()));
        assert_eq!(candidates(&db, at(1_000)).await, vec![job.job.id], "the row is not left locked");
    }
    assert_eq!(load(&db, job.job.id).await, job, "a skipped update writes nothing");

    // Derived from the row as locked, not from a copy the caller held: a claim bumped
    // the version in between, and the cancel still lands.
    let claimed = claim(&db, 1, at(2_000)).await.remove(0);
    assert_eq!(claimed.version, 2);
    let cancel = |r: &JobRecord| {
        let event = JobEvent::Cancel { actor: Actor::new("ops"), reason: "customer left".into() };
        Some(derive(r, &event, at(3_000)))
    };
    let Updated::Wrote(written, outcome) = db.update_job(job.job.id, at(3_000), &cancel).await.unwrap() else {
        panic!("the cancel was derived and written");
    };
    assert_eq!(outcome, WriteOutcome::Written { version: 3 });
    assert_eq!(written.version, 3, "the answered record carries its new version");
    let reread = load(&db, job.job.id).await;
    assert_eq!(stored(&reread), stored(&written));
    assert!(reread.job.requests.cancel.is_some(), "recorded; the step in flight ends it");
    assert_eq!(reread.job.claim, claimed.job.claim);
    if let Some(history) = db.kept_history(job.job.id).await {
        assert_eq!(history.last().map(HistoryEvent::name), Some("cancel_requested"));
    }
}
