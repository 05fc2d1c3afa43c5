//! Work one host at a time does for all of them (reconciling, pruning): a loop that runs
//! a pass every interval, each pass first taking or renewing a named singleton lease, and
//! that gives the lease up when it stops.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::engine::{Engine, EngineError};

/// A running singleton loop.
#[derive(Debug)]
pub struct SingletonLoop {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl SingletonLoop {
    /// Runs `pass` now and then every `interval` until stopped; on stop, gives up `lease`.
    pub fn start<F, Fut>(engine: Arc<Engine>, lease: &'static str, interval: Duration, mut pass: F) -> Self
    where
        F: FnMut(Arc<Engine>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send,
    {
        Self::start_paced(engine, lease, move |engine| {
            let run = pass(engine);
            async move {
                run.await;
                interval
            }
        })
    }

    /// Runs `pass` now and again after each pass's answer (how long to wait) until
    /// stopped; on stop, gives up `lease`.
    pub fn start_paced<F, Fut>(engine: Arc<Engine>, lease: &'static str, mut pass: F) -> Self
    where
        F: FnMut(Arc<Engine>) -> Fut + Send + 'static,
        Fut: Future<Output = Duration> + Send,
    {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                let wait = pass(engine.clone()).await;
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stopped.changed() => break,
                }
            }
            let _ = engine.release_singleton(lease).await;
        });
        Self { stop, task }
    }

    /// Stops the loop and gives up the lease.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

/// Whether this host holds `lease` (taking or renewing it). The lease outlives a pass
/// and the gap to the next (two intervals), so the holder keeps it while it runs; a host
/// that dies loses it within two intervals.
pub async fn hold(engine: &Engine, lease: &str, interval: Duration) -> Result<bool, EngineError> {
    let ttl = i64::try_from((interval * 2).as_micros()).unwrap_or(i64::MAX);
    engine.hold_singleton(lease, ttl).await
}
