//! Workflows through the real `workflow` guest, a real sandbox and both backends: child
//! jobs fanned out and joined (all, any, leftovers cancelled or kept, batches), signals
//! (sent before the wait, timed out, in order, to a finished job), cancellation of a
//! parent reaching its children, the fan-out limits, and cron schedules fired by two
//! hosts on a simulated clock.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use spindle::clock::{Clock as _, ManualClock};
use spindle::engine::{Command, Engine, EngineError, ScheduleRequest};
use spindle::scheduler;
use spindle::store::JobFilter;
use spindle::store::prelude::*;
use spindle::store::{Backend, JobRecord};
use spindle_core::{HistoryEvent, JobId, JobState, Refusal, Timestamp};
use spindle_tests::harness::{Harness, test_engine_config};

async fn setup(backend: Backend) -> (Harness, Arc<Engine>) {
    let h = Harness::new(backend).await;
    for kind in ["workflow", "noop", "scripted"] {
        h.deploy(kind).await;
    }
    let engine = h.engine();
    (h, engine)
}

fn output(record: &JobRecord) -> Value {
    record.job.steps[0].output.as_deref().map(spindle_tests::json).unwrap_or(Value::Null)
}

async fn children_of(h: &Harness, parent: JobId) -> Vec<JobRecord> {
    let filter = JobFilter { parent: Some(parent), limit: 1000, ..JobFilter::default() };
    h.store.list_jobs(&h.tenant, &filter).await.expect("list children")
}

async fn history(h: &Harness, id: JobId) -> Vec<HistoryEvent> {
    h.store.history(id).await.expect("history").into_iter().map(|e| e.event).collect()
}

/// A snoozing `scripted` child: open for an hour unless cancelled.
fn slow_child() -> Value {
    json!({ "kind": "scripted", "input": { "first": "snooze:3600" } })
}

/// Two batches of 40 children each: every child runs once, each batch is created once
/// (keyed by parent, slot and index), and the parent's step gets its last batch's 40
/// results, in order, before it completes.
async fn a_fan_out_creates_each_child_once_and_the_parent_gets_every_result(backend: Backend) {
    let (h, engine) = setup(backend).await;
    let input = json!({ "fan_out": 40, "child_kind": "noop", "batches": 2 });
    let parent = h.submit(&engine, "workflow", input).await;
    let dispatcher = h.dispatch(&engine);
    let record = h.wait_final(parent).await;
    dispatcher.shutdown(Duration::from_secs(5)).await;
    assert_eq!(record.job.state, JobState::Succeeded, "{:?}", record.job.failure);
    let out = output(&record);
    assert_eq!(out["batches"], 2);
    assert_eq!(out["succeeded"], 40);
    assert_eq!(out["final"], 40);
    let results = out["children"].as_array().expect("children");
    assert_eq!(results.len(), 40);
    let children = children_of(&h, parent).await;
    assert_eq!(children.len(), 80, "two batches of 40, each created once");
    for child in &children {
        assert_eq!(child.job.state, JobState::Succeeded);
        assert_eq!(child.job.parent.as_ref().map(|p| p.job), Some(parent));
        assert_eq!(child.job.depth, 1);
        assert_eq!(child.job.steps[0].attempts_made(), 1, "each child ran once");
        assert_eq!(child.tenant, h.tenant, "a child is in its parent's tenant");
    }
    // The results are the last batch's children, in the order they were asked for.
    let last: Vec<String> = {
        let mut batch: Vec<_> =
            children.iter().filter(|c| c.job.parent.as_ref().is_some_and(|p| p.slot == "1/0/2")).collect();
        batch.sort_by_key(|c| c.job.parent.as_ref().map(|p| p.index));
        batch.iter().map(|c| c.job.id.to_string()).collect()
    };
    let got: Vec<String> = results.iter().map(|r| r["id"].as_str().unwrap_or_default().to_owned()).collect();
    assert_eq!(got, last);
    let events = history(&h, parent).await;
    let count = |name: &str| events.iter().filter(|e| e.name() == name).count();
    assert_eq!((count("awaiting_children"), count("wait_over")), (2, 2));
    assert_eq!(record.job.steps[0].attempts_made(), 1, "the parent's step waited in one attempt");
}

/// `any` wakes the parent on its first final child; with `cancel` the others are
/// cancelled (their history says by whom and why), with `keep` they run on.
async fn await_any_returns_on_the_first_final_child(backend: Backend) {
    let (h, engine) = setup(backend).await;
    let children = json!([{ "kind": "noop" }, slow_child(), slow_child()]);
    let dispatcher = h.dispatch(&engine);
    for leftover in ["cancel", "keep"] {
        let input = json!({ "children": children, "join": "any", "leftover": leftover });
        let parent = h.submit(&engine, "workflow", input).await;
        let record = h.wait_final(parent).await;
        assert_eq!(record.job.state, JobState::Succeeded, "{leftover}: {:?}", record.job.failure);
        let out = output(&record);
        assert_eq!(out["children"][0]["state"], "succeeded", "{leftover}: {out}");
        // Called on the first final child: the slow ones are still open then — or, with
        // `cancel`, already cancelled when the relay's cancels land before the parent's
        // step is called again (both are the join's doing, in either order).
        let slow_states: Vec<&str> = (1..3).map(|i| out["children"][i]["state"].as_str().unwrap_or("")).collect();
        let open_or_cancelled =
            |s: &&str| !matches!(*s, "succeeded" | "failed") && (leftover == "cancel" || *s != "cancelled");
        assert!(slow_states.iter().all(open_or_cancelled), "{leftover}: {out}");
        let cancelled = slow_states.iter().filter(|s| **s == "cancelled").count();
        assert_eq!(out["final"], 1 + cancelled, "{leftover}: the step was called on the first final child: {out}");
        let slow: Vec<JobId> =
            children_of(&h, parent).await.iter().filter(|c| c.kind == "scripted").map(|c| c.job.id).collect();
        assert_eq!(slow.len(), 2);
        for id in slow {
            if leftover == "cancel" {
                let child = h.wait_final(id).await;
                assert_eq!(child.job.state, JobState::Cancelled);
                let why = history(&h, id).await.into_iter().find_map(|e| match e {
                    HistoryEvent::CancelRequested { actor, reason } => Some((actor.0, reason)),
                    _ => None,
                });
                let (actor, reason) = why.expect("the child's history says why");
                assert_eq!(actor, format!("parent:{parent}"));
                assert!(reason.contains("join was met"), "{reason}");
            } else {
                let child = h.store.job(id).await.unwrap().unwrap();
                assert!(!child.job.state.is_final(), "kept children run on: {:?}", child.job.state);
            }
        }
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

/// Signals sent before the step waits are kept and delivered when it does, in order,
/// each once; a wait with no signal times out and the step is called with none.
async fn signals_are_kept_until_awaited_and_delivered_in_order_once(backend: Backend) {
    let (h, engine) = setup(backend).await;
    // Sent while the job is still pending: nothing waits yet.
    let early = h.submit(&engine, "workflow", json!({ "signal": "go", "timeout_secs": 3600, "waits": 2 })).await;
    engine.workflows().signal(&h.tenant, early, "go", br#"{"n":1}"#.to_vec(), None).await.expect("signal 1");
    engine.workflows().signal(&h.tenant, early, "other", br#"{"n":0}"#.to_vec(), None).await.expect("another name");
    engine.workflows().signal(&h.tenant, early, "go", br#"{"n":2}"#.to_vec(), None).await.expect("signal 2");
    // Nothing is sent to this one: its one-second wait times out.
    let lonely = h.submit(&engine, "workflow", json!({ "signal": "go", "timeout_secs": 1 })).await;
    let dispatcher = h.dispatch(&engine);
    let record = h.wait_final(early).await;
    assert_eq!(record.job.state, JobState::Succeeded, "{:?}", record.job.failure);
    assert_eq!(output(&record), json!({ "signals": [{ "n": 1 }, { "n": 2 }], "timed_out": false }));
    assert_eq!(record.job.signals.get("go"), None, "both were consumed");
    // Another name's signal was never consumed: once the job ended it is no longer
    // pending, and its history says so.
    assert!(record.job.signals.is_empty(), "nothing pending once final: {:?}", record.job.signals);
    let discarded = h.store.history(early).await.unwrap().into_iter().find_map(|e| match e.event {
        HistoryEvent::SignalsDiscarded { signals } => Some(signals),
        _ => None,
    });
    assert_eq!(discarded, Some([("other".to_owned(), 1)].into_iter().collect()));
    let record = h.wait_final(lonely).await;
    assert_eq!(record.job.state, JobState::Succeeded, "{:?}", record.job.failure);
    assert_eq!(output(&record), json!({ "signals": [null], "signal": null, "timed_out": true }));
    // A signal sent while the step waits wakes it.
    let waiting = h.submit(&engine, "workflow", json!({ "signal": "shipped", "timeout_secs": 3600 })).await;
    h.wait_for(waiting, |r| r.job.state == JobState::Waiting).await;
    engine
        .workflows()
        .signal(&h.tenant, waiting, "shipped", br#"{"carrier":"ups"}"#.to_vec(), None)
        .await
        .expect("signal");
    let record = h.wait_final(waiting).await;
    assert_eq!(output(&record)["signal"], json!({ "carrier": "ups" }));
    dispatcher.shutdown(Duration::from_secs(5)).await;
    // A finished job refuses a signal with a typed error, and keeps nothing.
    match engine.workflows().signal(&h.tenant, waiting, "shipped", b"{}".to_vec(), None).await {
        Err(EngineError::Refused { refusal: Refusal::Finished { state }, .. }) => {
            assert_eq!(state, JobState::Succeeded);
        }
        other => panic!("a signal to a finished job: {other:?}"),
    }
    assert_eq!(h.store.oldest_signal(waiting, "shipped").await.unwrap(), None);
    // A malformed name and another tenant's job are refused too.
    assert!(matches!(
        engine.workflows().signal(&h.tenant, early, "no spaces", vec![], None).await,
        Err(EngineError::Invalid(_))
    ));
    let stranger = spindle::store::TenantId("stranger".into());
    assert!(matches!(
        engine.workflows().signal(&stranger, early, "go", vec![], None).await,
        Err(EngineError::NotFound)
    ));
}

/// The transaction that settles a parent's last child wakes the parent: with no
/// dispatcher (so no relay pass ever runs), claiming and running jobs by hand takes the
/// parent through its fan-out, its children and its woken step to success, and the
/// children's relay rows are still queued, unread.
async fn the_last_childs_settlement_wakes_its_parent_in_its_own_commit(backend: Backend) {
    let (h, engine) = setup(backend).await;
    let parent = h.submit(&engine, "workflow", json!({ "fan_out": 3, "child_kind": "noop" })).await;
    for _ in 0..10 {
        let claimed = engine.execution().claim(10).await.expect("claim");
        if claimed.is_empty() {
            break;
        }
        for record in claimed {
            engine.execution().execute_then_claim(record, None).await;
        }
    }
    let record = h.store.job(parent).await.unwrap().unwrap();
    assert_eq!(record.job.state, JobState::Succeeded, "woken without a relay pass: {:?}", record.job.wait);
    assert_eq!(output(&record)["final"], 3);
    let history = h.store.history(parent).await.unwrap();
    assert!(history.iter().any(|e| matches!(e.event, HistoryEvent::WaitOver { .. })));
    use spindle::store::sql::{Ty, Value};
    let queued = h
        .store
        .db()
        .fetch(
            "SELECT count(*) FROM outbox WHERE job_id = $1 AND effect = 'child_settled'",
            vec![Value::from(parent.to_string())],
            &[Ty::Int],
        )
        .await
        .unwrap();
    assert_eq!(queued.first().map(|r| r.int(0, "test row").expect("a decodable row")), Some(3), "the relay never ran");
}

/// A signal sent with an idempotency key is delivered once however often it is sent:
/// twice at once, again after it was consumed, and again after the job finished (each
/// repeat answered as a repeat, not refused).
async fn a_signal_sent_again_with_its_key_is_delivered_once(backend: Backend) {
    let (h, engine) = setup(backend).await;
    let job = h.submit(&engine, "workflow", json!({ "signal": "go", "timeout_secs": 3600, "waits": 2 })).await;
    let send = |key: &'static str, n: u32| {
        let (engine, tenant) = (engine.clone(), h.tenant.clone());
        async move { engine.workflows().signal(&tenant, job, "go", format!(r#"{{"n":{n}}}"#).into_bytes(), Some(key)).await }
    };
    let (a, b) = tokio::join!(send("first", 1), send("first", 1));
    let repeats = [a.expect("sent").repeated, b.expect("sent").repeated];
    assert_eq!(repeats.iter().filter(|r| **r).count(), 1, "one of two sends at once is the repeat: {repeats:?}");
    let dispatcher = h.dispatch(&engine);
    h.wait_for(job, |r| r.job.signals.is_empty() && r.job.state == JobState::Waiting).await;
    assert!(send("first", 1).await.expect("sent again").repeated, "consumed already: still a repeat");
    assert!(!send("second", 2).await.expect("sent").repeated);
    let record = h.wait_final(job).await;
    assert_eq!(output(&record), json!({ "signals": [{ "n": 1 }, { "n": 2 }], "timed_out": false }));
    let again = send("second", 2).await.expect("a repeat to a finished job is answered, not refused");
    assert!(again.repeated);
    assert!(matches!(send("third", 3).await, Err(EngineError::Refused { .. })), "a new signal to a finished job");
    let bad = engine.workflows().signal(&h.tenant, job, "go", vec![], Some("has space")).await;
    assert!(matches!(bad, Err(EngineError::Invalid(_))), "{bad:?}");
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

/// Cancelling a waiting parent cancels its open children; each child's history says
/// the parent did, and why. Pausing the parent leaves its children alone.
async fn cancelling_a_parent_cancels_its_open_children(backend: Backend) {
    let (h, engine) = setup(backend).await;
    let input = json!({ "children": [slow_child(), slow_child(), slow_child()] });
    let parent = h.submit(&engine, "workflow", input).await;
    let dispatcher = h.dispatch(&engine);
    h.wait_for(parent, |r| r.job.state == JobState::Waiting).await;
    let children: Vec<JobId> = children_of(&h, parent).await.iter().map(|c| c.job.id).collect();
    assert_eq!(children.len(), 3);
    engine.operations().command(&h.tenant, parent, Command::Pause, "ops").await.expect("pause");
    for &child in &children {
        let record = h.store.job(child).await.unwrap().unwrap();
        assert_ne!(record.job.state, JobState::Paused, "pausing a parent does not pause its children");
    }
    engine.operations().command(&h.tenant, parent, Command::Resume, "ops").await.expect("resume");
    assert_eq!(h.store.job(parent).await.unwrap().unwrap().job.state, JobState::Waiting);
    let cancelled = engine
        .operations()
        .command(&h.tenant, parent, Command::Cancel { reason: "order withdrawn".into() }, "ops")
        .await;
    assert_eq!(cancelled.expect("cancel").job.state, JobState::Cancelled);
    for child in children {
        let record = h.wait_final(child).await;
        assert_eq!(record.job.state, JobState::Cancelled);
        let why = history(&h, child).await.into_iter().find_map(|e| match e {
            HistoryEvent::CancelRequested { actor, reason } => Some((actor.0, reason)),
            _ => None,
        });
        assert_eq!(why, Some((format!("parent:{parent}"), format!("parent {parent} cancelled"))));
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

/// A waiting job is not silent, lost or claimable: the reconciler leaves it alone.
async fn the_reconciler_leaves_a_waiting_job_alone(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("workflow").await;
    let clock = ManualClock::new(Timestamp::from_micros(1_900_000_000_000_000));
    let engine = h.engine_clocked(test_engine_config(), Arc::new(clock.clone()));
    let parent = h.submit(&engine, "workflow", json!({ "signal": "go", "timeout_secs": 86_400 })).await;
    let claimed = engine.execution().claim(1).await.expect("claim");
    engine.execution().execute(claimed.into_iter().next().expect("claimed")).await;
    assert_eq!(h.store.job(parent).await.unwrap().unwrap().job.state, JobState::Waiting);
    clock.advance(Duration::from_secs(6 * 3600));
    let policy = spindle_core::ReconcilePolicy::default();
    for _ in 0..5 {
        spindle::reconciler::reconcile_once(&engine, &policy).await.expect("a pass");
    }
    assert!(engine.execution().claim(10).await.expect("claim").is_empty(), "a waiting job is not dispatched");
    let record = h.store.job(parent).await.unwrap().unwrap();
    assert_eq!(record.job.state, JobState::Waiting, "silence while waiting is not a lost execution");
    assert_eq!(record.job.probe_misses, 0);
}

/// Over the limits: a fan-out of 10,001 children, and a child of a kind that is not
/// deployed, fail the step with typed codes; nothing is created.
async fn fan_outs_over_the_limits_are_refused_with_typed_codes(backend: Backend) {
    let (h, engine) = setup(backend).await;
    let dispatcher = h.dispatch(&engine);
    for (input, code) in [
        (json!({ "fan_out": 10_001, "child_kind": "noop" }), "workflow.fan-out-too-large"),
        (json!({ "fan_out": 2, "child_kind": "no-such-kind" }), "workflow.unknown-kind"),
    ] {
        let parent = h.submit(&engine, "workflow", input).await;
        let record = h.wait_final(parent).await;
        assert_eq!(record.job.state, JobState::Failed);
        assert_eq!(record.job.failure.as_ref().map(|f| f.code.as_str()), Some(code));
        assert!(children_of(&h, parent).await.is_empty(), "{code}: no child was created");
    }
    dispatcher.shutdown(Duration::from_secs(5)).await;
}

fn every_minute(name: &str, catch_up: &str) -> ScheduleRequest {
    ScheduleRequest {
        name: name.into(),
        kind: "noop".into(),
        cron: "* * * * *".into(),
        timezone: "UTC".into(),
        input: json!({ "from": name }),
        catch_up: catch_up.into(),
        overlap: "allow".into(),
    }
}

async fn jobs_of(h: &Harness, name: &str) -> usize {
    let filter = JobFilter { kind: Some("noop".into()), limit: 1000, ..JobFilter::default() };
    let jobs = h.store.list_jobs(&h.tenant, &filter).await.expect("jobs");
    jobs.iter()
        .filter(|j| spindle_tests::json(&j.payload)["from"] == name)
        .inspect(|j| assert_eq!(j.priority, spindle_core::policy::priority::Priority::Scheduled))
        .count()
}

/// Two hosts on one store and one simulated clock: a schedule every minute over 60
/// minutes fires exactly 60 jobs, whichever host fires; after a 30-minute outage
/// `none` fires once and `all` fires 30.
async fn schedules_fire_each_time_once_across_two_hosts(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("noop").await;
    let clock = ManualClock::new(Timestamp::from_micros(1_900_000_020_000_000)); // on a minute
    let hosts = [
        h.engine_clocked(
            spindle::engine::EngineConfig { host_id: "a".into(), ..test_engine_config() },
            Arc::new(clock.clone()),
        ),
        h.engine_clocked(
            spindle::engine::EngineConfig { host_id: "b".into(), ..test_engine_config() },
            Arc::new(clock.clone()),
        ),
    ];
    hosts[0].workflows().create_schedule(&h.tenant, every_minute("minutely", "none")).await.expect("create");
    let duplicate = hosts[1].workflows().create_schedule(&h.tenant, every_minute("minutely", "none")).await;
    assert!(duplicate.is_err(), "a schedule's name is unique in its tenant");
    for minute in 0..60 {
        clock.advance(Duration::from_secs(60));
        // Either host may go first; the one holding the lease fires, and a time fired
        // twice would be the same job (its idempotency key is the schedule and time).
        let order = if minute % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            scheduler::fire_due(&hosts[i]).await.expect("a pass");
            scheduler::fire_due(&hosts[i]).await.expect("a repeated pass");
        }
    }
    assert_eq!(jobs_of(&h, "minutely").await, 60);
    let row = h.store.schedule(&h.tenant, "minutely").await.unwrap().expect("the schedule");
    assert_eq!(row.machine.fired, 60);

    // An outage: 30 minutes with no host firing, then one pass 30 s after a time: that
    // time is on time, the 29 before it were missed.
    hosts[0].workflows().pause_schedule(&h.tenant, "minutely").await.expect("pause");
    hosts[0].workflows().create_schedule(&h.tenant, every_minute("catch-none", "none")).await.expect("create");
    hosts[0].workflows().create_schedule(&h.tenant, every_minute("catch-all", "all")).await.expect("create");
    clock.advance(Duration::from_secs(30 * 60 + 30));
    for host in &hosts {
        scheduler::fire_due(host).await.expect("a pass");
    }
    assert_eq!(jobs_of(&h, "catch-none").await, 1);
    assert_eq!(jobs_of(&h, "catch-all").await, 30);
    assert_eq!(jobs_of(&h, "minutely").await, 60, "a paused schedule fires nothing");
    // Resumed, it fires from its next time on; times passed while paused are skipped.
    hosts[1].workflows().resume_schedule(&h.tenant, "minutely").await.expect("resume");
    clock.advance(Duration::from_secs(60));
    scheduler::fire_due(&hosts[1]).await.expect("a pass");
    scheduler::fire_due(&hosts[0]).await.expect("a pass");
    assert_eq!(jobs_of(&h, "minutely").await, 61);
    // Bad expressions, zones and kinds are refused before anything is stored.
    let bad = ScheduleRequest { cron: "61 * * * *".into(), ..every_minute("bad", "none") };
    assert!(matches!(hosts[0].workflows().create_schedule(&h.tenant, bad).await, Err(EngineError::Invalid(_))));
    let zone = ScheduleRequest { timezone: "Mars/Olympus".into(), ..every_minute("bad", "none") };
    assert!(matches!(hosts[0].workflows().create_schedule(&h.tenant, zone).await, Err(EngineError::Invalid(_))));
    let kind = ScheduleRequest { kind: "nope".into(), ..every_minute("bad", "none") };
    assert!(matches!(hosts[0].workflows().create_schedule(&h.tenant, kind).await, Err(EngineError::UnknownKind(_))));
}

/// The keys of the `noop` jobs schedule `name` fired, as their times in seconds.
async fn fired_seconds(h: &Harness, name: &str) -> Vec<i64> {
    let filter = JobFilter { kind: Some("noop".into()), limit: 100_000, ..JobFilter::default() };
    let prefix = format!("schedule:{name}:");
    let mut seconds: Vec<i64> = h
        .store
        .list_jobs(&h.tenant, &filter)
        .await
        .expect("jobs")
        .iter()
        .filter_map(|j| j.idempotency_key.as_deref()?.strip_prefix(&prefix)?.parse::<i64>().ok())
        .map(|micros| {
            assert_eq!(micros % 1_000_000, 0, "a firing key is a whole second: {micros}");
            micros / 1_000_000
        })
        .collect();
    seconds.sort_unstable();
    seconds
}

/// An every-second schedule over 300 simulated seconds, passes at random moments
/// (0.2 to 2.9 s apart, with microsecond fractions): exactly one job per second, each
/// keyed by its whole second, and `next_fire_at` always a whole second.
async fn an_every_second_schedule_fires_each_second_once_on_a_simulated_clock(backend: Backend) {
    use rand::{Rng, SeedableRng};
    let seed: u64 = std::env::var("SPINDLE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(rand::random);
    eprintln!("every-second schedule: SPINDLE_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let h = Harness::new(backend).await;
    h.deploy("noop").await;
    let start = Timestamp::from_micros(1_900_000_020_117_389);
    let clock = ManualClock::new(start);
    let engine = h.engine_clocked(test_engine_config(), Arc::new(clock.clone()));
    let tick = ScheduleRequest { name: "tick".into(), cron: "* * * * * *".into(), ..every_minute("tick", "none") };
    let row = engine.workflows().create_schedule(&h.tenant, tick).await.expect("create");
    assert_eq!(row.machine.next_fire_at, Timestamp::from_micros(1_900_000_021_000_000), "seed {seed}");
    let end = start.plus(Duration::from_secs(300));
    while clock.now() < end {
        clock.advance(Duration::from_micros(rng.random_range(200_000..2_900_000)));
        scheduler::fire_due(&engine).await.expect("a pass");
        let row = engine.workflows().schedule(&h.tenant, "tick").await.expect("the schedule");
        assert_eq!(row.machine.next_fire_at.as_micros() % 1_000_000, 0, "seed {seed}");
    }
    let fired = fired_seconds(&h, "tick").await;
    let last = clock.now().as_micros() / 1_000_000;
    let want: Vec<i64> = (1_900_000_021..=last).collect();
    assert_eq!(fired, want, "seed {seed}: every second once");
}

/// On a real clock and an idle host, an every-second schedule fires every second of a
/// minute: none missed, none twice.
async fn an_every_second_schedule_on_an_idle_host_misses_no_second(backend: Backend) {
    let h = Harness::new(backend).await;
    h.deploy("noop").await;
    let engine = h.engine();
    let tick = ScheduleRequest { name: "tick".into(), cron: "* * * * * *".into(), ..every_minute("tick", "none") };
    let first = engine.workflows().create_schedule(&h.tenant, tick).await.expect("create").machine.next_fire_at;
    let scheduler = scheduler::Scheduler::start(engine.clone());
    // Waiting for time itself to pass: a minute and a second of firings.
    let until = first.plus(Duration::from_secs(61));
    tokio::time::sleep(until.since(engine.now())).await;
    scheduler.stop().await;
    let fired = fired_seconds(&h, "tick").await;
    let first = first.as_micros() / 1_000_000;
    assert!(fired.len() >= 60, "a minute of firings: {}", fired.len());
    let want: Vec<i64> = (first..first + fired.len() as i64).collect();
    assert_eq!(fired, want, "each second from the first, once");
}

on_both_backends!(
    an_every_second_schedule_fires_each_second_once_on_a_simulated_clock,
    an_every_second_schedule_on_an_idle_host_misses_no_second,
    a_fan_out_creates_each_child_once_and_the_parent_gets_every_result,
    the_last_childs_settlement_wakes_its_parent_in_its_own_commit,
    await_any_returns_on_the_first_final_child,
    signals_are_kept_until_awaited_and_delivered_in_order_once,
    a_signal_sent_again_with_its_key_is_delivered_once,
    cancelling_a_parent_cancels_its_open_children,
    the_reconciler_leaves_a_waiting_job_alone,
    fan_outs_over_the_limits_are_refused_with_typed_codes,
    schedules_fire_each_time_once_across_two_hosts,
);

/// Children settling after their parent was cancelled is the normal end of a cancelled
/// fan-out: the host logs no warning for it (it read as the store disagreeing with the
/// core). On one thread, so the capture sees every task of the host.
#[tokio::test(flavor = "current_thread")]
async fn children_settling_after_their_parent_was_cancelled_warn_nobody() {
    let (log, _guard) = spindle_tests::capture_log(tracing::Level::WARN);
    cancelling_a_parent_cancels_its_open_children(Backend::Sqlite).await;
    let log = log.text();
    assert!(!log.contains("WARN"), "{log}");
}
