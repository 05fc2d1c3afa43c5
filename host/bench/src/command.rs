//! `spindle bench`: runs the benchmark harness (`spindle_bench::bench`) and prints its report,
//! a table on stdout (progress on stderr), or JSON with `--json`.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::progress::Progress;
use crate::{Section, Settings};
use spindle::dispatcher::DispatcherConfig;
use spindle::store::Backend;

/// Which store to benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendArg {
    /// A fresh SQLite file per scenario (WAL, synchronous=NORMAL: Spindle's default).
    Sqlite,
    /// A fresh database per scenario on the server `--database-url` names.
    Postgres,
}

/// `spindle bench` flags.
#[derive(Clone, Debug, clap::Args)]
pub struct BenchArgs {
    /// The store to measure.
    #[arg(long, value_enum, default_value = "sqlite")]
    pub backend: BackendArg,
    /// PostgreSQL: a URL to create the fresh databases through (`CREATE DATABASE`), e.g.
    /// postgres://postgres@127.0.0.1:5432/postgres.
    #[arg(long, env = "SPINDLE_BENCH_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Jobs per throughput run.
    #[arg(long, default_value_t = 20_000)]
    pub jobs: usize,
    /// Steps running at once (the dispatcher's concurrency); default: the host's default.
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Jobs per submission transaction when submitting in bulk.
    #[arg(long, default_value_t = 1_000)]
    pub submit_batch: usize,
    /// Jobs per second of the latency probe.
    #[arg(long, default_value_t = 200)]
    pub latency_rate: u32,
    /// Seconds the latency probe measures.
    #[arg(long, default_value_t = 10)]
    pub latency_secs: u64,
    /// Seconds of latency-probe warm-up, not counted.
    #[arg(long, default_value_t = 2)]
    pub warmup_secs: u64,
    /// Queue depths to measure claim latency at, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,1000000")]
    pub queued: Vec<u64>,
    /// Jobs the `retention` section runs (in waves of 50,000).
    #[arg(long, default_value_t = 1_000_000)]
    pub retention_jobs: usize,
    /// Run only these sections (comma-separated; also `--scenario`); default: all but
    /// `retention`.
    #[arg(long, alias = "scenario", value_enum, value_delimiter = ',')]
    pub only: Vec<Section>,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the report as JSON to this file (the table still goes to stdout).
    #[arg(long, value_name = "PATH")]
    pub json_file: Option<PathBuf>,
    /// Directory with the built components (`cargo xtask guests`).
    #[arg(long, default_value = "target/guests")]
    pub guests: PathBuf,
    /// Where scenario directories (SQLite files, caches) go; default: the system temp
    /// directory. Emptied of what the run made afterwards.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// The `languages` section measures this language only, in this process (what it
    /// runs once per language in a child process of its own).
    #[arg(long, hide = true)]
    pub language: Option<String>,
    /// Python and JavaScript versions the `languages` section deploys on one shared
    /// host, across 30 tenants (0: skip that part).
    #[arg(long, default_value_t = 300)]
    pub shared_versions: usize,
}

/// Runs the benchmark and prints the report.
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    let backend = match args.backend {
        BackendArg::Sqlite => Backend::Sqlite,
        BackendArg::Postgres => Backend::Postgres,
    };
    let work_dir =
        args.work_dir.unwrap_or_else(std::env::temp_dir).join(format!("spindle-bench-{}", std::process::id()));
    let settings = Settings {
        backend,
        database_url: args.database_url,
        jobs: args.jobs.max(1),
        concurrency: args.concurrency.unwrap_or_else(|| DispatcherConfig::default().concurrency).max(1),
        submit_batch: args.submit_batch.max(1),
        latency_rate: args.latency_rate.max(1),
        latency_secs: args.latency_secs.max(1),
        warmup_secs: args.warmup_secs,
        queued: args.queued,
        retention_jobs: args.retention_jobs.max(1),
        sections: if args.only.is_empty() { Section::all() } else { args.only },
        guests: args.guests,
        work_dir: work_dir.clone(),
        language: args.language,
        shared_versions: args.shared_versions,
    };
    let result = crate::run(settings, Progress::to_stderr()).await;
    let _ = std::fs::remove_dir_all(&work_dir);
    let mut report = result?;
    report.check_targets();
    if let Some(path) = &args.json_file {
        std::fs::write(path, report.to_json()).with_context(|| format!("writing {}", path.display()))?;
    }
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table());
    }
    Ok(())
}
