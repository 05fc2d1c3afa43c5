//! Regressions from the fault-injection runs, the code review and the black-box probes:
//! each test here failed before its fix.

use std::sync::Arc;

use spindle::store::Backend;
use spindle::store::Role;
use spindle_tests::harness::Harness;

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
