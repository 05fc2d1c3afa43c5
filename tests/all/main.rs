//! Spindle's workspace-level integration tests: one binary, a module per topic, real
//! components (built by `cargo xtask guests`), real SQLite files and a real PostgreSQL
//! server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sandbox;
