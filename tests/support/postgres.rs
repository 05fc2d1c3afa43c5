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
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let base = server();
    let name = format!("t{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
    let admin = format!("{base}/postgres");
    let mut conn = <sqlx_connect::PgConnection as sqlx_connect::Connection>::connect(&admin)
        .await
        .unwrap_or_else(|e| panic!("connect to the test PostgreSQL at {admin}: {e}"));
    sqlx_connect::query(sqlx_connect::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("create database {name}: {e}"));
    format!("{base}/{name}")
}

mod sqlx_connect {
    pub use spindle::sqlx::postgres::PgConnection;
    pub use spindle::sqlx::{AssertSqlSafe, Connection, query};
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

fn start_private_server() -> String {
    let bin = pg_bin();
    let dir = std::env::temp_dir().join(format!("spindle-pg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the PostgreSQL directory");
    let port = free_port();
    let as_postgres = |program: &str, args: &[&str]| {
        let status = Command::new("runuser")
            .current_dir("/")
            .args(["-u", "postgres", "--"])
            .arg(bin.join(program))
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        assert!(status.success(), "{program} failed: {status}");
    };
    let chown = Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir).status().expect("chown");
    assert!(chown.success());
    let data = dir.join("data");
    let data_s = data.to_str().expect("utf-8 path");
    let dir_s = dir.to_str().expect("utf-8 path");
    as_postgres(
        "initdb",
        &["-D", data_s, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
    );
    let opts = format!("-c listen_addresses=127.0.0.1 -p {port} -k {dir_s} -c max_connections=400 -c fsync=off");
    let log = dir.join("log");
    as_postgres("pg_ctl", &["-D", data_s, "-l", log.to_str().expect("utf-8"), "-w", "-t", "30", "-o", &opts, "start"]);
    // Stop the server when this test process exits.
    let stop_bin = bin.join("pg_ctl");
    let stop_data = data.clone();
    STOP.get_or_init(|| (stop_bin, stop_data));
    extern "C" fn stop_at_exit() {
        if let Some((bin, data)) = STOP.get() {
            let _ = Command::new("runuser")
                .current_dir("/")
                .args(["-u", "postgres", "--"])
                .arg(bin)
                .args(["-D"])
                .arg(data)
                .args(["-m", "immediate", "stop"])
                .stdout(std::process::Stdio::null())
                .status();
        }
    }
    unsafe_atexit(stop_at_exit);
    format!("postgres://postgres@127.0.0.1:{port}")
}

static STOP: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();

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
