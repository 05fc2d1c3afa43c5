//! The `spindle` client commands: talk to a running host over its HTTP API, decoding its
//! answers into the API's own views. Human tables by default, `--json` for scripts.

mod print;
mod remote;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use print::{emit, exit_for, is_final, pending, short, state_line, steps};
use remote::Client;
pub use remote::HostRefused;
use serde_json::Value;

use spindle::api::views::{
    CancelBody, CapacityView, CreatedToken, DeployView, Deployed, DeploymentView, ErrorDetail, JobPage, JobView,
    KindList, KindView, LogLineView, LogPage, NewTenant, NewToken, Retention, Rollback, RolledBack, SecretList,
    SecretView, SpecView, Submit, TenantList, TenantOutbound, TenantToken, TenantView, TokenList,
};
use spindle::api::{ScheduleList, ScheduleView};
use spindle::config::parse_duration;

/// Where the host is and who is asking.
#[derive(Clone, Debug, clap::Args)]
pub struct ClientArgs {
    /// The host's API address.
    #[arg(long, env = "SPINDLE_SERVER", default_value = "http://127.0.0.1:7464", global = true)]
    pub server: String,
    /// An API token (a tenant's, or an operator's for `tenant` and other tenants' tokens).
    #[arg(long, env = "SPINDLE_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
}

/// A client command.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Deploy a component as the next version of KIND.
    ///
    /// What the version's steps may reach comes from the flags and from a manifest, the
    /// file beside the component named like it with `.toml` (`greet.wasm` → `greet.toml`)
    /// or given with `--manifest`: `allow = [...]`, `secrets = [...]`, `[settings]`,
    /// `secrets_in_body = true`. Flags add to the manifest.
    Deploy {
        /// The kind's name.
        kind: String,
        /// The component (.wasm).
        file: PathBuf,
        /// An outbound rule, `METHOD scheme://host[:port]/path` (`*` wildcards); repeatable.
        #[arg(long = "allow", value_name = "RULE")]
        allow: Vec<String>,
        /// A tenant secret the kind's steps may use; repeatable.
        #[arg(long = "secret", value_name = "NAME")]
        secrets: Vec<String>,
        /// A setting the steps read with `config.get`, `NAME=VALUE`; repeatable.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        settings: Vec<String>,
        /// Put secrets in place in request bodies too, not only in headers.
        #[arg(long)]
        secrets_in_body: bool,
        /// Steps of this kind running at once, on every host together.
        #[arg(long)]
        max_running: Option<u32>,
        /// The manifest (default: the component's path with `.toml`, if it exists).
        #[arg(long)]
        manifest: Option<PathBuf>,
        /// Answer as soon as the host has checked the component (its imports and exports),
        /// without waiting for it to compile; `spindle kinds KIND` shows how it went.
        #[arg(long)]
        no_wait: bool,
    },
    /// List kinds, or show one with its versions.
    Kinds {
        /// A kind to show in full.
        kind: Option<String>,
    },
    /// Make an earlier (or later) version of KIND current.
    Rollback {
        /// The kind.
        kind: String,
        /// The version to make current.
        version: i64,
    },
    /// Submit a job.
    Submit {
        /// The kind.
        kind: String,
        /// The job's input (JSON). Without it: `{}` if the kind's input schema allows
        /// it, else the command says what the kind expects and submits nothing.
        #[arg(long)]
        input: Option<String>,
        /// forced, critical, scheduled, normal or background.
        #[arg(long)]
        priority: Option<String>,
        /// Idempotency key: a second submission with it returns the first job.
        #[arg(long)]
        key: Option<String>,
        /// An exclusive lease key (repeatable), e.g. `account:42`.
        #[arg(long = "lease-key")]
        lease_keys: Vec<String>,
        /// Run no earlier than this many seconds from now.
        #[arg(long)]
        delay: Option<f64>,
    },
    /// Show a job: steps, attempts, progress, history.
    Job {
        /// The job's id.
        id: String,
    },
    /// List jobs, newest first.
    Jobs {
        /// Only this state.
        #[arg(long)]
        state: Option<String>,
        /// Only this kind.
        #[arg(long)]
        kind: Option<String>,
        /// Only children of this job.
        #[arg(long)]
        parent: Option<String>,
        /// Page size.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// The next_cursor of the previous page.
        #[arg(long)]
        cursor: Option<i64>,
    },
    /// Wait for a job to finish; exit 0 if it succeeded, 1 if it failed or was
    /// cancelled, 3 on timeout.
    Wait {
        /// The job's id.
        id: String,
        /// Give up after this many seconds.
        #[arg(long, default_value_t = 600.0)]
        timeout: f64,
    },
    /// Watch a job's steps progress live; exits like `wait`.
    Watch {
        /// The job's id.
        id: String,
    },
    /// Show a job's logs: what its steps' guests logged and printed, per attempt.
    Logs {
        /// The job's id.
        id: String,
        /// Follow them live until the job is final.
        #[arg(long)]
        follow: bool,
        /// Only this step's lines.
        #[arg(long, value_name = "KEY")]
        step: Option<String>,
    },
    /// Cancel a job.
    Cancel {
        /// The job's id.
        id: String,
        /// Why (required).
        #[arg(long)]
        reason: String,
    },
    /// Pause a job at its next step boundary.
    Pause {
        /// The job's id.
        id: String,
    },
    /// Resume a paused job.
    Resume {
        /// The job's id.
        id: String,
    },
    /// Start a fresh pass of a job.
    Restart {
        /// The job's id.
        id: String,
    },
    /// Retry a failed or cancelled job as a new, linked job.
    Retry {
        /// The job's id.
        id: String,
    },
    /// List failed jobs not yet retried.
    DeadLetters {
        /// Page size.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Manage tenants (operator token).
    #[command(subcommand)]
    Tenant(TenantCommand),
    /// This tenant's usage, limits, and what it has queued and running now.
    Usage,
    /// Manage API tokens: a tenant token its own tenant's, an operator token any.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Manage the tenant's secrets (tenant token). Values go in, never come out.
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Send a signal to a job: a step awaiting a signal of that name gets it (now, or
    /// when it waits).
    Signal {
        /// The job's id.
        id: String,
        /// The signal's name.
        name: String,
        /// Its body (JSON).
        #[arg(long, default_value = "null")]
        data: String,
        /// An idempotency key: sent again with the same key, it is delivered once.
        #[arg(long)]
        key: Option<String>,
    },
    /// Manage cron schedules: each firing submits a job.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
}

/// Schedule management.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum ScheduleCommand {
    /// Create a schedule.
    Create {
        /// Its name.
        name: String,
        /// The kind each firing submits.
        #[arg(long)]
        kind: String,
        /// A cron expression, e.g. `*/5 * * * *` (six fields: seconds first).
        #[arg(long)]
        cron: String,
        /// Each firing's input (JSON).
        #[arg(long, default_value = "null")]
        input: String,
        /// An IANA time zone, e.g. `Europe/Paris`.
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// Missed times: none (only on time), one (the latest), all.
        #[arg(long = "catch-up", default_value = "none")]
        catch_up: String,
        /// skip (nothing fires while the last firing's job is open) or allow.
        #[arg(long, default_value = "skip")]
        overlap: String,
    },
    /// List schedules.
    List,
    /// Pause a schedule.
    Pause {
        /// Its name.
        name: String,
    },
    /// Resume a schedule (times passed while paused are skipped).
    Resume {
        /// Its name.
        name: String,
    },
    /// Delete a schedule (jobs it fired are untouched).
    Delete {
        /// Its name.
        name: String,
    },
}

/// Secret management.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum SecretCommand {
    /// Set a secret from standard input (or `--file`); kinds deployed with
    /// `--secret NAME` use the new value from their next step, with no redeploy.
    Set {
        /// Its name.
        name: String,
        /// Read the value from this file instead of standard input.
        #[arg(long)]
        file: Option<PathBuf>,
    },
    /// List the secrets' names and when they were set.
    List,
    /// Delete a secret.
    Delete {
        /// Its name.
        name: String,
    },
}

/// A deployment manifest: what a kind version's steps may reach.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Manifest {
    allow: Vec<String>,
    secrets: Vec<String>,
    settings: std::collections::BTreeMap<String, String>,
    secrets_in_body: bool,
    max_running: Option<u32>,
}

/// Tenant management.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum TenantCommand {
    /// Create a tenant; prints its first token (shown once).
    Create {
        /// Its name.
        name: String,
    },
    /// List tenants.
    List,
    /// Issue another token for a tenant.
    Token {
        /// The tenant.
        name: String,
    },
    /// Set how long a tenant's finished jobs are kept (`30d`, `12h`, …).
    Retention {
        /// The tenant.
        name: String,
        /// How long; from a minute to ten years.
        #[arg(long, required_unless_present = "default", conflicts_with = "default")]
        keep: Option<String>,
        /// Back to the host's default (`serve --retention`).
        #[arg(long)]
        default: bool,
    },
    /// Set a tenant's limits (operator); flags left out keep their value, `none` lifts one.
    Set {
        /// The tenant.
        name: String,
        /// Its share of claims in a priority layer against other tenants' (1-1000).
        #[arg(long)]
        weight: Option<u32>,
        /// Steps running at once, on every host together (`none`: no limit).
        #[arg(long, value_name = "N|none")]
        max_running: Option<String>,
        /// Jobs submitted and not yet started (`none`: no limit).
        #[arg(long, value_name = "N|none")]
        max_queued: Option<String>,
        /// Submissions per second, `500/s` (`none`: no limit).
        #[arg(long, value_name = "N/s|none")]
        rate: Option<String>,
        /// Submissions in one burst (`none`: a second's worth).
        #[arg(long, value_name = "N|none")]
        burst: Option<String>,
        /// Bytes of deployed components, all versions (`none`: no limit).
        #[arg(long, value_name = "BYTES|none")]
        max_deployed_bytes: Option<String>,
        /// A step's memory in bytes, at most the host's (`none`: the host's).
        #[arg(long, value_name = "BYTES|none")]
        max_memory: Option<String>,
        /// A step's time in milliseconds, at most the host's (`none`: the host's).
        #[arg(long, value_name = "MS|none")]
        max_step_timeout_ms: Option<String>,
        /// A step's fuel, at most the host's (`none`: the host's).
        #[arg(long, value_name = "N|none")]
        max_fuel: Option<String>,
    },
    /// Show a tenant's limits, usage, and what it has queued and running now (operator).
    Show {
        /// The tenant.
        name: String,
    },
    /// Reset a kind's fault breakers on the host answering (operator).
    ResetBreaker {
        /// The tenant.
        name: String,
        /// The kind.
        kind: String,
    },
    /// Set what a tenant's steps may reach, within the operator's `[outbound]` policy.
    Outbound {
        /// The tenant.
        name: String,
        /// A rule, `METHOD scheme://host[:port]/path` (`*` wildcards); repeatable.
        #[arg(long = "allow", value_name = "RULE", required_unless_present = "none", conflicts_with = "none")]
        allow: Vec<String>,
        /// Allow nothing.
        #[arg(long)]
        none: bool,
    },
}

/// Token management.
#[derive(Clone, Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token; prints its id, then the token (shown once).
    Create {
        /// The tenant it is for (a tenant token: only its own, the default).
        #[arg(long)]
        tenant: Option<String>,
        /// An operator token instead (operator token only).
        #[arg(long, conflicts_with = "tenant")]
        operator: bool,
        /// What it is for, shown in listings (default `issued`).
        #[arg(long)]
        name: Option<String>,
        /// Stop working after this long: `30s`, `5m`, `2h`, `30d` (default: until revoked).
        #[arg(long)]
        expires: Option<String>,
    },
    /// List tokens (revoked and expired ones too), never the tokens themselves.
    List {
        /// Only this tenant's (the operator sees every token without it).
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Revoke a token by its id: it stops working at once, on every host.
    Revoke {
        /// The token's id (from `token create` or `token list`).
        id: String,
    },
}

/// Whole seconds of the duration given as `flag`, rounded up: a token asked to last half a
/// second lasts one.
/// Seconds a deploy's upload waits for the compile before the host answers `202`; the
/// client then follows the deploy.
const DEPLOY_WAIT_SECS: u64 = 2;
/// Seconds each look at a compiling deploy waits for it to end.
const DEPLOY_POLL_SECS: u64 = 20;

/// Follows a compiling deploy until it is ready or failed, saying on stderr that it waits.
async fn follow_deploy(client: &Client, kind: &str, mut deploy: DeployView, json: bool) -> anyhow::Result<DeployView> {
    let started = std::time::Instant::now();
    while deploy.state == "compiling" {
        if !json {
            eprintln!("compiling {kind} ({} bytes, {} s so far)…", deploy.size, started.elapsed().as_secs());
        }
        deploy = client.get(&format!("/v1/kinds/{kind}/deploys/{}?wait={DEPLOY_POLL_SECS}", deploy.id)).await?;
    }
    Ok(deploy)
}

/// The description of `kind`'s current version, if it still reads.
fn current_spec(kind: &KindView) -> Option<&SpecView> {
    kind.versions.iter().flatten().find(|v| v.version == kind.current_version).and_then(|v| v.spec.as_ref())
}

/// The input `spindle submit KIND` sends without `--input`: `{}` when the kind's current
/// version accepts it; otherwise an error that shows the schema and an example, and
/// nothing is submitted.
async fn default_input(client: &Client, kind: &str) -> anyhow::Result<Value> {
    let empty = Value::Object(Default::default());
    let found: KindView = client.get(&format!("/v1/kinds/{kind}")).await?;
    let Some(schema) = current_spec(&found).and_then(|spec| spec.input_schema.as_ref()) else { return Ok(empty) };
    let accepts_empty =
        spindle_runtime::InputSchema::compile_value(schema).is_ok_and(|compiled| compiled.check_value(&empty).is_ok());
    if accepts_empty {
        return Ok(empty);
    }
    let example = spindle_runtime::schema_example(schema);
    anyhow::bail!(
        "{kind} expects an input that follows its schema; pass one with --input, for example\n  spindle submit {kind} --input '{example}'\nthe schema (`spindle kinds {kind}` shows it too):\n{}",
        serde_json::to_string_pretty(schema).unwrap_or_default()
    )
}

/// One log line as `spindle logs` prints it: time, step and attempt, level, stream, text.
fn log_line(line: &LogLineView) -> String {
    format!("{} {}#{} {:<5} {:<7} {}", line.at, line.step, line.attempt, line.level, line.stream, line.message)
}

/// One deploy as `spindle kinds KIND` lists it.
fn deploy_line(d: &DeployView) -> String {
    let outcome = match (&d.version, &d.error) {
        (Some(version), _) => format!("version {version}"),
        (None, Some(error)) => format!("{}: {}", error.code, error.message),
        (None, None) => String::new(),
    };
    format!("{:<10} {:<28} {:>10} bytes  {outcome}", d.state, d.created_at, d.size)
}

fn whole_secs(text: &str, flag: &str) -> anyhow::Result<u64> {
    let duration = parse_duration(text).with_context(|| flag.to_owned())?;
    Ok(duration.as_secs().saturating_add(u64::from(duration.subsec_nanos() > 0)))
}

/// A tenant's retention as a human reads it.
/// Applies a `--flag N|none` to a limit: absent keeps it, `none` lifts it.
fn set_limit<T: std::str::FromStr>(limit: &mut Option<T>, flag: Option<&str>, name: &str) -> anyhow::Result<()> {
    match flag {
        None => {}
        Some("none") => *limit = None,
        Some(value) => {
            *limit = Some(value.parse().map_err(|_| anyhow::anyhow!("{name}: {value:?} is not a number or `none`"))?)
        }
    }
    Ok(())
}

fn retention_of(tenant: &TenantView) -> String {
    match tenant.retention_secs {
        Some(secs) => format!("finished jobs kept {secs} s"),
        None => "finished jobs kept the host's default".to_owned(),
    }
}

/// `?tenant=NAME`, escaped.
fn tenant_query(tenant: Option<&str>) -> String {
    tenant.map(|t| format!("?tenant={}", percent_encode(t))).unwrap_or_default()
}

/// `text` with everything but unreserved URL characters percent-encoded.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Runs a client command; answers the process's exit code.
pub async fn run(args: ClientArgs, command: ClientCommand) -> anyhow::Result<u8> {
    let client = Client::new(&args.server, args.token.clone())?;
    let json = args.json;
    // Commands that take no body still send `{}`, as JSON clients do.
    let empty = serde_json::json!({});
    match command {
        ClientCommand::Deploy {
            kind,
            file,
            allow,
            secrets,
            settings,
            secrets_in_body,
            max_running,
            manifest,
            no_wait,
        } => {
            let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let beside = file.with_extension("toml");
            let manifest: Manifest = match manifest.or_else(|| beside.exists().then_some(beside)) {
                Some(path) => {
                    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
                    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
                }
                None => Manifest::default(),
            };
            let mut view = DeploymentView {
                allow: manifest.allow,
                secrets: manifest.secrets,
                settings: manifest.settings,
                secrets_in_body: manifest.secrets_in_body || secrets_in_body,
                max_running: max_running.or(manifest.max_running),
            };
            view.allow.extend(allow);
            view.secrets.extend(secrets);
            for setting in settings {
                let (name, value) = setting.split_once('=').context("--set takes NAME=VALUE")?;
                view.settings.insert(name.to_owned(), value.to_owned());
            }
            let wait = if no_wait { 0 } else { DEPLOY_WAIT_SECS };
            let path = if view == DeploymentView::default() {
                format!("/v1/kinds/{kind}?wait={wait}")
            } else {
                format!("/v1/kinds/{kind}?wait={wait}&deployment={}", percent_encode(&serde_json::to_string(&view)?))
            };
            let (status, answer) = client.put_component(&path, bytes).await?;
            if status == reqwest::StatusCode::ACCEPTED {
                let mut deploy: DeployView = serde_json::from_value(answer).context("the host's 202 answer")?;
                if !no_wait {
                    deploy = follow_deploy(&client, &kind, deploy, json).await?;
                }
                emit(json, &deploy, |d| match d.state.as_str() {
                    "ready" => println!(
                        "deployed {} version {} (sha256 {}…)",
                        d.kind,
                        d.version.unwrap_or(0),
                        short(&d.digest)
                    ),
                    state => println!(
                        "deploy {} of {} is {state}: `spindle kinds {}` shows how it ends",
                        d.id, d.kind, d.kind
                    ),
                });
                if deploy.state == "failed" {
                    let error = deploy.error.unwrap_or_else(|| ErrorDetail {
                        code: "internal".into(),
                        message: "the deploy failed".into(),
                        ..Default::default()
                    });
                    return Err(anyhow::Error::new(remote::HostRefused::deploy_failed(error)));
                }
                return Ok(0);
            }
            let deployed: Deployed = serde_json::from_value(answer).context("the host's answer")?;
            emit(json, &deployed, |d| {
                println!(
                    "deployed {} version {} (sha256 {}…), steps {}",
                    d.kind,
                    d.version,
                    short(&d.digest),
                    steps(Some(&d.spec))
                );
            });
        }
        ClientCommand::Kinds { kind: Some(kind) } => {
            let found: KindView = client.get(&format!("/v1/kinds/{kind}")).await?;
            emit(json, &found, |k| {
                println!("{} (current version {}, latest {})", k.kind, k.current_version, k.latest_version);
                println!("  {:<8} {:<14} {:<28} {:<10} steps", "version", "digest", "deployed", "breaker");
                for version in k.versions.iter().flatten() {
                    let breaker = k.breakers.iter().find(|b| b.version == version.version);
                    println!(
                        "  {:<8} {:<14} {:<28} {:<10} {}",
                        version.version,
                        short(&version.digest),
                        version.created_at,
                        breaker.map_or("closed", |b| b.state.as_str()),
                        steps(version.spec.as_ref())
                    );
                }
                if let Some(spec) = current_spec(k) {
                    print::input_schema(&k.kind, k.current_version, spec);
                }
                if !k.deploys.is_empty() {
                    println!("  latest deploys:");
                    for d in &k.deploys {
                        println!("  {}", deploy_line(d));
                    }
                }
            });
        }
        ClientCommand::Kinds { kind: None } => {
            let kinds: KindList = client.get("/v1/kinds").await?;
            emit(json, &kinds, |list| {
                println!("{:<24} {:>8} {:>8}  breaker", "kind", "current", "latest");
                for k in &list.kinds {
                    println!(
                        "{:<24} {:>8} {:>8}  {}",
                        k.kind,
                        k.current_version,
                        k.latest_version,
                        k.current_breaker()
                    );
                }
                for d in &list.compiling {
                    println!(
                        "{:<24} {:>8} {:>8}  compiling since {} ({} bytes)",
                        d.kind, "-", "-", d.created_at, d.size
                    );
                }
            });
        }
        ClientCommand::Rollback { kind, version } => {
            let done: RolledBack = client.post(&format!("/v1/kinds/{kind}/rollback"), &Rollback { version }).await?;
            emit(json, &done, |r| println!("{} now runs version {} for new jobs", r.kind, r.current_version));
        }
        ClientCommand::Submit { kind, input, priority, key, lease_keys, delay } => {
            let input: Value = match input {
                Some(input) => serde_json::from_str(&input).context("--input is not valid JSON")?,
                None => default_input(&client, &kind).await?,
            };
            let submit =
                Submit { kind, input, priority, run_at: None, delay_secs: delay, idempotency_key: key, lease_keys };
            let job: JobView = client.post("/v1/jobs", &submit).await?;
            emit(json, &job, |j| println!("{}", j.id));
        }
        ClientCommand::Job { id } => {
            let job: JobView = client.get(&format!("/v1/jobs/{id}")).await?;
            let children: Option<JobPage> = match &job.children {
                Some(_) if !json => Some(client.get(&format!("/v1/jobs?parent={id}&limit=500")).await?),
                _ => None,
            };
            emit(json, &job, |j| {
                print::job(j);
                if let Some(children) = &children {
                    print::children(children);
                }
            });
        }
        ClientCommand::Signal { id, name, data, key } => {
            let body: Value = serde_json::from_str(&data).context("--data is not valid JSON")?;
            let path = format!("/v1/jobs/{id}/signals/{}", percent_encode(&name));
            let job: JobView = match &key {
                Some(key) => client.post_keyed(&path, &body, key).await?,
                None => client.post(&path, &body).await?,
            };
            emit(json, &job, |j| println!("{} {} (signal {name} kept)", j.id, j.state));
        }
        ClientCommand::Schedule(ScheduleCommand::Create { name, kind, cron, input, timezone, catch_up, overlap }) => {
            let input: Value = serde_json::from_str(&input).context("--input is not valid JSON")?;
            let body = serde_json::json!({
                "name": name, "kind": kind, "cron": cron, "input": input, "timezone": timezone,
                "catch_up": catch_up, "overlap": overlap,
            });
            let created: ScheduleView = client.post("/v1/schedules", &body).await?;
            emit(json, &created, |s| println!("schedule {} fires {} next at {}", s.name, s.kind, s.next_fire_at));
        }
        ClientCommand::Schedule(ScheduleCommand::List) => {
            let list: ScheduleList = client.get("/v1/schedules").await?;
            emit(json, &list, print::schedules);
        }
        ClientCommand::Schedule(ScheduleCommand::Pause { name }) => {
            let s: ScheduleView =
                client.post(&format!("/v1/schedules/{}/pause", percent_encode(&name)), &empty).await?;
            emit(json, &s, |s| println!("schedule {} paused", s.name));
        }
        ClientCommand::Schedule(ScheduleCommand::Resume { name }) => {
            let s: ScheduleView =
                client.post(&format!("/v1/schedules/{}/resume", percent_encode(&name)), &empty).await?;
            emit(json, &s, |s| println!("schedule {} resumed, next at {}", s.name, s.next_fire_at));
        }
        ClientCommand::Schedule(ScheduleCommand::Delete { name }) => {
            client.delete(&format!("/v1/schedules/{}", percent_encode(&name))).await?;
            if !json {
                println!("schedule {name} deleted");
            }
        }
        ClientCommand::Jobs { state, kind, parent, limit, cursor } => {
            let mut query = vec![format!("limit={limit}")];
            query.extend(state.map(|s| format!("state={s}")));
            query.extend(kind.map(|k| format!("kind={k}")));
            query.extend(parent.map(|p| format!("parent={p}")));
            query.extend(cursor.map(|c| format!("cursor={c}")));
            let page: JobPage = client.get(&format!("/v1/jobs?{}", query.join("&"))).await?;
            emit(json, &page, print::page);
        }
        ClientCommand::DeadLetters { limit } => {
            let page: JobPage = client.get(&format!("/v1/dead-letters?limit={limit}")).await?;
            emit(json, &page, print::page);
        }
        ClientCommand::Wait { id, timeout } => {
            let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
            loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now()).as_secs_f64().min(60.0);
                let job: JobView = client.get(&format!("/v1/jobs/{id}/wait?timeout={left:.3}")).await?;
                if is_final(&job.state) {
                    emit(json, &job, |j| println!("{} {}", j.id, state_line(j)));
                    return Ok(exit_for(&job.state));
                }
                if tokio::time::Instant::now() >= deadline {
                    emit(json, &job, |j| println!("{} still {} (timed out)", j.id, j.state));
                    return Ok(3);
                }
            }
        }
        ClientCommand::Watch { id } => return watch::watch(&client, &id, json).await,
        ClientCommand::Logs { id, follow, step } => {
            let step_query = step.as_deref().map(|s| format!("&step={}", percent_encode(s))).unwrap_or_default();
            if follow {
                client
                    .events(&format!("/v1/jobs/{id}/logs?follow=true{step_query}"), |name, data| {
                        if name == "line" {
                            let line: LogLineView = serde_json::from_str(data).context("a log line")?;
                            if json {
                                println!("{data}");
                            } else {
                                println!("{}", log_line(&line));
                            }
                        }
                        Ok(name != "end")
                    })
                    .await?;
            } else {
                let page: LogPage = client.get(&format!("/v1/jobs/{id}/logs?follow=false{step_query}")).await?;
                emit(json, &page, |p| {
                    for line in &p.lines {
                        println!("{}", log_line(line));
                    }
                    if p.capped {
                        println!("(the job reached its log cap: {} later lines were counted, not kept)", p.dropped);
                    }
                });
            }
        }
        ClientCommand::Cancel { id, reason } => {
            let job: JobView = client.post(&format!("/v1/jobs/{id}/cancel"), &CancelBody { reason }).await?;
            emit(json, &job, |j| println!("{} {}", j.id, state_line(j)));
        }
        ClientCommand::Pause { id } => {
            let job: JobView = client.post(&format!("/v1/jobs/{id}/pause"), &empty).await?;
            emit(json, &job, |j| {
                println!("{} {}{}", j.id, state_line(j), pending(j.pause_requested, "pausing at the step boundary"))
            });
        }
        ClientCommand::Resume { id } => {
            let job: JobView = client.post(&format!("/v1/jobs/{id}/resume"), &empty).await?;
            emit(json, &job, |j| println!("{} {}", j.id, state_line(j)));
        }
        ClientCommand::Restart { id } => {
            let job: JobView = client.post(&format!("/v1/jobs/{id}/restart"), &empty).await?;
            emit(json, &job, |j| {
                println!(
                    "{} {} pass {}{}",
                    j.id,
                    state_line(j),
                    j.pass,
                    pending(j.restart_requested, "restart waiting for the step boundary")
                )
            });
        }
        ClientCommand::Retry { id } => {
            let job: JobView = client.post(&format!("/v1/jobs/{id}/retry"), &empty).await?;
            emit(json, &job, |j| println!("retried as {}", j.id));
        }
        ClientCommand::Tenant(TenantCommand::Create { name }) => {
            let created: TenantToken = client.post("/v1/tenants", &NewTenant { name }).await?;
            emit(json, &created, |t| {
                println!("tenant {} created; its token (shown once):", t.tenant);
                println!("{}", t.token);
            });
        }
        ClientCommand::Tenant(TenantCommand::Token { name }) => {
            let issued: TenantToken = client.post(&format!("/v1/tenants/{name}/tokens"), &empty).await?;
            emit(json, &issued, |t| println!("{}", t.token));
        }
        ClientCommand::Token(TokenCommand::Create { tenant, operator, name, expires }) => {
            let expires_in_secs = expires.as_deref().map(|e| whole_secs(e, "--expires")).transpose()?;
            let request = NewToken { tenant, operator, name, expires_in_secs };
            let created: CreatedToken = client.post("/v1/tokens", &request).await?;
            emit(json, &created, print::created_token);
        }
        ClientCommand::Token(TokenCommand::List { tenant }) => {
            let tokens: TokenList = client.get(&format!("/v1/tokens{}", tenant_query(tenant.as_deref()))).await?;
            emit(json, &tokens, print::tokens);
        }
        ClientCommand::Token(TokenCommand::Revoke { id }) => {
            client.delete(&format!("/v1/tokens/{}", percent_encode(&id))).await?;
            let revoked = serde_json::json!({ "id": id.as_str(), "revoked": true });
            emit(json, &revoked, |_| println!("token {id} revoked"));
        }
        ClientCommand::Tenant(TenantCommand::Set {
            name,
            weight,
            max_running,
            max_queued,
            rate,
            burst,
            max_deployed_bytes,
            max_memory,
            max_step_timeout_ms,
            max_fuel,
        }) => {
            let path = format!("/v1/tenants/{}/limits", percent_encode(&name));
            let current: CapacityView = client.get(&path).await?;
            let mut limits = current.limits;
            if weight.is_some() {
                limits.weight = weight;
            }
            set_limit(&mut limits.max_running, max_running.as_deref(), "--max-running")?;
            set_limit(&mut limits.max_queued, max_queued.as_deref(), "--max-queued")?;
            let rate = rate.map(|r| r.trim_end_matches("/s").to_owned());
            set_limit(&mut limits.rate_per_sec, rate.as_deref(), "--rate")?;
            set_limit(&mut limits.rate_burst, burst.as_deref(), "--burst")?;
            set_limit(&mut limits.max_deployed_bytes, max_deployed_bytes.as_deref(), "--max-deployed-bytes")?;
            set_limit(&mut limits.max_memory_bytes, max_memory.as_deref(), "--max-memory")?;
            set_limit(&mut limits.max_step_timeout_ms, max_step_timeout_ms.as_deref(), "--max-step-timeout-ms")?;
            set_limit(&mut limits.max_fuel, max_fuel.as_deref(), "--max-fuel")?;
            let capacity: CapacityView = client.put(&path, &limits).await?;
            emit(json, &capacity, print::capacity);
        }
        ClientCommand::Tenant(TenantCommand::Show { name }) => {
            let capacity: CapacityView = client.get(&format!("/v1/tenants/{}/limits", percent_encode(&name))).await?;
            emit(json, &capacity, print::capacity);
        }
        ClientCommand::Tenant(TenantCommand::ResetBreaker { name, kind }) => {
            let path = format!("/v1/tenants/{}/kinds/{}/breaker/reset", percent_encode(&name), percent_encode(&kind));
            let breakers: Vec<spindle::api::views::BreakerStateView> = client.post(&path, &empty).await?;
            emit(json, &breakers, |list| {
                println!("{name}/{kind}: breakers reset");
                for b in list {
                    println!("  version {} {}", b.version, b.state);
                }
            });
        }
        ClientCommand::Usage => {
            let capacity: CapacityView = client.get("/v1/usage").await?;
            emit(json, &capacity, print::capacity);
        }
        ClientCommand::Tenant(TenantCommand::List) => {
            let tenants: TenantList = client.get("/v1/tenants").await?;
            emit(json, &tenants, |list| {
                for t in &list.tenants {
                    println!("{:<24} {}  {}", t.name, t.created_at, retention_of(t));
                }
            });
        }
        ClientCommand::Tenant(TenantCommand::Outbound { name, allow, none }) => {
            let request = TenantOutbound { tenant: name.clone(), allow: (!none).then_some(allow) };
            let answer: TenantOutbound =
                client.put(&format!("/v1/tenants/{}/outbound", percent_encode(&name)), &request).await?;
            emit(json, &answer, |t| match t.allow.as_deref() {
                Some(rules) if !rules.is_empty() => println!("tenant {} may reach: {}", t.tenant, rules.join(", ")),
                _ => println!("tenant {} may reach nothing", t.tenant),
            });
        }
        ClientCommand::Secret(SecretCommand::Set { name, file }) => {
            let value = match file {
                Some(path) => std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
                None => {
                    let mut value = Vec::new();
                    std::io::Read::read_to_end(&mut std::io::stdin(), &mut value).context("reading standard input")?;
                    value
                }
            };
            // A value piped from `echo` ends in a newline no header wants.
            let value = value.strip_suffix(b"\n").map(<[u8]>::to_vec).unwrap_or(value);
            let set: SecretView = client.put_bytes(&format!("/v1/secrets/{}", percent_encode(&name)), value).await?;
            emit(json, &set, |s| println!("secret {} set at {}", s.name, s.updated_at));
        }
        ClientCommand::Secret(SecretCommand::List) => {
            let list: SecretList = client.get("/v1/secrets").await?;
            emit(json, &list, |l| {
                for s in &l.secrets {
                    println!("{:<32} set {}", s.name, s.updated_at);
                }
            });
        }
        ClientCommand::Secret(SecretCommand::Delete { name }) => {
            client.delete(&format!("/v1/secrets/{}", percent_encode(&name))).await?;
            if !json {
                println!("secret {name} deleted");
            }
        }
        ClientCommand::Tenant(TenantCommand::Retention { name, keep, default: _ }) => {
            let retention_secs = keep.as_deref().map(|k| whole_secs(k, "--keep")).transpose()?;
            let tenant: TenantView = client
                .put(&format!("/v1/tenants/{}/retention", percent_encode(&name)), &Retention { retention_secs })
                .await?;
            emit(json, &tenant, |t| println!("tenant {}: {}", t.name, retention_of(t)));
        }
    }
    Ok(0)
}

/// Fails with the host's own words when it refused: `code (reason): message`.
pub fn describe_error(error: &anyhow::Error) -> String {
    match error.downcast_ref::<HostRefused>() {
        Some(refused) => refused.to_string(),
        None => format!("{error:#}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_whole_seconds_rounded_up_and_tenants_are_escaped() {
        assert_eq!(whole_secs("30d", "--expires").ok(), Some(30 * 86_400));
        assert_eq!(whole_secs("2h", "--expires").ok(), Some(7_200));
        assert_eq!(whole_secs("500ms", "--expires").ok(), Some(1), "never rounded down to no time at all");
        assert!(whole_secs("soon", "--expires").is_err());
        assert_eq!(tenant_query(Some("a b/c")), "?tenant=a%20b%2Fc");
        assert_eq!(tenant_query(None), "");
    }
}
