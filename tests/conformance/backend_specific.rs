//! What each backend does on its own behalf: SQLite's checkpoints kept off the writer,
//! PostgreSQL's lock order across a batch (its plan for loading steps is checked inside
//! the host crate, where the query lives).

use spindle::store::Backend;
use spindle::store::prelude::*;
use spindle::store::sql::Ty;
use spindle_tests::harness::fresh_store;

use crate::fixture::{Db, at, claim_write, host, insert, keyed_job, new_job};

/// The writer leaves checkpoints to a reader connection: its own automatic checkpoint
/// is only a distant backstop, and a passive checkpoint from the readers copies every
/// committed frame back while the writer keeps its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_checkpoints_from_a_reader_not_the_writer() {
    let (store, _url, _scratch) = fresh_store(Backend::Sqlite).await;
    let db = store.db();
    let mut tx = db.begin().await.unwrap();
    let backstop = tx.fetch("PRAGMA wal_autocheckpoint", vec![], &[Ty::Int]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        backstop[0].int(0, "test row").expect("a decodable row"),
        16_384,
        "the writer's own checkpoint waits for 64 MiB of log"
    );

    let jobs: Vec<_> = (0..2_000).map(|_| new_job("sync", 1, at(0))).collect();
    store.insert_jobs(jobs, at(0)).await.unwrap();
    // The store's own reader checkpoints every 100 ms; one that runs at the same moment
    // makes this one answer busy, so ask again until it is not.
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(5));
    let mut checkpoint = db.checkpoint().await.unwrap().expect("SQLite checkpoints");
    for _ in 0..100 {
        if !checkpoint.busy {
            break;
        }
        tick.tick().await;
        checkpoint = db.checkpoint().await.unwrap().expect("SQLite checkpoints");
    }
    assert!(!checkpoint.busy, "nothing but the store's own checkpoint holds the log: {checkpoint:?}");
    assert!(checkpoint.log_frames > 0, "the inserts went to the log: {checkpoint:?}");
    assert_eq!(checkpoint.checkpointed_frames, checkpoint.log_frames, "every frame copied back: {checkpoint:?}");
}

/// Backends blocked (on a lock) by the backend `pid`.
async fn blocked_by(db: &spindle::store::sql::Db, pid: i64) -> i64 {
    let rows = db
        .fetch(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
            vec![spindle::store::sql::Value::from(pid)],
            &[Ty::Int],
        )
        .await
        .unwrap();
    rows[0].int(0, "test row").expect("a decodable row")
}

/// Backends of this database waiting for a lock.
async fn waiting_on_locks(db: &spindle::store::sql::Db) -> i64 {
    let rows = db
        .fetch(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            vec![],
            &[Ty::Int],
        )
        .await
        .unwrap();
    rows[0].int(0, "test row").expect("a decodable row")
}

/// Two batches that claim jobs sharing keys, in opposite orders, commit side by side:
/// every transaction takes its lease rows in one global order (keys sorted across the
/// batch), so neither waits for the other in a cycle. They deadlocked, and PostgreSQL
/// threw one whole batch away (16 times a run in the fault-injection tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_batches_take_lease_keys_in_one_order() {
    let db = Db::new(Backend::Postgres).await;
    let sql = db.sql().clone();
    sql.execute(
        "INSERT INTO leases (key, job_id, holder_fence, token, owner, expires_at) \
         VALUES ('a', '', 0, 1, '', 0), ('b', '', 0, 1, '', 0)",
        vec![],
    )
    .await
    .unwrap();
    let mut jobs = Vec::new();
    for key in ["a", "b", "b", "a"] {
        jobs.push(insert(&db, keyed_job("sync", &[key], at(0)), at(0)).await);
    }
    let claim = |i: usize| claim_write(&jobs[i], "host-a", at(1_000)).expect("claimable");
    // Hold each key's row in a transaction of its own, so both batches queue behind them.
    let mut hold_a = sql.begin().await.unwrap();
    hold_a.fetch("SELECT key FROM leases WHERE key = 'a' FOR UPDATE", vec![], &[Ty::Text]).await.unwrap();
    let mut hold_b = sql.begin().await.unwrap();
    let pid_b = hold_b.fetch("SELECT pg_backend_pid()::bigint", vec![], &[Ty::Int]).await.unwrap()[0]
        .int(0, "test row")
        .expect("a decodable row");
    hold_b.fetch("SELECT key FROM leases WHERE key = 'b' FOR UPDATE", vec![], &[Ty::Text]).await.unwrap();

    let batch = |writes: Vec<spindle::store::JobWrite>| {
        let store = db.shared();
        tokio::spawn(async move { store.write(writes, at(1_000), &host()).await })
    };
    let first = batch(vec![claim(0), claim(1)]);
    let second = batch(vec![claim(2), claim(3)]);
    // Both batches wait (behind a holder, or behind each other in a row's queue).
    while waiting_on_locks(&sql).await < 2 {
        tokio::task::yield_now().await;
    }
    hold_a.commit().await.unwrap();
    while blocked_by(&sql, pid_b).await < 1 {
        tokio::task::yield_now().await;
    }
    hold_b.commit().await.unwrap();
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    let outcomes = [first.expect("the first batch committed"), second.expect("the second batch committed")].concat();
    let written = outcomes.iter().filter(|o| matches!(o, spindle::store::WriteOutcome::Written { .. })).count();
    assert_eq!(written, 2, "one claim per key: {outcomes:?}");
}

/// A batch whose connection dies mid-transaction (an administrator's
/// `pg_terminate_backend`, a restarted server) is run again whole on a new connection,
/// instead of failing every writer it carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_a_batch_whose_connection_is_terminated_runs_again() {
    let db = Db::new(Backend::Postgres).await;
    let sql = db.sql().clone();
    let job = insert(&db, keyed_job("sync", &["a"], at(0)), at(0)).await;
    sql.execute(
        "INSERT INTO leases (key, job_id, holder_fence, token, owner, expires_at) VALUES ('a', '', 0, 1, '', 0)",
        vec![],
    )
    .await
    .unwrap();
    let mut hold = sql.begin().await.unwrap();
    let holder = hold.fetch("SELECT pg_backend_pid()::bigint", vec![], &[Ty::Int]).await.unwrap()[0]
        .int(0, "test row")
        .expect("a decodable row");
    hold.fetch("SELECT key FROM leases WHERE key = 'a' FOR UPDATE", vec![], &[Ty::Text]).await.unwrap();
    let write = claim_write(&job, "host-a", at(1_000)).expect("claimable");
    let store = db.shared();
    let batch = tokio::spawn(async move { store.write(vec![write], at(1_000), &host()).await });
    let victim = loop {
        let rows = sql
            .fetch(
                "SELECT pid::bigint FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                vec![spindle::store::sql::Value::from(holder)],
                &[Ty::Int],
            )
            .await
            .unwrap();
        if let Some(row) = rows.first() {
            break row.int(0, "test row").expect("a decodable row");
        }
        tokio::task::yield_now().await;
    };
    sql.fetch(
        "SELECT pg_terminate_backend($1::int)::text",
        vec![spindle::store::sql::Value::from(victim)],
        &[Ty::Text],
    )
    .await
    .unwrap();
    hold.commit().await.unwrap();
    let outcomes = batch.await.unwrap().expect("the batch ran again on a new connection");
    assert!(matches!(outcomes[..], [spindle::store::WriteOutcome::Written { .. }]), "{outcomes:?}");
}
