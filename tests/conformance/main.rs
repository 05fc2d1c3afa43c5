//! The storage conformance suite: what every [`Storage`](spindle::store::Storage)
//! backend must do, run against SQLite and PostgreSQL alike.
//!
//! Tests drive the store through the trait only. Job changes are derived the way the
//! engine derives them: a core [`transition`](spindle_core::transition) turned by hand
//! into a [`JobWrite`](spindle::store::JobWrite) (see `fixture.rs`). Time is explicit
//! (`Timestamp::from_millis`); nothing sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Generates `sqlite::NAME` and `postgres::NAME` tests from `async fn NAME(Backend)`, and
/// the same again with every job a lean kind's (`sqlite_lean::NAME`, `postgres_lean::NAME`:
/// [`fixture::rules`] answers lean rules): what the store promises holds for both records.
/// A test that runs once per backend (of what only a full record keeps, step rows and
/// history, or one that chooses its jobs' records itself) is listed after `once:`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)? $(; once: $($full:ident),* $(,)?)?) => {
        on_both_backends!(@full $($name,)* $($($full,)*)?);
        mod sqlite_lean {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::fixture::LEAN.scope(true, super::$name(spindle::store::Backend::Sqlite)).await
                }
            )*
        }
        mod postgres_lean {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::fixture::LEAN.scope(true, super::$name(spindle::store::Backend::Postgres)).await
                }
            )*
        }
    };
    (@full $($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(spindle::store::Backend::Sqlite).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(spindle::store::Backend::Postgres).await
                }
            )*
        }
    };
}

mod fixture;

mod backend_specific;

mod claims;
mod jobs;
mod leases;
mod listing;
mod passes;
mod projection;
mod queue;
mod registry;
mod services;
mod tenants;
