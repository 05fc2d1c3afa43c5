//! Group commit: step outcomes settled at about the same time share one transaction.
//!
//! Each settling step queues its write and waits. The first to find no flush in
//! progress becomes the leader: it takes everything queued, commits it in one
//! transaction (each write still checked against its own version) and hands every
//! waiter its own outcome. Writes that arrive during a flush form the next batch. With
//! one step settling at a time this is one transaction per write, as before; under load
//! one durable commit serves many jobs, which is what bounds throughput on a database
//! that fsyncs every commit.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use spindle_core::Timestamp;
use tokio::sync::{Mutex, oneshot};

use crate::store::{JobWrite, Storage, StoreError, WriteOutcome};

/// Most writes one transaction carries.
const MAX_BATCH: usize = 256;

type Waiter = oneshot::Sender<Result<WriteOutcome, Arc<StoreError>>>;

/// The queue of writes waiting to be committed together.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    queue: std::sync::Mutex<Vec<(JobWrite, Waiter)>>,
    flushing: Mutex<()>,
}

impl GroupCommit {
    /// Commits `write` together with whatever else is waiting; answers its own outcome.
    pub(crate) async fn write(
        &self,
        store: &dyn Storage,
        write: JobWrite,
        now: impl Fn() -> Timestamp,
        counters: &super::Counters,
    ) -> Result<WriteOutcome, Arc<StoreError>> {
        let (tx, mut rx) = oneshot::channel();
        self.lock_queue().push((write, tx));
        loop {
            let _leader = self.flushing.lock().await;
            // A previous leader may already have committed this write.
            if let Ok(result) = rx.try_recv() {
                return result;
            }
            let batch: Vec<(JobWrite, Waiter)> = {
                let mut queue = self.lock_queue();
                let take = queue.len().min(MAX_BATCH);
                queue.drain(..take).collect()
            };
            if batch.is_empty() {
                continue;
            }
            let (writes, waiters): (Vec<JobWrite>, Vec<Waiter>) = batch.into_iter().unzip();
            let started = std::time::Instant::now();
            let carried = writes.len() as u64;
            let result = store.write(writes, now()).await;
            counters.flushes.fetch_add(1, Ordering::Relaxed);
            counters.flushed_writes.fetch_add(carried, Ordering::Relaxed);
            counters.flush_micros.fetch_add(micros(started.elapsed()), Ordering::Relaxed);
            match result {
                Ok(outcomes) => {
                    for (waiter, outcome) in waiters.into_iter().zip(outcomes) {
                        let _ = waiter.send(Ok(outcome));
                    }
                }
                Err(e) => {
                    let e = Arc::new(e);
                    for waiter in waiters {
                        let _ = waiter.send(Err(e.clone()));
                    }
                }
            }
            if let Ok(result) = rx.try_recv() {
                return result;
            }
        }
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<(JobWrite, Waiter)>> {
        match self.queue.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// A duration in whole microseconds, saturating.
pub(crate) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
