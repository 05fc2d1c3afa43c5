//! What each backend does on its own behalf: PostgreSQL's plan for loading claimed jobs'
//! steps on a table it has never analysed, SQLite's checkpoints kept off the writer.

use spindle::store::sql::Ty;
use spindle::store::{Backend, steps_of};
use spindle_tests::harness::fresh_store;

use crate::fixture::{at, new_job};

/// A fresh table has no statistics until autovacuum gets to it; `job_id IN (…)` over 64
/// ids was then planned as a scan of every step, on every claim. The lookup must probe
/// the primary key whatever the statistics say, and find each job's steps in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_loads_claimed_steps_by_key_on_an_unanalysed_table() {
    let (store, _url, _scratch) = fresh_store(Backend::Postgres).await;
    let db = store.db();
    db.execute("ALTER TABLE steps SET (autovacuum_enabled = false)", vec![]).await.unwrap();
    let jobs: Vec<_> = (0..3_000).map(|_| new_job("sync", 2, at(0))).collect();
    let wanted: Vec<(String, i64)> =
        jobs.iter().take(64).map(|j| (j.job.id.to_string(), i64::from(j.job.pass))).collect();
    for chunk in jobs.chunks(500) {
        spindle::store::Storage::insert_jobs(store.as_ref(), chunk.to_vec(), at(0)).await.unwrap();
    }

    let (sql, args) = steps_of(Backend::Postgres, &wanted);
    let plan: Vec<String> = db
        .fetch(&format!("EXPLAIN {sql}"), args.clone(), &[Ty::Text])
        .await
        .unwrap()
        .into_iter()
        .map(|row| row.text(0))
        .collect();
    let plan = plan.join("\n");
    assert!(!plan.contains("Seq Scan on steps"), "steps are scanned, not probed:\n{plan}");
    assert!(plan.contains("steps_pkey"), "the primary key is not used:\n{plan}");

    let rows = db.fetch(&sql, args, &[Ty::Text, Ty::Int, Ty::Int, Ty::Text, Ty::Blob]).await.unwrap();
    let found: Vec<(String, i64)> = rows.iter().map(|r| (r.text(0), r.int(2))).collect();
    for pair in found.windows(2) {
        if pair[0].0 == pair[1].0 {
            assert!(pair[0].1 < pair[1].1, "a job's steps come in position order: {found:?}");
        }
    }
    let mut found = found;
    found.sort();
    let mut expected: Vec<(String, i64)> =
        wanted.iter().flat_map(|(id, _)| [(id.clone(), 0), (id.clone(), 1)]).collect();
    expected.sort();
    assert_eq!(found, expected, "both steps of every job asked for, and nothing else");
}

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
    assert_eq!(backstop[0].int(0), 16_384, "the writer's own checkpoint waits for 64 MiB of log");

    let jobs: Vec<_> = (0..2_000).map(|_| new_job("sync", 1, at(0))).collect();
    spindle::store::Storage::insert_jobs(store.as_ref(), jobs, at(0)).await.unwrap();
    let checkpoint = db.checkpoint().await.unwrap().expect("SQLite checkpoints");
    assert!(!checkpoint.busy, "nothing else holds the log: {checkpoint:?}");
    assert!(checkpoint.log_frames > 0, "the inserts went to the log: {checkpoint:?}");
    assert_eq!(checkpoint.checkpointed_frames, checkpoint.log_frames, "every frame copied back: {checkpoint:?}");
}
