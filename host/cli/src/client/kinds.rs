//! `spindle deploy`, `kinds` and `rollback`: a kind's versions, how they are deployed (the
//! manifest, following a compile), and which one new jobs run.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::Value;

use super::percent_encode;
use super::print::{self, emit, short, steps};
use super::remote::{Client, HostRefused};
use spindle::api::views::{
    DeployView, Deployed, DeploymentView, ErrorDetail, KindList, KindView, Rollback, RolledBack, SpecView,
};

/// Seconds a deploy's upload waits for the compile before the host answers `202`; the
/// client then follows the deploy.
const DEPLOY_WAIT_SECS: u64 = 2;
/// Seconds each look at a compiling deploy waits for it to end.
const DEPLOY_POLL_SECS: u64 = 20;

/// A deployment manifest: what a kind version's steps may reach.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Manifest {
    allow: Vec<String>,
    secrets: Vec<String>,
    settings: std::collections::BTreeMap<String, String>,
    secrets_in_body: bool,
    max_running: Option<u32>,
    record: Option<String>,
}

/// What `spindle deploy` was given (the fields of `ClientCommand::Deploy`): the component,
/// and flags that add to its manifest.
#[derive(Debug)]
pub(super) struct DeployArgs {
    pub(super) kind: String,
    pub(super) file: PathBuf,
    pub(super) allow: Vec<String>,
    pub(super) secrets: Vec<String>,
    pub(super) settings: Vec<String>,
    pub(super) secrets_in_body: bool,
    pub(super) max_running: Option<u32>,
    pub(super) record: Option<String>,
    pub(super) manifest: Option<PathBuf>,
    pub(super) no_wait: bool,
}

/// `spindle deploy`: uploads the component with its deployment, then follows the compile
/// unless `--no-wait`; a failed compile is the host's refusal.
pub(super) async fn deploy(client: &Client, json: bool, args: DeployArgs) -> anyhow::Result<()> {
    let DeployArgs { kind, file, allow, secrets, settings, secrets_in_body, max_running, record, manifest, no_wait } =
        args;
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
        record: record.or(manifest.record),
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
    let sent = view.clone();
    let (status, answer) = client.put_component(&path, bytes).await?;
    if status == reqwest::StatusCode::ACCEPTED {
        let mut deploy: DeployView = serde_json::from_value(answer).context("the host's 202 answer")?;
        if !no_wait {
            deploy = follow_deploy(client, &kind, deploy, json).await?;
        }
        emit(json, &deploy, |d| match d.state.as_str() {
            "ready" => {
                out!("deployed {} version {} (sha256 {}…)", d.kind, d.version.unwrap_or(0), short(&d.digest))
            }
            state => {
                out!("deploy {} of {} is {state}: `spindle kinds {}` shows how it ends", d.id, d.kind, d.kind)
            }
        });
        if deploy.state == "failed" {
            let error = deploy.error.unwrap_or_else(|| ErrorDetail {
                code: "internal".into(),
                message: "the deploy failed".into(),
                ..Default::default()
            });
            return Err(anyhow::Error::new(HostRefused::deploy_failed(error)));
        }
        if let Some(version) = deploy.version {
            check_stored(client, &kind, version, &sent).await?;
        }
        return Ok(());
    }
    let deployed: Deployed = serde_json::from_value(answer).context("the host's answer")?;
    check_stored(client, &kind, deployed.version, &sent).await?;
    emit(json, &deployed, |d| {
        out!(
            "deployed {} version {} (sha256 {}…), steps {}",
            d.kind,
            d.version,
            short(&d.digest),
            steps(Some(&d.spec))
        );
    });
    Ok(())
}

/// `spindle kinds KIND`: the kind's versions with their breakers, what its current version
/// expects as input, and its latest deploys.
pub(super) async fn show(client: &Client, json: bool, kind: &str) -> anyhow::Result<()> {
    let found: KindView = client.get(&format!("/v1/kinds/{kind}")).await?;
    emit(json, &found, |k| {
        out!("{} (current version {}, latest {})", k.kind, k.current_version, k.latest_version);
        let current = k.versions.iter().flatten().find(|v| v.version == k.current_version);
        if let Some(record) = current.and_then(|v| v.deployment.as_ref()).and_then(|d| d.record.as_deref()) {
            out!("  record {record}: its jobs are the job row alone (no step or history rows)");
        }
        out!("  {:<8} {:<14} {:<28} {:<10} steps", "version", "digest", "deployed", "breaker");
        for version in k.versions.iter().flatten() {
            let breaker = k.breakers.iter().find(|b| b.version == version.version);
            out!(
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
            out!("  latest deploys:");
            for d in &k.deploys {
                out!("  {}", deploy_line(d));
            }
        }
    });
    Ok(())
}

/// `spindle kinds`: every kind with its versions and breaker, then deploys still compiling.
pub(super) async fn list(client: &Client, json: bool) -> anyhow::Result<()> {
    let kinds: KindList = client.get("/v1/kinds").await?;
    emit(json, &kinds, |list| {
        out!("{:<24} {:>8} {:>8}  breaker", "kind", "current", "latest");
        for k in &list.kinds {
            out!("{:<24} {:>8} {:>8}  {}", k.kind, k.current_version, k.latest_version, k.current_breaker());
        }
        for d in &list.compiling {
            out!("{:<24} {:>8} {:>8}  compiling since {} ({} bytes)", d.kind, "-", "-", d.created_at, d.size);
        }
    });
    Ok(())
}

/// `spindle rollback`: makes `version` the one new jobs of `kind` run.
pub(super) async fn rollback(client: &Client, json: bool, kind: &str, version: i64) -> anyhow::Result<()> {
    let done: RolledBack = client.post(&format!("/v1/kinds/{kind}/rollback"), &Rollback { version }).await?;
    emit(json, &done, |r| out!("{} now runs version {} for new jobs", r.kind, r.current_version));
    Ok(())
}

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

/// Checks that version `version` of `kind` was stored with the deployment `sent`: a host
/// of an older build ignores the fields it does not know (a `record` of `lean`, secret
/// bindings), and would have deployed something else than asked without a word.
async fn check_stored(client: &Client, kind: &str, version: i64, sent: &DeploymentView) -> anyhow::Result<()> {
    let found: KindView = client.get(&format!("/v1/kinds/{kind}")).await?;
    let stored = found.versions.iter().flatten().find(|v| v.version == version).and_then(|v| v.deployment.clone());
    let normal = |view: &DeploymentView| {
        let mut view = view.clone();
        view.allow.sort();
        view.allow.dedup();
        view.secrets.sort();
        if view.record.as_deref() == Some("full") {
            view.record = None;
        }
        view
    };
    let stored = stored.unwrap_or_default();
    let (want, got) = (normal(sent), normal(&stored));
    if want == got {
        return Ok(());
    }
    let mut dropped = Vec::new();
    if want.record != got.record {
        dropped.push(format!("record {}", want.record.as_deref().unwrap_or("full")));
    }
    if want.secrets != got.secrets {
        dropped.push(format!("secrets {:?} (stored as {:?})", want.secrets, got.secrets));
    }
    if want.allow != got.allow {
        dropped.push("allow".to_owned());
    }
    if want.settings != got.settings {
        dropped.push("settings".to_owned());
    }
    if want.max_running != got.max_running {
        dropped.push("max_running".to_owned());
    }
    if want.secrets_in_body != got.secrets_in_body {
        dropped.push("secrets_in_body".to_owned());
    }
    anyhow::bail!(
        "the host stored {kind} version {version} without what was asked ({}): it may be of an older build that \
         does not know it. Deploy through a host of this build (`spindle hosts` shows the builds), and roll back \
         to the version before if this one must not run",
        dropped.join(", ")
    )
}

/// The description of `kind`'s current version, if it still reads.
fn current_spec(kind: &KindView) -> Option<&SpecView> {
    kind.versions.iter().flatten().find(|v| v.version == kind.current_version).and_then(|v| v.spec.as_ref())
}

/// The input `spindle submit KIND` sends without `--input`: `{}` when the kind's current
/// version accepts it; otherwise an error that shows the schema and an example, and
/// nothing is submitted.
pub(super) async fn default_input(client: &Client, kind: &str) -> anyhow::Result<Value> {
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

/// One deploy as `spindle kinds KIND` lists it.
fn deploy_line(d: &DeployView) -> String {
    let outcome = match (&d.version, &d.error) {
        (Some(version), _) => format!("version {version}"),
        (None, Some(error)) => format!("{}: {}", error.code, error.message),
        (None, None) => String::new(),
    };
    format!("{:<10} {:<28} {:>10} bytes  {outcome}", d.state, d.created_at, d.size)
}
