//! What each backend does on its own behalf: SQLite's checkpoints kept off the writer
//! (PostgreSQL's plan for loading steps is checked inside the host crate, where the query lives).

use spindle::store::Backend;
use spindle::store::prelude::*;
use spindle::store::sql::Ty;
use spindle_tests::harness::fresh_store;

use crate::fixture::{at, new_job};

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
    store.insert_jobs(jobs, at(0)).await.unwrap();
    let checkpoint = db.checkpoint().await.unwrap().expect("SQLite checkpoints");
    assert!(!checkpoint.busy, "nothing else holds the log: {checkpoint:?}");
    assert!(checkpoint.log_frames > 0, "the inserts went to the log: {checkpoint:?}");
    assert_eq!(checkpoint.checkpointed_frames, checkpoint.log_frames, "every frame copied back: {checkpoint:?}");
}
