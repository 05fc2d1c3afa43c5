//! `spindle tenant` (operator): tenants, their tokens, retention, limits, breakers and
//! outbound rules; and `spindle usage`, a tenant's own view of its limits.

use super::print::{self, emit};
use super::remote::Client;
use super::{empty_body, percent_encode, whole_secs};
use spindle::api::views::{
    BreakerStateView, CapacityView, NewTenant, Retention, SqlRoleGranted, TenantList, TenantOutbound, TenantToken,
    TenantView,
};

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
    /// Let a PostgreSQL role submit jobs as the tenant from its own transactions
    /// (`SELECT spindle.submit(kind, input, options)`), and nothing else of Spindle's
    /// schema (docs/clients.md).
    GrantSql {
        /// The tenant.
        name: String,
        /// The database role (it must exist).
        #[arg(long)]
        role: String,
    },
    /// Stop a PostgreSQL role submitting as the tenant: its next `spindle.submit` is
    /// refused (what it committed before is still admitted).
    RevokeSql {
        /// The tenant.
        name: String,
        /// The database role.
        #[arg(long)]
        role: String,
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

/// Runs a `spindle tenant` command.
pub(super) async fn run(client: &Client, json: bool, command: TenantCommand) -> anyhow::Result<()> {
    match command {
        TenantCommand::Create { name } => {
            let created: TenantToken = client.post("/v1/tenants", &NewTenant { name }).await?;
            emit(json, &created, |t| {
                out!("tenant {} created; its token (shown once):", t.tenant);
                out!("{}", t.token);
            });
        }
        TenantCommand::GrantSql { name, role } => {
            let path = format!("/v1/tenants/{}/sql-roles/{}", percent_encode(&name), percent_encode(&role));
            let granted: SqlRoleGranted = client.put(&path, &empty_body()).await?;
            emit(json, &granted, |g| out!("role {} submits as tenant {}", g.role, g.tenant));
        }
        TenantCommand::RevokeSql { name, role } => {
            client
                .delete(&format!("/v1/tenants/{}/sql-roles/{}", percent_encode(&name), percent_encode(&role)))
                .await?;
            emit(json, &serde_json::json!({ "tenant": name, "role": role }), |_| {
                out!("role {role} no longer submits as tenant {name}");
            });
        }
        TenantCommand::Token { name } => {
            let issued: TenantToken = client.post(&format!("/v1/tenants/{name}/tokens"), &empty_body()).await?;
            emit(json, &issued, |t| out!("{}", t.token));
        }
        TenantCommand::Set {
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
        } => {
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
        TenantCommand::Show { name } => {
            let capacity: CapacityView = client.get(&format!("/v1/tenants/{}/limits", percent_encode(&name))).await?;
            emit(json, &capacity, print::capacity);
        }
        TenantCommand::ResetBreaker { name, kind } => {
            let path = format!("/v1/tenants/{}/kinds/{}/breaker/reset", percent_encode(&name), percent_encode(&kind));
            let breakers: Vec<BreakerStateView> = client.post(&path, &empty_body()).await?;
            emit(json, &breakers, |list| {
                out!("{name}/{kind}: breakers reset");
                for b in list {
                    out!("  version {} {}", b.version, b.state);
                }
            });
        }
        TenantCommand::List => {
            let tenants: TenantList = client.get("/v1/tenants").await?;
            emit(json, &tenants, |list| {
                for t in &list.tenants {
                    out!("{:<24} {}  {}", t.name, t.created_at, retention_of(t));
                }
            });
        }
        TenantCommand::Outbound { name, allow, none } => {
            let request = TenantOutbound { tenant: name.clone(), allow: (!none).then_some(allow) };
            let answer: TenantOutbound =
                client.put(&format!("/v1/tenants/{}/outbound", percent_encode(&name)), &request).await?;
            emit(json, &answer, |t| match t.allow.as_deref() {
                Some(rules) if !rules.is_empty() => out!("tenant {} may reach: {}", t.tenant, rules.join(", ")),
                _ => out!("tenant {} may reach nothing", t.tenant),
            });
        }
        TenantCommand::Retention { name, keep, default: _ } => {
            let retention_secs = keep.as_deref().map(|k| whole_secs(k, "--keep")).transpose()?;
            let tenant: TenantView = client
                .put(&format!("/v1/tenants/{}/retention", percent_encode(&name)), &Retention { retention_secs })
                .await?;
            emit(json, &tenant, |t| out!("tenant {}: {}", t.name, retention_of(t)));
        }
    }
    Ok(())
}

/// `spindle usage`: this tenant's usage, limits, and what it has queued and running now.
pub(super) async fn usage(client: &Client, json: bool) -> anyhow::Result<()> {
    let capacity: CapacityView = client.get("/v1/usage").await?;
    emit(json, &capacity, print::capacity);
    Ok(())
}

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

/// A tenant's retention as a human reads it.
fn retention_of(tenant: &TenantView) -> String {
    match tenant.retention_secs {
        Some(secs) => format!("finished jobs kept {secs} s"),
        None => "finished jobs kept the host's default".to_owned(),
    }
}
