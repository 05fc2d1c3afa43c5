//! What operators read: history, job listings and their filters, dead letters, depths.

use spindle::store::{Backend, Depth, JobFilter, JobRecord, NewJob};
use spindle_core::{Actor, HistoryEvent, JobEvent, JobId, JobState, SafeFailure, StepReport};

use crate::fixture::{
    Db, acme, at, claim, complete, derive, globex, ids, insert, job_id, load, new_job, settle, write_ok,
};

on_both_backends!(listings_filter_page_and_count_jobs; once: history_is_kept_in_order_and_appendable);

async fn history_is_kept_in_order_and_appendable(backend: Backend) {
    let db = Db::new(backend).await;
    let job = insert(&db, new_job("resize", 2, at(0)), at(0)).await;
    let claimed = claim(&db, 1, at(1_000)).await.remove(0);
    write_ok(&db, settle(&claimed, complete(b"one"), at(2_000)), at(2_000)).await;
    let ran = HistoryEvent::EffectRan { effect: "notify_success".into(), failed: None };
    db.append_history(job.job.id, &[ran.clone(), HistoryEvent::ProbeMissed { misses: 1 }], at(3_000)).await.unwrap();
    let claimed = claim(&db, 1, at(4_000)).await.remove(0);
    write_ok(&db, settle(&claimed, complete(b"two"), at(5_000)), at(5_000)).await;

    let entries = db.history(job.job.id).await.unwrap();
    let step = |key: &str| key.to_owned();
    let expected = [
        (at(0), HistoryEvent::Submitted),
        (at(1_000), HistoryEvent::StepStarted { step: step("fetch"), attempt: 1 }),
        (at(2_000), HistoryEvent::StepCompleted { step: step("fetch") }),
        (at(3_000), ran),
        (at(3_000), HistoryEvent::ProbeMissed { misses: 1 }),
        (at(4_000), HistoryEvent::StepStarted { step: step("transform"), attempt: 1 }),
        (at(5_000), HistoryEvent::StepCompleted { step: step("transform") }),
        (at(5_000), HistoryEvent::Succeeded),
    ];
    let got: Vec<_> = entries.iter().map(|e| (e.at, e.event.clone())).collect();
    assert_eq!(got, expected);
    assert!(entries.windows(2).all(|w| w[0].id < w[1].id), "entries are numbered in order");
    assert_eq!(db.history(job_id()).await.unwrap(), vec![], "an unknown job has no history");
}

/// A failed job: claimed alone and refused at `now`.
async fn failed_job(db: &Db, job: NewJob, now: spindle_core::Timestamp) -> JobRecord {
    let id = job.job.id;
    insert(db, job, now).await;
    let only = |r: &JobRecord| (r.job.id == id).then(|| crate::fixture::claim_write(r, "host-a", now)).flatten();
    let claimed = db.claim(100, now, &only).await.unwrap().remove(0);
    let refused = StepReport::Refused { failure: SafeFailure::permanent("invalid", "the input is invalid") };
    let w = settle(&claimed, refused, now);
    let version = write_ok(db, w.clone(), now).await;
    JobRecord { version, ..w.record }
}

async fn listings_filter_page_and_count_jobs(backend: Backend) {
    let db = Db::new(backend).await;
    let actor = Actor::new("ops");
    // acme: email (pending x2, cancelled), report (pending, failed, failed then retried,
    // paused, running); globex: email (pending, failed).
    let mut email = Vec::new();
    for i in 0..3 {
        email.push(insert(&db, new_job("email", 1, at(i)), at(i)).await.job.id);
    }
    let cancel = JobEvent::Cancel { actor: actor.clone(), reason: "unsubscribed".into() };
    write_ok(&db, derive(&load(&db, email[2]).await, &cancel, at(10)), at(10)).await;

    let report_pending = insert(&db, new_job("report", 1, at(20)), at(20)).await.job.id;
    let dead = failed_job(&db, new_job("report", 1, at(21)), at(21)).await.job.id;
    let retried = failed_job(&db, new_job("report", 1, at(22)), at(22)).await;
    let successor = job_id();
    let retry = derive(&retried, &JobEvent::Retry { successor, onto: None }, at(23));
    assert!(retry.spawn.is_some());
    write_ok(&db, retry, at(23)).await;
    let paused = insert(&db, new_job("report", 2, at(24)), at(24)).await;
    write_ok(&db, derive(&paused, &JobEvent::Pause { actor }, at(25)), at(25)).await;
    let running = insert(&db, new_job("report", 1, at(26)), at(26)).await.job.id;
    let only =
        |r: &JobRecord| (r.job.id == running).then(|| crate::fixture::claim_write(r, "host-a", at(27))).flatten();
    assert_eq!(ids(&db.claim(100, at(27), &only).await.unwrap()), vec![running]);

    let theirs_pending = insert(&db, NewJob { tenant: globex(), ..new_job("email", 1, at(30)) }, at(30)).await.job.id;
    let theirs_dead = failed_job(&db, NewJob { tenant: globex(), ..new_job("email", 1, at(31)) }, at(31)).await.job.id;

    let list = |filter: JobFilter| {
        let db = &db;
        async move { ids(&db.list_jobs(&acme(), &filter).await.unwrap()) }
    };
    let page = |limit: u32| JobFilter { limit, ..JobFilter::default() };

    // Newest first (by submission), the tenant's own only.
    let all_acme =
        vec![running, paused.job.id, successor, retried.job.id, dead, report_pending, email[2], email[1], email[0]];
    assert_eq!(list(page(100)).await, all_acme);
    assert_eq!(ids(&db.list_jobs(&globex(), &page(100)).await.unwrap()), vec![theirs_dead, theirs_pending]);
    assert_eq!(list(page(3)).await, all_acme[..3].to_vec(), "at most `limit`");

    // Filters.
    let of_state = |state| JobFilter { state: Some(state), ..page(100) };
    assert_eq!(list(of_state(JobState::Pending)).await, vec![successor, report_pending, email[1], email[0]]);
    assert_eq!(list(of_state(JobState::Failed)).await, vec![retried.job.id, dead]);
    assert_eq!(list(of_state(JobState::Cancelled)).await, vec![email[2]]);
    assert_eq!(list(of_state(JobState::Running)).await, vec![running]);
    assert_eq!(list(of_state(JobState::Succeeded)).await, Vec::<JobId>::new());
    let of_kind = |kind: &str| JobFilter { kind: Some(kind.into()), ..page(100) };
    assert_eq!(list(of_kind("email")).await, vec![email[2], email[1], email[0]]);
    assert_eq!(
        list(JobFilter { state: Some(JobState::Pending), ..of_kind("report") }).await,
        vec![successor, report_pending]
    );

    // Dead letters: failed and not retried; not cancelled ones, not other tenants'.
    let dead_letters = JobFilter { dead_letters: true, ..page(100) };
    assert_eq!(list(dead_letters.clone()).await, vec![dead]);
    assert_eq!(list(JobFilter { kind: Some("email".into()), ..dead_letters }).await, Vec::<JobId>::new());

    // Pages: every job exactly once, newest first, with the cursor of the previous page.
    for size in [1, 2, 4, 9, 10] {
        let mut seen = Vec::new();
        let mut cursor = None;
        loop {
            let got = db.list_jobs(&acme(), &JobFilter { before_seq: cursor, ..page(size) }).await.unwrap();
            assert!(got.len() <= usize::try_from(size).unwrap());
            let Some(last) = got.last() else { break };
            cursor = Some(last.seq);
            seen.extend(ids(&got));
        }
        assert_eq!(seen, all_acme, "pages of {size}");
    }
    let pending_pages = JobFilter {
        state: Some(JobState::Pending),
        before_seq: Some(load(&db, report_pending).await.seq),
        ..page(100)
    };
    assert_eq!(list(pending_pages).await, vec![email[1], email[0]], "a cursor combines with filters");

    // Depths: open jobs per (tenant, kind, state).
    let mut depths = db.depths().await.unwrap();
    depths.sort_by(|a, b| (&a.tenant, &a.kind, &a.state).cmp(&(&b.tenant, &b.kind, &b.state)));
    let depth = |tenant: &spindle::store::TenantId, kind: &str, state: &str, count| Depth {
        tenant: tenant.clone(),
        kind: kind.into(),
        state: state.into(),
        count,
    };
    assert_eq!(
        depths,
        vec![
            depth(&acme(), "email", "pending", 2),
            depth(&acme(), "report", "paused", 1),
            depth(&acme(), "report", "pending", 2),
            depth(&acme(), "report", "running", 1),
            depth(&globex(), "email", "pending", 1),
        ]
    );

    // One kind's counts come from its own jobs: the same as the tenant's counts of it
    // while under the cap, and from its newest `cap` jobs past it; another tenant's none.
    let whole: Vec<(JobState, u64)> = {
        let mut rows: Vec<_> = db
            .count_jobs(&acme(), 1_000)
            .await
            .unwrap()
            .into_iter()
            .filter(|(_, kind, _)| kind == "report")
            .map(|(state, _, n)| (state, n))
            .collect();
        rows.sort_by_key(|(state, _)| state.as_str());
        rows
    };
    let mut report = db.count_kind_jobs(&acme(), "report", 1_000).await.unwrap();
    report.sort_by_key(|(state, _)| state.as_str());
    assert_eq!(report, whole);
    let newest = db.count_kind_jobs(&acme(), "report", 2).await.unwrap();
    assert_eq!(newest.iter().map(|(_, n)| n).sum::<u64>(), 2, "{newest:?}");
    assert!(db.count_kind_jobs(&globex(), "report", 1_000).await.unwrap().is_empty());
}
