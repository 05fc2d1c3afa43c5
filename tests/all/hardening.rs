//! Regressions from the fault-injection runs, the code review and the black-box probes:
//! each test here failed before its fix.

use std::sync::Arc;
use std::time::Duration;

use spindle::clock::{Clock, ManualClock};
use spindle::store::{Backend, Role};
use spindle_core::Timestamp;
use spindle_tests::harness::{Harness, test_engine_config};

on_both_backends!(hosts_starting_together_register_one_operator_token);

/// Hosts started together with one `SPINDLE_OPERATOR_TOKEN` each register it: every one
/// of them must come up (a duplicate key crashed all but the first).
async fn hosts_starting_together_register_one_operator_token(backend: Backend) {
    let h = Harness::new(backend).await;
    let engines: Vec<_> = (0..8).map(|_| h.engine()).collect();
    let token = "spo_shared_operator_token";
    let barrier = Arc::new(tokio::sync::Barrier::new(engines.len()));
    let starts: Vec<_> = engines
        .iter()
        .map(|engine| {
            let (engine, barrier) = (engine.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                engine.register_operator_token(token).await
            })
        })
        .collect();
    for start in starts {
        start.await.unwrap().expect("every host registers the token");
    }
    let (tenant, role) = engines[0].authenticate(token).await.unwrap().expect("the token is known");
    assert_eq!((tenant, role), (None, Role::Operator));
}

/// A clock that says each time it is read.
#[derive(Debug)]
struct Watched {
    clock: ManualClock,
    reads: tokio::sync::mpsc::UnboundedSender<()>,
}

impl Clock for Watched {
    fn now(&self) -> Timestamp {
        let _ = self.reads.send(());
        self.clock.now()
    }
}

/// A claim waiting for the database (here: SQLite's one writer, held by another
/// transaction) is stamped when it gets its rows, not when its host began asking: its
/// lease lasts its whole TTL after the claim commits, and history times follow commits.
async fn a_claim_is_stamped_when_it_holds_its_rows() {
    let h = Harness::new(Backend::Sqlite).await;
    h.deploy("scripted").await;
    let clock = ManualClock::new(Timestamp::from_millis(1_750_000_000_000));
    let (reads, mut read) = tokio::sync::mpsc::unbounded_channel();
    let engine = h.engine_clocked(test_engine_config(), Arc::new(Watched { clock: clock.clone(), reads }));
    let id = h.submit(&engine, "scripted", serde_json::json!({})).await;
    while read.try_recv().is_ok() {}

    let writer = h.store.db().begin().await.expect("hold the writer");
    let claiming = tokio::spawn({
        let engine = engine.clone();
        async move { engine.claim(1).await }
    });
    read.recv().await.expect("the claim read the clock before asking the store");
    clock.advance(Duration::from_secs(5));
    drop(writer);
    let claimed = claiming.await.unwrap().expect("claimed").pop().expect("the job");
    assert_eq!(claimed.job.id, id);
    let claim = claimed.job.claim.expect("a claim");
    eprintln!("claimed at {} with the clock at {}", claim.claimed_at, clock.now());
    assert_eq!(claim.claimed_at, clock.now(), "stamped when its rows were locked, five seconds later");
    assert_eq!(claim.expires_at, clock.now().plus(test_engine_config().lease_ttl));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_a_claim_is_stamped_when_it_holds_its_rows() {
    a_claim_is_stamped_when_it_holds_its_rows().await;
}
