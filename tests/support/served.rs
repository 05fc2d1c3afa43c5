//! A real `spindle serve` process on a free loopback port, and the `spindle` CLI
//! pointed at it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use crate::harness::Scratch;
use crate::spindle_bin;

/// A running `spindle serve`; killed when dropped.
#[derive(Debug)]
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The operator token it was started with.
    pub operator: String,
    /// Its data directory.
    pub data: Scratch,
    /// What it prints on standard output after it started listening, line by line.
    output: Mutex<Receiver<String>>,
}

/// What a CLI run printed and how it exited.
#[derive(Debug)]
pub struct Ran {
    /// Exit code.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

impl Ran {
    /// Standard output parsed as JSON (for `--json` runs).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }
}

impl Served {
    /// Starts `spindle serve` on `database_url` with extra flags.
    pub fn start(database_url: &str, extra: &[&str]) -> Self {
        Self::start_in(Scratch::new(), database_url, extra)
    }

    /// The host process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Starts it with a given data directory (to restart on the same one).
    pub fn start_in(data: Scratch, database_url: &str, extra: &[&str]) -> Self {
        Self::start_configured(data, database_url, extra, "spt_test_operator_token")
    }

    /// Starts it with a given data directory and `SPINDLE_OPERATOR_TOKEN` (to restart it
    /// with another operator token).
    pub fn start_configured(data: Scratch, database_url: &str, extra: &[&str], operator: &str) -> Self {
        Self::spawn(data, database_url, extra, operator, "error", None, &[])
    }

    /// Starts it with extra environment variables (`SPINDLE_FAILPOINTS`, say).
    pub fn start_with_env(data: Scratch, database_url: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn(data, database_url, extra, "spt_test_operator_token", "error", None, env)
    }

    /// Starts it with the log filter `log` (`SPINDLE_LOG`), its log written to `log_file`.
    pub fn start_logged(database_url: &str, extra: &[&str], log: &str, log_file: &Path) -> Self {
        Self::start_logged_in(Scratch::new(), database_url, extra, log, log_file)
    }

    /// [`start_logged`](Self::start_logged) on a given data directory (to restart on it).
    pub fn start_logged_in(data: Scratch, database_url: &str, extra: &[&str], log: &str, log_file: &Path) -> Self {
        Self::spawn(data, database_url, extra, "spt_test_operator_token", log, Some(log_file), &[])
    }

    /// Starts the process, its log to stderr or to `log_file`.
    fn spawn(
        data: Scratch,
        database_url: &str,
        extra: &[&str],
        operator: &str,
        log: &str,
        log_file: Option<&Path>,
        env: &[(&str, &str)],
    ) -> Self {
        let stderr = log_file.map_or_else(Stdio::inherit, |path| {
            let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
            Stdio::from(file)
        });
        let operator = operator.to_owned();
        let mut child = Command::new(spindle_bin())
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url", database_url])
            .arg("--data-dir")
            .arg(&data.path)
            .args(extra)
            .env("SPINDLE_OPERATOR_TOKEN", &operator)
            .env("SPINDLE_LOG", log)
            .env("NO_COLOR", "1")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start spindle serve");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(url) = line.strip_prefix("spindle listening on ") {
                        break url.trim().to_owned();
                    }
                }
                other => {
                    let log = log_file.map(std::fs::read_to_string).transpose().ok().flatten().unwrap_or_default();
                    panic!("spindle serve exited before listening ({other:?}): {:?}\n{log}", child.try_wait())
                }
            }
        };
        // Keep draining its output so it never blocks on a full pipe, and keep it for
        // `wait_for_output`.
        let (sender, output) = channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        Self { child, url, operator, data, output: Mutex::new(output) }
    }

    /// Waits up to `timeout` for a line of its standard output that contains `needle`.
    pub fn wait_for_output(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let output = self.output.lock().expect("output");
        loop {
            match output.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) if line.contains(needle) => return true,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to the process.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill").arg(format!("-{signal}")).arg(self.child.id().to_string()).status();
        assert!(status.is_ok_and(|s| s.success()), "kill -{signal} {}", self.child.id());
    }

    /// Kills the process with SIGKILL, as a crash would, and reaps it; answers its data
    /// directory (to start another host on it).
    pub fn kill_hard(mut self) -> Scratch {
        self.signal("KILL");
        let _ = self.child.wait();
        std::mem::replace(&mut self.data, Scratch::new())
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// CPU time the process has used so far (user + system), from `/proc`.
    pub fn cpu_time(&self) -> std::time::Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).expect("/proc/PID/stat");
        // Fields after the command name (in parentheses, which may hold spaces): utime is
        // the 14th field, stime the 15th, in clock ticks (100 per second on Linux).
        let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).expect("a tick count");
        std::time::Duration::from_millis((ticks(11) + ticks(12)) * 10)
    }

    /// Runs the CLI against this host with `token`.
    pub fn cli(&self, token: Option<&str>, args: &[&str]) -> Ran {
        let mut command = Command::new(spindle_bin());
        command.args(args).env("SPINDLE_SERVER", &self.url).env_remove("SPINDLE_TOKEN");
        if let Some(token) = token {
            command.env("SPINDLE_TOKEN", token);
        }
        let output = command.output().expect("run the spindle CLI");
        Ran {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Creates a tenant with the CLI; answers its token.
    pub fn tenant(&self, name: &str) -> String {
        let ran = self.cli(Some(&self.operator), &["tenant", "create", name, "--json"]);
        assert_eq!(ran.code, 0, "tenant create: {}", ran.stderr);
        ran.json()["token"].as_str().expect("a token").to_owned()
    }

    /// Sends SIGTERM and waits for the process to exit; answers its exit code.
    pub fn terminate(mut self) -> (i32, Scratch) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let status = self.child.wait().expect("wait for spindle serve");
        let data = std::mem::take(&mut self.data);
        (status.code().unwrap_or(-1), data)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
