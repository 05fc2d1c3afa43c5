//! `spindle watch`: live progress bars for a job's steps, until the job is final, redrawn
//! on each of the job's events (`GET /v1/jobs/{id}/events`) rather than by polling.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::print::{exit_for, is_final, state_line};
use super::remote::Client;
use spindle::api::views::JobView;

/// Redraws the job's bars on each of its events until it is final; answers the exit code
/// `wait` would.
pub(super) async fn watch(client: &Client, id: &str, json: bool) -> anyhow::Result<u8> {
    let bars = MultiProgress::new();
    let style = ProgressStyle::with_template("  {prefix:<16} [{bar:30}] {pos:>3}% {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let overall = bars.add(ProgressBar::new(100));
    overall.set_style(style.clone());
    overall.set_prefix("job");
    let mut step_bars: Vec<ProgressBar> = Vec::new();
    let mut events = Box::pin(changes(client, id));
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
                out!("{}", serde_json::to_string_pretty(&job).unwrap_or_default());
            } else {
                out!("{id} {}", state_line(&job));
            }
            return Ok(exit_for(&job.state));
        }
        // The next event (or the stream's end: the job is then final).
        events.as_mut().next_change().await?;
    }
}

/// The job's events, one wake per batch of them.
fn changes<'a>(client: &'a Client, id: &'a str) -> Changes<'a> {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
    let stream = Box::pin(async move {
        let mut events = client.typed().events(id).await?;
        while events.next().await?.is_some() {
            let _ = sender.send(());
        }
        Ok(())
    });
    Changes { stream, receiver, ended: None }
}

/// A job's events, followed.
struct Changes<'a> {
    stream: std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>> + 'a>>,
    receiver: tokio::sync::mpsc::UnboundedReceiver<()>,
    ended: Option<()>,
}

impl Changes<'_> {
    /// Waits for the next event; after the stream's end, answers at once (the job is final).
    async fn next_change(self: std::pin::Pin<&mut Self>) -> anyhow::Result<()> {
        let this = self.get_mut();
        if this.ended.is_some() {
            return Ok(());
        }
        tokio::select! {
            Some(()) = this.receiver.recv() => {
                // Many events at once are one redraw.
                while this.receiver.try_recv().is_ok() {}
                Ok(())
            }
            ended = &mut this.stream => {
                this.ended = Some(());
                ended
            }
        }
    }
}
