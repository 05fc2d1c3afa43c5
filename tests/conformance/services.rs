//! Shared services of the hosts: process-wide singleton leases, the after-commit
//! outbox, operational counters.

use std::time::Duration;

use spindle::store::{Backend, OutboxEffect, OutboxItem, WriteOutcome};
use spindle_core::{Actor, JobEvent, JobState, KindRules};

use crate::fixture::{Db, at, claim, complete, derive, insert, new_job, new_job_with, rules, settle, write, write_ok};

on_both_backends!(
    a_singleton_has_one_owner_at_a_time,
    outbox_effects_are_queued_with_the_write_and_leased_out,
    counters_accumulate,
);

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap()
}

async fn a_singleton_has_one_owner_at_a_time(backend: Backend) {
    let db = Db::new(backend).await;
    let ttl = micros(Duration::from_secs(10));

    let fence = db.singleton("reconciler", "host-a", ttl, at(0)).await.unwrap().expect("free: host-a takes it");
    assert_eq!(db.singleton("reconciler", "host-b", ttl, at(1_000)).await.unwrap(), None, "held by host-a");
    assert_eq!(db.singleton("reconciler", "host-a", ttl, at(5_000)).await.unwrap(), Some(fence), "renewed, same fence");
    assert_eq!(db.singleton("reconciler", "host-b", ttl, at(12_000)).await.unwrap(), None, "the renewal extended it");

    // Expired (at 15s): another owner takes it under a higher fence; the old one is out.
    let taken = db.singleton("reconciler", "host-b", ttl, at(15_000)).await.unwrap().expect("expired: host-b takes it");
    assert!(taken > fence, "{fence} then {taken}");
    assert_eq!(db.singleton("reconciler", "host-a", ttl, at(16_000)).await.unwrap(), None);

    // Only the owner can give it up; once given up, anyone may take it at once.
    db.release_singleton("reconciler", "host-a").await.unwrap();
    assert_eq!(db.singleton("reconciler", "host-c", ttl, at(17_000)).await.unwrap(), None, "host-a does not own it");
    db.release_singleton("reconciler", "host-b").await.unwrap();
    let after_release = db.singleton("reconciler", "host-c", ttl, at(17_000)).await.unwrap().expect("released");
    assert!(after_release > taken, "{taken} then {after_release}");
    assert_eq!(db.singleton("reconciler", "host-b", ttl, at(18_000)).await.unwrap(), None);

    // Names are independent.
    assert!(db.singleton("rescuer", "host-a", ttl, at(18_000)).await.unwrap().is_some());
    assert_eq!(db.singleton("reconciler", "host-c", ttl, at(19_000)).await.unwrap(), Some(after_release));
}

fn sorted(mut items: Vec<OutboxItem>) -> Vec<OutboxItem> {
    items.sort_by_key(|i| i.id);
    items
}

async fn outbox_effects_are_queued_with_the_write_and_leased_out(backend: Backend) {
    let db = Db::new(backend).await;
    let lease = micros(Duration::from_secs(60));
    let notifying = KindRules { notify_on_success: true, ..rules() };

    // A success that notifies: the core's effect becomes an outbox row with the write.
    let notified = insert(&db, new_job_with("email", 1, notifying, at(0), at(0)), at(0)).await;
    let claimed = claim(&db, 1, at(0)).await.remove(0);
    let success = settle(&claimed, complete(b"sent"), at(1_000));
    assert_eq!(success.outbox, vec![OutboxEffect::NotifySuccess]);
    assert_eq!(success.record.job.state, JobState::Succeeded);
    write_ok(&db, success, at(1_000)).await;

    // An effect queued with another job's write (set by hand: the store does not care why).
    let other = insert(&db, new_job("charge", 1, at(0)), at(0)).await;
    let cancel = JobEvent::Cancel { actor: Actor::new("ops"), reason: "fraud".into() };
    let mut cancelled = derive(&other, &cancel, at(2_000));
    cancelled.outbox = vec![OutboxEffect::FailureEffect];
    let mut racing = cancelled.clone();
    write_ok(&db, cancelled, at(2_000)).await;
    // The same change again, now from a stale version: it queues nothing.
    racing.outbox = vec![OutboxEffect::NotifySuccess, OutboxEffect::FailureEffect];
    assert_eq!(write(&db, racing, at(2_500)).await, WriteOutcome::Conflict);

    assert_eq!(
        db.outbox_claim(OutboxEffect::HOOKS, at(500), lease, 10).await.unwrap(),
        vec![],
        "nothing is queued before its write"
    );

    // Claimed once, in queue order, within the limit; hidden while leased.
    let first = db.outbox_claim(OutboxEffect::HOOKS, at(5_000), lease, 1).await.unwrap();
    assert_eq!(first.len(), 1);
    let notify = first[0].clone();
    assert_eq!((notify.job_id, notify.effect, notify.attempts), (notified.job.id, OutboxEffect::NotifySuccess, 0));
    let second = db.outbox_claim(OutboxEffect::HOOKS, at(5_000), lease, 10).await.unwrap();
    assert_eq!(second.len(), 1, "the first item is hidden, the second is due: {second:?}");
    let effect = second[0].clone();
    assert_eq!((effect.job_id, effect.effect, effect.attempts), (other.job.id, OutboxEffect::FailureEffect, 0));
    assert_ne!(effect.id, notify.id);
    assert_eq!(
        db.outbox_claim(OutboxEffect::HOOKS, at(5_000), lease, 10).await.unwrap(),
        vec![],
        "both are leased out"
    );
    assert_eq!(db.outbox_claim(OutboxEffect::HOOKS, at(64_999), lease, 10).await.unwrap(), vec![]);

    // A host that took them and vanished: they come back once the lease passes.
    let again = db.outbox_claim(OutboxEffect::HOOKS, at(65_000), lease, 10).await.unwrap();
    assert_eq!(sorted(again), sorted(vec![notify.clone(), effect.clone()]));

    // A failed attempt is rescheduled, counted, and due at its time.
    db.outbox_retry(&[notify.id], at(90_000)).await.unwrap();
    assert_eq!(db.outbox_claim(OutboxEffect::HOOKS, at(89_999), lease, 10).await.unwrap(), vec![]);
    let retried = db.outbox_claim(OutboxEffect::HOOKS, at(90_000), lease, 10).await.unwrap();
    assert_eq!(retried, vec![OutboxItem { attempts: 1, ..notify.clone() }]);

    // Done: gone for good.
    db.outbox_done(&[notify.id]).await.unwrap();
    db.outbox_done(&[effect.id]).await.unwrap();
    assert_eq!(db.outbox_claim(OutboxEffect::HOOKS, at(10_000_000), lease, 10).await.unwrap(), vec![]);
}

async fn counters_accumulate(backend: Backend) {
    let db = Db::new(backend).await;
    assert_eq!(db.counters().await.unwrap(), vec![]);
    db.bump_counter("alert.late-success-after-failure", 1).await.unwrap();
    db.bump_counter("sandbox.trap", 5).await.unwrap();
    db.bump_counter("alert.late-success-after-failure", 2).await.unwrap();
    db.bump_counter("alert.late-success-after-failure", -1).await.unwrap();
    db.bump_counter("sandbox.trap", 0).await.unwrap();
    assert_eq!(
        db.counters().await.unwrap(),
        vec![("alert.late-success-after-failure".to_owned(), 2), ("sandbox.trap".to_owned(), 5),]
    );
}
