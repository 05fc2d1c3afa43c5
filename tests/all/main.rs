//! Spindle's workspace-level integration tests: one binary, a module per topic, real
//! components (built by `cargo xtask guests`), real SQLite files and a real PostgreSQL
//! server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Generates `sqlite::NAME` and `postgres::NAME` tests from `async fn NAME(Backend)`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(spindle::store::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(spindle::store::Backend::Postgres).await
                }
            )*
        }
    };
}

mod bulk;
mod capacity;
mod clients;
mod crash;
mod deploys;
mod e2e;
mod engine;
mod hardening;
mod languages;
mod lean;
mod logs;
mod outbound;
mod reconciler;
mod run_control;
mod sandbox;
mod scale_out;
mod sql_door;
mod traces;
mod typed_inputs;
mod upgrades;
mod workflows;
