//! A thin, dialect-neutral layer over sqlx's SQLite and PostgreSQL drivers, so the
//! store's logic is written once.
//!
//! SQL is written with PostgreSQL's `$1` placeholders; for SQLite they become `?1`
//! (SQLite's numbered parameters), which keeps reused and out-of-order parameters
//! correct. Values cross as [`Value`]; rows come back decoded by a column [`Ty`] list.
//! sqlx caches each distinct statement per connection, so repeated SQL is prepared once.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteRow, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Postgres, Sqlite, Transaction};

use super::turns::{Turn, WriterTurns};
pub use super::values::{Column, Row, Ty, Value, unnest, unnest_from, values_list};

/// Which database a store runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// An embedded SQLite file (the default: one host).
    Sqlite,
    /// A PostgreSQL server (many hosts share it).
    Postgres,
}

impl Backend {
    /// The clause that locks the rows a `SELECT` reads until the transaction ends:
    /// PostgreSQL's `FOR UPDATE`; nothing on SQLite, whose one writer holds the whole
    /// database for the transaction.
    pub fn for_update(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE",
        }
    }

    /// [`for_update`](Self::for_update), passing over rows another transaction holds
    /// (PostgreSQL's `SKIP LOCKED`): for work discovery, where any free row will do.
    pub fn skip_locked(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }
}

/// A connection pool on either backend.
#[derive(Clone, Debug)]
pub enum Db {
    /// SQLite: one writer connection (SQLite has one writer at a time; a single
    /// connection avoids lock contention) and a pool of readers (WAL lets them run
    /// beside the writer).
    Sqlite {
        /// The writer.
        write: sqlx::SqlitePool,
        /// The readers.
        read: sqlx::SqlitePool,
        /// The background checkpoint, stopped when the last handle goes.
        checkpointer: Arc<Checkpointer>,
        /// Turns at the writer: submissions before queued group commits.
        turns: Arc<WriterTurns>,
    },
    /// PostgreSQL.
    Postgres(sqlx::PgPool),
}

/// Pages of write-ahead log after which the SQLite writer checkpoints by itself (64 MiB
/// at 4 KiB pages), only reached when the background checkpoint falls behind.
const WRITER_AUTOCHECKPOINT_PAGES: u32 = 16_384;

/// How often the background checkpoint copies committed pages back into the database.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Copies the write-ahead log back into the SQLite database every [`CHECKPOINT_EVERY`]
/// (a passive checkpoint: it waits for no one and no one waits for it), until the pool
/// closes. Left to the writer, every thousandth page would make one commit wait for the
/// copy and its fsync (about an eighth of the writer's time under load).
async fn checkpoint_in_background(pool: sqlx::SqlitePool) {
    let mut tick = tokio::time::interval(CHECKPOINT_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        if let Err(e) = passive_checkpoint(&pool).await {
            if pool.is_closed() {
                return;
            }
            tracing::debug!(error = %e, "background checkpoint");
        }
    }
}

/// The task running `checkpoint_in_background`. It holds a handle to the readers'
/// pool, so it would keep the database open and ticking after the last [`Db`] went
/// without [`Db::close`]; dropping this stops it.
#[derive(Debug)]
pub struct Checkpointer(tokio::task::JoinHandle<()>);

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What one passive checkpoint did (SQLite's `PRAGMA wal_checkpoint` answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Whether a writer or reader kept it from finishing.
    pub busy: bool,
    /// Frames in the write-ahead log.
    pub log_frames: i64,
    /// Frames of the log now copied into the database.
    pub checkpointed_frames: i64,
}

async fn passive_checkpoint(pool: &sqlx::SqlitePool) -> Result<Checkpoint, sqlx::Error> {
    use sqlx::Row as _;
    let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(pool).await?;
    Ok(Checkpoint {
        busy: row.try_get::<i64, _>(0)? != 0,
        log_frames: row.try_get(1)?,
        checkpointed_frames: row.try_get(2)?,
    })
}

/// Connection settings.
#[derive(Clone, Debug)]
pub struct ConnectOptions {
    /// `sqlite://path` (or a plain file path) or `postgres://…`.
    pub url: String,
    /// Most connections to PostgreSQL (default 16).
    pub max_connections: u32,
    /// SQLite: when a commit reaches the disk.
    pub sqlite_sync: SqliteSync,
}

impl ConnectOptions {
    /// `url` with `max_connections` and SQLite's default durability.
    pub fn new(url: impl Into<String>, max_connections: u32) -> Self {
        Self { url: url.into(), max_connections, sqlite_sync: SqliteSync::default() }
    }
}

/// SQLite's `synchronous` setting, in WAL mode: what a commit survives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SqliteSync {
    /// The log is synced at checkpoints only: a commit survives a process crash; an OS
    /// crash or power loss can lose the last commits (never the database's integrity).
    #[default]
    Normal,
    /// The log is synced at every commit: a commit also survives an OS crash or power
    /// loss, for one `fsync` per transaction.
    Full,
}

impl SqliteSync {
    /// Its name in configuration: `normal` or `full`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Full => "full",
        }
    }
}

impl FromStr for SqliteSync {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "normal" => Ok(Self::Normal),
            "full" => Ok(Self::Full),
            other => Err(format!("invalid SQLite synchronous setting {other:?} (use normal or full)")),
        }
    }
}

/// How long a PostgreSQL session may sit inside a transaction waiting for its host
/// before the server ends it. Spindle's transactions take milliseconds.
const IDLE_IN_TRANSACTION: &str = "10s";

impl Db {
    /// Opens a pool for `options.url`.
    pub async fn connect(options: &ConnectOptions) -> Result<Self, sqlx::Error> {
        let url = options.url.as_str();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            // A host paused mid-transaction (SIGSTOP, a long GC-like stall, a frozen VM)
            // would hold its row locks for as long as it stays paused, and every other
            // host's next write that needs those rows would wait behind it: the server ends
            // such a session instead, and the paused host's transaction is retried (or its
            // claims rescued) when it wakes.
            let connect = PgConnectOptions::from_str(url)?
                .options([("idle_in_transaction_session_timeout", IDLE_IN_TRANSACTION)]);
            // A connection is not pinged as it is handed out (sqlx's default, one round
            // trip for every read and transaction): one the server ended while pooled (a
            // restart, an administrator's `pg_terminate_backend`) is found out by the
            // first statement sent on it instead, and a read or a `BEGIN` that meets a
            // lost connection goes out again on another (`on_live_connection`).
            // A connection made before a migration changed the columns its cached
            // statements answer with is retired as it is handed out (`stale_statements`).
            let pool = PgPoolOptions::new()
                .max_connections(options.max_connections.max(2))
                .acquire_timeout(Duration::from_secs(30))
                .test_before_acquire(false)
                .before_acquire(|_, meta| Box::pin(async move { Ok(!made_before_statements_went_stale(meta.age)) }))
                .connect_with(connect)
                .await?;
            return Ok(Self::Postgres(pool));
        }
        let path = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")).unwrap_or(url);
        // WAL with synchronous=NORMAL by default: a commit survives a process crash; an OS
        // crash or power loss can lose the last commits (docs/configuration.md). FULL
        // syncs the log at every commit.
        let synchronous = match options.sqlite_sync {
            SqliteSync::Normal => SqliteSynchronous::Normal,
            SqliteSync::Full => SqliteSynchronous::Full,
        };
        let connect = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(synchronous)
            .busy_timeout(Duration::from_secs(30))
            .foreign_keys(false)
            .pragma("temp_store", "memory")
            .pragma("cache_size", "-8192");
        // The writer leaves checkpoints to a reader connection in the background (below),
        // so copying the log back into the database never holds up a commit; its own
        // automatic checkpoint stays as a backstop should the background one fall behind.
        let writer = connect.clone().pragma("wal_autocheckpoint", WRITER_AUTOCHECKPOINT_PAGES.to_string());
        // A SQLite connection is a file this process holds open: it cannot have been lost
        // while idle, so the pool does not ping it before every use (a hand-off to its
        // worker thread: a single read took ~32 µs instead of ~50 here).
        let write = SqlitePoolOptions::new().max_connections(1).test_before_acquire(false).connect_with(writer).await?;
        let read = SqlitePoolOptions::new().max_connections(4).test_before_acquire(false).connect_with(connect).await?;
        let checkpointer = Arc::new(Checkpointer(tokio::spawn(checkpoint_in_background(read.clone()))));
        Ok(Self::Sqlite { write, read, checkpointer, turns: Arc::default() })
    }

    /// Runs the passive checkpoint the background task runs, now (SQLite; `None` on
    /// PostgreSQL, which checkpoints by itself).
    pub async fn checkpoint(&self) -> Result<Option<Checkpoint>, sqlx::Error> {
        match self {
            Self::Sqlite { read, .. } => passive_checkpoint(read).await.map(Some),
            Self::Postgres(_) => Ok(None),
        }
    }

    /// Makes the space of deleted rows in `tables` reusable now: PostgreSQL's `VACUUM
    /// (ANALYZE)`, outside any transaction; SQLite reuses freed pages by itself.
    pub async fn vacuum(&self, tables: &[&str]) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite { .. } => Ok(()),
            Self::Postgres(pool) => sqlx::raw_sql(AssertSqlSafe(format!("VACUUM (ANALYZE) {}", tables.join(", "))))
                .execute(pool)
                .await
                .map(|_| ()),
        }
    }

    /// Which backend this is.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Sqlite { .. } => Backend::Sqlite,
            Self::Postgres(_) => Backend::Postgres,
        }
    }

    /// Begins a write transaction. On SQLite it takes the write lock at once
    /// (`BEGIN IMMEDIATE`), so a read-then-write transaction cannot fail to upgrade.
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        self.begin_turn(false).await
    }

    /// Begins a short write transaction that goes before the ordinary ones waiting for
    /// SQLite's writer (a submission: see `WriterTurns`); as [`begin`](Self::begin)
    /// on PostgreSQL.
    pub async fn begin_urgent(&self) -> Result<Tx, sqlx::Error> {
        self.begin_turn(true).await
    }

    /// PostgreSQL: statements that each commit as they end, on one connection, with no
    /// `BEGIN` or `COMMIT` around them (two round trips fewer); `None` on SQLite, whose
    /// writer needs its transaction. For work whose writes are a single statement, and
    /// whose first statement is a read (see [`Autocommit`]).
    pub fn autocommit(&self) -> Option<Tx> {
        match self {
            Self::Sqlite { .. } => None,
            Self::Postgres(pool) => Some(Tx::Autocommit(Autocommit { pool: pool.clone(), conn: None })),
        }
    }

    async fn begin_turn(&self, urgent: bool) -> Result<Tx, sqlx::Error> {
        Ok(match self {
            Self::Sqlite { write, turns, .. } => {
                let turn = turns.take(urgent).await;
                Tx::Sqlite(write.begin_with("BEGIN IMMEDIATE").await?, turn)
            }
            Self::Postgres(pool) => Tx::Postgres(on_live_connection(pool, "BEGIN", || pool.begin()).await?),
        })
    }

    /// Runs a read-only query outside any transaction.
    pub async fn fetch(&self, sql: &str, args: Vec<Value>, tys: &[Ty]) -> Result<Vec<Row>, sqlx::Error> {
        match self {
            Self::Sqlite { read, .. } => {
                let rows = bind_sqlite(&sqlite_sql(sql), args).fetch_all(read).await?;
                rows.iter().map(|r| decode_sqlite(r, tys)).collect()
            }
            Self::Postgres(pool) => {
                let (_, rows) = read_on_live_connection(pool, "a read", sql, &args).await?;
                rows.iter().map(|r| decode_pg(r, tys)).collect()
            }
        }
    }

    /// Runs one statement in a transaction of its own.
    pub async fn execute(&self, sql: &str, args: Vec<Value>) -> Result<u64, sqlx::Error> {
        let mut tx = self.begin().await?;
        let n = tx.execute(sql, args).await?;
        tx.commit().await?;
        Ok(n)
    }

    /// Closes the pools.
    pub async fn close(&self) {
        match self {
            Self::Sqlite { write, read, .. } => {
                write.close().await;
                read.close().await;
            }
            Self::Postgres(pool) => pool.close().await,
        }
    }
}

/// Runs `attempt` (a read, a `BEGIN`, a `LISTEN`, each on a connection from `pool`)
/// again while it meets lost connections: once for every connection the pool may hold,
/// all of which a restarted server left dead, and once more on a new one. Pooled
/// connections are not pinged before use, so this is where a dead one is passed over.
pub(crate) async fn on_live_connection<T, F, Fut>(
    pool: &sqlx::PgPool,
    what: &str,
    mut attempt: F,
) -> Result<T, sqlx::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, sqlx::Error>>,
{
    let attempts = pool.options().get_max_connections() + 1;
    let mut n = 1;
    loop {
        match attempt().await {
            Err(e) if connection_lost(&e) && n < attempts => {
                tracing::debug!(error = %e, "{what} met a lost connection; sent again on another");
                n += 1;
            }
            done => return done,
        }
    }
}

/// Runs the read `sql` on a connection from `pool` ([`on_live_connection`]: a lost one
/// is closed and passed over); answers the connection it ran on, with the rows.
async fn read_on_live_connection(
    pool: &sqlx::PgPool,
    what: &str,
    sql: &str,
    args: &[Value],
) -> Result<(sqlx::pool::PoolConnection<Postgres>, Vec<PgRow>), sqlx::Error> {
    on_live_connection(pool, what, || async {
        let mut conn = pool.acquire().await?;
        match bind_pg(sql, args).fetch_all(&mut *conn).await {
            Ok(rows) => Ok((conn, rows)),
            Err(e) => {
                if connection_lost(&e) {
                    conn.close_on_drop();
                }
                Err(e)
            }
        }
    })
    .await
}

/// Whether `e` says the connection a statement went out on is gone (the server ended
/// its session: an administrator's `pg_terminate_backend`, a shutdown or a restart; or
/// the socket broke), so that nothing a read or a `BEGIN` asked for happened and it may
/// go out again on another connection.
///
/// A connection whose cached statements no longer match the schema counts as lost too:
/// a migration changed the columns a prepared statement answers with (0015's swap
/// changes text columns' collation under running hosts), and PostgreSQL refuses to run
/// it again (`cached plan must not change result type`). Every connection made before
/// is retired as it is next handed out, and the statement goes out again on a new one.
pub(crate) fn connection_lost(e: &sqlx::Error) -> bool {
    if retire_if_stale(e) {
        return true;
    }
    match e {
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // 57P01 terminated by an administrator, 57P02/57P03 crash or start-up,
            // 08xxx connection exceptions.
            matches!(code.as_ref(), "57P01" | "57P02" | "57P03") || code.starts_with("08")
        }
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) => true,
        _ => false,
    }
}

/// Whether `e` is PostgreSQL refusing a prepared statement whose result columns changed
/// (nothing the statement's transaction wrote committed); if so, every connection made
/// until now is retired as it is next handed out.
pub(crate) fn retire_if_stale(e: &sqlx::Error) -> bool {
    let stale = e.as_database_error().is_some_and(|db| {
        db.code().as_deref() == Some("0A000") && db.message().contains("cached plan must not change result type")
    });
    if stale {
        STATEMENTS_STALE_SINCE
            .store(micros_since_origin(std::time::Instant::now()), std::sync::atomic::Ordering::Release);
    }
    stale
}

/// When a connection last met stale statements, in microseconds after [`ORIGIN`] (0:
/// never): connections made before then are retired.
static STATEMENTS_STALE_SINCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// This process's reference instant for [`STATEMENTS_STALE_SINCE`].
static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

fn micros_since_origin(at: std::time::Instant) -> u64 {
    let origin = *ORIGIN.get_or_init(std::time::Instant::now);
    u64::try_from(at.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX).max(1)
}

/// Whether a connection `age` old was made before its statements went stale.
fn made_before_statements_went_stale(age: Duration) -> bool {
    let stale = STATEMENTS_STALE_SINCE.load(std::sync::atomic::Ordering::Acquire);
    if stale == 0 {
        return false;
    }
    let made = std::time::Instant::now().checked_sub(age).map_or(0, micros_since_origin);
    made < stale
}

/// A transaction on either backend, or PostgreSQL statements outside one.
#[derive(Debug)]
pub enum Tx {
    /// SQLite, with the writer's turn it holds until it ends.
    Sqlite(Transaction<'static, Sqlite>, Turn),
    /// PostgreSQL.
    Postgres(Transaction<'static, Postgres>),
    /// PostgreSQL with no transaction: each statement commits as it ends
    /// ([`Db::autocommit`]).
    Autocommit(Autocommit),
}

/// PostgreSQL statements on one connection outside any transaction, each committing as it
/// ends. The connection is taken by the first statement, which must be a read: like
/// [`Db::fetch`], it goes out again on another connection when it meets a lost one
/// (pooled connections are not pinged). Later statements are never sent twice.
#[derive(Debug)]
pub struct Autocommit {
    pool: sqlx::PgPool,
    conn: Option<sqlx::pool::PoolConnection<Postgres>>,
}

impl Autocommit {
    /// The connection, for a statement that is not this one's first read.
    async fn conn(&mut self) -> Result<&mut sqlx::PgConnection, sqlx::Error> {
        let conn = match self.conn.take() {
            Some(conn) => conn,
            None => self.pool.acquire().await?,
        };
        Ok(self.conn.insert(conn))
    }

    /// Runs the read `sql`: the first one takes the connection, passing over lost ones.
    async fn fetch(&mut self, sql: &str, args: &[Value]) -> Result<Vec<PgRow>, sqlx::Error> {
        if let Some(conn) = self.conn.as_deref_mut() {
            return bind_pg(sql, args).fetch_all(conn).await;
        }
        debug_assert!(sql.trim_start().starts_with("SELECT"), "a first statement sent again must be a read: {sql}");
        let (conn, rows) = read_on_live_connection(&self.pool, "a first read", sql, args).await?;
        self.conn = Some(conn);
        Ok(rows)
    }
}

impl Tx {
    /// Tells this host's dispatcher that the transaction woke jobs (SQLite: through the
    /// writer's turns; PostgreSQL's `NOTIFY` reaches this host's own `LISTEN` already).
    pub fn wake_this_host(&self) {
        if let Self::Sqlite(_, turn) = self {
            turn.signal_ready();
        }
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        match self {
            Self::Sqlite(..) => Backend::Sqlite,
            Self::Postgres(_) | Self::Autocommit(_) => Backend::Postgres,
        }
    }

    /// Whether the statements run inside one transaction (all but [`Tx::Autocommit`]).
    pub fn in_transaction(&self) -> bool {
        !matches!(self, Self::Autocommit(_))
    }

    /// Runs a statement whose parameters are whole [`Column`]s (PostgreSQL only: SQLite
    /// has no arrays, and answers an error).
    pub async fn fetch_columns(
        &mut self,
        sql: &str,
        columns: Vec<Column>,
        tys: &[Ty],
    ) -> Result<Vec<Row>, sqlx::Error> {
        let mut q = sqlx::query(AssertSqlSafe(sql.to_owned()));
        for column in columns {
            q = match column {
                Column::Int(v) => q.bind(v),
                Column::Text(v) => q.bind(v),
                Column::Blob(v) => q.bind(v),
            };
        }
        let rows = match self {
            Self::Sqlite(..) => return Err(sqlx::Error::Configuration("array parameters are PostgreSQL's".into())),
            Self::Postgres(tx) => q.fetch_all(&mut **tx).await?,
            Self::Autocommit(each) => q.fetch_all(each.conn().await?).await?,
        };
        rows.iter().map(|r| decode_pg(r, tys)).collect()
    }

    /// Executes a statement; answers the rows affected.
    pub async fn execute(&mut self, sql: &str, args: Vec<Value>) -> Result<u64, sqlx::Error> {
        Ok(match self {
            Self::Sqlite(tx, _) => bind_sqlite(&sqlite_sql(sql), args).execute(&mut **tx).await?.rows_affected(),
            Self::Postgres(tx) => bind_pg(sql, &args).execute(&mut **tx).await?.rows_affected(),
            Self::Autocommit(each) => bind_pg(sql, &args).execute(each.conn().await?).await?.rows_affected(),
        })
    }

    /// Runs a query; answers its rows decoded as `tys`.
    pub async fn fetch(&mut self, sql: &str, args: Vec<Value>, tys: &[Ty]) -> Result<Vec<Row>, sqlx::Error> {
        match self {
            Self::Sqlite(tx, _) => {
                let rows = bind_sqlite(&sqlite_sql(sql), args).fetch_all(&mut **tx).await?;
                rows.iter().map(|r| decode_sqlite(r, tys)).collect()
            }
            Self::Postgres(tx) => {
                let rows = bind_pg(sql, &args).fetch_all(&mut **tx).await?;
                rows.iter().map(|r| decode_pg(r, tys)).collect()
            }
            Self::Autocommit(each) => each.fetch(sql, &args).await?.iter().map(|r| decode_pg(r, tys)).collect(),
        }
    }

    /// Commits (statements outside a transaction have each committed already).
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Sqlite(tx, _turn) => tx.commit().await,
            Self::Postgres(tx) => tx.commit().await,
            Self::Autocommit(_) => Ok(()),
        }
    }
}

/// `$n` → SQLite parameters. When the parameters appear exactly as `$1, $2, … $N` in
/// order (every multi-row statement), they become anonymous `?`s: sqlx maps numbered
/// parameters by name, which SQLite answers by scanning the statement's parameter list,
/// so binding `?NNN`s is quadratic in their number. Otherwise (a parameter used twice,
/// or out of order) they become numbered `?n`s.
fn sqlite_sql(sql: &str) -> String {
    let mut anonymous = String::with_capacity(sql.len());
    let mut numbered = String::with_capacity(sql.len() + 8);
    let mut expected = 1u64;
    let mut in_order = true;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            let mut digits = String::new();
            while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                digits.push(d);
                chars.next();
            }
            in_order &= digits.parse::<u64>().ok() == Some(expected);
            expected += 1;
            anonymous.push('?');
            numbered.push('?');
            numbered.push_str(&digits);
        } else {
            anonymous.push(c);
            numbered.push(c);
        }
    }
    if in_order { anonymous } else { numbered }
}

type SqliteQuery<'q> = sqlx::query::Query<'q, Sqlite, sqlx::sqlite::SqliteArguments>;
type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

fn bind_sqlite<'q>(sql: &str, args: Vec<Value>) -> SqliteQuery<'q> {
    let mut q = sqlx::query(AssertSqlSafe(sql.to_owned()));
    for arg in args {
        q = match arg {
            Value::Int(v) => q.bind(v),
            Value::Text(v) => q.bind(v),
            Value::Blob(v) => q.bind(v),
        };
    }
    q
}

/// `sql` with `args` bound; the values are encoded as they are bound, so a statement
/// sent again (see [`on_live_connection`]) binds the same arguments without copying them.
fn bind_pg<'q>(sql: &str, args: &'q [Value]) -> PgQuery<'q> {
    let mut q = sqlx::query(AssertSqlSafe(sql.to_owned()));
    for arg in args {
        q = match arg {
            Value::Int(v) => q.bind(*v),
            Value::Text(v) => q.bind(v.as_deref()),
            Value::Blob(v) => q.bind(v.as_deref()),
        };
    }
    q
}

/// Decodes `row` by the column types `tys`, on either backend.
fn decode<'r, R>(row: &'r R, tys: &[Ty]) -> Result<Row, sqlx::Error>
where
    R: sqlx::Row,
    usize: sqlx::ColumnIndex<R>,
    Option<i64>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<String>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    Option<Vec<u8>>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    let mut out = Vec::with_capacity(tys.len());
    // A value that does not decode is named by its column, for the corrupt error.
    let named = |i: usize, e: sqlx::Error| match e {
        sqlx::Error::ColumnDecode { source, .. } => {
            let name = row.columns().get(i).map_or_else(|| i.to_string(), |c| sqlx::Column::name(c).to_owned());
            sqlx::Error::ColumnDecode { index: name, source }
        }
        other => other,
    };
    for (i, ty) in tys.iter().enumerate() {
        let value = match ty {
            Ty::Int | Ty::OptInt => Value::Int(row.try_get::<Option<i64>, _>(i).map_err(|e| named(i, e))?),
            Ty::Text | Ty::OptText => Value::Text(row.try_get::<Option<String>, _>(i).map_err(|e| named(i, e))?),
            Ty::Blob | Ty::OptBlob => Value::Blob(row.try_get::<Option<Vec<u8>>, _>(i).map_err(|e| named(i, e))?),
        };
        let null = matches!(value, Value::Int(None) | Value::Text(None) | Value::Blob(None));
        if null && matches!(ty, Ty::Int | Ty::Text | Ty::Blob) {
            let source = format!("NULL where a {ty:?} value must be").into();
            return Err(named(i, sqlx::Error::ColumnDecode { index: i.to_string(), source }));
        }
        out.push(value);
    }
    Ok(Row(out))
}

fn decode_sqlite(row: &SqliteRow, tys: &[Ty]) -> Result<Row, sqlx::Error> {
    decode(row, tys)
}

fn decode_pg(row: &PgRow, tys: &[Ty]) -> Result<Row, sqlx::Error> {
    decode(row, tys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreError;
    use crate::store::test_db::fresh;

    /// A NULL or a value of another type where a column must hold a value is corrupt
    /// data, never a 0 or an empty string.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_null_or_mistyped_column_is_corrupt_not_a_default() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            let Some(test) = fresh(backend).await else { return };
            let corrupt = |result: Result<Vec<Row>, sqlx::Error>| {
                assert!(
                    matches!(result.map_err(StoreError::from), Err(StoreError::Corrupt(_))),
                    "{backend:?}: expected corrupt data"
                )
            };
            corrupt(test.db.fetch("SELECT CAST(NULL AS BIGINT)", vec![], &[Ty::Int]).await);
            corrupt(test.db.fetch("SELECT CAST(NULL AS TEXT)", vec![], &[Ty::Text]).await);
            corrupt(test.db.fetch("SELECT 'forty-two'", vec![], &[Ty::Int]).await);
            let rows = test.db.fetch("SELECT CAST(NULL AS BIGINT)", vec![], &[Ty::OptInt]).await.expect("a NULL");
            assert_eq!(
                rows[0].opt_int(0, "test row").expect("a decodable row"),
                None,
                "a column that may be NULL reads as None"
            );
            test.drop().await;
        }
    }

    /// The durability asked for is what both of SQLite's pools run with.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite_commits_sync_as_configured() {
        let dir = std::env::temp_dir().join(format!("spindle-sync-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        for (sync, pragma) in [(SqliteSync::Normal, 1), (SqliteSync::Full, 2)] {
            let url = format!("sqlite://{}", dir.join(format!("{}.db", sync.as_str())).display());
            let db =
                Db::connect(&ConnectOptions { sqlite_sync: sync, ..ConnectOptions::new(url, 2) }).await.expect("opens");
            let read = db.fetch("PRAGMA synchronous", vec![], &[Ty::Int]).await.expect("reads");
            assert_eq!(read[0].int(0, "test row").expect("a decodable row"), pragma, "{sync:?}: the readers");
            let mut tx = db.begin().await.expect("a write transaction");
            let written = tx.fetch("PRAGMA synchronous", vec![], &[Ty::Int]).await.expect("reads");
            assert_eq!(written[0].int(0, "test row").expect("a decodable row"), pragma, "{sync:?}: the writer");
            tx.commit().await.expect("commits");
            db.close().await;
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn placeholders_become_numbered_sqlite_parameters() {
        assert_eq!(sqlite_sql("SELECT $2, $1, $10 WHERE a = '$x'"), "SELECT ?2, ?1, ?10 WHERE a = '$x'");
        assert_eq!(sqlite_sql("INSERT INTO t VALUES ($1, $2), ($3, $4)"), "INSERT INTO t VALUES (?, ?), (?, ?)");
        assert_eq!(sqlite_sql("VALUES ($1, $1, $2)"), "VALUES (?1, ?1, ?2)", "a reused parameter stays numbered");
        assert_eq!(values_list(2, 3, 4), "($4,$5,$6),($7,$8,$9)");
    }

    #[test]
    fn rows_become_typed_columns_for_unnest() {
        let rows = vec![
            vec![Value::from("a"), Value::from(1i64), Value::from(None::<Vec<u8>>)],
            vec![Value::from(None::<String>), Value::from(None::<i64>), Value::from(vec![7u8])],
        ];
        let columns = Column::transpose(rows);
        assert_eq!(
            columns,
            vec![
                Column::Text(vec![Some("a".into()), None]),
                Column::Int(vec![Some(1), None]),
                Column::Blob(vec![None, Some(vec![7])]),
            ],
            "typed by the first row, NULLs kept in place"
        );
        assert_eq!(
            unnest(&columns, "v"),
            "UNNEST($1::text[], $2::bigint[], $3::bytea[]) AS v(column1, column2, column3)",
            "the column names a VALUES list has"
        );
        assert!(Column::transpose(Vec::new()).is_empty());
    }

    /// Connections the server ended while they sat in the pool (a restart, an
    /// administrator's `pg_terminate_backend`) cost a read, a transaction or the ready
    /// signals' `LISTEN`, or the first read outside a transaction, nothing: each goes out
    /// again on another connection, however many of the pooled ones are dead.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres_reads_and_transactions_outlive_pooled_connections_the_server_ended() {
        let Some(test) = fresh(Backend::Postgres).await else { return };
        let admin_url = std::env::var("SPINDLE_TEST_DATABASE_URL").expect("a PostgreSQL server");
        let admin = Db::connect(&ConnectOptions::new(admin_url, 2)).await.expect("connect");

        let ended = end_pooled_sessions(&test.db, &admin).await;
        let mut tx = test.db.begin().await.expect("a BEGIN on a dead connection goes out again");
        let pid = tx.fetch(PID, vec![], &[Ty::Int]).await.expect("read in the transaction")[0]
            .int(0, "test row")
            .expect("a decodable row");
        assert!(!ended.contains(&pid), "a new session");
        tx.commit().await.expect("commit");

        let ended = end_pooled_sessions(&test.db, &admin).await;
        let read = test.db.fetch(PID, vec![], &[Ty::Int]).await.expect("a read on a dead connection goes out again");
        assert!(!ended.contains(&read[0].int(0, "test row").expect("a decodable row")), "a new session");

        // As is the first read of statements outside a transaction; the rest go out on
        // the connection it found.
        let ended = end_pooled_sessions(&test.db, &admin).await;
        let Some(mut each) = test.db.autocommit() else { unreachable!("PostgreSQL has statements outside one") };
        assert!(!each.in_transaction());
        let first =
            each.fetch(PID, vec![], &[Ty::Int]).await.expect("a first read on a dead connection goes out again");
        assert!(!ended.contains(&first[0].int(0, "test row").expect("a decodable row")), "a new session");
        let later = each.fetch(PID, vec![], &[Ty::Int]).await.expect("a later read");
        assert_eq!(
            later[0].int(0, "test row").expect("a decodable row"),
            first[0].int(0, "test row").expect("a decodable row"),
            "one connection"
        );
        each.commit().await.expect("nothing to commit");

        // As is the `LISTEN` that carries other hosts' ready signals.
        end_pooled_sessions(&test.db, &admin).await;
        let Db::Postgres(pool) = &test.db else { unreachable!("a PostgreSQL database") };
        let mut listener = crate::store::queue::listen(pool, "spindle_ready")
            .await
            .expect("LISTEN on a dead connection goes out again");
        test.db.fetch("SELECT pg_notify('spindle_ready', '')::text", vec![], &[Ty::Text]).await.expect("notify");
        assert_eq!(listener.recv().await.expect("a signal").channel(), "spindle_ready");
        drop(listener);

        // An error that is the statement's own is answered at once, not sent again.
        let wrong = test.db.fetch("SELECT no_such_column", vec![], &[]).await.expect_err("no such column");
        assert!(!connection_lost(&wrong), "{wrong}");
        admin.close().await;
        test.drop().await;
    }

    const PID: &str = "SELECT pg_backend_pid()::bigint";

    /// Fills `db`'s pool of two with idle connections, then ends their sessions from
    /// `admin` and waits until the server has let them go: the next statement sent on
    /// either meets a lost connection. Answers their process ids.
    async fn end_pooled_sessions(db: &Db, admin: &Db) -> Vec<i64> {
        let Db::Postgres(pool) = db else { unreachable!("a PostgreSQL database") };
        let (mut a, mut b) = (db.begin().await.expect("begin"), db.begin().await.expect("begin"));
        let mut pids = Vec::new();
        for tx in [&mut a, &mut b] {
            pids.push(
                tx.fetch(PID, vec![], &[Ty::Int]).await.expect("pid")[0].int(0, "test row").expect("a decodable row"),
            );
        }
        a.commit().await.expect("commit");
        b.commit().await.expect("commit");
        while pool.num_idle() < 2 {
            tokio::task::yield_now().await;
        }
        let ended: Vec<Value> = pids.iter().map(|p| Value::from(*p)).collect();
        let terminate = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN ($1, $2)";
        admin.fetch(terminate, ended.clone(), &[]).await.expect("terminate");
        let alive = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid IN ($1, $2)";
        while admin.fetch(alive, ended.clone(), &[Ty::Int]).await.expect("activity")[0]
            .int(0, "test row")
            .expect("a decodable row")
            > 0
        {
            tokio::task::yield_now().await;
        }
        assert_eq!(pool.num_idle(), 2, "both dead connections still pooled");
        pids
    }
}
