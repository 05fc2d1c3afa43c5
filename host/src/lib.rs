//! The Spindle host: everything durable around the pure core.
//!
//! - [`core`] (crate `spindle-core`): the state machines and policies, pure.
//! - [`runtime`] (crate `spindle-runtime`): the wasmtime sandbox.
//! - [`store`]: SQLite and PostgreSQL persistence behind one trait.
//! - [`engine`]: load → core transition → version-checked write; runs claimed steps.
//! - [`dispatcher`]: indexed discovery, batched claims, a bounded pool of running steps.
//! - [`slots`]: the host's slots as tenants hold them (who is over its share).
//! - [`registry`]: deployed components and kind versions.
//! - [`capabilities`]: what a step may reach outward (deployments, rules, sealed secrets).
//! - [`admission`]: admits jobs applications submitted in their own PostgreSQL transactions.
//! - [`reconciler`]: settles silent jobs from execution evidence.
//! - [`pruner`]: deletes finished jobs past their retention.
//! - [`failpoints`]: named points where a crash test stops the host to kill it there.
//! - [`singleton`]: the one-host-at-a-time loop the reconciler and pruner run in.
//! - [`upgrade`]: this host's side of the storage format gate (hosts of two builds).
//! - [`host`]: all of the above assembled; [`api`] faces users (`api::dashboard`: the web
//!   dashboard); [`telemetry`]: logs, and spans over OTLP.
//!
//! The `spindle` command is the `spindle-cli` crate (`host/cli`); the benchmark harness
//! and the demo are `spindle-bench` (`host/bench`).

pub mod admission;
pub mod api;
pub mod capabilities;
pub mod clock;
pub mod config;
pub mod dispatcher;
pub mod engine;
pub mod failpoints;
pub mod host;
pub mod pruner;
pub mod reconciler;
pub mod registry;
pub mod scheduler;
pub mod singleton;
pub mod slots;
pub mod store;
pub mod telemetry;
pub mod tokens;
pub mod upgrade;

pub use spindle_core as core;
pub use spindle_runtime as runtime;
pub use sqlx;
