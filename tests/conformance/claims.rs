//! Dispatch: which ready jobs a claim takes and in what order, delayed jobs, and the
//! queries the rescuer and the reconciler run (lapsed claims, silent jobs).

use spindle::store::{Backend, JobRecord, NewJob};
use spindle_core::policy::priority::Priority;
use spindle_core::{Actor, JobEvent, JobState};

use crate::fixture::{
    Db, TTL, acme, at, claim, claim_as, derive, globex, ids, insert, load, new_job, new_job_with, rules, run_step,
    stored,
};

on_both_backends!(
    claims_take_the_best_ready_jobs_first_within_the_limit,
    a_delayed_job_is_claimed_only_after_it_is_promoted,
    lapsed_claims_and_silent_jobs_are_found_by_time,
    a_filtered_claim_takes_only_the_kinds_and_tenants_it_names,
    a_tenant_at_its_share_is_passed_over_while_others_are_ready_and_never_takes_a_reserve_slot,
    an_outcome_and_the_next_claims_share_one_transaction,
);

async fn claims_take_the_best_ready_jobs_first_within_the_limit(backend: Backend) {
    let db = Db::new(backend).await;
    // Submitted in an order unrelated to priority: (name, layer).
    let plan = [
        ("bg-1", Priority::Background),
        ("normal-1", Priority::Normal),
        ("critical-1", Priority::Critical),
        ("normal-2", Priority::Normal),
        ("forced-1", Priority::Forced),
        ("critical-2", Priority::Critical),
        ("scheduled-1", Priority::Scheduled),
        ("bg-2", Priority::Background),
    ];
    let mut by_name = std::collections::HashMap::new();
    for (i, (name, priority)) in plan.iter().enumerate() {
        let now = at(i64::try_from(i).unwrap());
        let record = insert(&db, NewJob { priority: *priority, ..new_job(name, 1, now) }, now).await;
        by_name.insert(*name, record.job.id);
    }
    let expect = |names: &[&str]| names.iter().map(|n| by_name[n]).collect::<Vec<_>>();

    let now = at(1_000);
    let first = claim(&db, 3, now).await;
    assert_eq!(ids(&first), expect(&["forced-1", "critical-1", "critical-2"]), "priority, then submission order");
    for record in &first {
        let claim = record.job.claim.as_ref().expect("a claimed record holds its claim");
        assert_eq!((claim.owner.as_str(), claim.expires_at), ("host-a", now.plus(TTL)));
        assert_eq!(record.job.state, JobState::Running);
        assert_eq!(stored(record), stored(&load(&db, record.job.id).await), "the claim answers the record as written");
    }
    let second = claim_as(&db, "host-b", 4, now).await;
    assert_eq!(ids(&second), expect(&["scheduled-1", "normal-1", "normal-2", "bg-1"]));
    let third = claim(&db, 4, now).await;
    assert_eq!(ids(&third), expect(&["bg-2"]), "fewer ready jobs than the limit: all of them");
    assert_eq!(claim(&db, 4, now).await, vec![], "a claimed job is not claimed again");
    assert_eq!(claim(&db, 4, at(10_000)).await, vec![], "nor later while its claim lasts");

    // A job whose claim ended is ready again, in its place.
    let urgent = &first[0];
    let released = crate::fixture::settle(urgent, crate::fixture::complete(b"ok"), at(2_000));
    assert_eq!(released.record.job.state, JobState::Succeeded);
    crate::fixture::write_ok(&db, released, at(2_000)).await;
    let more = insert(&db, new_job_with("multi", 2, rules(), at(3_000), at(3_000)), at(3_000)).await;
    let step = run_step(&db, &more, b"one", at(4_000)).await;
    assert_eq!(step.job.state, JobState::Running);
    assert_eq!(
        ids(&claim(&db, 4, at(5_000)).await),
        vec![more.job.id],
        "after its step, the job is ready for the next"
    );
}

async fn a_delayed_job_is_claimed_only_after_it_is_promoted(backend: Backend) {
    let db = Db::new(backend).await;
    assert_eq!(db.next_due().await.unwrap(), None);
    let later = NewJob { priority: Priority::Forced, ..new_job_with("report", 1, rules(), at(60_000), at(0)) };
    let later = insert(&db, later, at(0)).await;
    let sooner = insert(&db, new_job_with("report", 1, rules(), at(30_000), at(0)), at(0)).await;
    let now_job = insert(&db, NewJob { priority: Priority::Background, ..new_job("report", 1, at(0)) }, at(0)).await;
    assert_eq!(db.next_due().await.unwrap(), Some(at(30_000)), "the earliest delayed job");

    assert_eq!(ids(&claim(&db, 10, at(0)).await), vec![now_job.job.id], "only the job due now, despite its layer");
    assert_eq!(db.promote_due(at(29_999)).await.unwrap(), 0);
    assert_eq!(claim(&db, 10, at(45_000)).await, vec![], "due, but not promoted yet");

    assert_eq!(db.promote_due(at(45_000)).await.unwrap(), 1);
    assert_eq!(db.next_due().await.unwrap(), Some(at(60_000)));
    assert_eq!(ids(&claim(&db, 10, at(45_000)).await), vec![sooner.job.id]);

    assert_eq!(db.promote_due(at(59_000)).await.unwrap(), 0);
    assert_eq!(db.promote_due(at(60_000)).await.unwrap(), 1, "due at its instant");
    assert_eq!(db.next_due().await.unwrap(), None);
    assert_eq!(db.promote_due(at(61_000)).await.unwrap(), 0, "promotion happens once");
    assert_eq!(ids(&claim(&db, 10, at(60_000)).await), vec![later.job.id]);

    // A job snoozed by its step is delayed again and comes back at its time.
    let snoozing = &load(&db, later.job.id).await;
    let fence = crate::fixture::held_fence(snoozing);
    let snooze = derive(
        snoozing,
        &JobEvent::Report {
            fence,
            report: spindle_core::StepReport::Snooze { delay: std::time::Duration::from_secs(10) },
        },
        at(61_000),
    );
    crate::fixture::write_ok(&db, snooze, at(61_000)).await;
    assert_eq!(db.next_due().await.unwrap(), Some(at(71_000)));
    assert_eq!(claim(&db, 10, at(70_000)).await, vec![]);
    assert_eq!(db.promote_due(at(71_000)).await.unwrap(), 1);
    assert_eq!(ids(&claim(&db, 10, at(71_000)).await), vec![later.job.id]);
}

async fn lapsed_claims_and_silent_jobs_are_found_by_time(backend: Backend) {
    let db = Db::new(backend).await;
    // Inserted out of time order, so that "oldest first" is not "first inserted".
    let b = insert(&db, new_job("sync", 1, at(10_000)), at(10_000)).await;
    let a = insert(&db, new_job("sync", 1, at(0)), at(0)).await;
    let c = insert(&db, new_job("sync", 1, at(5_000)), at(5_000)).await;
    let done = insert(&db, new_job("sync", 1, at(1_000)), at(1_000)).await;
    let paused = insert(&db, new_job("sync", 1, at(2_000)), at(2_000)).await;

    // done: cancelled at 3s (final). paused: paused at 4s.
    let actor = Actor::new("ops");
    let cancel = JobEvent::Cancel { actor: actor.clone(), reason: "obsolete".into() };
    crate::fixture::write_ok(&db, derive(&done, &cancel, at(3_000)), at(3_000)).await;
    crate::fixture::write_ok(&db, derive(&paused, &JobEvent::Pause { actor }, at(4_000)), at(4_000)).await;

    // c: claimed at 20s (expires 50s), a and b: claimed at 25s (expire 55s).
    let mut claimed = Vec::new();
    for (record, now) in [(&c, at(20_000)), (&a, at(25_000)), (&b, at(25_000))] {
        let only = |r: &JobRecord| {
            (r.job.id == record.job.id).then(|| crate::fixture::claim_write(r, "host-a", now)).flatten()
        };
        let got = db.claim(10, now, &only).await.unwrap();
        assert_eq!(ids(&got), vec![record.job.id]);
        claimed.extend(got);
    }

    assert_eq!(db.lapsed_claims(at(49_000), 10).await.unwrap(), vec![], "no claim has lapsed yet");
    assert_eq!(db.lapsed_claims(at(50_001), 10).await.unwrap(), vec![c.job.id]);
    let lapsed = db.lapsed_claims(at(60_000), 10).await.unwrap();
    assert_eq!(lapsed.len(), 3);
    assert_eq!(lapsed[0], c.job.id, "the earliest expiry first");
    assert_eq!(db.lapsed_claims(at(60_000), 1).await.unwrap(), vec![c.job.id], "within the limit");

    // A claim that ended is not lapsed; a renewed one lapses later.
    let ended = crate::fixture::settle(&claimed[0], crate::fixture::complete(b"ok"), at(30_000));
    crate::fixture::write_ok(&db, ended, at(30_000)).await;
    let a_claimed = &claimed[1];
    let fence = crate::fixture::held_fence(a_claimed);
    let heartbeat = derive(a_claimed, &JobEvent::Heartbeat { fence, ttl: TTL, progress: None }, at(40_000));
    crate::fixture::write_ok(&db, heartbeat, at(40_000)).await;
    assert_eq!(db.lapsed_claims(at(60_000), 10).await.unwrap(), vec![b.job.id]);
    assert_eq!(db.lapsed_claims(at(70_001), 10).await.unwrap(), vec![b.job.id, a.job.id]);

    // Silence: open jobs (pending, running) whose last activity is at or before the
    // threshold, oldest first.
    // Last activity now: a 40s (heartbeat), b 25s, c 30s (succeeded), done 3s (cancelled), paused 4s.
    assert_eq!(db.silent_jobs(at(25_000), 10).await.unwrap(), vec![b.job.id], "silent at the threshold");
    assert_eq!(db.silent_jobs(at(24_999), 10).await.unwrap(), vec![], "not silent before it");
    assert_eq!(db.silent_jobs(at(100_000), 10).await.unwrap(), vec![b.job.id, a.job.id]);
    assert_eq!(db.silent_jobs(at(100_000), 1).await.unwrap(), vec![b.job.id]);

    let pending = insert(&db, new_job("sync", 1, at(6_000)), at(6_000)).await;
    let quiet = db.silent_jobs(at(100_000), 10).await.unwrap();
    assert_eq!(quiet, vec![pending.job.id, b.job.id, a.job.id], "a pending job is open too; oldest first");
    assert!(!quiet.contains(&done.job.id) && !quiet.contains(&c.job.id), "final jobs are never silent");
    assert!(!quiet.contains(&paused.job.id), "a paused job is not expected to make progress");
    assert_eq!(load(&db, c.job.id).await.job.state, JobState::Succeeded);
}

async fn a_filtered_claim_takes_only_the_kinds_and_tenants_it_names(backend: Backend) {
    use spindle::store::ClaimFilter;
    let db = Db::new(backend).await;
    let now = at(0);
    let mail = insert(&db, new_job("mail", 1, now), now).await.job.id;
    let report = insert(&db, new_job("report", 1, now), now).await.job.id;
    let other = insert(&db, NewJob { tenant: globex(), ..new_job("mail", 1, now) }, now).await.job.id;
    let derive = |record: &JobRecord| crate::fixture::claim_write(record, "host-a", now);
    let only_mail = ClaimFilter { kinds: vec!["mail".into()], tenants: vec![acme()], ..ClaimFilter::default() };
    let got = db.claim_filtered(10, now, &only_mail, &derive).await.unwrap();
    assert_eq!(ids(&got), vec![mail], "only acme's mail jobs");
    let only_globex = ClaimFilter { tenants: vec![globex()], ..ClaimFilter::default() };
    assert_eq!(ids(&db.claim_filtered(10, now, &only_globex, &derive).await.unwrap()), vec![other]);
    assert_eq!(ids(&claim(&db, 10, now).await), vec![report], "an unfiltered claim takes the rest");
}

async fn a_tenant_at_its_share_is_passed_over_while_others_are_ready_and_never_takes_a_reserve_slot(backend: Backend) {
    use spindle::store::ClaimFilter;
    let db = Db::new(backend).await;
    // acme's jobs come first in claim order; globex's one job after them.
    let acme_jobs: Vec<_> = (0..3).map(|i| new_job("spin", 1, at(i))).collect();
    let mut acmes = Vec::new();
    for (i, job) in acme_jobs.into_iter().enumerate() {
        acmes.push(insert(&db, job, at(i64::try_from(i).unwrap())).await.job.id);
    }
    let other = insert(&db, NewJob { tenant: globex(), ..new_job("quick", 1, at(5)) }, at(5)).await.job.id;
    let derive = |record: &JobRecord| crate::fixture::claim_write(record, "host-a", at(10));
    // A reserve slot's claim never takes acme's jobs, even the first in order.
    let reserve = ClaimFilter { except: vec![acme()], ..ClaimFilter::default() };
    assert!(db.any_ready(&reserve).await.unwrap(), "the read before a reserve claim sees globex's job");
    assert_eq!(ids(&db.claim_filtered(1, at(10), &reserve, &derive).await.unwrap()), vec![other]);
    assert!(!db.any_ready(&reserve).await.unwrap(), "only acme's jobs are ready");
    assert!(
        db.claim_filtered(1, at(10), &reserve, &derive).await.unwrap().is_empty(),
        "with only acme's jobs ready, a reserve claim takes nothing"
    );
    // Passed over, acme's jobs are taken once nothing else is ready: the claim fills up.
    let another = insert(&db, NewJob { tenant: globex(), ..new_job("quick", 1, at(7)) }, at(7)).await.job.id;
    let share = ClaimFilter { pass_over: vec![acme()], ..ClaimFilter::default() };
    let got = db.claim_filtered(2, at(10), &share, &derive).await.unwrap();
    assert_eq!(ids(&got), vec![another, acmes[0]], "globex's ready job first, then acme's");
}

async fn an_outcome_and_the_next_claims_share_one_transaction(backend: Backend) {
    use spindle::store::{ClaimFilter, WriteOutcome};
    let db = Db::new(backend).await;
    let now = at(0);
    // A two-step job whose first step completes, and two other ready jobs.
    let running = insert(&db, new_job("multi", 2, now), now).await;
    let first = claim(&db, 1, now).await.remove(0);
    assert_eq!(first.job.id, running.job.id);
    let waiting_a = insert(&db, new_job("one", 1, at(1)), at(1)).await.job.id;
    let waiting_b = insert(&db, new_job("one", 1, at(2)), at(2)).await.job.id;
    let outcome = crate::fixture::settle(&first, crate::fixture::complete(b"ok"), at(10));
    let derive = |record: &JobRecord| crate::fixture::claim_write(record, "host-a", at(10));
    let (outcomes, claimed) =
        db.write_and_claim(vec![outcome], at(10), 5, &ClaimFilter::default(), &derive).await.unwrap();
    assert!(matches!(outcomes[..], [WriteOutcome::Written { .. }]), "{outcomes:?}");
    // The candidates were read before the outcome landed: the settled job, ready again
    // for its second step, is not claimed in the same transaction; the others are.
    assert_eq!(ids(&claimed), vec![waiting_a, waiting_b]);
    assert!(claimed.iter().all(|r| r.job.claim.is_some() && r.version == 2));
    assert_eq!(load(&db, first.job.id).await.job.steps[0].state, spindle_core::StepState::Completed);
    // It is ready for the next claim.
    assert_eq!(ids(&claim(&db, 5, at(11)).await), vec![first.job.id]);
}
