//! Summaries of samples, and what the process knows about its own memory and CPU.

use serde::Serialize;

/// A distribution summarised: count, mean and nearest-rank percentiles, in the unit
/// the samples were given in.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Summary {
    /// How many samples.
    pub count: usize,
    /// Their mean.
    pub mean: f64,
    /// The median (nearest rank).
    pub p50: f64,
    /// The 99th percentile (nearest rank).
    pub p99: f64,
    /// The largest sample.
    pub max: f64,
}

impl Summary {
    /// Summarises `samples` (reordered in place); `None` when there are none.
    pub fn of(samples: &mut [f64]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        Some(Self {
            count: samples.len(),
            mean,
            p50: percentile(samples, 0.50),
            p99: percentile(samples, 0.99),
            max: samples[samples.len() - 1],
        })
    }
}

/// The nearest-rank percentile `q` (0..=1) of sorted, non-empty `sorted`.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`); `None` off Linux.
pub fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Resident memory now by kind, MiB: the process's own (anonymous and shared-memory
/// pages, which only it holds and the kernel cannot drop) and file-backed pages (mapped
/// from files, shared with other processes, dropped under pressure and read again).
pub fn rss_split_mib() -> Option<(f64, f64)> {
    let own = status_kib("RssAnon")? + status_kib("RssShmem").unwrap_or(0);
    Some((kib_to_mib(own), kib_to_mib(status_kib("RssFile")?)))
}

/// Resident memory now, MiB.
pub fn rss_mib() -> Option<f64> {
    status_kib("VmRSS").map(kib_to_mib)
}

/// Peak resident memory (since start, or since the last [`reset_peak`]), MiB.
pub fn peak_rss_mib() -> Option<f64> {
    status_kib("VmHWM").map(kib_to_mib)
}

fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Resets the kernel's peak-RSS mark to the current RSS (`echo 5 > /proc/self/clear_refs`,
/// Linux ≥ 4.0), so a section's peak is its own. Answers whether it worked.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// CPU time this process has used (user + system), seconds; `None` off Linux.
pub fn process_cpu_secs() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start at its closing ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after ')'.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // The kernel reports clock ticks; USER_HZ is 100 on every Linux architecture we run on.
    Some((utime + stime) / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut samples: Vec<f64> = (1..=100).rev().map(f64::from).collect();
        let s = Summary::of(&mut samples).expect("samples");
        assert_eq!((s.count, s.p50, s.p99, s.max), (100, 50.0, 99.0, 100.0));
        assert!((s.mean - 50.5).abs() < 1e-9);
        let one = Summary::of(&mut [7.0]).expect("one sample");
        assert_eq!((one.p50, one.p99), (7.0, 7.0));
        assert!(Summary::of(&mut []).is_none());
    }

    #[test]
    fn reads_its_own_status() {
        if cfg!(target_os = "linux") {
            assert!(rss_mib().is_some_and(|m| m > 0.0));
            assert!(process_cpu_secs().is_some());
        }
    }
}
