//! The row's place in the dispatch queue as reads report it (`queued`), writes that
//! leave it alone (`preserve_queue`), and locked read-modify-writes (`update_job`).

use std::time::Duration;

use spindle::store::{Backend, JobRecord, JobWrite, LeaseOp, Updated, WriteOutcome};
use spindle_core::{Actor, Evidence, JobEvent, JobState, ReconcilePolicy, StepReport};

use crate::fixture::{
    Db, at, claim, derive, held_fence, ids, insert, job_id, keyed_job, load, new_job, new_job_with, rules, stored,
    write_ok,
};

on_both_backends!(
    reads_report_queue_membership_and_probes_preserve_it,
    update_job_derives_and_commits_under_the_row_lock
);

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
fn probe(before: &JobRecord, now: spindle_core::Timestamp, preserve_queue: bool) -> JobWrite {
    let policy = ReconcilePolicy { silence: Duration::from_secs(60), required_misses: 3, ..ReconcilePolicy::default() };
    let w = derive(before, &JobEvent::Reconcile { evidence: Evidence::Missing, policy }, now, LeaseOp::None);
    JobWrite { preserve_queue, ..w }
}

async fn reads_report_queue_membership_and_probes_preserve_it(backend: Backend) {
    let db = Db::new(backend).await;
    let ready = insert(&db, new_job("sync", 1, at(0)), at(0)).await;
    let delayed = insert(&db, new_job_with("sync", 1, rules(), at(600_000), at(0)), at(0)).await;
    let holder = insert(&db, keyed_job("sync", &["key:1"], at(0)), at(0)).await;
    let blocked = insert(&db, keyed_job("sync", &["key:1"], at(0)), at(0)).await;
    assert!(ready.queued && delayed.queued && holder.queued, "new open jobs are queued, due or not");

    let only_holder = |r: &JobRecord| {
        (r.job.id == holder.job.id || r.job.id == blocked.job.id)
            .then(|| crate::fixture::claim_write(r, "host-a", at(1_000)))
            .flatten()
    };
    let claimed = db.claim(10, at(1_000), &only_holder).await.unwrap();
    assert_eq!(ids(&claimed), vec![holder.job.id]);
    let queued = |id| {
        let db = &db;
        async move { load(db, id).await.queued }
    };
    assert!(queued(ready.job.id).await, "ready");
    assert!(queued(delayed.job.id).await, "delayed");
    assert!(!queued(holder.job.id).await, "claimed");
    assert!(queued(blocked.job.id).await, "blocked on a key");
    let paused = insert(&db, new_job("sync", 1, at(2_000)), at(2_000)).await;
    write_ok(&db, derive(&paused, &JobEvent::Pause { actor: Actor::new("ops") }, at(2_000), LeaseOp::None), at(2_000))
        .await;
    assert!(!queued(paused.job.id).await, "paused");

    // A probe of a queued job leaves it queued and claimable.
    write_ok(&db, probe(&load(&db, ready.job.id).await, at(100_000), true), at(100_000)).await;
    let probed = load(&db, ready.job.id).await;
    assert_eq!((probed.queued, probed.job.probe_misses), (true, 1));

    // A job that lost its dispatch (open, unclaimed, out of the queue): here its claim
    // was handed back by a write that kept the row where it was.
    let fence = held_fence(&claimed[0]);
    let handed_back = derive(
        &claimed[0],
        &JobEvent::Report { fence, report: StepReport::Release },
        at(3_000),
        LeaseOp::Release { fence: crate::fixture::fence_of(fence), verify: true },
    );
    assert!(handed_back.record.job.claim.is_none() && handed_back.record.job.run_at <= at(3_000));
    write_ok(&db, JobWrite { preserve_queue: true, ..handed_back }, at(3_000)).await;
    let lost = load(&db, holder.job.id).await;
    assert_eq!((lost.queued, lost.job.state, lost.job.claim.is_none()), (false, JobState::Running, true));

    // The reconciler's probe observes it and must not repair it...
    write_ok(&db, probe(&lost, at(100_000), true), at(100_000)).await;
    let observed = load(&db, holder.job.id).await;
    assert_eq!((observed.queued, observed.job.probe_misses), (false, 1));
    let claimable = claim(&db, 10, at(100_000)).await;
    assert!(!ids(&claimable).contains(&holder.job.id), "a job out of the queue is not claimed");
    // ...while an ordinary write puts it back where its state says.
    write_ok(&db, probe(&observed, at(200_000), false), at(200_000)).await;
    assert!(queued(holder.job.id).await);
    assert_eq!(ids(&claim(&db, 10, at(200_000)).await), vec![holder.job.id]);
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
        Some(derive(r, &event, at(3_000), LeaseOp::None))
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
    let names: Vec<&str> = db.history(job.job.id).await.unwrap().iter().map(|e| e.event.name()).collect();
    assert_eq!(names.last(), Some(&"cancel_requested"));
}
