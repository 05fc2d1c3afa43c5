//! The `spindle` client commands: talk to a running host over its HTTP API, decoding its
//! answers into the API's own views. Human tables by default, `--json` for scripts.
//!
//! This module holds the command line and sends each command to the module of its group:
//! `kinds` (deploy, kinds, rollback), `jobs`, `watch`, `schedules`, `tenants` (and usage),
//! `tokens` and `secrets`; `remote` speaks HTTP and `print` draws the tables.

mod hosts;
mod jobs;
mod kinds;
mod print;
mod remote;
mod schedules;
mod secrets;
mod tenants;
mod tokens;
mod watch;

pub use remote::HostRefused;
// The groups' command enums, at the paths they had when they lived here.
pub use schedules::ScheduleCommand;
pub use secrets::SecretCommand;
pub use tenants::TenantCommand;
pub use tokens::TokenCommand;

use std::path::PathBuf;

use anyhow::Context;
use remote::Client;
use serde_json::Value;

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
        /// A tenant secret the kind's steps may use, bound to a destination it may be sent
        /// to (`NAME@RULE`, e.g. `stripe@POST https://api.stripe.com/v1/*`); repeatable,
        /// once per destination.
        #[arg(long = "secret", value_name = "NAME@RULE")]
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
        /// What the kind keeps of its jobs: `full` (default) or `lean` (one row per job,
        /// no step or history rows: for high-volume kinds).
        #[arg(long, value_parser = ["full", "lean"])]
        record: Option<String>,
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
    /// Retry a failed or cancelled job as a new, linked job (on the version it ran on, or
    /// with `--on-current` on the kind's current version).
    Retry {
        /// The job's id.
        id: String,
        /// Run the retry on the kind's current version (a fix deployed since): its steps
        /// and rules, the input checked against its schema; completed steps of the same
        /// key are carried, not run again.
        #[arg(long)]
        on_current: bool,
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
    /// The hosts on the database (operator): build, storage formats, contracts, heartbeat.
    Hosts,
    /// Upgrades without downtime (operator): the storage format gate.
    #[command(subcommand)]
    Upgrade(hosts::UpgradeCommand),
}

/// Runs a client command; answers the process's exit code.
pub async fn run(args: ClientArgs, command: ClientCommand) -> anyhow::Result<u8> {
    let client = Client::new(&args.server, args.token.clone())?;
    let json = args.json;
    match command {
        ClientCommand::Deploy {
            kind,
            file,
            allow,
            secrets,
            settings,
            secrets_in_body,
            max_running,
            record,
            manifest,
            no_wait,
        } => {
            let args = kinds::DeployArgs {
                kind,
                file,
                allow,
                secrets,
                settings,
                secrets_in_body,
                max_running,
                record,
                manifest,
                no_wait,
            };
            kinds::deploy(&client, json, args).await?;
        }
        ClientCommand::Kinds { kind: Some(kind) } => kinds::show(&client, json, &kind).await?,
        ClientCommand::Kinds { kind: None } => kinds::list(&client, json).await?,
        ClientCommand::Rollback { kind, version } => kinds::rollback(&client, json, &kind, version).await?,
        ClientCommand::Submit { kind, input, priority, key, lease_keys, delay } => {
            let args = jobs::SubmitArgs { kind, input, priority, key, lease_keys, delay };
            jobs::submit(&client, json, args).await?;
        }
        ClientCommand::Job { id } => jobs::show(&client, json, &id).await?,
        ClientCommand::Jobs { state, kind, parent, limit, cursor } => {
            jobs::list(&client, json, state, kind, parent, limit, cursor).await?;
        }
        ClientCommand::Wait { id, timeout } => return jobs::wait(&client, json, &id, timeout).await,
        ClientCommand::Watch { id } => return watch::watch(&client, &id, json).await,
        ClientCommand::Logs { id, follow, step } => jobs::logs(&client, json, &id, follow, step).await?,
        ClientCommand::Cancel { id, reason } => jobs::cancel(&client, json, &id, reason).await?,
        ClientCommand::Pause { id } => jobs::pause(&client, json, &id).await?,
        ClientCommand::Resume { id } => jobs::resume(&client, json, &id).await?,
        ClientCommand::Restart { id } => jobs::restart(&client, json, &id).await?,
        ClientCommand::Retry { id, on_current } => jobs::retry(&client, json, &id, on_current).await?,
        ClientCommand::DeadLetters { limit } => jobs::dead_letters(&client, json, limit).await?,
        ClientCommand::Tenant(command) => tenants::run(&client, json, command).await?,
        ClientCommand::Usage => tenants::usage(&client, json).await?,
        ClientCommand::Token(command) => tokens::run(&client, json, command).await?,
        ClientCommand::Secret(command) => secrets::run(&client, json, command).await?,
        ClientCommand::Signal { id, name, data, key } => {
            jobs::signal(&client, json, &id, &name, &data, key.as_deref()).await?;
        }
        ClientCommand::Schedule(command) => schedules::run(&client, json, command).await?,
        ClientCommand::Hosts => hosts::list(&client, json).await?,
        ClientCommand::Upgrade(command) => hosts::upgrade(&client, json, command).await?,
    }
    Ok(0)
}

/// Fails with the host's own words when it refused: `code (reason): message`.
pub fn describe_error(error: &anyhow::Error) -> String {
    if let Some(refused) = error.downcast_ref::<HostRefused>() {
        return refused.to_string();
    }
    match error.downcast_ref::<spindle_client::Error>() {
        Some(spindle_client::Error::Refused(refused)) => refused.to_string(),
        _ => format!("{error:#}"),
    }
}

/// The body of a command that takes none: `{}`, as JSON clients send.
fn empty_body() -> Value {
    serde_json::json!({})
}

/// Whole seconds of the duration given as `flag`, rounded up: a token asked to last half a
/// second lasts one.
fn whole_secs(text: &str, flag: &str) -> anyhow::Result<u64> {
    let duration = parse_duration(text).with_context(|| flag.to_owned())?;
    Ok(duration.as_secs().saturating_add(u64::from(duration.subsec_nanos() > 0)))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_whole_seconds_rounded_up() {
        assert_eq!(whole_secs("30d", "--expires").ok(), Some(30 * 86_400));
        assert_eq!(whole_secs("2h", "--expires").ok(), Some(7_200));
        assert_eq!(whole_secs("500ms", "--expires").ok(), Some(1), "never rounded down to no time at all");
        assert!(whole_secs("soon", "--expires").is_err());
    }
}
