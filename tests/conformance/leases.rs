//! Exclusive lease keys: one holder per key, taken with the claim and released with
//! it; a holder that lost a key commits nothing.

use std::time::Duration;

use spindle::store::{Backend, WriteOutcome};
use spindle_core::{JobEvent, JobState, QueueState};

use crate::fixture::{
    Db, at, claim, complete, derive, ids, insert, keyed_job, load, new_job, settle, stored, write, write_ok,
};

on_both_backends!(
    a_lease_key_admits_one_holder_at_a_time,
    a_claim_takes_all_of_its_keys_or_none,
    a_holder_with_a_repeated_key_can_commit,
    a_holder_whose_key_was_taken_over_commits_nothing,
);

async fn a_lease_key_admits_one_holder_at_a_time(backend: Backend) {
    let db = Db::new(backend).await;
    let a = insert(&db, keyed_job("charge", &["account:42"], at(0)), at(0)).await;
    let b = insert(&db, keyed_job("charge", &["account:42"], at(0)), at(0)).await;
    let c = insert(&db, keyed_job("refund", &["account:42"], at(0)), at(0)).await;
    let free = insert(&db, new_job("email", 1, at(0)), at(0)).await;
    assert_eq!(db.lease_holder("account:42").await, None);

    // One batch: the first job takes the key, the others sharing it are passed over,
    // and the batch goes on to jobs that need no key.
    let batch = claim(&db, 10, at(1_000)).await;
    assert_eq!(ids(&batch), vec![a.job.id, free.job.id]);
    let (holder, first_token) = db.lease_holder("account:42").await.expect("a holds the key");
    assert_eq!(holder, a.job.id);
    assert_eq!(claim(&db, 10, at(1_000)).await, vec![], "the others are blocked, not ready");
    for blocked in [&b, &c] {
        // Waiting for the key is the core's answer, written version-checked: the job
        // stays pending, and waits in the queue as blocked on the key.
        let record = load(&db, blocked.job.id).await;
        assert_eq!((record.version, record.job.state), (2, JobState::Pending));
        assert_eq!((record.job.queue, record.job.blocked_on.as_deref()), (QueueState::Blocked, Some("account:42")));
    }
    let retry = db.next_due().await.unwrap().expect("blocked jobs are retried at a time");
    assert!(retry > at(1_000) && retry <= at(31_000), "no later than the holder's expiry: {retry}");

    // Retried while the holder's claim lasts: still busy, and the key is untouched.
    assert_eq!(db.promote_due(at(20_000)).await.unwrap(), 2);
    assert_eq!(claim(&db, 10, at(20_000)).await, vec![]);
    assert_eq!(db.lease_holder("account:42").await, Some((a.job.id, first_token)));

    // The holder's claim ends: the key is free and the next job takes it.
    write_ok(&db, settle(&batch[0], complete(b"charged"), at(21_000)), at(21_000)).await;
    assert_eq!(db.lease_holder("account:42").await, None, "released with the claim");
    let next = claim(&db, 10, at(21_000)).await;
    assert_eq!(ids(&next), vec![b.job.id], "woken by the release; still one holder");
    let (holder, second_token) = db.lease_holder("account:42").await.expect("b holds the key");
    assert_eq!(holder, b.job.id);
    assert!(second_token > first_token, "the token grows on every acquisition: {first_token} then {second_token}");

    // b's claim lapses (expires at 51s) without a release: c may take the key.
    assert_eq!(db.promote_due(at(50_000)).await.unwrap(), 1);
    assert_eq!(claim(&db, 10, at(50_000)).await, vec![], "not before b's lease expires");
    assert_eq!(db.promote_due(at(52_000)).await.unwrap(), 1);
    let taken = claim(&db, 10, at(52_000)).await;
    assert_eq!(ids(&taken), vec![c.job.id]);
    let (holder, third_token) = db.lease_holder("account:42").await.expect("c holds the key");
    assert_eq!(holder, c.job.id);
    assert!(third_token > second_token, "{second_token} then {third_token}");
    // Lapsed, oldest expiry first: the key-less job (31s) and b (51s); a's claim ended.
    assert_eq!(db.lapsed_claims(at(52_000), 10).await.unwrap(), vec![free.job.id, b.job.id]);
}

async fn a_claim_takes_all_of_its_keys_or_none(backend: Backend) {
    let db = Db::new(backend).await;
    let holds_b = insert(&db, keyed_job("sync", &["key:b"], at(0)), at(0)).await;
    assert_eq!(ids(&claim(&db, 10, at(0)).await), vec![holds_b.job.id]);

    let needs_a_and_b = insert(&db, keyed_job("sync", &["key:a", "key:b"], at(1_000)), at(1_000)).await;
    let needs_a = insert(&db, keyed_job("sync", &["key:a", "key:c"], at(1_000)), at(1_000)).await;
    // needs_a_and_b comes first, finds key:b busy and must let key:a go again, so that
    // needs_a, in the same batch, can take it.
    let batch = claim(&db, 10, at(2_000)).await;
    assert_eq!(ids(&batch), vec![needs_a.job.id]);
    assert_eq!(db.lease_holder("key:a").await.map(|h| h.0), Some(needs_a.job.id));
    assert_eq!(db.lease_holder("key:b").await.map(|h| h.0), Some(holds_b.job.id));
    assert_eq!(db.lease_holder("key:c").await.map(|h| h.0), Some(needs_a.job.id));
    let waiting = load(&db, needs_a_and_b.job.id).await;
    assert_eq!((waiting.version, waiting.job.blocked_on.as_deref()), (2, Some("key:b")), "blocked on the busy key");

    // Releasing one claim frees all of its keys.
    write_ok(&db, settle(&batch[0], complete(b""), at(3_000)), at(3_000)).await;
    assert_eq!(db.lease_holder("key:a").await, None);
    assert_eq!(db.lease_holder("key:c").await, None);
    assert_eq!(claim(&db, 10, at(3_000)).await, vec![], "key:b is still held");
}

async fn a_holder_with_a_repeated_key_can_commit(backend: Backend) {
    let db = Db::new(backend).await;
    // Nothing upstream removes repeats from a submission's keys.
    let job = insert(&db, keyed_job("sync", &["tenant:7", "tenant:7"], at(0)), at(0)).await;
    let claimed = claim(&db, 10, at(0)).await;
    assert_eq!(ids(&claimed), vec![job.job.id]);
    assert_eq!(db.lease_holder("tenant:7").await.map(|h| h.0), Some(job.job.id));
    assert_eq!(
        write(&db, settle(&claimed[0], complete(b"ok"), at(1_000)), at(1_000)).await,
        WriteOutcome::Written { version: 3 },
        "the holder still holds its key"
    );
    assert_eq!(db.lease_holder("tenant:7").await, None);
}

async fn a_holder_whose_key_was_taken_over_commits_nothing(backend: Backend) {
    let db = Db::new(backend).await;
    let stale = insert(&db, keyed_job("charge", &["account:42"], at(0)), at(0)).await;
    let next = insert(&db, keyed_job("charge", &["account:42"], at(0)), at(0)).await;
    let stale_claim = claim(&db, 10, at(0)).await.remove(0);
    assert_eq!(stale_claim.job.id, stale.job.id);
    let (_, stale_token) = db.lease_holder("account:42").await.unwrap();

    // The holder goes quiet past its lease (30s); the other job takes the key over.
    assert_eq!(db.promote_due(at(31_000)).await.unwrap(), 1);
    let next_claim = claim(&db, 10, at(31_000)).await;
    assert_eq!(ids(&next_claim), vec![next.job.id]);
    let (holder, token) = db.lease_holder("account:42").await.unwrap();
    assert_eq!(holder, next.job.id);
    assert!(token > stale_token);

    // The old holder wakes up and reports: refused, nothing changes.
    let history_before = db.history(stale.job.id).await.unwrap();
    let late = settle(&stale_claim, complete(b"charged twice"), at(32_000));
    assert_eq!(write(&db, late, at(32_000)).await, WriteOutcome::LeaseLost);
    assert_eq!(stored(&load(&db, stale.job.id).await), stored(&stale_claim), "the job is as it was claimed");
    assert_eq!(db.history(stale.job.id).await.unwrap(), history_before);
    assert_eq!(db.lease_holder("account:42").await, Some((next.job.id, token)), "the new holder keeps it");

    // In a batch, the refused write does not hold back the others.
    let late_again = settle(&stale_claim, complete(b"charged twice"), at(33_000));
    let unrelated = insert(&db, new_job("email", 1, at(33_000)), at(33_000)).await;
    let pause = derive(&unrelated, &JobEvent::Pause { actor: spindle_core::Actor::new("ops") }, at(33_000));
    let outcomes = db.write(vec![late_again, pause], at(33_000)).await.unwrap();
    assert_eq!(outcomes, vec![WriteOutcome::LeaseLost, WriteOutcome::Written { version: 2 }]);

    // The rescuer takes back the stale claim: it releases what that claim held, which
    // is nothing any more; the new holder's key stays.
    let rescue = derive(&stale_claim, &JobEvent::Rescue { backoff: Duration::from_secs(5) }, at(40_000));
    write_ok(&db, rescue, at(40_000)).await;
    assert_eq!(db.lease_holder("account:42").await, Some((next.job.id, token)));

    // The new holder commits.
    write_ok(&db, settle(&next_claim[0], complete(b"charged"), at(41_000)), at(41_000)).await;
    assert_eq!(db.lease_holder("account:42").await, None);
    assert_eq!(load(&db, next.job.id).await.job.state, JobState::Succeeded);
}
