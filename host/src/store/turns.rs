//! Turns at SQLite's one writer. A submission of a few jobs is a short transaction; a
//! group commit under load is a long one (about 10 ms for 128 outcomes and their
//! claims). Were they served in arrival order, a tenant submitting one job would wait
//! behind every flush already queued for the writer, not only the one in progress. An
//! urgent turn goes before the ordinary ones waiting, but never twice in a row while
//! one waits, so a stream of submissions cannot starve the flushes that settle jobs.
//! The one holding the writer is never interrupted.
//!
//! PostgreSQL has no such queue (its writers run side by side), so only SQLite takes
//! turns.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

/// Who holds the writer, who waits for it, and whether the last turn was urgent.
#[derive(Debug, Default)]
struct State {
    held: bool,
    /// Writers waiting, ordinary and urgent.
    waiting: [usize; 2],
    last_urgent: bool,
}

impl State {
    /// Whether a writer of this class may take the writer now.
    fn may_take(&self, urgent: bool) -> bool {
        let others_waiting = self.waiting[usize::from(!urgent)] > 0;
        !self.held && (!others_waiting || self.last_urgent != urgent)
    }
}

/// The writer's turns, and the signal its writes give this host's dispatcher when they
/// woke jobs the writing engine does not know of (SQLite has no other hosts to notify,
/// and no `NOTIFY`).
#[derive(Debug)]
pub struct WriterTurns {
    state: Mutex<State>,
    freed: Notify,
    ready: tokio::sync::watch::Sender<u64>,
}

impl Default for WriterTurns {
    fn default() -> Self {
        Self { state: Mutex::default(), freed: Notify::new(), ready: tokio::sync::watch::channel(0).0 }
    }
}

/// The writer, held until dropped.
#[derive(Debug)]
pub struct Turn(Arc<WriterTurns>);

impl Drop for Turn {
    fn drop(&mut self) {
        self.0.lock().held = false;
        self.0.freed.notify_waiters();
    }
}

/// A writer's place in the count of those waiting, given back when its turn comes or
/// when it stops waiting (its future dropped), so no one waits for a writer that left.
struct Waiting<'a> {
    turns: &'a WriterTurns,
    urgent: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.turns.lock().waiting[usize::from(self.urgent)] -= 1;
        self.turns.freed.notify_waiters();
    }
}

impl Turn {
    /// Tells this host's dispatchers that the write holding this turn made work ready.
    /// Sent before the commit: a claim takes a turn of its own, so it reads after it.
    pub fn signal_ready(&self) {
        self.0.ready.send_modify(|n| *n = n.wrapping_add(1));
    }
}

impl WriterTurns {
    /// The signals [`Turn::signal_ready`] sends.
    pub fn ready_signals(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ready.subscribe()
    }

    /// Waits for the writer: as soon as it is free, unless writers of the other class
    /// wait and the last turn went to this one.
    pub async fn take(self: &Arc<Self>, urgent: bool) -> Turn {
        self.lock().waiting[usize::from(urgent)] += 1;
        let waiting = Waiting { turns: self, urgent };
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the state is read: a turn given back in between still
            // wakes this writer.
            freed.as_mut().enable();
            {
                let mut state = self.lock();
                if state.may_take(urgent) {
                    state.held = true;
                    state.last_urgent = urgent;
                    drop(state);
                    drop(waiting);
                    return Turn(self.clone());
                }
            }
            freed.await;
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;

    const WITHIN: Duration = Duration::from_secs(10);

    /// Polls `turn` once: whether it is still waiting (it is then registered to wake).
    async fn still_waiting(turn: std::pin::Pin<&mut impl Future<Output = Turn>>) -> bool {
        tokio::select! {
            biased;
            _ = turn => false,
            () = std::future::ready(()) => true,
        }
    }

    /// Writers of each class that wait while the writer is held, in the order given
    /// (`true`: urgent), served when it is given back: the classes in the order served.
    async fn served(arrivals: &[bool]) -> Vec<bool> {
        let turns = Arc::new(WriterTurns::default());
        let held = turns.take(false).await;
        let (order, mut served) = mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        for &urgent in arrivals {
            let (turns, order) = (turns.clone(), order.clone());
            let (queued, arrived) = tokio::sync::oneshot::channel();
            tasks.push(tokio::spawn(async move {
                let waiting = turns.take(urgent);
                tokio::pin!(waiting);
                assert!(still_waiting(waiting.as_mut()).await, "it waits: the writer is held");
                queued.send(()).expect("arrived");
                let turn = waiting.await;
                order.send(urgent).expect("served");
                drop(turn);
            }));
            arrived.await.expect("the writer waits");
        }
        drop(held);
        let mut got = Vec::new();
        for _ in arrivals {
            got.push(tokio::time::timeout(WITHIN, served.recv()).await.expect("served in time").expect("a writer"));
        }
        for task in tasks {
            task.await.expect("writer task");
        }
        got
    }

    /// Two group commits wait for the writer, then a submission: it goes first when the
    /// writer is given back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_urgent_writer_goes_before_ordinary_ones_already_waiting() {
        assert_eq!(served(&[false, false, true]).await, [true, false, false]);
    }

    /// Submissions and group commits all waiting take turns, so a stream of submissions
    /// cannot hold the flushes back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn urgent_and_ordinary_writers_alternate_while_both_wait() {
        assert_eq!(served(&[false, false, true, true]).await, [true, false, true, false]);
    }

    /// An urgent writer that stops waiting gives its place up: ordinary writers are not
    /// held back by it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_urgent_writer_that_leaves_does_not_hold_the_others_back() {
        let turns = Arc::new(WriterTurns::default());
        let held = turns.take(false).await;
        {
            let urgent = turns.take(true);
            tokio::pin!(urgent);
            assert!(still_waiting(urgent.as_mut()).await);
        }
        drop(held);
        let turn = tokio::time::timeout(WITHIN, turns.take(false)).await.expect("the ordinary writer is served");
        drop(turn);
    }
}
