//! A real PostgreSQL server for tests, on 127.0.0.1 only.
//!
//! `cargo xtask test` installs PostgreSQL from Debian's packages when it is missing,
//! starts one server for the run and passes its URL in `SPINDLE_TEST_DATABASE_URL`. Run
//! alone, a test binary starts its own throwaway server the same way (initdb + pg_ctl as
//! the `postgres` user) and stops it when the process exits. Each test gets a database
//! of its own.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// The server every test in this process shares: its base URL, without a database.
fn server() -> &'static str {
    static SERVER: OnceLock<String> = OnceLock::new();
    SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("SPINDLE_TEST_DATABASE_URL") {
            return url.trim_end_matches('/').rsplit_once('/').map_or(url.clone(), |(base, _)| base.to_owned());
        }
        start_private_server()
    })
}

/// A fresh, empty database on the shared server; answers its URL.
pub async fn fresh_database() -> String {
    create_database(server()).await
}

/// A fresh, empty database on the server at `base`; answers its URL.
async fn create_database(base: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let name = format!("t{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let admin = format!("{base}/postgres");
    let mut conn = <sqlx_connect::PgConnection as sqlx_connect::Connection>::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("connect to the test PostgreSQL at {admin}: {e}"));
    drop_databases_of_ended_runs(&mut conn).await;
    sqlx_connect::query(sqlx_connect::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    format!("{base}/{name}")
}

/// Drops the databases of test processes that have exited (named `t<pid>_<n>`), once per
/// process, so a long-lived server does not fill its disk with earlier runs' databases.
async fn drop_databases_of_ended_runs(conn: &mut sqlx_connect::PgConnection) {
    static DONE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if DONE.swap(true, Ordering::Relaxed) {
        return;
    }
    let names: Vec<String> =
        sqlx_connect::query_scalar("SELECT datname FROM pg_database WHERE datname ~ '^t[0-9]+_[0-9]+$'")
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
    for name in names {
        let pid = name[1..].split('_').next().unwrap_or_default();
        if std::path::Path::new("/proc").join(pid).exists() {
            continue;
        }
        let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        let _ = sqlx_connect::query(sqlx_connect::AssertSqlSafe(drop)).execute(&mut *conn).await;
    }
}

mod sqlx_connect {
    pub use spindle::sqlx::postgres::PgConnection;
    pub use spindle::sqlx::{AssertSqlSafe, Connection, query, query_scalar};
}

fn pg_bin() -> PathBuf {
    let root = PathBuf::from("/usr/lib/postgresql");
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|_| panic!("PostgreSQL is not installed: run `cargo xtask test`, which installs it"))
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop().expect("a PostgreSQL version under /usr/lib/postgresql")
}

/// A throwaway PostgreSQL server of the test's own, run as the `postgres` user (initdb +
/// pg_ctl); stopped when dropped. A test that restarts its server or reads its log has one.
#[derive(Debug)]
pub struct PrivateServer {
    bin: PathBuf,
    dir: PathBuf,
    data: PathBuf,
    options: String,
    /// `postgres://postgres@127.0.0.1:PORT`, without a database.
    pub base_url: String,
}

impl PrivateServer {
    /// Creates and starts a server under the temp directory, named after `name`.
    pub fn start(name: &str) -> Self {
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!("spindle-pg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the PostgreSQL directory");
        let chown = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status().expect("chown");
        assert!(chown.success());
        let data = dir.join("data");
        let port = free_port();
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {port} -k {} -c max_connections=400 -c fsync=off",
            dir.to_str().expect("utf-8 path")
        );
        let server = Self { bin, dir, data, options, base_url: format!("postgres://postgres@127.0.0.1:{port}") };
        let data_s = server.data.to_str().expect("utf-8 path");
        server.as_postgres(
            "initdb",
            &["-D", data_s, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
        );
        server.pg_ctl("start");
        server
    }

    fn as_postgres(&self, program: &str, args: &[&str]) {
        let status = Command::new("runuser")
            .current_dir("/")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(program))
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(status.success(), "{program} failed: {status}");
    }

    fn pg_ctl(&self, action: &str) {
        let data = self.data.to_str().expect("utf-8 path");
        let log = self.log_path();
        let log = log.to_str().expect("utf-8 path");
        let mut args = vec!["-D", data, "-l", log, "-w", "-t", "60", "-o", &self.options];
        if action == "restart" {
            args.extend(["-m", "fast"]);
        }
        args.push(action);
        self.as_postgres("pg_ctl", &args);
    }

    /// Restarts the server (fast shutdown: every connection is cut).
    pub fn restart(&self) {
        self.pg_ctl("restart");
    }

    /// The server's log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("log")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// A fresh, empty database on this server; answers its URL.
    pub async fn fresh_database(&self) -> String {
        create_database(&self.base_url).await
    }

    fn stop(&self) {
        if let Some(data) = self.data.to_str() {
            let _ = Command::new("runuser")
                .current_dir("/")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", data, "-m", "immediate", "stop"])
                .stdout(std::process::Stdio::null())
                .status();
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The shared server of a test binary run alone, stopped when the process exits.
fn start_private_server() -> String {
    let server = STOP.get_or_init(|| PrivateServer::start("shared"));
    extern "C" fn stop_at_exit() {
        if let Some(server) = STOP.get() {
            server.stop();
        }
    }
    unsafe_atexit(stop_at_exit);
    server.base_url.clone()
}

static STOP: OnceLock<PrivateServer> = OnceLock::new();

#[allow(unsafe_code)]
fn unsafe_atexit(f: extern "C" fn()) {
    unsafe extern "C" {
        fn atexit(f: extern "C" fn()) -> i32;
    }
    // SAFETY: registers a plain function with no captured state to run at process exit.
    unsafe {
        atexit(f);
    }
}

/// A free TCP port on the loopback interface.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}
