//! A fan-out through a whole host: one `workflow` job whose step creates 10,000 `noop`
//! children (join all), timed from the parent's outcome — the transaction that records
//! it and creates the children — to every child running, every child final, and the
//! parent completing with all their results.
//!
//! Times are read from what the host stored (the parent's `awaiting_children` history
//! entry, the children's `started_at` and `settled_at`, the parent's `settled_at`).

use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use serde::Serialize;
use spindle_core::{HistoryEvent, JobState};

use super::Context;
use crate::engine::SubmitRequest;
use crate::store::sql::{Ty, Value};

/// Children in the fan-out.
pub const CHILDREN: usize = 10_000;

/// The section's figures.
#[derive(Clone, Debug, Serialize)]
pub struct FanOutBench {
    /// Children created by the one outcome.
    pub children: usize,
    /// From the parent's outcome to the last child's first step starting, ms.
    pub to_all_running_ms: f64,
    /// From the parent's outcome to the last child settling, ms.
    pub to_all_settled_ms: f64,
    /// From the parent's outcome to the parent completing with every result, ms.
    pub to_parent_completed_ms: f64,
    /// Children per second, outcome to all settled.
    pub children_per_sec: f64,
}

/// Runs the fan-out once on a fresh host.
pub async fn measure(ctx: &Context) -> anyhow::Result<FanOutBench> {
    let mut scenario = ctx.open("fan-out", ctx.settings.concurrency).await?;
    ctx.deploy(&scenario, "workflow").await?;
    ctx.deploy(&scenario, "noop").await?;
    let engine = scenario.host.engine.clone();
    let task = ctx.progress.task("fan-out: 10,000 children settled", Some(CHILDREN as u64));
    scenario.start();
    let input = serde_json::json!({ "fan_out": CHILDREN, "child_kind": "noop" });
    let request = SubmitRequest { kind: "workflow".into(), input: serde_json::to_vec(&input)?, ..Default::default() };
    let parent = engine.submit(&ctx.tenant, request).await?.record().job.id;
    let started = Instant::now();
    let record = loop {
        let record = engine.store().job(parent).await?.context("the parent job")?;
        if record.job.state.is_final() {
            break record;
        }
        ensure!(started.elapsed() < Duration::from_secs(600), "the fan-out did not finish in 10 minutes");
        let settled = scenario
            .host
            .store
            .db()
            .fetch(
                "SELECT count(*) FROM jobs WHERE parent_id = $1 AND settled_at IS NOT NULL",
                vec![Value::from(parent.to_string())],
                &[Ty::Int],
            )
            .await?;
        task.set(settled.first().map_or(0, |r| u64::try_from(r.int(0)).unwrap_or(0)));
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    ensure!(record.job.state == JobState::Succeeded, "the parent ended {}: {:?}", record.job.state, record.job.failure);
    let outcome_at = engine
        .store()
        .history(parent)
        .await?
        .into_iter()
        .find(|e| matches!(e.event, HistoryEvent::AwaitingChildren { .. }))
        .map(|e| e.at)
        .context("the parent's fan-out in its history")?;
    let rows = scenario
        .host
        .store
        .db()
        .fetch(
            "SELECT count(*), max(settled_at) FROM jobs WHERE parent_id = $1 AND state = 'succeeded'",
            vec![Value::from(parent.to_string())],
            &[Ty::Int, Ty::OptInt],
        )
        .await?;
    let row = rows.first().context("the children's times")?;
    let children = usize::try_from(row.int(0)).unwrap_or(0);
    ensure!(children == CHILDREN, "{children} of {CHILDREN} children succeeded");
    let ms = |micros: Option<i64>| micros.map_or(0.0, |m| (m - outcome_at.as_micros()) as f64 / 1_000.0);
    let to_all_settled_ms = ms(row.opt_int(1));
    let parent_done = record.job.settled_at.map(|t| t.as_micros());
    let bench = FanOutBench {
        children,
        to_all_running_ms: ms(started_at_of_last(&scenario, parent).await?),
        to_all_settled_ms,
        to_parent_completed_ms: ms(parent_done),
        children_per_sec: CHILDREN as f64 / (to_all_settled_ms / 1_000.0).max(1e-9),
    };
    ctx.close(scenario, Duration::from_secs(5)).await;
    task.finish(&format!("{:.0} ms to the parent's completion", bench.to_parent_completed_ms));
    Ok(bench)
}

/// When the last child's first step started (jobs keep `started_at` in the machine and
/// in no column, so it is read from the children's first attempts).
async fn started_at_of_last(scenario: &super::Scenario, parent: spindle_core::JobId) -> anyhow::Result<Option<i64>> {
    let rows = scenario
        .host
        .store
        .db()
        .fetch("SELECT machine FROM jobs WHERE parent_id = $1", vec![Value::from(parent.to_string())], &[Ty::Text])
        .await?;
    let mut last = None;
    for row in rows {
        let machine: serde_json::Value = serde_json::from_str(&row.text(0))?;
        if let Some(at) = machine["started_at"].as_i64() {
            last = Some(last.map_or(at, |l: i64| l.max(at)));
        }
    }
    Ok(last)
}
