//! Schema migrations, embedded in the binary, one list per backend. Applied in order at
//! start-up inside a transaction; on PostgreSQL an advisory lock keeps two hosts starting
//! together from applying the same migration twice.

use super::StoreError;
use super::sql::{Backend, Db, Ty, Value};

const SQLITE: &[(i64, &str)] = &[
    (1, include_str!("../../migrations/sqlite/0001_initial.sql")),
    (2, include_str!("../../migrations/sqlite/0002_fewer_job_indexes.sql")),
];
const POSTGRES: &[(i64, &str)] = &[
    (1, include_str!("../../migrations/postgres/0001_initial.sql")),
    (2, include_str!("../../migrations/postgres/0002_fewer_job_indexes.sql")),
    (3, include_str!("../../migrations/postgres/0003_cheaper_step_and_history_writes.sql")),
    (4, include_str!("../../migrations/postgres/0004_jobs_keyed_by_id.sql")),
];

/// An arbitrary, fixed key for the migration advisory lock.
const MIGRATION_LOCK: i64 = 0x0053_5049_4e44_4c45;

/// Brings the schema up to date.
pub(super) async fn migrate(db: &Db) -> Result<(), StoreError> {
    let migrations = match db.backend() {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    };
    let mut tx = db.begin().await?;
    if db.backend() == Backend::Postgres {
        tx.fetch("SELECT pg_advisory_xact_lock($1)::text", vec![Value::from(MIGRATION_LOCK)], &[Ty::Text]).await?;
    }
    tx.execute(
        "CREATE TABLE IF NOT EXISTS spindle_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        vec![],
    )
    .await?;
    let applied = tx.fetch("SELECT COALESCE(MAX(version), 0) FROM spindle_schema", vec![], &[Ty::Int]).await?;
    let current = applied.first().map_or(0, |row| row.int(0));
    for (version, script) in migrations.iter().filter(|(v, _)| *v > current) {
        for statement in statements(script) {
            tx.execute(&statement, vec![]).await?;
        }
        tx.execute(
            "INSERT INTO spindle_schema (version, applied_at) VALUES ($1, $2)",
            vec![Value::from(*version), Value::from(spindle_core::Timestamp::EPOCH.as_micros())],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Splits a script into statements (on `;` at line ends), dropping comments.
fn statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let line = line.split("--").next().unwrap_or("").trim_end();
        if line.trim().is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.ends_with(';') {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_split_into_statements() {
        let s = statements("-- c\nCREATE TABLE a (x INTEGER); -- t\nCREATE INDEX i ON a (x)\n  WHERE x > 1;\n");
        assert_eq!(s.len(), 2);
        assert!(s[1].contains("WHERE x > 1;"));
        assert!(statements(SQLITE[0].1).len() > 10);
        assert_eq!(statements(SQLITE[0].1).len(), statements(POSTGRES[0].1).len());
    }
}
