//! A fresh database for every scenario: a new SQLite file in a directory of its own, or
//! a new PostgreSQL database (`CREATE DATABASE bench_<pid>_<n>` through the admin URL)
//! on the server the caller names. Dropped afterwards, and on the way out of an error.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context as _, bail};
use sqlx::{AssertSqlSafe, Connection as _};

use spindle::store::Backend;
use spindle::store::sql::{Db, Ty};

/// Makes and drops the benchmark's databases.
#[derive(Debug)]
pub struct Databases {
    backend: Backend,
    /// PostgreSQL: the URL of a database to connect to for `CREATE DATABASE`.
    admin_url: Option<String>,
    /// Where scenario directories (SQLite files, compiled-component caches) go.
    work_dir: PathBuf,
    /// Made and not yet dropped: PostgreSQL database names, scenario directories.
    live: Mutex<(Vec<String>, Vec<PathBuf>)>,
    next: Mutex<u32>,
}

/// One scenario's database.
#[derive(Debug)]
pub struct Fresh {
    /// `sqlite://…` or `postgres://…`.
    pub url: String,
    /// The scenario's own directory (the SQLite file, the host's data directory).
    pub dir: PathBuf,
    /// The PostgreSQL database's name.
    pg_name: Option<String>,
}

impl Databases {
    /// Databases on `backend`; PostgreSQL needs `admin_url`.
    pub fn new(backend: Backend, admin_url: Option<String>, work_dir: &Path) -> anyhow::Result<Self> {
        if backend == Backend::Postgres && admin_url.is_none() {
            bail!("--backend postgres needs --database-url (or SPINDLE_BENCH_DATABASE_URL)");
        }
        std::fs::create_dir_all(work_dir).with_context(|| format!("creating {}", work_dir.display()))?;
        Ok(Self {
            backend,
            admin_url,
            work_dir: work_dir.to_owned(),
            live: Mutex::new((Vec::new(), Vec::new())),
            next: Mutex::new(0),
        })
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// A new, empty database for the scenario `label`.
    pub async fn fresh(&self, label: &str) -> anyhow::Result<Fresh> {
        let n = {
            let mut next = self.next.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *next += 1;
            *next
        };
        let slug: String = label.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        let dir = self.work_dir.join(format!("{n:02}-{slug}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).with_context(|| format!("emptying {}", dir.display()))?;
        }
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        self.track(|live| live.1.push(dir.clone()));
        match (self.backend, &self.admin_url) {
            (Backend::Postgres, Some(admin)) => {
                let name = format!("bench_{}_{n}", std::process::id());
                let mut conn = sqlx::PgConnection::connect(admin).await.context("connecting to the admin URL")?;
                sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {name}")))
                    .execute(&mut conn)
                    .await
                    .with_context(|| format!("CREATE DATABASE {name}"))?;
                conn.close().await.ok();
                self.track(|live| live.0.push(name.clone()));
                Ok(Fresh { url: with_database(admin, &name)?, dir, pg_name: Some(name) })
            }
            _ => Ok(Fresh { url: format!("sqlite://{}", dir.join("spindle.db").display()), dir, pg_name: None }),
        }
    }

    /// Drops a scenario's database and directory (after its host has shut down).
    pub async fn drop_fresh(&self, fresh: Fresh) {
        if let (Some(name), Some(admin)) = (&fresh.pg_name, &self.admin_url) {
            drop_database(admin, name).await;
            self.track(|live| live.0.retain(|n| n != name));
        }
        let _ = std::fs::remove_dir_all(&fresh.dir);
        self.track(|live| live.1.retain(|d| *d != fresh.dir));
    }

    /// Drops whatever an interrupted scenario left behind.
    pub async fn cleanup(&self) {
        let (names, dirs) = {
            let mut live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (std::mem::take(&mut live.0), std::mem::take(&mut live.1))
        };
        if let Some(admin) = &self.admin_url {
            for name in names {
                drop_database(admin, &name).await;
            }
        }
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    fn track(&self, change: impl FnOnce(&mut (Vec<String>, Vec<PathBuf>))) {
        change(&mut self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    }
}

async fn drop_database(admin: &str, name: &str) {
    let result = async {
        let mut conn = sqlx::PgConnection::connect(admin).await?;
        sqlx::query(AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))).execute(&mut conn).await?;
        conn.close().await
    }
    .await;
    if let Err(e) = result {
        eprintln!("bench: could not drop database {name}: {e}");
    }
}

/// `url` with its database (path) replaced by `database`, query string kept.
pub fn with_database(url: &str, database: &str) -> anyhow::Result<String> {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else { bail!("not a URL: {url}") };
    let rest = &url[scheme_end..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let after_authority = &rest[authority_end..];
    let query = after_authority.find('?').map_or("", |q| &after_authority[q..]);
    Ok(format!("{}{}/{database}{query}", &url[..scheme_end], &rest[..authority_end]))
}

/// How durable the store's commits are, as the database itself reports it, and the
/// server's version.
pub async fn durability(db: &Db) -> anyhow::Result<(String, String)> {
    let text = |rows: Vec<spindle::store::sql::Row>| {
        rows.first().map(|r| r.text(0, "bench row").expect("a decodable row")).unwrap_or_default()
    };
    match db {
        Db::Sqlite { .. } => {
            let journal = text(db.fetch("PRAGMA journal_mode", vec![], &[Ty::Text]).await?);
            let sync = db.fetch("PRAGMA synchronous", vec![], &[Ty::Int]).await?;
            let sync = match sync.first().map(|r| r.int(0, "bench row").expect("a decodable row")) {
                Some(0) => "OFF",
                Some(1) => "NORMAL",
                Some(2) => "FULL",
                Some(3) => "EXTRA",
                _ => "unknown",
            };
            let version = text(db.fetch("SELECT sqlite_version()", vec![], &[Ty::Text]).await?);
            Ok((
                format!(
                    "journal_mode={journal}, synchronous={sync} (Spindle's default: a commit survives a process \
                     crash; an OS crash or power loss can lose the last commits)"
                ),
                format!("SQLite {version}"),
            ))
        }
        Db::Postgres(_) => {
            let mut settings = Vec::new();
            for name in ["synchronous_commit", "fsync", "full_page_writes", "wal_sync_method", "commit_delay"] {
                let value = text(db.fetch(&format!("SHOW {name}"), vec![], &[Ty::Text]).await?);
                settings.push(format!("{name}={value}"));
            }
            let version = text(db.fetch("SHOW server_version", vec![], &[Ty::Text]).await?);
            Ok((settings.join(", "), format!("PostgreSQL {version}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn replaces_the_database_and_keeps_the_query() {
        let cases = [
            ("postgres://postgres@127.0.0.1:5432/postgres", "postgres://postgres@127.0.0.1:5432/bench_1"),
            ("postgres://u:p@h/db?sslmode=disable", "postgres://u:p@h/bench_1?sslmode=disable"),
            ("postgresql://h:5432", "postgresql://h:5432/bench_1"),
            ("postgres://h?x=1", "postgres://h/bench_1?x=1"),
        ];
        for (url, expected) in cases {
            assert_eq!(with_database(url, "bench_1").expect("a URL"), expected);
        }
        assert!(with_database("not a url", "x").is_err());
    }
}
