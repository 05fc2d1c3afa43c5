//! `spindle schedule`: cron schedules, each firing of which submits a job.

use anyhow::Context;
use serde_json::Value;

use super::print::{self, emit};
use super::remote::Client;
use super::{empty_body, percent_encode};
use spindle::api::views::JobView;
use spindle::api::{ScheduleList, ScheduleView};

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
    /// Fire a schedule now, once (active or paused; its next time does not move): prints
    /// the job it submitted.
    Trigger {
        /// Its name.
        name: String,
    },
    /// Delete a schedule (jobs it fired are untouched).
    Delete {
        /// Its name.
        name: String,
    },
}

/// Runs a `spindle schedule` command.
pub(super) async fn run(client: &Client, json: bool, command: ScheduleCommand) -> anyhow::Result<()> {
    match command {
        ScheduleCommand::Create { name, kind, cron, input, timezone, catch_up, overlap } => {
            let input: Value = serde_json::from_str(&input).context("--input is not valid JSON")?;
            let body = serde_json::json!({
                "name": name, "kind": kind, "cron": cron, "input": input, "timezone": timezone,
                "catch_up": catch_up, "overlap": overlap,
            });
            let created: ScheduleView = client.post("/v1/schedules", &body).await?;
            emit(json, &created, |s| out!("schedule {} fires {} next at {}", s.name, s.kind, s.next_fire_at));
        }
        ScheduleCommand::List => {
            let list: ScheduleList = client.get("/v1/schedules").await?;
            emit(json, &list, print::schedules);
        }
        ScheduleCommand::Pause { name } => {
            let s: ScheduleView =
                client.post(&format!("/v1/schedules/{}/pause", percent_encode(&name)), &empty_body()).await?;
            emit(json, &s, |s| out!("schedule {} paused", s.name));
        }
        ScheduleCommand::Resume { name } => {
            let s: ScheduleView =
                client.post(&format!("/v1/schedules/{}/resume", percent_encode(&name)), &empty_body()).await?;
            emit(json, &s, |s| out!("schedule {} resumed, next at {}", s.name, s.next_fire_at));
        }
        ScheduleCommand::Trigger { name } => {
            let job: JobView =
                client.post(&format!("/v1/schedules/{}/trigger", percent_encode(&name)), &empty_body()).await?;
            emit(json, &job, |j| out!("schedule {name} fired {} ({})", j.id, j.state));
        }
        ScheduleCommand::Delete { name } => {
            client.delete(&format!("/v1/schedules/{}", percent_encode(&name))).await?;
            if !json {
                out!("schedule {name} deleted");
            }
        }
    }
    Ok(())
}
