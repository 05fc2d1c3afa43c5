//! The job commands: `submit`, `job`, `jobs`, `wait`, `logs`, `dead-letters`, run control
//! (`cancel`, `pause`, `resume`, `restart`, `retry`) and `signal`. (`watch` is in `watch.rs`.)

use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use super::kinds::default_input;
use super::print::{self, emit, exit_for, is_final, pending, state_line};
use super::remote::Client;
use super::{empty_body, percent_encode};
use spindle::api::views::{CancelBody, JobPage, JobView, LogLineView, Submit};

/// What `spindle submit` was given (the fields of `ClientCommand::Submit`).
#[derive(Debug)]
pub(super) struct SubmitArgs {
    pub(super) kind: String,
    pub(super) input: Option<String>,
    pub(super) priority: Option<String>,
    pub(super) key: Option<String>,
    pub(super) lease_keys: Vec<String>,
    pub(super) delay: Option<f64>,
}

/// `spindle submit`: prints the new job's id (or the first job's, for a key seen before).
pub(super) async fn submit(client: &Client, json: bool, args: SubmitArgs) -> anyhow::Result<()> {
    let SubmitArgs { kind, input, priority, key, lease_keys, delay } = args;
    let input: Value = match input {
        Some(input) => serde_json::from_str(&input).context("--input is not valid JSON")?,
        None => default_input(client, &kind).await?,
    };
    let submit = Submit { kind, input, priority, run_at: None, delay_secs: delay, idempotency_key: key, lease_keys };
    let job: JobView = client.post("/v1/jobs", &submit).await?;
    emit(json, &job, |j| out!("{}", j.id));
    Ok(())
}

/// `spindle job`: the job in full and, for people, its children.
pub(super) async fn show(client: &Client, json: bool, id: &str) -> anyhow::Result<()> {
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
    Ok(())
}

/// `spindle jobs`: one page of jobs, newest first, filtered as asked.
pub(super) async fn list(
    client: &Client,
    json: bool,
    state: Option<String>,
    kind: Option<String>,
    parent: Option<String>,
    limit: u32,
    cursor: Option<i64>,
) -> anyhow::Result<()> {
    let mut query = vec![format!("limit={limit}")];
    query.extend(state.map(|s| format!("state={s}")));
    query.extend(kind.map(|k| format!("kind={k}")));
    query.extend(parent.map(|p| format!("parent={p}")));
    query.extend(cursor.map(|c| format!("cursor={c}")));
    let page: JobPage = client.get(&format!("/v1/jobs?{}", query.join("&"))).await?;
    emit(json, &page, print::page);
    Ok(())
}

/// `spindle dead-letters`: one page of failed jobs not yet retried.
pub(super) async fn dead_letters(client: &Client, json: bool, limit: u32) -> anyhow::Result<()> {
    let page: JobPage = client.get(&format!("/v1/dead-letters?limit={limit}")).await?;
    emit(json, &page, print::page);
    Ok(())
}

/// `spindle wait`: long-polls the host (a minute at most per request) until the job is
/// final or `timeout` seconds passed; answers the exit code: the job's, or 3 on timeout.
pub(super) async fn wait(client: &Client, json: bool, id: &str, timeout: f64) -> anyhow::Result<u8> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now()).as_secs_f64().min(60.0);
        let job: JobView = client.get(&format!("/v1/jobs/{id}/wait?timeout={left:.3}")).await?;
        if is_final(&job.state) {
            emit(json, &job, |j| out!("{} {}", j.id, state_line(j)));
            return Ok(exit_for(&job.state));
        }
        if tokio::time::Instant::now() >= deadline {
            emit(json, &job, |j| out!("{} still {} (timed out)", j.id, j.state));
            return Ok(3);
        }
    }
}

/// `spindle logs`: the job's log lines kept so far, or with `--follow` each line as the
/// host sends it until the job is final.
pub(super) async fn logs(
    client: &Client,
    json: bool,
    id: &str,
    follow: bool,
    step: Option<String>,
) -> anyhow::Result<()> {
    if follow {
        let mut lines = client.typed().follow_logs(id, step.as_deref()).await?;
        while let Some(line) = lines.next().await? {
            if json {
                out!("{}", serde_json::to_string(&line)?);
            } else {
                out!("{}", log_line(&line));
            }
        }
    } else {
        let page = client.typed().logs(id, step.as_deref()).await?;
        emit(json, &page, |p| {
            for line in &p.lines {
                out!("{}", log_line(line));
            }
            if p.capped {
                out!("(the job reached its log cap: {} later lines were counted, not kept)", p.dropped);
            }
        });
    }
    Ok(())
}

/// One log line as `spindle logs` prints it: time, step and attempt, level, stream, text.
fn log_line(line: &LogLineView) -> String {
    format!("{} {}#{} {:<5} {:<7} {}", line.at, line.step, line.attempt, line.level, line.stream, line.message)
}

/// `spindle cancel`.
pub(super) async fn cancel(client: &Client, json: bool, id: &str, reason: String) -> anyhow::Result<()> {
    let job: JobView = client.post(&format!("/v1/jobs/{id}/cancel"), &CancelBody { reason }).await?;
    emit(json, &job, |j| out!("{} {}", j.id, state_line(j)));
    Ok(())
}

/// `spindle pause`: says so when the pause waits for the step boundary.
pub(super) async fn pause(client: &Client, json: bool, id: &str) -> anyhow::Result<()> {
    let job: JobView = client.post(&format!("/v1/jobs/{id}/pause"), &empty_body()).await?;
    emit(json, &job, |j| {
        out!("{} {}{}", j.id, state_line(j), pending(j.pause_requested, "pausing at the step boundary"))
    });
    Ok(())
}

/// `spindle resume`.
pub(super) async fn resume(client: &Client, json: bool, id: &str) -> anyhow::Result<()> {
    let job: JobView = client.post(&format!("/v1/jobs/{id}/resume"), &empty_body()).await?;
    emit(json, &job, |j| out!("{} {}", j.id, state_line(j)));
    Ok(())
}

/// `spindle restart`: the job's pass, and whether the restart waits for the step boundary.
pub(super) async fn restart(client: &Client, json: bool, id: &str) -> anyhow::Result<()> {
    let job: JobView = client.post(&format!("/v1/jobs/{id}/restart"), &empty_body()).await?;
    emit(json, &job, |j| {
        out!(
            "{} {} pass {}{}",
            j.id,
            state_line(j),
            j.pass,
            pending(j.restart_requested, "restart waiting for the step boundary")
        )
    });
    Ok(())
}

/// `spindle retry`: prints the new, linked job's id.
pub(super) async fn retry(client: &Client, json: bool, id: &str, on_current: bool) -> anyhow::Result<()> {
    let query = if on_current { "?on_current=true" } else { "" };
    let job: JobView = client.post(&format!("/v1/jobs/{id}/retry{query}"), &empty_body()).await?;
    emit(json, &job, |j| out!("retried as {} (version {})", j.id, j.kind_version));
    Ok(())
}

/// `spindle signal`: with `--key`, sent idempotently.
pub(super) async fn signal(
    client: &Client,
    json: bool,
    id: &str,
    name: &str,
    data: &str,
    key: Option<&str>,
) -> anyhow::Result<()> {
    let body: Value = serde_json::from_str(data).context("--data is not valid JSON")?;
    let path = format!("/v1/jobs/{id}/signals/{}", percent_encode(name));
    let job: JobView = match key {
        Some(key) => client.post_keyed(&path, &body, key).await?,
        None => client.post(&path, &body).await?,
    };
    emit(json, &job, |j| out!("{} {} (signal {name} kept)", j.id, j.state));
    Ok(())
}
