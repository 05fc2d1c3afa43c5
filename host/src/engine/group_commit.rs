//! Group commit: step outcomes settled at about the same time share one transaction,
//! and so do the next jobs their workers go on to.
//!
//! Each settling step queues its write and waits. The first to find no flush in
//! progress becomes the leader: it takes everything queued, commits it in one
//! transaction (each write still checked against its own version) and hands every
//! waiter its own outcome. A waiter that asks for its next job gets one claimed in the
//! same transaction, so a busy worker costs one commit per job instead of two. Writes
//! that arrive during a flush form the next batch. With one step settling at a time this
//! is one transaction per write, as before; under load one durable commit serves many
//! jobs, which is what bounds throughput on a database that fsyncs every commit.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{Semaphore, oneshot};

use super::{Counters, HostDeriver};
use crate::clock::Clock;
use crate::store::{Backend, ClaimFilter, JobRecord, JobWrite, Storage, StoreError, WriteOutcome};

/// Most writes one transaction carries, by backend. PostgreSQL runs two flushes side by
/// side on separate connections, so a moderate batch keeps both busy; SQLite has one
/// writer and runs flushes one after the other, where a larger batch spreads each
/// commit's fixed cost (statements, WAL frames) over more jobs (about 5% more one-step
/// jobs/s at 128 than at 64).
fn max_batch(backend: Backend) -> usize {
    match backend {
        Backend::Postgres => 64,
        Backend::Sqlite => 128,
    }
}

/// What a waiter gets back: its write's outcome, and its next job if it asked for one.
pub(crate) type Flushed = Result<(WriteOutcome, Option<JobRecord>), Arc<StoreError>>;

type Waiter = oneshot::Sender<Flushed>;

/// One queued write.
struct Pending {
    write: JobWrite,
    /// Claim a next job for this writer, among the jobs this filter admits.
    next: Option<ClaimFilter>,
    waiter: Waiter,
}

/// The queue of writes waiting to be committed together, and what a flush needs: the
/// store, how this host claims, the clock, the counters it reports to.
pub(crate) struct GroupCommit {
    queue: std::sync::Mutex<Vec<Pending>>,
    flushing: Semaphore,
    max_batch: usize,
    store: Arc<dyn Storage>,
    deriver: Arc<HostDeriver>,
    clock: Arc<dyn Clock>,
    counters: Arc<Counters>,
}

impl GroupCommit {
    /// A group commit over `store`.
    pub(crate) fn new(
        store: Arc<dyn Storage>,
        deriver: Arc<HostDeriver>,
        clock: Arc<dyn Clock>,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            queue: std::sync::Mutex::default(),
            flushing: Semaphore::new(LEADERS),
            max_batch: max_batch(store.backend()),
            store,
            deriver,
            clock,
            counters,
        }
    }
}

/// Flushes in flight at once: while one batch commits, the next one gathers and may
/// commit beside it, so the workers of one batch never wait for all the others.
const LEADERS: usize = 2;

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Commits `write` together with whatever else is waiting; answers its own outcome,
    /// and a job claimed for the writer when `next` asks for one.
    pub(crate) async fn write(&self, write: JobWrite, next: Option<ClaimFilter>) -> Flushed {
        let (tx, mut rx) = oneshot::channel();
        self.lock_queue().push(Pending { write, next, waiter: tx });
        loop {
            let Ok(_leader) = self.flushing.acquire().await else { continue };
            // A previous leader may already have committed this write.
            if let Ok(result) = rx.try_recv() {
                return result;
            }
            let batch: Vec<Pending> = {
                let mut queue = self.lock_queue();
                let take = queue.len().min(self.max_batch);
                queue.drain(..take).collect()
            };
            if batch.is_empty() {
                continue;
            }
            self.flush(batch).await;
            if let Ok(result) = rx.try_recv() {
                return result;
            }
        }
    }

    /// Commits one batch and answers its waiters.
    async fn flush(&self, batch: Vec<Pending>) {
        let started = std::time::Instant::now();
        let carried = batch.len() as u64;
        // The batch claims for the writers that asked, with the first one's filter (a
        // host has one dispatcher, hence one filter); others asking get no job.
        let filter = batch.iter().find_map(|p| p.next.clone());
        let wanting = filter.as_ref().map_or(0, |f| batch.iter().filter(|p| p.next.as_ref() == Some(f)).count());
        let mut writes = Vec::with_capacity(batch.len());
        let mut waiters = Vec::with_capacity(batch.len());
        for pending in batch {
            let asks = filter.is_some() && pending.next == filter;
            writes.push(pending.write);
            waiters.push((pending.waiter, asks));
        }
        let now = self.clock.now();
        let deriver = self.deriver.as_ref();
        let result = match &filter {
            Some(filter) => {
                let limit = u32::try_from(wanting).unwrap_or(u32::MAX);
                self.store.write_and_claim(writes, now, limit, filter, deriver).await
            }
            None => self.store.write(writes, now, deriver).await.map(|outcomes| (outcomes, Vec::new())),
        };
        let counters = &self.counters;
        counters.flushes.fetch_add(1, Ordering::Relaxed);
        counters.flushed_writes.fetch_add(carried, Ordering::Relaxed);
        counters.flush_micros.fetch_add(micros(started.elapsed()), Ordering::Relaxed);
        match result {
            Ok((outcomes, claimed)) => {
                counters.claimed_in_commits.fetch_add(claimed.len() as u64, Ordering::Relaxed);
                let mut claimed = claimed.into_iter();
                for ((waiter, asks), outcome) in waiters.into_iter().zip(outcomes) {
                    let next = if asks { claimed.next() } else { None };
                    if let Err(Ok((_, Some(lost)))) = waiter.send(Ok((outcome, next))) {
                        // The waiter is gone (its task was aborted): its job's claim
                        // lapses and the rescuer hands it to another worker.
                        tracing::warn!(job = %lost.job.id, "a claimed job found no worker; its claim will lapse");
                    }
                }
            }
            Err(e) => {
                let e = Arc::new(e);
                for (waiter, _) in waiters {
                    let _ = waiter.send(Err(e.clone()));
                }
            }
        }
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
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
