//! A PostgreSQL server for the test run: installed from Debian's packages when missing,
//! started as the `postgres` user on a free loopback port, stopped afterwards.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail, ensure};

/// A running server; stopped when dropped.
#[derive(Debug)]
pub struct Server {
    bin: PathBuf,
    dir: PathBuf,
    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub url: String,
}

/// The newest installed server's `bin` directory, if any.
fn installed() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("pg_ctl").exists() && bin.join("initdb").exists())
        .collect();
    found.sort_by_key(|p| {
        p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok()).unwrap_or(0)
    });
    found.pop()
}

/// Installs PostgreSQL with apt-get when it is not installed.
pub fn ensure_installed() -> anyhow::Result<PathBuf> {
    if let Some(bin) = installed() {
        return Ok(bin);
    }
    eprintln!("installing PostgreSQL from Debian's packages (apt-get install -y postgresql)");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let apt = |args: &[&str]| -> anyhow::Result<()> {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        let status = command.args(args).env("DEBIAN_FRONTEND", "noninteractive").status().context("running apt-get")?;
        ensure!(status.success(), "apt-get {} failed ({status})", args.join(" "));
        Ok(())
    };
    apt(&["update", "-q"])?;
    apt(&["install", "-y", "-q", "--no-install-recommends", "postgresql"])?;
    installed().context("PostgreSQL installed, but no server binaries under /usr/lib/postgresql")
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn as_postgres(bin: &Path, program: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("runuser")
        .current_dir("/")
        .args(["-u", "postgres", "--"])
        .arg(bin.join(program))
        .args(args)
        .stdout(Stdio::null())
        .status()
        .with_context(|| format!("running {program} as postgres"))?;
    ensure!(status.success(), "{program} failed ({status})");
    Ok(())
}

impl Server {
    /// Starts a throwaway server in `dir` (created, owned by `postgres`).
    pub fn start(dir: &Path) -> anyhow::Result<Self> {
        let bin = ensure_installed()?;
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("clearing {}", dir.display()))?;
        }
        std::fs::create_dir_all(dir)?;
        let status = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir).status()?;
        ensure!(status.success(), "chown {} failed", dir.display());
        let data = dir.join("data");
        let (Some(data_s), Some(dir_s)) = (data.to_str(), dir.to_str()) else {
            bail!("non-UTF-8 path {}", dir.display())
        };
        as_postgres(
            &bin,
            "initdb",
            &["-D", data_s, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"],
        )?;
        let port = free_port()?;
        // A test server: fsync off keeps the suite quick (the benchmarks run their own,
        // durable server).
        let options = format!("-c listen_addresses=127.0.0.1 -p {port} -k {dir_s} -c max_connections=400 -c fsync=off");
        let log = dir.join("server.log");
        let log_s = log.to_str().unwrap_or("server.log");
        as_postgres(&bin, "pg_ctl", &["-D", data_s, "-l", log_s, "-w", "-t", "60", "-o", &options, "start"])?;
        Ok(Self { bin, dir: dir.to_owned(), url: format!("postgres://postgres@127.0.0.1:{port}/postgres") })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        if let Some(data) = data.to_str() {
            let _ = as_postgres(&self.bin, "pg_ctl", &["-D", data, "-m", "fast", "-w", "stop"]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
