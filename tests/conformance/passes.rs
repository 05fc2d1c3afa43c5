//! Writes that carry more than the job row: a restart's previous pass, a retry job.

use spindle::store::{Backend, JobRecord, WriteOutcome};
use spindle_core::step::Partial;
use spindle_core::{Actor, HistoryEvent, JobEvent, JobState, SafeFailure, StepReport, StepState};

use crate::fixture::{
    Db, at, claim, complete, derive, held_fence, insert, job_id, load, new_job, run_step, settle, write, write_ok,
};

on_both_backends!(
    a_retry_job_is_created_with_the_write;
    once: a_restart_keeps_the_previous_pass_steps, a_lean_jobs_restart_begins_a_fresh_pass_in_its_row,
);

/// A lean job keeps its current pass alone: a restart at the step boundary begins a
/// fresh pass in its row (every step queued, no output), writes no step row for either
/// pass, and the new pass runs from its first step.
async fn a_lean_jobs_restart_begins_a_fresh_pass_in_its_row(backend: Backend) {
    let db = Db::new(backend).await;
    let rules = spindle_core::KindRules { lean: true, ..crate::fixture::rules() };
    let job = insert(&db, crate::fixture::new_job_with("resize", 3, rules, at(0), at(0)), at(0)).await;
    run_step(&db, &job, b"fetched", at(1_000)).await;
    let running = claim(&db, 1, at(2_000)).await.remove(0);
    let request = derive(&running, &JobEvent::RequestRestart { actor: Actor::new("ops") }, at(3_000));
    let version = write_ok(&db, request.clone(), at(3_000)).await;
    let requested = JobRecord { version, ..request.record };
    let fence = held_fence(&requested);
    let checkpoint = StepReport::More { cursor: "row:500".into(), partial: Partial { done: 500, total: Some(1_000) } };
    let boundary = derive(&requested, &JobEvent::Report { fence, report: checkpoint }, at(4_000));
    assert!(boundary.previous_pass.is_some(), "the core hands over pass 1 as for any job");
    write_ok(&db, boundary, at(4_000)).await;

    let reread = load(&db, job.job.id).await;
    assert_eq!(reread.job.pass, 2);
    assert!(reread.job.steps.iter().all(|s| s.state == StepState::Queued && s.output.is_none()), "a fresh pass");
    let next = run_step(&db, &reread, b"fetched again", at(5_000)).await;
    assert_eq!(next.job.steps[0].output.as_deref(), Some(&b"fetched again"[..]));
    assert_eq!(load(&db, job.job.id).await.job.steps[0].attempts.len(), 1, "its attempts start over");
    assert_eq!((db.step_rows(job.job.id).await, db.history_rows(job.job.id).await), (0, 0), "one row throughout");
}

async fn a_restart_keeps_the_previous_pass_steps(backend: Backend) {
    let db = Db::new(backend).await;
    let job = insert(&db, new_job("resize", 3, at(0)), at(0)).await;
    let after_first = run_step(&db, &job, b"fetched", at(1_000)).await;

    // A restart requested while the second step runs waits for the step boundary.
    let running = claim(&db, 1, at(2_000)).await.remove(0);
    assert_eq!(running.job.steps[1].state, StepState::Running);
    let request = derive(&running, &JobEvent::RequestRestart { actor: Actor::new("ops") }, at(3_000));
    assert_eq!(request.previous_pass, None);
    let version = write_ok(&db, request.clone(), at(3_000)).await;
    let requested = JobRecord { version, ..request.record };

    // The holder's checkpoint reaches the boundary: the fresh pass begins, and the step
    // in flight ends superseded in pass 1, which only the write's previous pass records.
    let fence = held_fence(&requested);
    let checkpoint = StepReport::More { cursor: "row:500".into(), partial: Partial { done: 500, total: Some(1_000) } };
    let boundary = derive(&requested, &JobEvent::Report { fence, report: checkpoint }, at(4_000));
    let (pass, first_pass) = boundary.previous_pass.clone().expect("the core hands over pass 1 as it ended");
    assert_eq!(pass, 1);
    assert_eq!(
        first_pass.iter().map(|s| s.state).collect::<Vec<_>>(),
        vec![StepState::Completed, StepState::Failed, StepState::Queued]
    );
    assert_eq!(first_pass[0].output, after_first.job.steps[0].output);
    assert_eq!(boundary.record.job.pass, 2);
    let version = write_ok(&db, boundary.clone(), at(4_000)).await;

    let reread = load(&db, job.job.id).await;
    assert_eq!(reread.version, version);
    assert_eq!(reread.job.pass, 2);
    assert_eq!(reread.job.steps, boundary.record.job.steps, "the job reads the new pass");
    assert!(reread.job.steps.iter().all(|s| s.state == StepState::Queued && s.output.is_none()));
    assert_eq!(db.pass_steps(job.job.id, 1).await, first_pass, "pass 1 is kept as it ended, outputs too");
    assert_eq!(db.pass_steps(job.job.id, 2).await, reread.job.steps);
    assert_eq!(db.pass_steps(job.job.id, 3).await, vec![]);

    // Running the new pass changes only the new pass's rows.
    let next = run_step(&db, &reread, b"fetched again", at(5_000)).await;
    assert_eq!(load(&db, job.job.id).await.job.steps[0].output.as_deref(), Some(&b"fetched again"[..]));
    assert_eq!(next.job.steps[0].attempts.len(), 1, "a fresh pass starts its attempts over");
    assert_eq!(db.pass_steps(job.job.id, 1).await, first_pass);
    assert_eq!(db.pass_steps(job.job.id, 2).await, load(&db, job.job.id).await.job.steps);
    let passes: Vec<_> = db
        .history(job.job.id)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| matches!(e.event, HistoryEvent::PassStarted { .. }))
        .map(|e| e.event)
        .collect();
    assert_eq!(passes, vec![HistoryEvent::PassStarted { pass: 2 }]);
}

async fn a_retry_job_is_created_with_the_write(backend: Backend) {
    let db = Db::new(backend).await;
    let job = insert(&db, new_job("charge", 2, at(0)), at(0)).await;
    let after_first = run_step(&db, &job, b"authorised", at(1_000)).await;
    let claimed = claim(&db, 1, at(2_000)).await.remove(0);
    let refused = StepReport::Refused { failure: SafeFailure::permanent("declined", "the card was declined") };
    let w = settle(&claimed, refused, at(2_000));
    assert_eq!(w.record.job.state, JobState::Failed);
    let version = write_ok(&db, w.clone(), at(2_000)).await;
    let failed = JobRecord { version, ..w.record };
    assert_eq!(after_first.job.steps[0].output.as_deref(), Some(&b"authorised"[..]));

    // Two operators retry it from the same version: one retry job is created, with
    // the write that links it; the conflicting write creates nothing.
    let successor = job_id();
    let retry = derive(&failed, &JobEvent::Retry { successor, onto: None }, at(3_000));
    let spawned = retry.spawn.clone().expect("a retry spawns the successor");
    let lost = job_id();
    let racing = derive(&failed, &JobEvent::Retry { successor: lost, onto: None }, at(3_000));
    assert!(racing.spawn.is_some());
    write_ok(&db, retry, at(3_000)).await;
    assert_eq!(write(&db, racing, at(3_000)).await, WriteOutcome::Conflict);
    assert_eq!(db.job(lost).await.unwrap(), None, "the conflicting write's retry job was not created");

    let predecessor = load(&db, job.job.id).await;
    assert_eq!((predecessor.job.state, predecessor.job.successor), (JobState::Failed, Some(successor)));
    let retried = load(&db, successor).await;
    assert_eq!(retried.job, spawned.job, "the retry job is stored as derived");
    assert_eq!(
        (retried.version, retried.tenant.clone(), retried.kind.clone()),
        (1, job.tenant.clone(), job.kind.clone())
    );
    assert_eq!(retried.payload, job.payload);
    assert_eq!(retried.job.state, JobState::Pending);
    assert_eq!(retried.job.predecessor, Some(job.job.id));
    assert!(retried.seq > predecessor.seq);
    assert_eq!(retried.job.steps[0].state, StepState::Completed, "the completed step is carried");
    assert_eq!(retried.job.steps[0].output.as_deref(), Some(&b"authorised"[..]));
    assert_eq!(retried.job.steps[1].state, StepState::Queued);
    if let Some(history) = db.kept_history(successor).await {
        assert_eq!(history, spawned.history);
        assert_eq!(history[..2], [HistoryEvent::Submitted, HistoryEvent::RetryOf { predecessor: job.job.id }]);
    }

    // It is ready at once, and runs its remaining step.
    let claimed = claim(&db, 10, at(4_000)).await;
    assert_eq!(claimed.iter().map(|r| r.job.id).collect::<Vec<_>>(), vec![successor]);
    assert_eq!(claimed[0].job.claim.as_ref().unwrap().step, 1);
    write_ok(&db, settle(&claimed[0], complete(b"captured"), at(5_000)), at(5_000)).await;
    assert_eq!(load(&db, successor).await.job.state, JobState::Succeeded);
}
