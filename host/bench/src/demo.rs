//! `spindle demo`: Spindle's main job on the embedded default. Starts a host on a
//! SQLite file, deploys the example kinds, runs a batch of jobs through every outcome
//! (complete, skip, retry, refusal with its failure effect, checkpoints, snooze, cancel,
//! pause and resume, a retry job, a workflow that fans out child jobs and waits for a
//! signal, a cron schedule) and shows progress as it goes, then the results.
//!
//! The payment and webhook kinds call services the demo runs on 127.0.0.1 in its own
//! process (`demo_services`): the operator's policy allows that address, the tenant's
//! rules and each deployment allow their paths, and the API key and signing key are
//! tenant secrets the guests never see.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::json;
use spindle_core::step::StepState;
use spindle_core::{JobId, JobState};

use spindle_runtime::outbound::{OperatorPolicy, Rules};

use super::demo_services::{DECLINED_CARD, Services};
use spindle::capabilities::Deployment;
use spindle::engine::{Command, SubmitRequest};
use spindle::host::{Host, HostConfig};
use spindle::store::{JobRecord, JobStore, OutboundStore, TenantId};

/// `spindle demo` flags.
#[derive(Clone, Debug, clap::Args)]
pub struct DemoArgs {
    /// Directory with the built example components (`cargo xtask guests`).
    #[arg(long, default_value = "target/guests")]
    pub guests: PathBuf,
    /// Directory for the demo's SQLite file (emptied first).
    #[arg(long, default_value = "target/demo")]
    pub data_dir: PathBuf,
    /// How many small jobs (`noop3`) to run beside the showcase jobs.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
}

/// One job of the showcase, and what it demonstrates.
struct Showcase {
    label: &'static str,
    kind: &'static str,
    input: serde_json::Value,
    /// A run-control action the demo takes once the job runs.
    action: Option<Action>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    CancelWhileRunning,
    PauseThenResume,
    RetryWhenFailed,
    /// Sends the `shipped` signal once the job waits for it.
    ShipWhenWaiting,
}

fn showcase(services: &str) -> Vec<Showcase> {
    let hook = |path: &str, event: &str| json!({ "url": format!("{services}/hooks/{path}"), "event": event, "payload": { "order": 1042 } });
    vec![
        Showcase {
            label: "import 200k CSV rows in slices",
            kind: "csv-import",
            input: json!({"generate_rows": 200_000, "slice": 4_000}),
            action: None,
        },
        Showcase {
            label: "payment: retry a flaky capture",
            kind: "payment-saga",
            input: json!({"account": "flaky-2", "amount_cents": 1200, "card": "4242424242424242"}),
            action: None,
        },
        Showcase {
            label: "payment: card declined (402)",
            kind: "payment-saga",
            input: json!({"account": "acct-2", "amount_cents": 990, "card": DECLINED_CARD}),
            action: None,
        },
        Showcase {
            label: "webhook: signed, delivered",
            kind: "webhook-delivery",
            input: hook("ok", "order.paid"),
            action: None,
        },
        Showcase {
            label: "webhook: 503, then delivered",
            kind: "webhook-delivery",
            input: hook("flaky", "order.shipped"),
            action: None,
        },
        Showcase {
            label: "webhook: denied destination",
            kind: "webhook-delivery",
            input: json!({ "url": "http://169.254.169.254/latest/meta-data/", "event": "order.paid", "payload": {} }),
            action: None,
        },
        Showcase {
            label: "thumbnail a 1024x768 image",
            kind: "thumbnail",
            input: json!({"width": 1024, "height": 768, "max_edge": 64}),
            action: None,
        },
        Showcase {
            label: "skip, retry, checkpoint",
            kind: "scripted",
            input: json!({"first": "skip", "second": ["retryable", "complete"], "third": "more:5"}),
            action: None,
        },
        Showcase { label: "snooze for a second", kind: "scripted", input: json!({"second": "snooze:1"}), action: None },
        Showcase {
            label: "cancel mid-step (heartbeat)",
            kind: "scripted",
            input: json!({"second": "wait-for-stop"}),
            action: Some(Action::CancelWhileRunning),
        },
        Showcase {
            label: "pause, then resume",
            kind: "scripted",
            input: json!({"first": "more:40"}),
            action: Some(Action::PauseThenResume),
        },
        Showcase {
            label: "order: 3 thumbnails, then shipped",
            kind: "order-fulfilment",
            input: json!({"order_id": "A-1042", "images": ["front.jpg", "back.jpg", "side.jpg"], "ship_timeout_secs": 600}),
            action: Some(Action::ShipWhenWaiting),
        },
        Showcase {
            label: "refused, then retried",
            kind: "scripted",
            input: json!({"third": "refused"}),
            action: Some(Action::RetryWhenFailed),
        },
    ]
}

/// Runs the demo.
pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    if args.data_dir.exists() {
        std::fs::remove_dir_all(&args.data_dir).with_context(|| format!("emptying {}", args.data_dir.display()))?;
    }
    // The services the payment and webhook kinds call, and the keys they check.
    let api_key = format!("sk_demo_{}", hex::encode(rand::random::<[u8; 12]>()));
    let signing_key = format!("whsec_{}", hex::encode(rand::random::<[u8; 16]>()));
    let services = Services::start(&api_key, &signing_key).await.context("starting the demo's services")?;
    let base = services.base();
    let port = services.addr.port();

    let mut config = HostConfig::in_dir(&args.data_dir);
    config.reconcile.interval = Duration::from_secs(60);
    // The operator allows the services' address, and nothing else.
    config.sandbox.outbound.operator = OperatorPolicy {
        allow: Rules::parse(&[format!("* http://127.0.0.1:{port}/*")])?,
        block_private: true,
        allow_cidrs: vec!["127.0.0.1/32".parse()?],
    };
    let host = Host::open(config).await.context("starting the host")?;
    println!("Spindle demo: a host on {}\n", host.config().database_url());
    let tenant = TenantId::default_tenant();
    host.engine
        .tenancy()
        .set_tenant_outbound(&tenant, Some(Rules::parse(&[format!("POST http://127.0.0.1:{port}/*")])?))
        .await?;
    host.engine.tenancy().set_secret(&tenant, "payments-key", api_key.as_bytes()).await?;
    host.engine.tenancy().set_secret(&tenant, "webhook-signing", signing_key.as_bytes()).await?;
    println!("Services on {base} (payments, a webhook receiver); the operator, the tenant and each");
    println!("deployment allow them; the API key and signing key are sealed tenant secrets.\n");

    let deployments = [
        (
            "payment-saga",
            Deployment::parse(
                &[format!("POST http://127.0.0.1:{port}/*")],
                &[format!("payments-key@POST http://127.0.0.1:{port}/*")],
                &[format!("payments_url={base}")],
                false,
            )?,
        ),
        (
            "webhook-delivery",
            Deployment::parse(
                &[format!("POST http://127.0.0.1:{port}/hooks/*")],
                &[format!("webhook-signing@POST http://127.0.0.1:{port}/hooks/*")],
                &[],
                false,
            )?,
        ),
    ];
    println!("Deploying the example kinds (validated, compiled, stored, versioned):");
    let kinds = [
        "csv-import",
        "payment-saga",
        "webhook-delivery",
        "thumbnail",
        "order-fulfilment",
        "nightly-report",
        "scripted",
        "noop3",
    ];
    for kind in kinds {
        let path = args.guests.join(format!("{kind}.wasm"));
        let bytes =
            std::fs::read(&path).with_context(|| format!("reading {} (run `cargo xtask guests`)", path.display()))?;
        let t = Instant::now();
        let deployment = deployments.iter().find(|(k, _)| *k == kind).map(|(_, d)| d.clone()).unwrap_or_default();
        let (version, spec) = host.registry.deploy_with(&tenant, kind, &bytes, &deployment, host.engine.now()).await?;
        let steps: Vec<&str> = spec.steps.iter().map(|s| s.key.as_str()).collect();
        println!(
            "  {kind:<16} v{} {:>7} bytes  sha256 {}…  steps {}  ({} ms)",
            version.version,
            bytes.len(),
            &version.digest[..12],
            steps.join(" → "),
            t.elapsed().as_millis()
        );
    }
    host.start().await;
    // A schedule: `nightly-report` every second here (at night, it would be `0 2 * * *`).
    let schedule = spindle::engine::ScheduleRequest {
        name: "nightly".into(),
        kind: "nightly-report".into(),
        cron: "* * * * * *".into(),
        timezone: "Europe/Paris".into(),
        input: json!({ "report": "orders" }),
        catch_up: "none".into(),
        overlap: "skip".into(),
    };
    host.engine.workflows().create_schedule(&tenant, schedule).await?;
    println!("\nSchedule `nightly` fires a nightly-report job every second (cron `* * * * * *`, Europe/Paris).");

    let jobs = showcase(&base);
    let mut ids = Vec::new();
    for job in &jobs {
        let request =
            SubmitRequest { kind: job.kind.into(), input: serde_json::to_vec(&job.input)?, ..Default::default() };
        ids.push(host.engine.submission().submit(&tenant, request).await?.record().job.id);
    }
    let batch: Vec<SubmitRequest> = (0..args.batch)
        .map(|i| SubmitRequest {
            kind: "noop3".into(),
            input: serde_json::to_vec(&json!({ "n": i })).unwrap_or_default(),
            ..Default::default()
        })
        .collect();
    let batch_started = Instant::now();
    let batch_ids: Vec<JobId> =
        host.engine.submission().submit_many(&tenant, batch).await?.iter().map(|i| i.record().job.id).collect();
    println!("\nRunning {} showcase jobs and a batch of {} three-step jobs:\n", jobs.len(), batch_ids.len());

    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template("  {prefix:<34} [{bar:30}] {pos:>3}% {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let showcase_bars: Vec<ProgressBar> = jobs
        .iter()
        .map(|job| {
            let bar = bars.add(ProgressBar::new(100));
            bar.set_style(style.clone());
            bar.set_prefix(job.label);
            bar
        })
        .collect();
    let batch_bar = bars.add(ProgressBar::new(u64::try_from(batch_ids.len()).unwrap_or(0)));
    batch_bar.set_style(
        ProgressStyle::with_template("  {prefix:<34} [{bar:30}] {pos}/{len} jobs {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    batch_bar.set_prefix("batch of noop3 jobs");

    // Without a terminal (a CI log) the bars are hidden: print each change instead.
    let plain = !std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut last_seen: Vec<String> = vec![String::new(); jobs.len()];
    let mut acted = vec![false; jobs.len()];
    let mut retries: BTreeMap<usize, JobId> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut batch_done_at = None;
    loop {
        let mut all_final = true;
        for (i, job) in jobs.iter().enumerate() {
            let current = retries.get(&i).copied().unwrap_or(ids[i]);
            let record = host.engine.operations().job(&tenant, current).await?;
            show(&showcase_bars[i], &record, retries.contains_key(&i));
            if plain {
                let line = format!("{:>3}% {}", record.job.progress, showcase_bars[i].message());
                if line != last_seen[i] {
                    println!("  {:<34} {line}", job.label);
                    last_seen[i] = line;
                }
            }
            if !acted[i] && act(&host, &tenant, job.action, &record, &mut retries, i).await? {
                acted[i] = true;
            }
            let waiting_for_retry = job.action == Some(Action::RetryWhenFailed) && !retries.contains_key(&i);
            all_final &= record.job.state.is_final() && !waiting_for_retry;
        }
        let done = count_final(&host, &batch_ids).await?;
        batch_bar.set_position(done);
        if done == u64::try_from(batch_ids.len()).unwrap_or(0) && batch_done_at.is_none() {
            batch_done_at = Some(batch_started.elapsed());
            batch_bar.finish_with_message("all succeeded");
        }
        if all_final && batch_done_at.is_some() {
            break;
        }
        if Instant::now() > deadline {
            bail!("the demo's jobs did not finish within five minutes");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for bar in &showcase_bars {
        bar.finish();
    }

    println!("\nResults:\n");
    println!("  {:<34} {:<16} {:<10} {:>4}  {:<34} steps", "job", "kind", "state", "%", "why");
    for (i, job) in jobs.iter().enumerate() {
        for id in std::iter::once(ids[i]).chain(retries.get(&i).copied()) {
            let record = host.engine.operations().job(&tenant, id).await?;
            let label = if Some(id) == retries.get(&i).copied() { "  ↳ its retry job" } else { job.label };
            let why = record.job.failure.as_ref().map(|f| f.code.clone()).unwrap_or_default();
            println!(
                "  {label:<34} {:<16} {:<10} {:>4}  {why:<34} {}",
                job.kind,
                record.job.state.as_str(),
                record.job.progress,
                steps_summary(&record)
            );
        }
    }
    if let Some(took) = batch_done_at {
        let steps = batch_ids.len() * 3;
        println!(
            "\n  batch: {} jobs ({steps} sandboxed steps) settled in {:.2} s — {:.0} jobs/s on one SQLite file",
            batch_ids.len(),
            took.as_secs_f64(),
            batch_ids.len() as f64 / took.as_secs_f64().max(1e-6)
        );
    }
    // The workflow: the order's children and its wait for the signal.
    if let Some(i) = jobs.iter().position(|j| j.kind == "order-fulfilment") {
        let order = host.engine.operations().job(&tenant, ids[i]).await?;
        println!("\nWorkflow \"{}\" ({}), as `spindle job ID` prints its tree:", jobs[i].label, order.job.id);
        let filter = spindle::store::JobFilter { parent: Some(order.job.id), limit: 100, ..Default::default() };
        for child in host.store.list_jobs(&tenant, &filter).await?.iter().rev() {
            println!("  └─ {} {} {}", child.job.id, child.kind, child.job.state.as_str());
        }
        for entry in host.store.history(order.job.id).await? {
            if matches!(
                entry.event,
                spindle_core::HistoryEvent::AwaitingChildren { .. }
                    | spindle_core::HistoryEvent::AwaitingSignal { .. }
                    | spindle_core::HistoryEvent::SignalReceived { .. }
                    | spindle_core::HistoryEvent::WaitOver { .. }
            ) {
                println!("  {}", serde_json::to_string(&entry.event)?);
            }
        }
    }
    // Let the schedule fire three times, then pause it.
    let filter = spindle::store::JobFilter { kind: Some("nightly-report".into()), limit: 100, ..Default::default() };
    let schedule_deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < schedule_deadline {
        let fired = host.store.list_jobs(&tenant, &filter).await?;
        if fired.iter().filter(|j| j.job.state == JobState::Succeeded).count() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    host.engine.workflows().pause_schedule(&tenant, "nightly").await?;
    let fired = host.store.list_jobs(&tenant, &filter).await?;
    let succeeded = fired.iter().filter(|j| j.job.state == JobState::Succeeded).count();
    println!(
        "\nSchedule `nightly` fired {} jobs while the demo ran ({succeeded} succeeded so far), each once per time: \
         its idempotency key is the schedule and the time.",
        fired.len()
    );
    let declined = ids[2];
    println!("\nHistory of \"{}\" ({declined}):", jobs[2].label);
    for entry in host.store.history(declined).await? {
        println!("  {}", serde_json::to_string(&entry.event)?);
    }
    println!("\nOutbound requests of the webhook and payment jobs (as `spindle job ID` lists them):");
    for (i, job) in jobs.iter().enumerate().filter(|(_, j)| j.kind == "webhook-delivery" || j.kind == "payment-saga") {
        for call in host.store.calls(ids[i]).await? {
            let c = &call.call;
            let result = match (c.status, &c.denied, &c.error) {
                (_, Some(layer), _) => format!("denied by the {layer}"),
                (Some(status), _, _) => status.to_string(),
                (None, None, Some(error)) => error.clone(),
                (None, None, None) => "no answer".into(),
            };
            println!(
                "  {:<30} {} #{} {} {}://{}:{}{} → {result}",
                job.label, call.step, call.attempt, c.method, c.scheme, c.host, c.port, c.path
            );
        }
    }
    let seen = services.seen.lock().map(|s| (s.requests.len(), s.authorised, s.verified)).unwrap_or_default();
    println!(
        "  the services saw {} requests: {} carried the API key and {} webhook signatures verified,\n  \
         though no guest ever held either key",
        seen.0, seen.1, seen.2
    );
    println!("\nDone in {:.1} s. The database is {}.", started.elapsed().as_secs_f64(), host.config().database_url());
    host.shutdown(Duration::from_secs(10)).await;
    Ok(())
}

fn show(bar: &ProgressBar, record: &JobRecord, retried: bool) {
    bar.set_position(u64::from(record.job.progress));
    let step = record
        .job
        .steps
        .iter()
        .find(|s| !s.state.is_final())
        .map(|s| format!("{} {}", s.key, s.state.as_str()))
        .unwrap_or_default();
    let prefix = if retried { "retry: " } else { "" };
    let message = match record.job.state {
        JobState::Running | JobState::Pending | JobState::Waiting => {
            format!("{prefix}{} {step}", record.job.state.as_str())
        }
        state => format!("{prefix}{}", state.as_str()),
    };
    bar.set_message(message);
}

/// Takes the showcase job's run-control action when its moment comes; answers whether
/// it is done with it.
async fn act(
    host: &Host,
    tenant: &TenantId,
    action: Option<Action>,
    record: &JobRecord,
    retries: &mut BTreeMap<usize, JobId>,
    index: usize,
) -> anyhow::Result<bool> {
    let id = record.job.id;
    match action {
        None => Ok(true),
        Some(Action::CancelWhileRunning) => {
            if record.job.steps.get(1).is_some_and(|s| s.state == StepState::Running) {
                host.engine
                    .operations()
                    .command(tenant, id, Command::Cancel { reason: "the demo changed its mind".into() }, "demo")
                    .await?;
                return Ok(true);
            }
            Ok(record.job.state.is_final())
        }
        Some(Action::PauseThenResume) => {
            if record.job.state == JobState::Paused {
                host.engine.operations().command(tenant, id, Command::Resume, "demo").await?;
                return Ok(true);
            }
            if record.job.progress >= 10 && record.job.requests.pause.is_none() && !record.job.state.is_final() {
                let _ = host.engine.operations().command(tenant, id, Command::Pause, "demo").await;
            }
            Ok(record.job.state.is_final())
        }
        Some(Action::ShipWhenWaiting) => {
            let waits_for_shipping = record.job.state == JobState::Waiting
                && record.job.wait.as_ref().is_some_and(
                    |w| matches!(&w.what, spindle_core::workflow::WaitFor::Signal { name, .. } if name == "shipped"),
                );
            if waits_for_shipping {
                let body = serde_json::to_vec(&json!({ "carrier": "ups", "tracking": "1Z999AA10123456784" }))?;
                host.engine.workflows().signal(tenant, id, "shipped", body, None).await?;
                return Ok(true);
            }
            Ok(record.job.state.is_final())
        }
        Some(Action::RetryWhenFailed) => {
            if record.job.state == JobState::Failed {
                let failed = host.engine.operations().command(tenant, id, Command::Retry, "demo").await?;
                if let Some(successor) = failed.job.successor {
                    retries.insert(index, successor);
                }
                return Ok(true);
            }
            Ok(false)
        }
    }
}

/// How many of the batch's jobs are final: those not counted among open `noop3` jobs.
async fn count_final(host: &Host, ids: &[JobId]) -> anyhow::Result<u64> {
    let open: i64 = host.store.depths().await?.iter().filter(|d| d.kind == "noop3").map(|d| d.count).sum();
    Ok(u64::try_from(i64::try_from(ids.len()).unwrap_or(0) - open).unwrap_or(0))
}

fn steps_summary(record: &JobRecord) -> String {
    record
        .job
        .steps
        .iter()
        .map(|s| {
            let attempts = s.attempts.len();
            let mark = match s.state {
                StepState::Completed if s.carried => "carried".to_owned(),
                state => state.as_str().to_owned(),
            };
            if attempts > 1 { format!("{}:{mark}×{attempts}", s.key) } else { format!("{}:{mark}", s.key) }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
