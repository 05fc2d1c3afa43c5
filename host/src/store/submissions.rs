//! Concurrent submissions share one insert.
//!
//! Each submission of a few jobs joins a queue. The first to find an insert slot free
//! takes everything queued (up to [`MAX_MERGED_JOBS`]) and writes it as one submission:
//! one statement and one commit on PostgreSQL, one turn at the writer on SQLite. Alone,
//! each paid its own round trips and commit, and a tenant's submissions committed one
//! after another (each holds the tenant's fair-share row from its write to its commit).
//! Submissions that arrive while an insert runs form the next one; a lone submission is
//! inserted at once, as before.
//!
//! A merged insert answers each submission what it would have been answered alone, in
//! its order: the tenant's fair tags and the jobs' sequence follow the queue's order,
//! and a repeated idempotency key finds the job an earlier submission made. One that
//! wrote nothing because a part of it could not pass (a version moved, a quota refused)
//! is not the other parts' failure: each part then goes alone, and gets its own answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use spindle_core::Timestamp;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use super::error::StoreError;
use super::records::{Inserted, NewJob};

/// Submissions of at most this many jobs join the queue; larger ones go alone (they
/// already spread their commit over many jobs).
pub(super) const MERGE_UP_TO: usize = 16;

/// Most jobs one merged insert carries.
pub(super) const MAX_MERGED_JOBS: usize = 256;

/// Inserts running at once. While one commits, the next gathers and may go beside it
/// (another tenant's submissions need not wait for this one's commit).
const INSERTING: usize = 2;

/// What the queue needs of the store: insert a submission's jobs, pinned to their
/// versions, as one.
#[async_trait]
pub(super) trait Insert: Clone + Send + Sync + 'static {
    /// Inserts `jobs`; `urgent` when they are a few jobs, or many submissions of a few
    /// (SQLite lets such a submission go before the group commits waiting for its writer).
    async fn insert(&self, jobs: Vec<NewJob>, now: Timestamp, urgent: bool) -> Result<Vec<Inserted>, StoreError>;
}

/// One queued submission.
struct Queued {
    /// Tells this submission apart in the queue.
    id: u64,
    jobs: Vec<NewJob>,
    now: Timestamp,
    reply: oneshot::Sender<Reply>,
}

/// What a queued submission is answered.
enum Reply {
    /// Its jobs were inserted (with others').
    Inserted(Vec<Inserted>),
    /// The merged insert wrote nothing because some part could not pass: go alone.
    Alone(Vec<NewJob>),
    /// The insert carrying it failed.
    Failed(StoreError),
}

/// The queue of submissions waiting to be inserted together.
#[derive(Debug)]
pub(super) struct SubmissionQueue {
    queue: std::sync::Mutex<Vec<Queued>>,
    next_id: AtomicU64,
    inserting: Arc<Semaphore>,
}

impl Default for SubmissionQueue {
    fn default() -> Self {
        Self {
            queue: std::sync::Mutex::default(),
            next_id: AtomicU64::new(0),
            inserting: Arc::new(Semaphore::new(INSERTING)),
        }
    }
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued").field("id", &self.id).field("jobs", &self.jobs.len()).finish_non_exhaustive()
    }
}

impl SubmissionQueue {
    /// Inserts `jobs` through `store`, with whatever other submissions are waiting.
    ///
    /// An insert that carries others' submissions runs as a task of its own: if the
    /// caller that leads it is dropped (an API client gone), it still answers every
    /// submission it carried. A caller that finds only its own inserts it itself.
    pub(super) async fn submit<I: Insert>(
        &self,
        store: &I,
        jobs: Vec<NewJob>,
        now: Timestamp,
    ) -> Result<Vec<Inserted>, StoreError> {
        if jobs.len() > MERGE_UP_TO {
            return store.insert(jobs, now, false).await;
        }
        let (tx, mut rx) = oneshot::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock_queue().push(Queued { id, jobs, now, reply: tx });
        let reply = loop {
            tokio::select! {
                biased;
                reply = &mut rx => break reply,
                permit = self.inserting.clone().acquire_owned() => {
                    let Ok(permit) = permit else { break rx.await };
                    let mut batch = self.take_batch();
                    if let [own] = batch.as_slice()
                        && own.id == id
                    {
                        // Alone: inserted here, without a task's hand-off (its answer is
                        // this caller's only).
                        let Some(own) = batch.pop() else { break rx.await };
                        let inserted = store.insert(own.jobs, own.now, true).await;
                        drop(permit);
                        return inserted;
                    }
                    // Not in the queue any more: this submission is in this batch, or in
                    // an insert already under way; either answers it.
                    let carried = batch.is_empty() || batch.iter().any(|q| q.id == id);
                    if batch.is_empty() {
                        drop(permit);
                    } else {
                        tokio::spawn(insert_batch(store.clone(), batch, permit));
                    }
                    if carried || !self.lock_queue().iter().any(|q| q.id == id) {
                        break rx.await;
                    }
                }
            }
        };
        match reply {
            Ok(Reply::Inserted(inserted)) => Ok(inserted),
            Ok(Reply::Alone(jobs)) => store.insert(jobs, now, true).await,
            Ok(Reply::Failed(e)) => Err(e),
            Err(_) => Err(StoreError::Interrupted("the insert carrying this submission was abandoned".into())),
        }
    }

    /// The queued submissions, oldest first, up to [`MAX_MERGED_JOBS`] jobs (and at
    /// least one submission).
    fn take_batch(&self) -> Vec<Queued> {
        let mut queue = self.lock_queue();
        let mut jobs = 0;
        let take = queue
            .iter()
            .take_while(|q| {
                jobs += q.jobs.len();
                jobs <= MAX_MERGED_JOBS
            })
            .count()
            .max(usize::from(!queue.is_empty()));
        queue.drain(..take).collect()
    }

    fn lock_queue(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        match self.queue.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Inserts one batch and answers each of its submissions, holding an insert slot until
/// it is done (a lone submission of another caller's: alone).
async fn insert_batch<I: Insert>(store: I, mut batch: Vec<Queued>, permit: OwnedSemaphorePermit) {
    if batch.len() == 1 {
        let Some(lone) = batch.pop() else { return };
        let reply = match store.insert(lone.jobs, lone.now, true).await {
            Ok(inserted) => Reply::Inserted(inserted),
            Err(e) => Reply::Failed(e),
        };
        let _ = lone.reply.send(reply);
        drop(permit);
        return;
    }
    let now = batch.iter().map(|q| q.now).max().unwrap_or(Timestamp::EPOCH);
    let merged: Vec<NewJob> = batch.iter().flat_map(|q| q.jobs.iter().cloned()).collect();
    let result = store.insert(merged, now, true).await;
    drop(permit);
    match result {
        Ok(inserted) => {
            let mut inserted = inserted.into_iter();
            for q in batch {
                let _ = q.reply.send(Reply::Inserted(inserted.by_ref().take(q.jobs.len()).collect()));
            }
        }
        // Nothing was written: each part gets the answer it would have had alone.
        Err(StoreError::VersionMoved { .. } | StoreError::QuotaExceeded(_)) => {
            for q in batch {
                let _ = q.reply.send(Reply::Alone(q.jobs));
            }
        }
        Err(e) => {
            let e = e.to_string();
            for q in batch {
                let _ = q.reply.send(Reply::Failed(StoreError::Interrupted(format!(
                    "the insert carrying this submission with others failed: {e}"
                ))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use spindle_core::job::{KindRules, Submission};
    use spindle_core::policy::priority::Priority;
    use spindle_core::{Job, JobId};
    use tokio::sync::{Notify, mpsc};

    use super::*;
    use crate::store::TenantId;

    /// A store whose inserts each wait for a gate of their own, after saying which jobs
    /// they carry. A batch holding [`POISON`] is refused as a moved version; the rest land.
    #[derive(Clone)]
    struct Gated {
        gates: Arc<Vec<Notify>>,
        calls: Arc<std::sync::Mutex<usize>>,
        entered: mpsc::UnboundedSender<Vec<u128>>,
    }

    const POISON: u128 = 666;

    #[async_trait]
    impl Insert for Gated {
        async fn insert(&self, jobs: Vec<NewJob>, _now: Timestamp, _urgent: bool) -> Result<Vec<Inserted>, StoreError> {
            let call = {
                let mut calls = self.calls.lock().expect("calls");
                *calls += 1;
                *calls - 1
            };
            let ids: Vec<u128> = jobs.iter().map(|j| j.job.id.0.as_u128()).collect();
            let _ = self.entered.send(ids.clone());
            if let Some(gate) = self.gates.get(call) {
                gate.notified().await;
            }
            if ids.contains(&POISON) {
                return Err(StoreError::VersionMoved { kind: "k".into(), pinned: 1 });
            }
            Ok(jobs.into_iter().map(|new| Inserted::Created(new.into_record(1))).collect())
        }
    }

    fn job(n: u128) -> NewJob {
        let rules = KindRules {
            cancellable: false,
            max_attempts: 1,
            failure_effect: false,
            notify_on_success: false,
            lean: false,
        };
        let submission = Submission {
            id: JobId(uuid::Uuid::from_u128(n)),
            rules,
            steps: vec![("a".into(), 1)],
            run_at: Timestamp::EPOCH,
        };
        let (job, history) = Job::submit(submission, Timestamp::EPOCH);
        NewJob {
            job,
            tenant: TenantId::default_tenant(),
            kind: "k".into(),
            kind_version: 1,
            priority: Priority::Normal,
            payload: Vec::new(),
            idempotency_key: None,
            lease_keys: Vec::new(),
            history,
        }
    }

    fn ids(inserted: &[Inserted]) -> Vec<u128> {
        inserted.iter().map(|i| i.record().job.id.0.as_u128()).collect()
    }

    /// A queue over a store whose first `gates` inserts wait to be let go.
    fn queue(gates: usize) -> (Arc<SubmissionQueue>, Gated, mpsc::UnboundedReceiver<Vec<u128>>) {
        let (entered, calls) = mpsc::unbounded_channel();
        let store =
            Gated { gates: Arc::new((0..gates).map(|_| Notify::new()).collect()), calls: Arc::default(), entered };
        (Arc::default(), store, calls)
    }

    type Submitted = tokio::task::JoinHandle<Result<Vec<Inserted>, StoreError>>;

    fn submit(queue: &Arc<SubmissionQueue>, store: &Gated, jobs: Vec<NewJob>) -> Submitted {
        let (queue, store) = (queue.clone(), store.clone());
        tokio::spawn(async move { queue.submit(&store, jobs, Timestamp::EPOCH).await })
    }

    /// Fills both insert slots with lone submissions held at their gates, then queues
    /// `waiting` behind them; answers the two held.
    async fn behind_two_inserts(
        queue: &Arc<SubmissionQueue>,
        store: &Gated,
        calls: &mut mpsc::UnboundedReceiver<Vec<u128>>,
        waiting: &[Vec<u128>],
    ) -> (Vec<Submitted>, Vec<Submitted>) {
        let mut held = Vec::new();
        for n in [1, 2] {
            held.push(submit(queue, store, vec![job(n)]));
            assert_eq!(calls.recv().await.expect("an insert"), vec![n], "a lone submission is inserted at once");
        }
        let mut queued = Vec::new();
        for jobs in waiting {
            queued.push(submit(queue, store, jobs.iter().map(|n| job(*n)).collect()));
            while queue.lock_queue().len() < queued.len() {
                tokio::task::yield_now().await;
            }
        }
        (held, queued)
    }

    const ANSWERED_WITHIN: Duration = Duration::from_secs(10);

    /// Submissions that arrive while both inserts run wait, then go as one insert, in the
    /// order they came; each is answered its own jobs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn submissions_waiting_for_an_insert_share_the_next_one() {
        let (queue, store, mut calls) = queue(2);
        let waiting = vec![vec![10], vec![20, 21], vec![30]];
        let (held, queued) = behind_two_inserts(&queue, &store, &mut calls, &waiting).await;
        store.gates[0].notify_one();
        assert_eq!(calls.recv().await.expect("the next insert"), vec![10, 20, 21, 30], "all three, in order");
        for (submitted, jobs) in queued.into_iter().zip(&waiting) {
            let inserted = tokio::time::timeout(ANSWERED_WITHIN, submitted).await.expect("in time").expect("task");
            assert_eq!(ids(&inserted.expect("inserted")), *jobs, "each submission gets its own jobs back");
        }
        store.gates[1].notify_one();
        for submitted in held {
            submitted.await.expect("task").expect("inserted");
        }
        assert!(calls.try_recv().is_err(), "no other insert");
    }

    /// A merged insert refused for one part's sake (a moved version) wrote nothing: each
    /// part goes alone, and only that one is refused.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_refused_part_of_a_merged_insert_fails_alone() {
        let (queue, store, mut calls) = queue(2);
        let waiting = vec![vec![10], vec![POISON], vec![30, 31]];
        let (held, queued) = behind_two_inserts(&queue, &store, &mut calls, &waiting).await;
        store.gates[0].notify_one();
        store.gates[1].notify_one();
        assert_eq!(calls.recv().await.expect("the merged insert"), vec![10, POISON, 30, 31]);
        let mut alone = Vec::new();
        for _ in 0..3 {
            alone.push(calls.recv().await.expect("each part alone"));
        }
        alone.sort_unstable();
        assert_eq!(alone, vec![vec![10], vec![30, 31], vec![POISON]]);
        let mut answers = Vec::new();
        for submitted in queued {
            answers.push(tokio::time::timeout(ANSWERED_WITHIN, submitted).await.expect("in time").expect("task"));
        }
        assert_eq!(ids(answers[0].as_ref().expect("inserted")), vec![10]);
        assert!(matches!(answers[1], Err(StoreError::VersionMoved { .. })), "{:?}", answers[1]);
        assert_eq!(ids(answers[2].as_ref().expect("inserted")), vec![30, 31]);
        for submitted in held {
            submitted.await.expect("task").expect("inserted");
        }
    }

    /// The caller that leads a merged insert is dropped while it runs (its client went
    /// away): the insert still lands, and the other submission it carried is answered.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_merged_insert_outlives_the_caller_that_led_it() {
        let (queue, store, mut calls) = queue(3);
        let (held, _) = behind_two_inserts(&queue, &store, &mut calls, &[]).await;
        // A submission waiting with no caller of its own to lead, then the one caller.
        let (reply, answer) = oneshot::channel();
        queue.lock_queue().push(Queued { id: u64::MAX, jobs: vec![job(10)], now: Timestamp::EPOCH, reply });
        let leader = submit(&queue, &store, vec![job(20)]);
        while queue.lock_queue().len() < 2 {
            tokio::task::yield_now().await;
        }
        store.gates[0].notify_one();
        assert_eq!(calls.recv().await.expect("the merged insert"), vec![10, 20]);
        leader.abort();
        let _ = leader.await;
        store.gates[2].notify_one();
        match tokio::time::timeout(ANSWERED_WITHIN, answer).await.expect("in time") {
            Ok(Reply::Inserted(inserted)) => assert_eq!(ids(&inserted), vec![10]),
            _ => panic!("the waiting submission was not answered its jobs"),
        }
        store.gates[1].notify_one();
        for submitted in held {
            submitted.await.expect("task").expect("inserted");
        }
    }

    /// A submission of many jobs is not held for others: it goes alone at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bulk_submission_goes_alone() {
        let (queue, store, mut calls) = queue(0);
        let bulk: Vec<u128> = (100..100 + MERGE_UP_TO as u128 + 1).collect();
        let inserted = queue.submit(&store, bulk.iter().map(|n| job(*n)).collect(), Timestamp::EPOCH).await;
        assert_eq!(ids(&inserted.expect("inserted")), bulk);
        assert_eq!(calls.recv().await.expect("one insert"), bulk);
        assert!(queue.lock_queue().is_empty());
    }

    /// The batch a leader takes stops at [`MAX_MERGED_JOBS`] (but holds at least one
    /// submission, however large).
    #[test]
    fn a_batch_stops_at_the_most_jobs_one_insert_carries() {
        let queue = SubmissionQueue::default();
        let push = |n: usize| {
            let (reply, _) = oneshot::channel();
            let jobs = (0..n).map(|i| job(i as u128)).collect();
            queue.lock_queue().push(Queued { id: 0, jobs, now: Timestamp::EPOCH, reply });
        };
        for _ in 0..MAX_MERGED_JOBS / MERGE_UP_TO + 1 {
            push(MERGE_UP_TO);
        }
        let batch = queue.take_batch();
        assert_eq!(batch.iter().map(|q| q.jobs.len()).sum::<usize>(), MAX_MERGED_JOBS);
        assert_eq!(queue.lock_queue().len(), 1, "the rest wait for the next insert");
        queue.lock_queue().clear();
        push(MAX_MERGED_JOBS + 1);
        assert_eq!(queue.take_batch().len(), 1);
        assert!(queue.take_batch().is_empty());
    }
}
