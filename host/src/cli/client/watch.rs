//! `spindle watch`: live progress bars for a job's steps, until the job is final.

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::print::{exit_for, is_final, state_line};
use super::remote::Client;
use crate::api::views::JobView;

/// Polls the job and redraws its bars until it is final; answers the exit code `wait` would.
pub(super) async fn watch(client: &Client, id: &str, json: bool) -> anyhow::Result<u8> {
    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template("  {prefix:<16} [{bar:30}] {pos:>3}% {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let overall = bars.add(ProgressBar::new(100));
    overall.set_style(style.clone());
    overall.set_prefix("job");
    let mut step_bars: Vec<ProgressBar> = Vec::new();
    loop {
        let job: JobView = client.get(&format!("/v1/jobs/{id}")).await?;
        if step_bars.len() != job.steps.len() {
            for bar in step_bars.drain(..) {
                bars.remove(&bar);
            }
            for step in &job.steps {
                let bar = bars.add(ProgressBar::new(100));
                bar.set_style(style.clone());
                bar.set_prefix(step.key.clone());
                step_bars.push(bar);
            }
        }
        overall.set_position(u64::from(job.progress));
        overall.set_message(job.state.clone());
        for (bar, step) in step_bars.iter().zip(&job.steps) {
            let percent = match step.state.as_str() {
                "completed" | "skipped" => 100,
                _ => match (step.done, step.total) {
                    (Some(done), Some(total)) if total > 0 => done.min(total) * 100 / total,
                    _ => 0,
                },
            };
            bar.set_position(percent);
            let attempts = step.attempts.len();
            bar.set_message(if attempts > 1 {
                format!("{} (attempt {attempts})", step.state)
            } else {
                step.state.clone()
            });
        }
        if is_final(&job.state) {
            overall.finish();
            for bar in &step_bars {
                bar.finish();
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&job).unwrap_or_default());
            } else {
                println!("{id} {}", state_line(&job));
            }
            return Ok(exit_for(&job.state));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
