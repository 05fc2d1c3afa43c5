//! The `spindle` client commands: talk to a running host over its HTTP API. Human
//! tables by default, `--json` for scripts.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use serde_json::{Value, json};

/// Where the host is and who is asking.
#[derive(Clone, Debug, clap::Args)]
pub struct ClientArgs {
    /// The host's API address.
    #[arg(long, env = "SPINDLE_SERVER", default_value = "http://127.0.0.1:7464", global = true)]
    pub server: String,
    /// An API token (a tenant's, or the operator's for `tenant`).
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
    Deploy {
        /// The kind's name.
        kind: String,
        /// The component (.wasm).
        file: PathBuf,
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
        /// The job's input (JSON).
        #[arg(long, default_value = "{}")]
        input: String,
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
}

/// An error the host answered.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct HostRefused {
    /// The stable code.
    pub code: String,
    /// The message.
    pub message: String,
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

impl Client {
    fn new(args: &ClientArgs) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(330)).build()?;
        Ok(Self { http, base: args.server.trim_end_matches('/').to_owned(), token: args.token.clone() })
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.with_context(|| format!("cannot reach the host at {}", self.base))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        let code = body["error"]["code"].as_str().unwrap_or("error").to_owned();
        let mut message = body["error"]["message"].as_str().unwrap_or("").to_owned();
        if let Some(state) = body["error"]["state"].as_str() {
            message.push_str(&format!(" [job is {state}]"));
        }
        Err(HostRefused { code, message: if message.is_empty() { status.to_string() } else { message } }.into())
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.base))).await
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body)).await
    }
}

/// Runs a client command; answers the process's exit code.
pub async fn run(args: ClientArgs, command: ClientCommand) -> anyhow::Result<u8> {
    let client = Client::new(&args)?;
    let out = |value: &Value, human: &dyn Fn(&Value)| {
        if args.json {
            println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
        } else {
            human(value);
        }
    };
    match command {
        ClientCommand::Deploy { kind, file } => {
            let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let request = client
                .http
                .put(format!("{}/v1/kinds/{kind}", client.base))
                .header("content-type", "application/wasm")
                .body(bytes);
            let deployed = client.send(request).await?;
            out(&deployed, &|v| {
                let steps: Vec<&str> = v["spec"]["steps"]
                    .as_array()
                    .map(|s| s.iter().filter_map(|s| s["key"].as_str()).collect())
                    .unwrap_or_default();
                println!(
                    "deployed {} version {} (sha256 {}…), steps {}",
                    v["kind"].as_str().unwrap_or(""),
                    v["version"],
                    &v["digest"].as_str().unwrap_or("").chars().take(12).collect::<String>(),
                    steps.join(" → ")
                );
            });
        }
        ClientCommand::Kinds { kind: Some(kind) } => {
            let found = client.get(&format!("/v1/kinds/{kind}")).await?;
            out(&found, &|v| {
                println!(
                    "{} (current version {}, latest {})",
                    v["kind"].as_str().unwrap_or(""),
                    v["current_version"],
                    v["latest_version"]
                );
                println!("  {:<8} {:<14} {:<28} steps", "version", "digest", "deployed");
                for version in v["versions"].as_array().into_iter().flatten() {
                    let steps: Vec<&str> = version["spec"]["steps"]
                        .as_array()
                        .map(|s| s.iter().filter_map(|s| s["key"].as_str()).collect())
                        .unwrap_or_default();
                    println!(
                        "  {:<8} {:<14} {:<28} {}",
                        int(&version["version"]),
                        version["digest"].as_str().unwrap_or("").chars().take(12).collect::<String>(),
                        version["created_at"].as_str().unwrap_or(""),
                        steps.join(" → ")
                    );
                }
            });
        }
        ClientCommand::Kinds { kind: None } => {
            let kinds = client.get("/v1/kinds").await?;
            out(&kinds, &|v| {
                println!("{:<24} {:>8} {:>8}", "kind", "current", "latest");
                for k in v["kinds"].as_array().into_iter().flatten() {
                    println!(
                        "{:<24} {:>8} {:>8}",
                        k["kind"].as_str().unwrap_or(""),
                        int(&k["current_version"]),
                        int(&k["latest_version"])
                    );
                }
            });
        }
        ClientCommand::Rollback { kind, version } => {
            let done = client.post(&format!("/v1/kinds/{kind}/rollback"), json!({ "version": version })).await?;
            out(&done, &|v| {
                println!("{} now runs version {} for new jobs", v["kind"].as_str().unwrap_or(""), v["current_version"])
            });
        }
        ClientCommand::Submit { kind, input, priority, key, lease_keys, delay } => {
            let input: Value = serde_json::from_str(&input).context("--input is not valid JSON")?;
            let mut body = json!({ "kind": kind, "input": input, "lease_keys": lease_keys });
            if let Some(p) = priority {
                body["priority"] = json!(p);
            }
            if let Some(k) = key {
                body["idempotency_key"] = json!(k);
            }
            if let Some(d) = delay {
                body["delay_secs"] = json!(d);
            }
            let job = client.post("/v1/jobs", body).await?;
            out(&job, &|v| println!("{}", v["id"].as_str().unwrap_or("")));
        }
        ClientCommand::Job { id } => {
            let job = client.get(&format!("/v1/jobs/{id}")).await?;
            out(&job, &print_job);
        }
        ClientCommand::Jobs { state, kind, limit, cursor } => {
            let mut query = vec![format!("limit={limit}")];
            query.extend(state.map(|s| format!("state={s}")));
            query.extend(kind.map(|k| format!("kind={k}")));
            query.extend(cursor.map(|c| format!("cursor={c}")));
            let page = client.get(&format!("/v1/jobs?{}", query.join("&"))).await?;
            out(&page, &print_page);
        }
        ClientCommand::DeadLetters { limit } => {
            let page = client.get(&format!("/v1/dead-letters?limit={limit}")).await?;
            out(&page, &print_page);
        }
        ClientCommand::Wait { id, timeout } => {
            let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
            loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now()).as_secs_f64().min(60.0);
                let job = client.get(&format!("/v1/jobs/{id}/wait?timeout={left:.3}")).await?;
                let state = job["state"].as_str().unwrap_or("").to_owned();
                if is_final(&state) {
                    out(&job, &|v| println!("{} {}", v["id"].as_str().unwrap_or(""), state_line(v)));
                    return Ok(exit_for(&state));
                }
                if tokio::time::Instant::now() >= deadline {
                    out(&job, &|v| println!("{} still {} (timed out)", v["id"].as_str().unwrap_or(""), state));
                    return Ok(3);
                }
            }
        }
        ClientCommand::Watch { id } => return watch(&client, &id, args.json).await,
        ClientCommand::Cancel { id, reason } => {
            let job = client.post(&format!("/v1/jobs/{id}/cancel"), json!({ "reason": reason })).await?;
            out(&job, &|v| println!("{} {}", v["id"].as_str().unwrap_or(""), state_line(v)));
        }
        ClientCommand::Pause { id } => {
            let job = client.post(&format!("/v1/jobs/{id}/pause"), json!({})).await?;
            out(&job, &|v| {
                println!(
                    "{} {}{}",
                    v["id"].as_str().unwrap_or(""),
                    state_line(v),
                    pending(v, "pause_requested", "pausing at the step boundary")
                )
            });
        }
        ClientCommand::Resume { id } => {
            let job = client.post(&format!("/v1/jobs/{id}/resume"), json!({})).await?;
            out(&job, &|v| println!("{} {}", v["id"].as_str().unwrap_or(""), state_line(v)));
        }
        ClientCommand::Restart { id } => {
            let job = client.post(&format!("/v1/jobs/{id}/restart"), json!({})).await?;
            out(&job, &|v| {
                println!(
                    "{} {} pass {}{}",
                    v["id"].as_str().unwrap_or(""),
                    state_line(v),
                    v["pass"],
                    pending(v, "restart_requested", "restart waiting for the step boundary")
                )
            });
        }
        ClientCommand::Retry { id } => {
            let job = client.post(&format!("/v1/jobs/{id}/retry"), json!({})).await?;
            out(&job, &|v| println!("retried as {}", v["id"].as_str().unwrap_or("")));
        }
        ClientCommand::Tenant(TenantCommand::Create { name }) => {
            let created = client.post("/v1/tenants", json!({ "name": name })).await?;
            out(&created, &|v| {
                println!("tenant {} created; its token (shown once):", v["tenant"].as_str().unwrap_or(""));
                println!("{}", v["token"].as_str().unwrap_or(""));
            });
        }
        ClientCommand::Tenant(TenantCommand::Token { name }) => {
            let created = client.post(&format!("/v1/tenants/{name}/tokens"), json!({})).await?;
            out(&created, &|v| println!("{}", v["token"].as_str().unwrap_or("")));
        }
        ClientCommand::Tenant(TenantCommand::List) => {
            let tenants = client.get("/v1/tenants").await?;
            out(&tenants, &|v| {
                for t in v["tenants"].as_array().into_iter().flatten() {
                    println!("{:<24} {}", t["name"].as_str().unwrap_or(""), t["created_at"].as_str().unwrap_or(""));
                }
            });
        }
    }
    Ok(0)
}

/// A JSON number for a width-aligned column.
fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// A note when a request is recorded but waits.
fn pending(v: &Value, flag: &str, note: &str) -> String {
    if v[flag].as_bool() == Some(true) { format!(" ({note})") } else { String::new() }
}

fn is_final(state: &str) -> bool {
    matches!(state, "succeeded" | "failed" | "cancelled")
}

fn exit_for(state: &str) -> u8 {
    if state == "succeeded" { 0 } else { 1 }
}

fn state_line(v: &Value) -> String {
    let mut line = format!("{} {}%", v["state"].as_str().unwrap_or(""), v["progress"]);
    if let Some(code) = v["failure"]["code"].as_str() {
        line.push_str(&format!(" ({code}: {})", v["failure"]["message"].as_str().unwrap_or("")));
    }
    line
}

fn print_page(v: &Value) {
    println!("{:<38} {:<16} {:>3} {:<10} {:>4}  {:<28} why", "id", "kind", "v", "state", "%", "created");
    for job in v["jobs"].as_array().into_iter().flatten() {
        println!(
            "{:<38} {:<16} {:>3} {:<10} {:>4}  {:<28} {}",
            job["id"].as_str().unwrap_or(""),
            job["kind"].as_str().unwrap_or(""),
            int(&job["kind_version"]),
            job["state"].as_str().unwrap_or(""),
            int(&job["progress"]),
            job["created_at"].as_str().unwrap_or(""),
            job["failure_code"].as_str().unwrap_or("")
        );
    }
    if let Some(next) = v["next_cursor"].as_i64() {
        println!("more: --cursor {next}");
    }
}

fn print_job(v: &Value) {
    println!("job      {}", v["id"].as_str().unwrap_or(""));
    println!(
        "kind     {} v{} ({} priority)",
        v["kind"].as_str().unwrap_or(""),
        v["kind_version"],
        v["priority"].as_str().unwrap_or("")
    );
    println!("state    {}", state_line(v));
    println!("created  {}", v["created_at"].as_str().unwrap_or(""));
    for (label, key) in
        [("started", "started_at"), ("settled", "settled_at"), ("retry of", "predecessor"), ("retried", "successor")]
    {
        if let Some(value) = v[key].as_str() {
            println!("{label:<8} {value}");
        }
    }
    println!("\n  {:<16} {:<10} {:>8}  last attempt", "step", "state", "attempts");
    for step in v["steps"].as_array().into_iter().flatten() {
        let attempts = step["attempts"].as_array().map_or(0, Vec::len);
        let last = step["attempts"].as_array().and_then(|a| a.last());
        let detail = match last {
            Some(a) => {
                let code = a["failure"]["code"].as_str().map(|c| format!(" {c}")).unwrap_or_default();
                format!("{}{code}", a["outcome"].as_str().unwrap_or(""))
            }
            None if step["carried"].as_bool() == Some(true) => "carried from the predecessor".to_owned(),
            None => String::new(),
        };
        println!(
            "  {:<16} {:<10} {:>8}  {detail}",
            step["key"].as_str().unwrap_or(""),
            step["state"].as_str().unwrap_or(""),
            attempts
        );
    }
    if let Some(history) = v["history"].as_array() {
        println!("\nhistory");
        for entry in history {
            let mut fields = entry.clone();
            let at = fields["at"].as_str().unwrap_or("").to_owned();
            let event = fields["event"].as_str().unwrap_or("").to_owned();
            if let Some(map) = fields.as_object_mut() {
                map.remove("at");
                map.remove("event");
            }
            let rest =
                if fields.as_object().is_some_and(|m| m.is_empty()) { String::new() } else { fields.to_string() };
            println!("  {at}  {event:<18} {rest}");
        }
    }
}

/// Live progress bars for a job's steps, until the job is final.
async fn watch(client: &Client, id: &str, json: bool) -> anyhow::Result<u8> {
    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template("  {prefix:<16} [{bar:30}] {pos:>3}% {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let overall = bars.add(ProgressBar::new(100));
    overall.set_style(style.clone());
    overall.set_prefix("job");
    let mut step_bars: Vec<ProgressBar> = Vec::new();
    loop {
        let job = client.get(&format!("/v1/jobs/{id}")).await?;
        let steps = job["steps"].as_array().cloned().unwrap_or_default();
        if step_bars.len() != steps.len() {
            for bar in step_bars.drain(..) {
                bars.remove(&bar);
            }
            for step in &steps {
                let bar = bars.add(ProgressBar::new(100));
                bar.set_style(style.clone());
                bar.set_prefix(step["key"].as_str().unwrap_or("").to_owned());
                step_bars.push(bar);
            }
        }
        overall.set_position(job["progress"].as_u64().unwrap_or(0));
        overall.set_message(job["state"].as_str().unwrap_or("").to_owned());
        for (bar, step) in step_bars.iter().zip(&steps) {
            let state = step["state"].as_str().unwrap_or("");
            let percent = match state {
                "completed" | "skipped" => 100,
                _ => match (step["done"].as_u64(), step["total"].as_u64()) {
                    (Some(done), Some(total)) if total > 0 => done.min(total) * 100 / total,
                    _ => 0,
                },
            };
            bar.set_position(percent);
            let attempts = step["attempts"].as_array().map_or(0, Vec::len);
            bar.set_message(if attempts > 1 { format!("{state} (attempt {attempts})") } else { state.to_owned() });
        }
        let state = job["state"].as_str().unwrap_or("").to_owned();
        if is_final(&state) {
            overall.finish();
            for bar in &step_bars {
                bar.finish();
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&job).unwrap_or_default());
            } else {
                println!("{id} {}", state_line(&job));
            }
            return Ok(exit_for(&state));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Fails with the host's own words when it refused.
pub fn describe_error(error: &anyhow::Error) -> String {
    match error.downcast_ref::<HostRefused>() {
        Some(refused) => format!("{}: {}", refused.code, refused.message),
        None => format!("{error:#}"),
    }
}
