//! The machine a benchmark ran on, read from the system rather than typed in.

use serde::Serialize;

/// What the figures were measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// Logical CPUs available to the process.
    pub cpus: usize,
    /// The CPU model (`/proc/cpuinfo`).
    pub cpu_model: String,
    /// Total memory, GiB (`/proc/meminfo`).
    pub memory_gib: f64,
    /// The kernel release.
    pub kernel: String,
    /// The 1-, 5- and 15-minute load averages when the run began: anything else busy on
    /// the machine (a build) shows here, and makes the figures worth less.
    pub load_average: String,
}

impl Machine {
    /// Reads the current machine.
    pub fn current() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        Self {
            cpus: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            cpu_model,
            memory_gib: mem_kib / (1024.0 * 1024.0),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_owned(),
            load_average: std::fs::read_to_string("/proc/loadavg")
                .unwrap_or_default()
                .split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}
