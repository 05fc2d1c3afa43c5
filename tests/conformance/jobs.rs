//! Jobs: insert and load, idempotent submission, version-checked writes.

use spindle::store::{Backend, Inserted, JobFilter, JobRecord, JobStore, NewJob, StoreError, TenantId, WriteOutcome};
use spindle_core::policy::priority::Priority;
use spindle_core::{Actor, HistoryEvent, JobEvent, JobState, StepReport, StepState};

use crate::fixture::{
    Db, acme, at, claim, claim_write, complete, derive, globex, insert, keyed_job, load, new_job, settle, stored,
    write, write_ok,
};

on_both_backends!(
    a_submitted_job_reads_back_as_written,
    an_idempotency_key_yields_the_existing_job_per_tenant,
    a_write_from_a_stale_version_conflicts_and_lands_nothing,
    a_large_batch_checks_every_write_against_its_own_version,
    a_damaged_row_reads_as_corrupt_data_not_a_default,
    a_submission_writes_steps_and_history_of_the_jobs_it_creates_only,
    a_submission_pinned_to_a_version_no_longer_current_writes_nothing,
    a_refused_submission_leaves_the_fair_share_tags_as_they_were,
    concurrent_submissions_are_answered_as_if_each_went_alone;
    once: a_lean_job_is_one_row_that_holds_its_steps_outputs_and_checkpoint,
);

/// A lean kind's job is its row alone: submitted, claimed, checkpointed, completed and
/// retried, it has no step row and no history row, and reads back whole from its row
/// (steps, attempts, checkpoint cursor, outputs of any bytes, failure); a full job beside
/// it keeps its rows.
async fn a_lean_job_is_one_row_that_holds_its_steps_outputs_and_checkpoint(backend: Backend) {
    use spindle_core::step::Partial;
    let db = Db::new(backend).await;
    let lean_rules = spindle_core::KindRules { lean: true, ..crate::fixture::rules() };
    let lean = insert(&db, crate::fixture::new_job_with("hook", 2, lean_rules, at(0), at(0)), at(0)).await;
    let full = insert(&db, new_job("hook", 1, at(0)), at(0)).await;
    assert_eq!(load(&db, lean.job.id).await, lean, "it reads back as written");
    assert_eq!(lean.job.steps.len(), 2);

    // Claimed, checkpointed, claimed again and completed with an output of every byte.
    let only = |id| {
        move |r: &JobRecord| (r.job.id == id).then(|| crate::fixture::claim_write(r, "host-a", at(1_000))).flatten()
    };
    let claimed = db.claim(10, at(1_000), &only(lean.job.id)).await.unwrap().remove(0);
    assert_eq!(load(&db, lean.job.id).await.job.steps[0].state, StepState::Running, "the claim's attempt reads back");
    let more = StepReport::More { cursor: "row:500".into(), partial: Partial { done: 500, total: Some(1_000) } };
    write_ok(&db, settle(&claimed, more, at(2_000)), at(2_000)).await;
    let checkpointed = load(&db, lean.job.id).await;
    assert_eq!(checkpointed.job.steps[0].cursor.as_deref(), Some("row:500"), "the checkpoint is in the row");
    let only = |id| {
        move |r: &JobRecord| (r.job.id == id).then(|| crate::fixture::claim_write(r, "host-b", at(3_000))).flatten()
    };
    let again = db.claim(10, at(3_000), &only(lean.job.id)).await.unwrap().remove(0);
    assert_eq!(again.job.steps[0].cursor.as_deref(), Some("row:500"), "the next claim resumes from it");
    let every_byte: Vec<u8> = (0..=255u8).collect();
    write_ok(&db, settle(&again, complete(&every_byte), at(4_000)), at(4_000)).await;
    let done = load(&db, lean.job.id).await;
    assert_eq!(done.job.steps[0].state, StepState::Completed);
    assert_eq!(done.job.steps[0].output.as_deref(), Some(&every_byte[..]));

    // Refused on its second step: failed, with its failure; retried, the successor is
    // lean too and carries the completed step's output.
    let only = |id| {
        move |r: &JobRecord| (r.job.id == id).then(|| crate::fixture::claim_write(r, "host-a", at(5_000))).flatten()
    };
    let last = db.claim(10, at(5_000), &only(lean.job.id)).await.unwrap().remove(0);
    let refused = StepReport::Refused { failure: spindle_core::SafeFailure::permanent("declined", "no") };
    let version = write_ok(&db, settle(&last, refused, at(6_000)), at(6_000)).await;
    let failed = load(&db, lean.job.id).await;
    assert_eq!((failed.version, failed.job.state), (version, JobState::Failed));
    assert_eq!(failed.job.failure.as_ref().map(|f| f.code.as_str()), Some("declined"));
    let successor = crate::fixture::job_id();
    let retry = derive(&failed, &JobEvent::Retry { successor, onto: None }, at(7_000));
    write_ok(&db, retry, at(7_000)).await;
    let retried = load(&db, successor).await;
    assert!(retried.job.rules.lean, "a retry keeps its kind's record");
    assert_eq!(retried.job.steps[0].output.as_deref(), Some(&every_byte[..]), "the output is carried");

    for id in [lean.job.id, successor] {
        assert_eq!((db.step_rows(id).await, db.history_rows(id).await), (0, 0), "job {id} is one row");
        assert!(db.history(id).await.unwrap().is_empty());
    }
    assert_eq!(db.step_rows(full.job.id).await, 1, "a full job keeps its step row");
    assert_eq!(db.history_rows(full.job.id).await, 1, "and its history");
}

/// Submissions that arrive together may be inserted together; each is answered as if
/// it went alone: its own jobs, a key another made answering that job, a moved version
/// refusing it and nothing else. Twice: without a refused caller (the callers that
/// wait for an insert share the next one), then with one (the shared insert writes
/// nothing, and each goes alone).
async fn concurrent_submissions_are_answered_as_if_each_went_alone(backend: Backend) {
    const CALLERS: usize = 48;
    let db = Db::new(backend).await;
    db.add_kind_version(&acme(), "charge", "sha256:c", "{}", "{}", at(0)).await.unwrap();
    let mut created = 0;
    for (key, refused) in [("once", None), ("twice", Some(CALLERS - 1))] {
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(CALLERS));
        let mut callers = Vec::new();
        for i in 0..CALLERS {
            let mut jobs = vec![new_job("charge", 1, at(0))];
            if i % 8 == 0 {
                jobs[0].idempotency_key = Some(key.into());
            }
            if i % 5 == 1 {
                jobs.push(new_job("charge", 2, at(0)));
            }
            if refused == Some(i) {
                jobs[0].kind_version = 2;
            }
            let (store, start) = (db.shared(), start.clone());
            callers.push(tokio::spawn(async move {
                start.wait().await;
                let answer = store.submit_jobs(jobs.clone(), at(0)).await;
                (jobs, answer)
            }));
        }
        let mut keyed = std::collections::HashSet::new();
        for (i, caller) in callers.into_iter().enumerate() {
            let (jobs, answer) = caller.await.unwrap();
            if refused == Some(i) {
                assert!(matches!(answer, Err(StoreError::VersionMoved { pinned: 2, .. })), "{answer:?}");
                continue;
            }
            let answer = answer.unwrap_or_else(|e| panic!("caller {i}: {e}"));
            assert_eq!(answer.len(), jobs.len(), "caller {i}: one answer per job");
            for (job, inserted) in jobs.iter().zip(&answer) {
                match inserted {
                    Inserted::Created(record) => {
                        assert_eq!(record.job.id, job.job.id, "caller {i}: its own job");
                        assert_eq!(load(&db, job.job.id).await.job, job.job, "caller {i}: stored as submitted");
                        if job.idempotency_key.is_some() {
                            keyed.insert(record.job.id);
                        }
                        created += 1;
                    }
                    Inserted::Existing(found) => {
                        assert_eq!(job.idempotency_key.as_deref(), Some(key), "caller {i}: only a taken key");
                        keyed.insert(found.job.id);
                    }
                }
            }
        }
        assert_eq!(keyed.len(), 1, "every use of the key {key:?} answers one job");
        let listed = db.list_jobs(&acme(), &JobFilter { limit: 1_000, ..JobFilter::default() }).await.unwrap();
        assert_eq!(listed.len(), created, "no job written twice, none of the refused caller's");
    }
}

/// A submission refused for a moved version takes no fair tag either: the tenant's next
/// jobs queue where they would have without it. (On PostgreSQL a submission to a tenant
/// without quotas runs outside a transaction, so nothing rolls a tag back.)
async fn a_refused_submission_leaves_the_fair_share_tags_as_they_were(backend: Backend) {
    use spindle::store::sql::Ty;
    let db = Db::new(backend).await;
    let tags = || async {
        let sql = "SELECT tenant_id, priority, last_tag FROM fair_tags ORDER BY tenant_id, priority";
        let rows = db.sql().fetch(sql, vec![], &[Ty::Text, Ty::Int, Ty::Int]).await.unwrap();
        rows.iter()
            .map(|r| {
                (
                    r.text(0, "test row").expect("a decodable row"),
                    r.int(1, "test row").expect("a decodable row"),
                    r.int(2, "test row").expect("a decodable row"),
                )
            })
            .collect::<Vec<_>>()
    };
    let pinned = |kind_version| NewJob { kind_version, ..new_job("charge", 1, at(0)) };
    db.add_kind_version(&acme(), "charge", "sha256:c", "{}", "{}", at(0)).await.unwrap();
    let refused = db.submit_jobs(vec![pinned(2), pinned(2)], at(0)).await.expect_err("no version 2");
    assert!(matches!(refused, StoreError::VersionMoved { pinned: 2, .. }), "{refused}");
    assert_eq!(tags().await, vec![], "no tag taken");

    db.submit_jobs(vec![pinned(1)], at(0)).await.unwrap();
    let after_one = tags().await;
    assert_eq!(after_one.len(), 1, "{after_one:?}");
    let refused = db.submit_jobs((0..3).map(|_| pinned(2)).collect(), at(0)).await.expect_err("no version 2");
    assert!(matches!(refused, StoreError::VersionMoved { .. }), "{refused}");
    assert_eq!(tags().await, after_one, "the tenant's last tag unmoved");
    assert_eq!(db.list_jobs(&acme(), &JobFilter::default()).await.unwrap().len(), 1, "no job of the refused ones");
}

/// A submission's jobs are pinned to the version their host last knew; the insert
/// checks, in its transaction, that each is still its kind's current one. One that
/// another deploy or rollback replaced writes nothing of the batch and names the kind.
async fn a_submission_pinned_to_a_version_no_longer_current_writes_nothing(backend: Backend) {
    let db = Db::new(backend).await;
    let pinned = |kind: &str, kind_version| NewJob { kind_version, ..new_job(kind, 1, at(0)) };
    let unknown = db.submit_jobs(vec![pinned("charge", 1)], at(0)).await.expect_err("no such kind");
    assert!(matches!(&unknown, StoreError::VersionMoved { kind, pinned: 1 } if kind == "charge"), "{unknown}");
    for kind in ["charge", "charge", "email"] {
        db.add_kind_version(&acme(), kind, "sha256:c", "{}", "{}", at(0)).await.unwrap();
    }
    let theirs = NewJob { tenant: globex(), ..pinned("charge", 2) };
    let refused = db.submit_jobs(vec![pinned("email", 1), theirs.clone()], at(0)).await.expect_err("not globex's");
    assert!(matches!(&refused, StoreError::VersionMoved { kind, pinned: 2 } if kind == "charge"), "{refused}");
    let stale = pinned("charge", 1);
    let refused = db.submit_jobs(vec![pinned("email", 1), stale.clone()], at(0)).await.expect_err("replaced");
    assert!(matches!(&refused, StoreError::VersionMoved { kind, pinned: 1 } if kind == "charge"), "{refused}");
    assert_eq!(db.job(stale.job.id).await.unwrap(), None, "nothing of the batch was written");
    assert!(db.list_jobs(&acme(), &JobFilter::default()).await.unwrap().is_empty(), "not even its current job");

    let current = db.submit_jobs(vec![pinned("email", 1), pinned("charge", 2)], at(0)).await.unwrap();
    assert!(current.iter().all(|i| matches!(i, Inserted::Created(_))), "{current:?}");
    db.set_current_version(&acme(), "charge", 1, at(1)).await.unwrap();
    let rolled_back = db.submit_jobs(vec![pinned("charge", 2)], at(1)).await.expect_err("rolled back");
    assert!(matches!(rolled_back, StoreError::VersionMoved { pinned: 2, .. }), "{rolled_back}");
    db.submit_jobs(vec![pinned("charge", 1)], at(1)).await.expect("the version rolled back to");
}

/// A submission writes each job it creates with its steps and its history, in the order
/// that history was given, and nothing of a job whose idempotency key was taken (on
/// PostgreSQL all of it is one statement, whose joins must keep both).
async fn a_submission_writes_steps_and_history_of_the_jobs_it_creates_only(backend: Backend) {
    let db = Db::new(backend).await;
    let keyed = NewJob { idempotency_key: Some("order-9".into()), ..new_job("charge", 2, at(0)) };
    let mut storied = Vec::new();
    for misses in 0..20u32 {
        let mut job = new_job("charge", 1 + misses as usize % 3, at(0));
        job.history.extend((1..=3).map(|n| HistoryEvent::ProbeMissed { misses: misses * 10 + n }));
        storied.push(job);
    }
    let repeat = NewJob { idempotency_key: Some("order-9".into()), ..new_job("charge", 3, at(0)) };
    let mut batch = vec![keyed.clone()];
    batch.extend(storied.iter().cloned());
    batch.push(repeat.clone());
    let out = db.insert_jobs(batch, at(0)).await.unwrap();
    assert!(matches!(out[0], Inserted::Created(_)), "{:?}", out[0]);
    assert_eq!(out[out.len() - 1], Inserted::Existing(load(&db, keyed.job.id).await), "the key's first job");

    for job in std::iter::once(&keyed).chain(&storied) {
        let id = job.job.id;
        assert_eq!(db.pass_steps(id, 1).await, job.job.steps, "job {id}'s steps");
        if let Some(history) = db.kept_history(id).await {
            assert_eq!(history, job.history, "job {id}'s history, in the order given");
        }
    }
    assert_eq!(db.job(repeat.job.id).await.unwrap(), None, "the repeat created no job");
    assert!(db.pass_steps(repeat.job.id, 1).await.is_empty(), "nor any step");
    assert!(db.history(repeat.job.id).await.unwrap().is_empty(), "nor any history");
}

/// An unknown priority rank was read as `normal`: it is corrupt data.
/// A stored value a record cannot hold — a number out of its range, a name no enum
/// knows, JSON that does not parse, a value of another type (SQLite stores any type in
/// any column) — reads as a corrupt error naming its table and column, never as a
/// default.
async fn a_damaged_row_reads_as_corrupt_data_not_a_default(backend: Backend) {
    use spindle::store::sql::Value;
    let db = Db::new(backend).await;
    let mut damages = vec![
        ("UPDATE jobs SET priority = 99 WHERE id = $1", "jobs.priority"),
        ("UPDATE jobs SET machine = '{\"state\":' WHERE id = $1", "jobs.machine"),
        ("UPDATE jobs SET lease_keys = 'keys' WHERE id = $1", "jobs.lease_keys"),
        if crate::fixture::lean() {
            // A lean job's steps are in its machine column.
            (
                "UPDATE jobs SET machine = replace(machine, '\"lean_steps\":[', '\"lean_steps\":[7,') WHERE id = $1",
                "jobs.machine",
            )
        } else {
            ("UPDATE steps SET body = '[]' WHERE job_id = $1", "steps.body")
        },
    ];
    if backend == Backend::Sqlite {
        damages.push((
            "UPDATE jobs SET version = 'seven' WHERE id = $1",
            "jobs: error occurred while decoding column version",
        ));
    }
    for (damage, named) in damages {
        let job = insert(&db, new_job("sync", 1, at(0)), at(0)).await;
        let id = Value::from(job.job.id.to_string());
        db.sql().execute(damage, vec![id]).await.unwrap_or_else(|e| panic!("{damage}: {e}"));
        match db.job(job.job.id).await {
            Err(StoreError::Corrupt(what)) => assert!(what.contains(named), "{damage}: {what:?} names {named:?}"),
            other => panic!("{damage}: {other:?}"),
        }
    }
}

async fn a_submitted_job_reads_back_as_written(backend: Backend) {
    let db = Db::new(backend).await;
    let first = NewJob {
        priority: Priority::Critical,
        idempotency_key: Some("order-1".into()),
        lease_keys: vec!["account:42".into(), "region:eu".into()],
        payload: (0..=255u8).collect(),
        ..new_job("resize", 3, at(0))
    };
    let second = NewJob { payload: Vec::new(), priority: Priority::Background, ..new_job("email", 1, at(0)) };
    let third = new_job("resize", 2, at(0));
    let inserted = db.insert_jobs(vec![first.clone(), second.clone(), third], at(0)).await.unwrap();
    let records: Vec<_> = inserted
        .into_iter()
        .map(|i| match i {
            Inserted::Created(r) => r,
            Inserted::Existing(r) => panic!("unexpected existing job {}", r.job.id),
        })
        .collect();
    let later = insert(&db, new_job("resize", 1, at(1_000)), at(1_000)).await;

    // What insert answers is what the store holds.
    let r = &records[0];
    assert_eq!((r.version, r.tenant.clone(), r.kind.as_str(), r.kind_version), (1, acme(), "resize", 1));
    assert_eq!(
        (r.priority, r.payload.clone(), r.lease_keys.clone()),
        (first.priority, first.payload, first.lease_keys)
    );
    assert_eq!(r.idempotency_key.as_deref(), Some("order-1"));
    assert_eq!(r.job, first.job);
    assert_eq!(r.job.steps.len(), 3);
    for record in records.iter().chain([&later]) {
        assert_eq!(load(&db, record.job.id).await, *record, "job {} reads back as inserted", record.job.id);
    }
    assert_eq!(load(&db, records[1].job.id).await.payload, Vec::<u8>::new(), "an empty payload stays empty");

    // Sequence numbers follow submission order, within a batch and across batches.
    let seqs: Vec<i64> = records.iter().chain([&later]).map(|r| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seq increases with submission order: {seqs:?}");

    // Step outputs round-trip, binary and empty alike, and the record equals the write.
    let [_, _, two_steps] = &records[..] else { unreachable!() };
    let claimed = claim(&db, 10, at(2_000)).await;
    let claimed = claimed.iter().find(|c| c.job.id == two_steps.job.id).expect("claimed").clone();
    let w = settle(&claimed, complete(&[0, 159, 146, 150, 255]), at(3_000));
    let expected = w.record.clone();
    let version = write_ok(&db, w, at(3_000)).await;
    let reread = load(&db, two_steps.job.id).await;
    assert_eq!(stored(&reread), stored(&JobRecord { version, ..expected }));
    assert_eq!(reread.job.steps[0].output.as_deref(), Some(&[0u8, 159, 146, 150, 255][..]));
    assert_eq!(reread.job.steps[1].output, None);

    let claimed = claim(&db, 10, at(4_000)).await;
    let claimed = claimed.iter().find(|c| c.job.id == two_steps.job.id).expect("claimed again").clone();
    let w = settle(&claimed, complete(b""), at(5_000));
    let expected = w.record.clone();
    let version = write_ok(&db, w, at(5_000)).await;
    let reread = load(&db, two_steps.job.id).await;
    assert_eq!(reread.job.state, JobState::Succeeded);
    assert_eq!(reread.job.steps[1].output, Some(Vec::new()), "an empty output is not a missing one");
    assert_eq!(stored(&reread), stored(&JobRecord { version, ..expected }));

    // Listing reads the same records.
    let listed = db.list_jobs(&acme(), &JobFilter { limit: 10, ..JobFilter::default() }).await.unwrap();
    assert_eq!(listed.len(), 4);
    assert!(listed.contains(&reread));
    assert!(listed.contains(&load(&db, records[0].job.id).await));
}

async fn an_idempotency_key_yields_the_existing_job_per_tenant(backend: Backend) {
    let db = Db::new(backend).await;
    let keyed = |n: usize| NewJob { idempotency_key: Some("order-7".into()), ..new_job("charge", n, at(0)) };

    let original = insert(&db, keyed(1), at(0)).await;
    let again = keyed(2);
    assert_ne!(again.job.id, original.job.id);
    let out = db.insert_jobs(vec![again.clone()], at(1_000)).await.unwrap();
    assert_eq!(out, vec![Inserted::Existing(original.clone())], "a repeat answers the first job, unchanged");
    assert_eq!(db.job(again.job.id).await.unwrap(), None, "the repeat created no job");

    // Within one batch, the second of two submissions with one key gets the first.
    let a = NewJob { idempotency_key: Some("order-8".into()), ..new_job("charge", 1, at(2_000)) };
    let b = NewJob { idempotency_key: Some("order-8".into()), ..new_job("charge", 1, at(2_000)) };
    let out = db.insert_jobs(vec![a.clone(), b.clone()], at(2_000)).await.unwrap();
    let Inserted::Created(created_a) = &out[0] else { panic!("first of the batch is new: {:?}", out[0]) };
    assert_eq!(created_a.job.id, a.job.id);
    assert_eq!(out[1], Inserted::Existing(load(&db, a.job.id).await));
    assert_eq!(db.job(b.job.id).await.unwrap(), None);

    // The same key under another tenant is another job.
    let theirs = NewJob { tenant: globex(), ..keyed(1) };
    let out = db.insert_jobs(vec![theirs.clone()], at(3_000)).await.unwrap();
    let Inserted::Created(created) = &out[0] else { panic!("another tenant's key is its own: {:?}", out[0]) };
    assert_eq!((created.job.id, created.tenant.clone()), (theirs.job.id, globex()));
    assert_eq!(
        db.insert_jobs(vec![keyed(1)], at(4_000)).await.unwrap(),
        vec![Inserted::Existing(original.clone())],
        "acme's key still answers acme's job"
    );

    // One batch over both tenants: each key is looked up under its own job's tenant.
    let mixed = vec![
        NewJob { tenant: globex(), idempotency_key: Some("order-9".into()), ..new_job("charge", 1, at(5_000)) },
        keyed(1),
        NewJob { tenant: globex(), ..keyed(1) },
        NewJob { idempotency_key: Some("order-9".into()), ..new_job("charge", 1, at(5_000)) },
    ];
    let out = db.insert_jobs(mixed.clone(), at(5_000)).await.unwrap();
    assert!(matches!(&out[0], Inserted::Created(r) if r.job.id == mixed[0].job.id), "globex's new key: {:?}", out[0]);
    assert_eq!(out[1], Inserted::Existing(original), "acme's taken key");
    assert_eq!(out[2], Inserted::Existing(load(&db, theirs.job.id).await), "globex's taken key");
    assert!(
        matches!(&out[3], Inserted::Created(r) if r.job.id == mixed[3].job.id),
        "acme's order-9 is not globex's: {:?}",
        out[3]
    );

    assert_eq!(job_count(&db, &acme()).await, 3);
    assert_eq!(job_count(&db, &globex()).await, 2);
}

async fn job_count(db: &Db, tenant: &TenantId) -> usize {
    db.list_jobs(tenant, &JobFilter { limit: 100, ..JobFilter::default() }).await.unwrap().len()
}

async fn a_write_from_a_stale_version_conflicts_and_lands_nothing(backend: Backend) {
    let db = Db::new(backend).await;
    let job = insert(&db, new_job("resize", 2, at(0)), at(0)).await;
    let claimed = claim(&db, 1, at(1_000)).await.remove(0);
    assert_eq!(claimed.version, 2);
    let history_before = db.kept_history(job.job.id).await;

    // Two reports derived from the same version: the first lands, the second conflicts.
    let first = settle(&claimed, complete(b"first"), at(2_000));
    let second = settle(
        &claimed,
        StepReport::Refused { failure: spindle_core::SafeFailure::permanent("bad-input", "no") },
        at(2_000),
    );
    assert_eq!(write(&db, first.clone(), at(2_000)).await, WriteOutcome::Written { version: 3 });
    assert_eq!(write(&db, second, at(2_500)).await, WriteOutcome::Conflict);

    let after = load(&db, job.job.id).await;
    assert_eq!(stored(&after), stored(&JobRecord { version: 3, ..first.record.clone() }));
    assert_eq!(after.job.state, JobState::Running);
    assert_eq!(after.job.steps[0].state, StepState::Completed);
    assert_eq!(after.job.steps[0].output.as_deref(), Some(&b"first"[..]));
    let history = db.kept_history(job.job.id).await;
    if let (Some(history), Some(before)) = (&history, &history_before) {
        assert_eq!(history.len(), before.len() + first.history.len(), "only the first write's history landed");
        assert!(history.iter().all(|e| !matches!(e, HistoryEvent::StepFailed { .. } | HistoryEvent::Failed { .. })));
    }

    // In one batch, two writes from one version: one lands, one conflicts.
    let pause = derive(&after, &JobEvent::Pause { actor: Actor::new("ops") }, at(3_000));
    let cancel = derive(&after, &JobEvent::Cancel { actor: Actor::new("ops"), reason: "duplicate".into() }, at(3_000));
    let outcomes = db.write(vec![pause.clone(), cancel], at(3_000)).await.unwrap();
    assert_eq!(outcomes, vec![WriteOutcome::Written { version: 4 }, WriteOutcome::Conflict]);
    let paused = load(&db, job.job.id).await;
    assert_eq!(paused.job.state, JobState::Paused);
    if let (Some(names), Some(history)) = (db.kept_history(job.job.id).await, &history) {
        let names: Vec<&str> = names.iter().map(HistoryEvent::name).collect();
        assert_eq!(names.iter().filter(|n| **n == "cancel_requested" || **n == "cancelled").count(), 0);
        assert_eq!(names.len(), history.len() + pause.history.len());
    }

    // A claim derived from a stale version conflicts and leaves its lease keys free.
    let keyed = insert(&db, keyed_job("charge", &["account:42"], at(4_000)), at(4_000)).await;
    let stale = claim_write(&keyed, "host-b", at(5_000)).expect("claimable");
    let cancel = derive(&keyed, &JobEvent::Cancel { actor: Actor::new("ops"), reason: "not needed".into() }, at(4_500));
    write_ok(&db, cancel, at(4_500)).await;
    assert_eq!(write(&db, stale, at(5_000)).await, WriteOutcome::Conflict);
    assert_eq!(db.lease_holder("account:42").await, None, "a conflicting claim holds no key");
    assert_eq!(load(&db, keyed.job.id).await.job.state, JobState::Cancelled);
}

/// Batches as large as a busy host's (40 jobs: PostgreSQL binds them as arrays from 16
/// rows, smaller ones as VALUES lists) land each write on its own version: one stale
/// write among them conflicts alone, and every other job gets its own outcome, steps
/// and history.
async fn a_large_batch_checks_every_write_against_its_own_version(backend: Backend) {
    let db = Db::new(backend).await;
    let inserted = db.insert_jobs((0..40).map(|_| new_job("resize", 1, at(0))).collect(), at(0)).await.unwrap();
    assert_eq!(inserted.len(), 40);
    let claimed = claim(&db, 40, at(1_000)).await;
    assert_eq!(claimed.len(), 40, "one claim takes all forty");
    assert!(claimed.iter().all(|r| r.version == 2 && r.job.state == JobState::Running));

    let stale_at = 17;
    let mut writes: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, r)| settle(r, complete(format!("out-{i}").as_bytes()), at(2_000)))
        .collect();
    writes[stale_at].expected_version = 1;
    let outcomes = db.write(writes, at(2_000)).await.unwrap();
    for (i, outcome) in outcomes.iter().enumerate() {
        let expected = if i == stale_at { WriteOutcome::Conflict } else { WriteOutcome::Written { version: 3 } };
        assert_eq!(*outcome, expected, "write {i}");
    }

    for (i, before) in claimed.iter().enumerate() {
        let after = load(&db, before.job.id).await;
        let history = db.kept_history(before.job.id).await;
        let names: Vec<&str> = history.iter().flatten().map(HistoryEvent::name).collect();
        let lean = history.is_none();
        if i == stale_at {
            assert_eq!(after.version, 2, "the stale write changed nothing");
            assert_eq!(after.job.state, JobState::Running);
            assert_eq!(after.job.steps[0].state, StepState::Running);
            assert!(!names.contains(&"succeeded"), "{names:?}");
        } else {
            assert_eq!(after.version, 3);
            assert_eq!(after.job.state, JobState::Succeeded);
            assert_eq!(after.job.steps[0].state, StepState::Completed);
            assert_eq!(after.job.steps[0].output.as_deref(), Some(format!("out-{i}").as_bytes()));
            assert!(lean || names.iter().filter(|n| **n == "succeeded").count() == 1, "{names:?}");
        }
    }
}
