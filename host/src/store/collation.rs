//! Migration 0015 done online (PostgreSQL): every text column of Spindle's tables moves
//! to byte order (collation "C") while other hosts keep claiming and committing.
//!
//! `ALTER COLUMN … COLLATE "C"` alone rebuilds every index over the column under an
//! exclusive lock on its table: seconds for a million jobs, with every host waiting. So:
//!
//! - **expand**: beside each index over a text column, a twin that names the byte order
//!   (`col COLLATE "C"`) is built `CONCURRENTLY`: writes go on while it builds. An empty
//!   table (a fresh database) has nothing to wait for and is altered at once.
//! - **contract** (the swap): in one short transaction per table, under `lock_timeout`,
//!   the old indexes (and the constraints they back) are dropped, the columns change
//!   collation — the twins already match it, so nothing is rebuilt — and the twins take
//!   the old names (constraints come back `USING INDEX` the twin). Milliseconds, whatever
//!   the table's size; a lock not had in time is given up and tried again.
//!
//! Both steps look at the catalog and do only what is left, so either may run again
//! after a crash (an invalid twin, left by a build that was killed, is dropped first).

use std::time::Duration;

use sqlx::{AssertSqlSafe, PgConnection};

use super::error::StoreError;

/// Spindle's tables as of migration 0015 (later tables are created in byte order).
const TABLES: &[&str] = &[
    "alerts",
    "api_tokens",
    "components",
    "counters",
    "deployments",
    "fair_tags",
    "history",
    "job_log_totals",
    "job_logs",
    "job_traces",
    "jobs",
    "kind_limits",
    "kind_versions",
    "kinds",
    "leases",
    "operations",
    "outbound_calls",
    "outbox",
    "schedules",
    "secrets",
    "signals",
    "singletons",
    "steps",
    "tenant_admission",
    "tenant_limits",
    "tenants",
    "usage",
];

/// How long a swap waits for its table's lock before it gives up and tries again: the
/// longest another host's statement waits behind it, beyond the swap's own few
/// milliseconds.
pub(super) const LOCK_TIMEOUT: Duration = Duration::from_millis(200);

/// How many times a swap tries for its lock.
const LOCK_TRIES: u32 = 100;

/// An index over one of a table's text columns not yet in byte order.
struct Index {
    name: String,
    unique: bool,
    /// The constraint it backs (`p` primary key, `u` unique), if any.
    constraint: Option<(String, String)>,
    /// Its columns, each with whether it is a text column to put in byte order.
    columns: Vec<(String, bool)>,
    predicate: Option<String>,
}

fn twin(name: &str) -> String {
    format!("{name}_bytewise")
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The text columns of `table` not in byte order.
async fn columns(conn: &mut PgConnection, table: &str) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar::<_, String>(
        "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() \
         AND table_name = $1 AND data_type = 'text' AND collation_name IS DISTINCT FROM 'C' ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?)
}

/// An index as the catalog lists it: name, unique, constraint name and kind, columns
/// (empty for an expression), predicate.
type IndexRow = (String, bool, Option<String>, Option<String>, Vec<String>, Option<String>);

/// The indexes of `table` over any of `text` (its columns not in byte order).
async fn indexes(conn: &mut PgConnection, table: &str, text: &[String]) -> Result<Vec<Index>, StoreError> {
    let rows: Vec<IndexRow> = sqlx::query_as(
        "SELECT i.relname::text, x.indisunique, c.conname::text, c.contype::text, \
         ARRAY(SELECT CASE WHEN k.attnum = 0 THEN '' ELSE a.attname::text END \
               FROM unnest(x.indkey::int2[]) WITH ORDINALITY AS k(attnum, n) \
               LEFT JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum ORDER BY k.n), \
         pg_get_expr(x.indpred, x.indrelid) \
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid \
         JOIN pg_namespace s ON s.oid = t.relnamespace \
         LEFT JOIN pg_constraint c ON c.conindid = x.indexrelid AND c.contype IN ('p', 'u') \
         WHERE s.nspname = current_schema() AND t.relname = $1 AND i.relname NOT LIKE '%\\_bytewise' ORDER BY 1",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    let mut found = Vec::new();
    for (name, unique, conname, contype, columns, predicate) in rows {
        if columns.iter().any(String::is_empty) {
            return Err(StoreError::Corrupt(format!("index {name} has an expression column: 0015 cannot twin it")));
        }
        if !columns.iter().any(|c| text.contains(c)) {
            continue;
        }
        let columns = columns.into_iter().map(|c| (c.clone(), text.contains(&c))).collect();
        found.push(Index { name, unique, constraint: conname.zip(contype), columns, predicate });
    }
    Ok(found)
}

async fn is_empty(conn: &mut PgConnection, table: &str) -> Result<bool, StoreError> {
    let sql = format!("SELECT NOT EXISTS (SELECT 1 FROM {})", quote(table));
    Ok(sqlx::query_scalar::<_, bool>(AssertSqlSafe(sql)).fetch_one(&mut *conn).await?)
}

async fn table_exists(conn: &mut PgConnection, table: &str) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar::<_, bool>(
        "SELECT EXISTS (SELECT 1 FROM pg_class t JOIN pg_namespace s ON s.oid = t.relnamespace \
         WHERE s.nspname = current_schema() AND t.relname = $1 AND t.relkind = 'r')",
    )
    .bind(table)
    .fetch_one(&mut *conn)
    .await?)
}

/// The tables of [`TABLES`] that exist and have text columns not in byte order, with
/// those columns.
async fn to_move(conn: &mut PgConnection) -> Result<Vec<(String, Vec<String>)>, StoreError> {
    let mut found = Vec::new();
    for table in TABLES {
        if table_exists(conn, table).await? {
            let text = columns(conn, table).await?;
            if !text.is_empty() {
                found.push(((*table).to_owned(), text));
            }
        }
    }
    Ok(found)
}

fn alter_columns(table: &str, columns: &[String]) -> String {
    let changes: Vec<String> =
        columns.iter().map(|c| format!("ALTER COLUMN {} TYPE TEXT COLLATE \"C\"", quote(c))).collect();
    format!("ALTER TABLE {} {}", quote(table), changes.join(", "))
}

/// The expand step: twins built concurrently beside the indexes of every non-empty
/// table; empty tables altered at once.
pub(super) async fn expand(conn: &mut PgConnection) -> Result<(), StoreError> {
    for (table, text) in to_move(conn).await? {
        let table = table.as_str();
        if is_empty(conn, table).await? {
            locked(conn, &[alter_columns(table, &text)]).await?;
            continue;
        }
        for index in indexes(conn, table, &text).await? {
            build_twin(conn, table, &index).await?;
        }
    }
    Ok(())
}

/// Builds `index`'s twin concurrently, dropping one a killed build left invalid.
async fn build_twin(conn: &mut PgConnection, table: &str, index: &Index) -> Result<(), StoreError> {
    let name = twin(&index.name);
    let invalid: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid \
         JOIN pg_namespace s ON s.oid = i.relnamespace \
         WHERE s.nspname = current_schema() AND i.relname = $1 AND NOT x.indisvalid)",
    )
    .bind(&name)
    .fetch_one(&mut *conn)
    .await?;
    if invalid {
        sqlx::raw_sql(AssertSqlSafe(format!("DROP INDEX CONCURRENTLY IF EXISTS {}", quote(&name))))
            .execute(&mut *conn)
            .await?;
    }
    let columns: Vec<String> = index
        .columns
        .iter()
        .map(|(c, text)| if *text { format!("{} COLLATE \"C\"", quote(c)) } else { quote(c) })
        .collect();
    let predicate = index.predicate.as_ref().map(|p| format!(" WHERE {p}")).unwrap_or_default();
    let sql = format!(
        "CREATE {}INDEX CONCURRENTLY IF NOT EXISTS {} ON {} ({}){predicate}",
        if index.unique { "UNIQUE " } else { "" },
        quote(&name),
        quote(table),
        columns.join(", ")
    );
    sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *conn).await?;
    Ok(())
}

/// The contract step: each table's swap, in a short transaction of its own.
pub(super) async fn swap(conn: &mut PgConnection) -> Result<(), StoreError> {
    for (table, text) in to_move(conn).await? {
        let table = table.as_str();
        let indexes = indexes(conn, table, &text).await?;
        for index in &indexes {
            // A twin the expand step did not build (a table that filled up since).
            build_twin(conn, table, index).await?;
        }
        let mut statements = Vec::new();
        for index in &indexes {
            statements.push(match &index.constraint {
                Some((name, _)) => format!("ALTER TABLE {} DROP CONSTRAINT {}", quote(table), quote(name)),
                None => format!("DROP INDEX {}", quote(&index.name)),
            });
        }
        statements.push(alter_columns(table, &text));
        for index in &indexes {
            statements.push(match &index.constraint {
                Some((name, kind)) => format!(
                    "ALTER TABLE {} ADD CONSTRAINT {} {} USING INDEX {}",
                    quote(table),
                    quote(name),
                    if kind == "p" { "PRIMARY KEY" } else { "UNIQUE" },
                    quote(&twin(&index.name))
                ),
                None => format!("ALTER INDEX {} RENAME TO {}", quote(&twin(&index.name)), quote(&index.name)),
            });
        }
        locked(conn, &statements).await?;
    }
    Ok(())
}

/// Runs `statements` in one transaction that waits at most [`LOCK_TIMEOUT`] for each
/// lock, trying again (after a pause as long) when one was not had in time.
pub(super) async fn locked(conn: &mut PgConnection, statements: &[String]) -> Result<(), StoreError> {
    let mut tries = 0;
    loop {
        tries += 1;
        match try_locked(conn, statements).await {
            Err(e) if lock_not_had(&e) && tries < LOCK_TRIES => {
                tracing::info!(tries, "a migration step did not get its lock in time; trying again");
                tokio::time::sleep(LOCK_TIMEOUT).await;
            }
            other => return other.map_err(StoreError::from),
        }
    }
}

async fn try_locked(conn: &mut PgConnection, statements: &[String]) -> Result<(), sqlx::Error> {
    use sqlx::Connection as _;
    let mut tx = conn.begin().await?;
    let timeout = format!("SET LOCAL lock_timeout = '{}ms'", LOCK_TIMEOUT.as_millis());
    sqlx::raw_sql(AssertSqlSafe(timeout)).execute(&mut *tx).await?;
    for statement in statements {
        sqlx::raw_sql(AssertSqlSafe(statement.clone())).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// PostgreSQL's `lock_not_available`: a `lock_timeout` ran out.
fn lock_not_had(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|code| code == "55P03")
}
