//! Progress while a benchmark runs: a bar on stderr when it is a terminal, one line per
//! task otherwise (a CI log, `compare.sh`). Never on stdout, which carries the results.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where progress goes.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    bars: bool,
    quiet: bool,
}

impl Progress {
    /// Bars when stderr is a terminal, plain lines otherwise.
    pub fn to_stderr() -> Self {
        Self { bars: std::io::stderr().is_terminal(), quiet: false }
    }

    /// No progress at all (tests).
    pub fn silent() -> Self {
        Self { bars: false, quiet: true }
    }

    /// Starts a task of `total` units (`None`: a spinner).
    pub fn task(&self, label: impl Into<String>, total: Option<u64>) -> Task {
        let label = label.into();
        let bar = if self.bars {
            let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
            let template = if total.is_some() {
                "{spinner} {prefix:<34} [{bar:30}] {pos}/{len} {msg}"
            } else {
                "{spinner} {prefix:<34} {elapsed} {msg}"
            };
            bar.set_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.set_prefix(label.clone());
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        } else {
            if !self.quiet {
                eprintln!("bench: {label} …");
            }
            ProgressBar::hidden()
        };
        Task { bar, label, quiet: self.quiet, bars: self.bars, started: Instant::now() }
    }
}

/// One running task.
#[derive(Debug)]
pub struct Task {
    bar: ProgressBar,
    label: String,
    quiet: bool,
    bars: bool,
    started: Instant,
}

impl Task {
    /// Units done so far.
    pub fn set(&self, done: u64) {
        self.bar.set_position(done);
    }

    /// A short note beside the bar.
    pub fn note(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// Ends the task with a one-line summary.
    pub fn finish(self, summary: &str) {
        self.bar.finish_and_clear();
        if self.quiet {
            return;
        }
        let mark = if self.bars { "✓ " } else { "bench: " };
        eprintln!("{mark}{}: {summary} ({:.1} s)", self.label, self.started.elapsed().as_secs_f64());
    }
}
