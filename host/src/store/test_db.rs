//! Fresh databases for the store's own unit tests: a SQLite file in the temp directory,
//! or a new database on the suite's PostgreSQL (`SPINDLE_TEST_DATABASE_URL`, which
//! `cargo xtask test` sets; without it the PostgreSQL half of a test says so and ends).

use std::sync::atomic::{AtomicU32, Ordering};

use super::sql::{Backend, ConnectOptions, Db, Ty, Value};

/// A fresh, empty database.
pub(crate) struct TestDb {
    /// Its pools.
    pub db: Db,
    cleanup: Cleanup,
}

enum Cleanup {
    File(std::path::PathBuf),
    Database { admin: Db, name: String },
}

/// A fresh database on `backend`; `None` (with a note) for PostgreSQL without a server.
pub(crate) async fn fresh(backend: Backend) -> Option<TestDb> {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let name = format!("unit_{}_{n}", std::process::id());
    match backend {
        Backend::Sqlite => {
            let path = std::env::temp_dir().join(format!("spindle-{name}.db"));
            let _ = std::fs::remove_file(&path);
            let options = ConnectOptions::new(format!("sqlite://{}", path.display()), 2);
            let db = Db::connect(&options).await.expect("open SQLite");
            Some(TestDb { db, cleanup: Cleanup::File(path) })
        }
        Backend::Postgres => {
            let Ok(url) = std::env::var("SPINDLE_TEST_DATABASE_URL") else {
                eprintln!("SPINDLE_TEST_DATABASE_URL is not set: run through `cargo xtask test`");
                return None;
            };
            let admin = Db::connect(&ConnectOptions::new(url.clone(), 2)).await.expect("connect");
            // Outside a transaction: PostgreSQL creates and drops databases in none.
            admin.fetch(&format!("DROP DATABASE IF EXISTS {name}"), vec![], &[]).await.expect("drop database");
            admin.fetch(&format!("CREATE DATABASE {name}"), vec![], &[]).await.expect("create database");
            let base = url.rsplit_once('/').map_or(url.as_str(), |(base, _)| base);
            let options = ConnectOptions::new(format!("{base}/{name}"), 2);
            let db = Db::connect(&options).await.expect("connect");
            Some(TestDb { db, cleanup: Cleanup::Database { admin, name } })
        }
    }
}

impl TestDb {
    /// Closes the database and removes it.
    pub(crate) async fn drop(self) {
        self.db.close().await;
        match self.cleanup {
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
            }
            Cleanup::Database { admin, name } => {
                let _ = admin.fetch(&format!("DROP DATABASE IF EXISTS {name}"), vec![], &[]).await;
                admin.close().await;
            }
        }
    }
}

/// The plan `db` chooses for `sql` with `args`, one line per node (PostgreSQL's `EXPLAIN`,
/// SQLite's `EXPLAIN QUERY PLAN`).
pub(crate) async fn plan(db: &Db, sql: &str, args: Vec<Value>) -> String {
    let lines: Vec<String> = match db.backend() {
        Backend::Sqlite => db
            .fetch(&format!("EXPLAIN QUERY PLAN {sql}"), args, &[Ty::Int, Ty::Int, Ty::Int, Ty::Text])
            .await
            .expect("explain")
            .iter()
            .map(|r| r.text(3, "test row").expect("a decodable row"))
            .collect(),
        Backend::Postgres => db
            .fetch(&format!("EXPLAIN {sql}"), args, &[Ty::Text])
            .await
            .expect("explain")
            .iter()
            .map(|r| r.text(0, "test row").expect("a decodable row"))
            .collect(),
    };
    lines.join("\n")
}
