//! Schema migrations, embedded in the binary, one list per backend, each step in one of
//! two phases (issue 40, "expand, then contract"):
//!
//! - **expand** steps are safe while hosts of the previous build run on the database
//!   (new tables, nullable columns, indexes built concurrently, batched backfills). A
//!   host runs them when it starts.
//! - **contract** steps (drops, swaps, tightenings) run once every host is of the new
//!   build: `spindle migrate --contract`, after the storage format gate moved.
//!
//! On PostgreSQL each step is a transaction of its own that waits at most
//! [`collation::LOCK_TIMEOUT`] for a table's lock (and tries again), so no step holds up
//! other hosts' statements for longer than that beyond its own short run; a session
//! advisory lock keeps two hosts starting together from applying a step twice. Online
//! steps (0015's collation, `collation`) run statements no transaction may hold
//! (`CREATE INDEX CONCURRENTLY`). On SQLite, an embedded database with one host, every
//! step runs at start in one transaction: a failed migration leaves the file as it was.

use std::collections::BTreeSet;

use super::collation;
use super::error::StoreError;
use super::sql::{Backend, Db, Ty, Value};

/// When a migration step may run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// While hosts of the previous build still run: at every host's start.
    Expand,
    /// Once every host runs this build: `spindle migrate --contract`.
    Contract,
}

/// What a step does.
#[derive(Clone, Copy, Debug)]
enum Step {
    /// A script of statements, in one transaction.
    Script(&'static str),
    /// 0015 online: twin indexes in byte order, built concurrently.
    CollationTwins,
    /// 0015 online: each table's swap to its twins, in a short transaction.
    CollationSwap,
}

use Phase::{Contract, Expand};
use Step::{CollationSwap, CollationTwins, Script};

const SQLITE: &[(i64, Phase, Step)] = &[
    (1, Expand, Script(include_str!("../../migrations/sqlite/0001_initial.sql"))),
    (2, Expand, Script(include_str!("../../migrations/sqlite/0002_fewer_job_indexes.sql"))),
    (3, Expand, Script(include_str!("../../migrations/sqlite/0003_queue_in_the_machine.sql"))),
    (4, Expand, Script(include_str!("../../migrations/sqlite/0004_token_lifecycle.sql"))),
    (5, Expand, Script(include_str!("../../migrations/sqlite/0005_retention.sql"))),
    (6, Expand, Script(include_str!("../../migrations/sqlite/0006_outbound.sql"))),
    (7, Expand, Script(include_str!("../../migrations/sqlite/0007_workflows.sql"))),
    (8, Expand, Script(include_str!("../../migrations/sqlite/0008_tenant_capacity.sql"))),
    (9, Expand, Script(include_str!("../../migrations/sqlite/0009_deployments.sql"))),
    (10, Expand, Script(include_str!("../../migrations/sqlite/0010_dashboard.sql"))),
    (11, Expand, Script(include_str!("../../migrations/sqlite/0011_one_tenant_index.sql"))),
    (12, Expand, Script(include_str!("../../migrations/sqlite/0012_signal_keys.sql"))),
    (13, Expand, Script(include_str!("../../migrations/sqlite/0013_hosts.sql"))),
    (14, Expand, Script(include_str!("../../migrations/sqlite/0014_compiled_size.sql"))),
    (15, Expand, Script(include_str!("../../migrations/sqlite/0015_token_minters.sql"))),
];
const POSTGRES: &[(i64, Phase, Step)] = &[
    (1, Expand, Script(include_str!("../../migrations/postgres/0001_initial.sql"))),
    (2, Expand, Script(include_str!("../../migrations/postgres/0002_fewer_job_indexes.sql"))),
    (3, Expand, Script(include_str!("../../migrations/postgres/0003_cheaper_step_and_history_writes.sql"))),
    (4, Expand, Script(include_str!("../../migrations/postgres/0004_jobs_keyed_by_id.sql"))),
    (5, Expand, Script(include_str!("../../migrations/postgres/0005_queue_in_the_machine.sql"))),
    (6, Expand, Script(include_str!("../../migrations/postgres/0006_token_lifecycle.sql"))),
    (7, Expand, Script(include_str!("../../migrations/postgres/0007_retention.sql"))),
    (8, Expand, Script(include_str!("../../migrations/postgres/0008_outbound.sql"))),
    (9, Expand, Script(include_str!("../../migrations/postgres/0009_workflows.sql"))),
    (10, Expand, Script(include_str!("../../migrations/postgres/0010_tenant_capacity.sql"))),
    (11, Expand, Script(include_str!("../../migrations/postgres/0011_deployments.sql"))),
    (12, Expand, Script(include_str!("../../migrations/postgres/0012_dashboard.sql"))),
    (13, Expand, Script(include_str!("../../migrations/postgres/0013_room_for_rewrites.sql"))),
    (14, Expand, Script(include_str!("../../migrations/postgres/0014_one_tenant_index.sql"))),
    // 0015_text_in_byte_order.sql says what and why; it runs online, in two steps.
    (15, Expand, CollationTwins),
    (16, Expand, Script(include_str!("../../migrations/postgres/0016_signal_keys.sql"))),
    (17, Expand, Script(include_str!("../../migrations/postgres/0017_hosts.sql"))),
    (18, Contract, CollationSwap),
    (19, Expand, Script(include_str!("../../migrations/postgres/0019_sql_submissions.sql"))),
    (20, Expand, Script(include_str!("../../migrations/postgres/0020_door_in_its_own_schema.sql"))),
    (21, Expand, Script(include_str!("../../migrations/postgres/0021_compiled_size.sql"))),
    (22, Expand, Script(include_str!("../../migrations/postgres/0022_token_minters.sql"))),
];

/// An arbitrary, fixed key for the migration advisory lock.
const MIGRATION_LOCK: i64 = 0x0053_5049_4e44_4c45;

/// Brings the schema fully up to date, both phases.
#[cfg(test)]
pub(super) async fn migrate(db: &Db) -> Result<(), StoreError> {
    migrate_to(db, i64::MAX).await
}

/// Runs the steps of `phases` not yet applied; answers how many ran.
pub(super) async fn migrate_phases(db: &Db, phases: &[Phase]) -> Result<usize, StoreError> {
    match db {
        Db::Sqlite { .. } => migrate_sqlite(db, i64::MAX).await,
        Db::Postgres(pool) => migrate_postgres(pool, i64::MAX, phases).await,
    }
}

/// Applies the steps up to `target`, both phases (fewer than all, to test one).
#[cfg(test)]
async fn migrate_to(db: &Db, target: i64) -> Result<(), StoreError> {
    match db {
        Db::Sqlite { .. } => migrate_sqlite(db, target).await.map(drop),
        Db::Postgres(pool) => migrate_postgres(pool, target, &[Expand, Contract]).await.map(drop),
    }
}

const SCHEMA_TABLE: &str =
    "CREATE TABLE IF NOT EXISTS spindle_schema (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)";

/// SQLite: every step, in one transaction.
async fn migrate_sqlite(db: &Db, target: i64) -> Result<usize, StoreError> {
    let mut tx = db.begin().await?;
    tx.execute(SCHEMA_TABLE, vec![]).await?;
    let applied = tx.fetch("SELECT version FROM spindle_schema", vec![], &[Ty::Int]).await?;
    let applied: BTreeSet<i64> =
        applied.iter().map(|row| row.int(0, "spindle_schema.version")).collect::<Result<_, _>>()?;
    let mut ran = 0;
    for (version, _, step) in SQLITE.iter().filter(|(v, _, _)| *v <= target && !applied.contains(v)) {
        let Script(script) = step else {
            return Err(StoreError::Corrupt(format!("SQLite migration {version} is not a script")));
        };
        for statement in statements(script) {
            tx.execute(&statement, vec![]).await?;
        }
        tx.execute(
            "INSERT INTO spindle_schema (version, applied_at) VALUES ($1, $2)",
            vec![Value::from(*version), Value::from(spindle_core::Timestamp::EPOCH.as_micros())],
        )
        .await?;
        ran += 1;
    }
    tx.commit().await?;
    Ok(ran)
}

/// PostgreSQL: each step of `phases` in a short transaction of its own (or online), on
/// one connection that holds the migration lock meanwhile.
async fn migrate_postgres(pool: &sqlx::PgPool, target: i64, phases: &[Phase]) -> Result<usize, StoreError> {
    let mut conn = pool.acquire().await?;
    sqlx::query("SELECT pg_advisory_lock($1)").bind(MIGRATION_LOCK).execute(&mut *conn).await?;
    let ran = run_postgres(&mut conn, target, phases).await;
    let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)").bind(MIGRATION_LOCK).execute(&mut *conn).await;
    if unlocked.is_err() {
        // Never back to the pool holding the lock.
        conn.close_on_drop();
    }
    ran
}

async fn run_postgres(conn: &mut sqlx::PgConnection, target: i64, phases: &[Phase]) -> Result<usize, StoreError> {
    sqlx::raw_sql(SCHEMA_TABLE).execute(&mut *conn).await?;
    let applied: BTreeSet<i64> = sqlx::query_scalar::<_, i64>("SELECT version FROM spindle_schema")
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .collect();
    let record = |version: i64| {
        format!(
            "INSERT INTO spindle_schema (version, applied_at) VALUES ({version}, {}) ON CONFLICT DO NOTHING",
            spindle_core::Timestamp::EPOCH.as_micros()
        )
    };
    let mut ran = 0;
    for (version, phase, step) in POSTGRES.iter().filter(|(v, _, _)| *v <= target && !applied.contains(v)) {
        if !phases.contains(phase) {
            continue;
        }
        match step {
            Script(script) => {
                let mut all = statements(script);
                all.push(record(*version));
                collation::locked(conn, &all).await?;
            }
            CollationTwins => {
                collation::expand(conn).await?;
                collation::locked(conn, &[record(*version)]).await?;
            }
            CollationSwap => {
                collation::swap(conn).await?;
                collation::locked(conn, &[record(*version)]).await?;
            }
        }
        ran += 1;
    }
    Ok(ran)
}

/// The contract steps not yet applied, by version.
pub(super) async fn pending_contract(db: &Db) -> Result<Vec<i64>, StoreError> {
    let list = match db.backend() {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    };
    let applied = db.fetch("SELECT version FROM spindle_schema", vec![], &[Ty::Int]).await?;
    let applied: BTreeSet<i64> =
        applied.iter().map(|row| row.int(0, "spindle_schema.version")).collect::<Result<_, _>>()?;
    Ok(list.iter().filter(|(v, phase, _)| *phase == Contract && !applied.contains(v)).map(|(v, _, _)| *v).collect())
}

/// Splits a script into statements (on `;` at line ends), dropping comments.
fn statements(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    // Inside a dollar-quoted body (`DO $$ … $$`), a `;` at a line's end is the body's.
    let mut quoted = false;
    for line in script.lines() {
        let line = line.split("--").next().unwrap_or("").trim_end();
        if line.trim().is_empty() {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if line.matches("$$").count() % 2 == 1 {
            quoted = !quoted;
        }
        if line.ends_with(';') && !quoted {
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
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::store::test_db::fresh;
    use crate::store::{JobStore, Role, SqlStore, TenantId, TenantStore, token_id};

    #[test]
    fn scripts_split_into_statements() {
        let s = statements("-- c\nCREATE TABLE a (x INTEGER); -- t\nCREATE INDEX i ON a (x)\n  WHERE x > 1;\n");
        assert_eq!(s.len(), 2);
        assert!(s[1].contains("WHERE x > 1;"));
        let body = statements("DO $$ BEGIN\n  PERFORM 1;\n  PERFORM 2;\nEND $$;\nSELECT 3;\n");
        assert_eq!(body.len(), 2, "{body:?}");
        assert!(body[0].contains("PERFORM 2;") && body[0].ends_with("END $$;\n"));
        let (Script(lite), Script(pg)) = (SQLITE[0].2, POSTGRES[0].2) else { panic!("0001 is a script") };
        assert!(statements(lite).len() > 10);
        assert_eq!(statements(lite).len(), statements(pg).len());
    }

    /// What a schema says, in terms both backends share: each table's columns (type
    /// class and nullability), its unique keys (the primary key among them), and its
    /// other indexes (columns and partial predicate).
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Schema {
        columns: BTreeMap<String, BTreeMap<String, (String, bool)>>,
        keys: BTreeSet<(String, String)>,
        indexes: BTreeSet<(String, String, String, String)>,
    }

    fn type_class(ty: &str) -> String {
        let ty = ty.to_ascii_lowercase();
        if ty.contains("int") {
            "integer".into()
        } else if ty.contains("text") || ty.contains("char") {
            "text".into()
        } else if ty.contains("blob") || ty.contains("bytea") {
            "bytes".into()
        } else {
            ty
        }
    }

    /// A partial index's predicate without the notation each backend adds.
    fn predicate(text: &str) -> String {
        let text = text.to_ascii_lowercase().replace("::text", "").replace("= any (array[", "in (").replace("])", ")");
        text.chars().filter(|c| !c.is_whitespace() && *c != '(' && *c != ')').collect()
    }

    /// `(a, b)` in `… ON t (a, b) …` / `… USING btree (a, b) …`.
    fn index_columns(definition: &str) -> String {
        let after_on = definition.split_once(" ON ").map_or(definition, |(_, rest)| rest);
        let open = after_on.find('(').map_or(0, |i| i + 1);
        let close = after_on[open..].find(')').map_or(after_on.len(), |i| open + i);
        // PostgreSQL quotes a column named like a keyword (`"position"`).
        after_on[open..close].split(',').map(|c| c.trim().trim_matches('"')).collect::<Vec<_>>().join(",")
    }

    async fn read_schema(db: &Db) -> Schema {
        let mut schema = Schema::default();
        match db.backend() {
            Backend::Sqlite => {
                let tables = db
                    .fetch(
                        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
                         AND name <> 'spindle_schema'",
                        vec![],
                        &[Ty::Text],
                    )
                    .await
                    .expect("tables");
                for table in tables.iter().map(|r| r.text(0, "test row").expect("a decodable row")) {
                    let info = db
                        .fetch(
                            &format!("SELECT name, type, \"notnull\", pk FROM pragma_table_info('{table}')"),
                            vec![],
                            &[Ty::Text, Ty::Text, Ty::Int, Ty::Int],
                        )
                        .await
                        .expect("columns");
                    let mut pk: Vec<(i64, String)> = Vec::new();
                    let columns = schema.columns.entry(table.clone()).or_default();
                    for r in &info {
                        // A primary key column is never NULL, whatever SQLite's flag says.
                        columns.insert(
                            r.text(0, "test row").expect("a decodable row"),
                            (
                                type_class(&r.text(1, "test row").expect("a decodable row")),
                                r.int(2, "test row").expect("a decodable row") != 0
                                    || r.int(3, "test row").expect("a decodable row") > 0,
                            ),
                        );
                        if r.int(3, "test row").expect("a decodable row") > 0 {
                            pk.push((
                                r.int(3, "test row").expect("a decodable row"),
                                r.text(0, "test row").expect("a decodable row"),
                            ));
                        }
                    }
                    pk.sort();
                    let pk: Vec<String> = pk.into_iter().map(|(_, c)| c).collect();
                    schema.keys.insert((table.clone(), pk.join(",")));
                    let indexes = db
                        .fetch(
                            &format!("SELECT name, \"unique\", partial FROM pragma_index_list('{table}')"),
                            vec![],
                            &[Ty::Text, Ty::Int, Ty::Int],
                        )
                        .await
                        .expect("indexes");
                    for index in &indexes {
                        let name = index.text(0, "test row").expect("a decodable row");
                        let cols = db
                            .fetch(
                                &format!("SELECT name FROM pragma_index_info('{name}') ORDER BY seqno"),
                                vec![],
                                &[Ty::Text],
                            )
                            .await
                            .expect("index columns");
                        let cols: Vec<String> =
                            cols.iter().map(|r| r.text(0, "test row").expect("a decodable row")).collect();
                        let sql = db
                            .fetch(
                                "SELECT sql FROM sqlite_master WHERE name = $1",
                                vec![Value::from(name.as_str())],
                                &[Ty::OptText],
                            )
                            .await
                            .expect("index sql");
                        let sql = sql
                            .first()
                            .and_then(|r| r.opt_text(0, "test row").expect("a decodable row"))
                            .unwrap_or_default();
                        let pred = sql.split_once(" WHERE ").map(|(_, p)| predicate(p)).unwrap_or_default();
                        if index.int(1, "test row").expect("a decodable row") != 0 && pred.is_empty() {
                            schema.keys.insert((table.clone(), cols.join(",")));
                        } else {
                            let kind = if index.int(1, "test row").expect("a decodable row") != 0 {
                                "unique"
                            } else {
                                "index"
                            };
                            schema.indexes.insert((table.clone(), kind.into(), cols.join(","), pred));
                        }
                    }
                }
            }
            Backend::Postgres => {
                let columns = db
                    .fetch(
                        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns \
                         WHERE table_schema = 'public' AND table_name <> 'spindle_schema'",
                        vec![],
                        &[Ty::Text, Ty::Text, Ty::Text, Ty::Text],
                    )
                    .await
                    .expect("columns");
                for r in &columns {
                    let entry = schema.columns.entry(r.text(0, "test row").expect("a decodable row")).or_default();
                    entry.insert(
                        r.text(1, "test row").expect("a decodable row"),
                        (
                            type_class(&r.text(2, "test row").expect("a decodable row")),
                            r.text(3, "test row").expect("a decodable row") == "NO",
                        ),
                    );
                }
                let indexes = db
                    .fetch(
                        "SELECT t.relname, i.indisunique::text, pg_get_indexdef(i.indexrelid), \
                         COALESCE(pg_get_expr(i.indpred, i.indrelid), '') \
                         FROM pg_index i JOIN pg_class t ON t.oid = i.indrelid \
                         JOIN pg_namespace n ON n.oid = t.relnamespace \
                         WHERE n.nspname = 'public' AND t.relname <> 'spindle_schema'",
                        vec![],
                        &[Ty::Text, Ty::Text, Ty::Text, Ty::Text],
                    )
                    .await
                    .expect("indexes");
                for r in &indexes {
                    let (table, unique, cols, pred) = (
                        r.text(0, "test row").expect("a decodable row"),
                        r.text(1, "test row").expect("a decodable row") == "true",
                        index_columns(&r.text(2, "test row").expect("a decodable row")),
                        predicate(&r.text(3, "test row").expect("a decodable row")),
                    );
                    if unique && pred.is_empty() {
                        schema.keys.insert((table, cols));
                    } else {
                        let kind = if unique { "unique" } else { "index" };
                        schema.indexes.insert((table, kind.into(), cols, pred));
                    }
                }
            }
        }
        schema
    }

    /// Where the backends differ on purpose, and why: SQLite numbers jobs and history
    /// through each table's rowid (`INTEGER PRIMARY KEY`), so those tables keep the key
    /// they were created with; PostgreSQL keys jobs by id and history by (job, id)
    /// (migrations 0003 and 0004), which SQLite's history index and its unique job id
    /// mirror.
    const ONLY_SQLITE: &[(&str, &str)] = &[("jobs", "key seq"), ("history", "key id"), ("history", "index job_id,id")];
    const ONLY_POSTGRES: &[(&str, &str)] = &[("history", "key job_id,id")];

    /// Tables of PostgreSQL's door for applications' own transactions (`spindle.submit`,
    /// migration 0019), which an embedded SQLite database has no use for: in the schema
    /// `spindle` since 0020, with a view of each where they were, for older hosts.
    const POSTGRES_ONLY_TABLES: &[&str] = &["sql_submissions", "sql_roles"];

    fn facts(schema: &Schema) -> BTreeSet<(String, String)> {
        let mut facts = BTreeSet::new();
        for (table, columns) in &schema.columns {
            for (column, (ty, not_null)) in columns {
                facts.insert((
                    table.clone(),
                    format!("column {column} {ty}{}", if *not_null { " not null" } else { "" }),
                ));
            }
        }
        for (table, cols) in &schema.keys {
            facts.insert((table.clone(), format!("key {cols}")));
        }
        for (table, kind, cols, pred) in &schema.indexes {
            let pred = if pred.is_empty() { String::new() } else { format!(" where {pred}") };
            facts.insert((table.clone(), format!("{kind} {cols}{pred}")));
        }
        facts
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_and_postgres_migrations_describe_the_same_schema() {
        let (Some(sqlite), Some(postgres)) = (fresh(Backend::Sqlite).await, fresh(Backend::Postgres).await) else {
            return;
        };
        migrate(&sqlite.db).await.expect("migrate SQLite");
        migrate(&postgres.db).await.expect("migrate PostgreSQL");
        let (lite, mut pg) = (facts(&read_schema(&sqlite.db).await), facts(&read_schema(&postgres.db).await));
        pg.retain(|(table, _)| !POSTGRES_ONLY_TABLES.contains(&table.as_str()));
        assert!(lite.len() > 80, "the SQLite schema was read: {lite:?}");
        let only = |a: &BTreeSet<(String, String)>, b: &BTreeSet<(String, String)>| -> BTreeSet<(String, String)> {
            a.difference(b).cloned().collect()
        };
        let expected = |list: &[(&str, &str)]| list.iter().map(|(t, f)| ((*t).to_owned(), (*f).to_owned())).collect();
        assert_eq!(only(&lite, &pg), expected(ONLY_SQLITE), "in SQLite's schema only");
        assert_eq!(only(&pg, &lite), expected(ONLY_POSTGRES), "in PostgreSQL's schema only");
        sqlite.drop().await;
        postgres.drop().await;
    }

    /// Every text column of every table the migrations create compares in byte order
    /// on PostgreSQL, as on SQLite: a later table or column in the database's collation
    /// would compare through the locale again (and two columns of different collations
    /// cannot be compared at all). Rows stored before `0015` read back unchanged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_postgres_text_column_compares_in_byte_order() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        migrate_to(&test.db, 14).await.expect("migrate to 14");
        test.db
            .execute(
                "INSERT INTO tenants (id, name, created_at) VALUES ('t-1', 'Zeta', 0), ('t-2', 'alpha', 0)",
                vec![],
            )
            .await
            .expect("tenants before 0015");
        migrate(&test.db).await.expect("migrate");
        let rows = test
            .db
            .fetch(
                "SELECT table_name || '.' || column_name FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND data_type = 'text' \
                 AND collation_name IS DISTINCT FROM 'C' AND table_name <> 'spindle_schema' ORDER BY 1",
                vec![],
                &[Ty::Text],
            )
            .await
            .expect("read the columns");
        let other: Vec<String> = rows.iter().map(|r| r.text(0, "test row").expect("a decodable row")).collect();
        assert_eq!(other, Vec::<String>::new(), "text columns in another collation");
        let texts = test
            .db
            .fetch("SELECT count(*) FROM information_schema.columns WHERE table_schema = current_schema() AND data_type = 'text'", vec![], &[Ty::Int])
            .await
            .expect("count");
        assert!(texts[0].int(0, "test row").expect("a decodable row") > 60, "the schema was read");
        let names = test
            .db
            .fetch("SELECT name FROM tenants WHERE id IN ('t-1', 't-2') ORDER BY name", vec![], &[Ty::Text])
            .await
            .expect("names");
        let names: Vec<String> = names.iter().map(|r| r.text(0, "test row").expect("a decodable row")).collect();
        assert_eq!(names, ["Zeta", "alpha"], "kept, and listed in byte order");
        test.drop().await;
    }

    /// An embedded host upgraded in place: a migration that fails part-way (here, a table
    /// it creates is already there) leaves the file as it was, every job kept, and the
    /// next start with the obstacle gone applies it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_sqlite_migration_leaves_the_file_as_it_was() {
        let Some(test) = fresh(Backend::Sqlite).await else { return };
        migrate_to(&test.db, 12).await.expect("migrate to 12");
        test.db
            .execute("INSERT INTO tenants (id, name, created_at) VALUES ('t-1', 'acme', 0)", vec![])
            .await
            .expect("a tenant");
        // Migration 13 creates `hosts`, then `storage_gate`: with the second already
        // there, it fails after the first.
        test.db.execute("CREATE TABLE storage_gate (x INTEGER)", vec![]).await.expect("an obstacle");
        let versions = |db: Db| async move {
            db.fetch("SELECT version FROM spindle_schema ORDER BY version", vec![], &[Ty::Int])
                .await
                .expect("versions")
                .iter()
                .map(|r| r.int(0, "test row").expect("a version"))
                .collect::<Vec<i64>>()
        };
        let before = versions(test.db.clone()).await;
        assert!(migrate(&test.db).await.is_err(), "the migration fails");
        assert_eq!(versions(test.db.clone()).await, before, "no step recorded");
        let hosts = test
            .db
            .fetch("SELECT count(*) FROM sqlite_master WHERE name = 'hosts'", vec![], &[Ty::Int])
            .await
            .expect("read");
        assert_eq!(hosts[0].int(0, "test row").expect("count"), 0, "the table made before the failure is gone");
        let tenants = test.db.fetch("SELECT name FROM tenants", vec![], &[Ty::Text]).await.expect("read");
        assert_eq!(tenants.len(), 1, "the rows are kept");
        test.db.execute("DROP TABLE storage_gate", vec![]).await.expect("the obstacle gone");
        migrate(&test.db).await.expect("migrate");
        assert_eq!(versions(test.db.clone()).await.last(), SQLITE.last().map(|(v, _, _)| v));
        test.drop().await;
    }

    /// Rows written before the queue moved into the machine read as they were: the
    /// migration copies the stored queue column into it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_job_row_reads_after_the_queue_moved_into_the_machine() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { return };
            let before = match backend {
                Backend::Sqlite => 2,
                Backend::Postgres => 4,
            };
            migrate_to(&test.db, before).await.expect("migrate to the previous version");
            let (job, _) = spindle_core::Job::submit(
                spindle_core::Submission {
                    id: spindle_core::JobId(uuid::Uuid::from_u128(42)),
                    rules: spindle_core::KindRules {
                        cancellable: true,
                        max_attempts: 3,
                        failure_effect: false,
                        notify_on_success: false,
                        lean: false,
                    },
                    steps: vec![("a".into(), 1)],
                    run_at: spindle_core::Timestamp::from_micros(10),
                },
                spindle_core::Timestamp::from_micros(10),
            );
            let mut old: serde_json::Value = serde_json::to_value(&job).expect("encode");
            if let Some(fields) = old.as_object_mut() {
                fields.remove("queue");
                fields.remove("blocked_on");
            }
            test.db
                .execute(
                    "INSERT INTO jobs (id, tenant_id, kind, kind_version, state, queue, priority, run_at, blocked_on, \
                     last_activity_at, created_at, progress, payload, lease_keys, version, machine) \
                     VALUES ($1, 'acme', 'sync', 1, 'pending', 3, 3, 10, 'acme/account:1', 10, 10, 0, $2, '[]', 1, $3)",
                    vec![Value::from(job.id.to_string()), Value::from(Vec::<u8>::new()), Value::from(old.to_string())],
                )
                .await
                .expect("an old row");
            migrate(&test.db).await.expect("migrate the rest");
            let store = SqlStore::on(test.db.clone());
            let read = store.job(job.id).await.expect("read").expect("the job");
            assert_eq!(read.job.queue, spindle_core::QueueState::Blocked, "{backend:?}");
            assert_eq!(read.job.blocked_on.as_deref(), Some("acme/account:1"), "{backend:?}");
            test.drop().await;
        }
    }

    /// Tokens stored before tokens had ids, expiries and revocations still work after the
    /// migration: each gets the id its hash gives, and the configured operator token (the
    /// only operator token there was, named `operator`) the name rotation retires.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_token_stored_before_ids_authenticates_lists_and_rotates_after() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { return };
            let before = match backend {
                Backend::Sqlite => 3,
                Backend::Postgres => 5,
            };
            migrate_to(&test.db, before).await.expect("migrate to the previous version");
            let (operator, tenant) = (crate::tokens::hash("spt_configured_before"), crate::tokens::hash("spt_acme"));
            test.db
                .execute(
                    "INSERT INTO api_tokens (token_hash, tenant_id, role, name, created_at) \
                     VALUES ($1, NULL, 'operator', 'operator', 7), ($2, 'acme', 'tenant', 'initial', 8)",
                    vec![Value::from(operator.as_str()), Value::from(tenant.as_str())],
                )
                .await
                .expect("old rows");
            migrate(&test.db).await.expect("migrate the rest");
            let store = SqlStore::on(test.db.clone());
            let now = spindle_core::Timestamp::from_micros(100);
            let presented = |hash: String| {
                let store = store.clone();
                async move { store.token(&hash, now).await.expect("read").map(|p| (p.tenant, p.role)) }
            };
            assert_eq!(presented(operator.clone()).await, Some((None, Role::Operator)), "{backend:?}");
            let acme = TenantId("acme".into());
            assert_eq!(presented(tenant.clone()).await, Some((Some(acme.clone()), Role::Tenant)));
            let listed = store.tokens(None).await.expect("list");
            let seen: Vec<(String, String)> = listed.iter().map(|t| (t.id.clone(), t.name.clone())).collect();
            assert_eq!(
                seen,
                vec![
                    (token_id(&operator), crate::engine::CONFIGURED_OPERATOR_TOKEN.to_owned()),
                    (token_id(&tenant), "initial".to_owned())
                ],
                "{backend:?}"
            );
            assert!(listed.iter().all(|t| t.expires_at.is_none() && t.revoked_at.is_none()));
            let retired = store
                .revoke_operator_tokens_named(crate::engine::CONFIGURED_OPERATOR_TOKEN, "another hash", now)
                .await
                .expect("rotate");
            assert_eq!(retired, 1, "{backend:?}: the token configured before the migration is retired by a rotation");
            assert_eq!(store.token(&operator, now).await.expect("read"), None);
            assert!(store.revoke_token(&token_id(&tenant), Some(&acme), now).await.expect("revoke"));
            assert_eq!(store.token(&tenant, now).await.expect("read"), None);
            test.drop().await;
        }
    }
}
