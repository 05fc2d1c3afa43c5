//! Policies as pure functions: dispatch order, retry backoff, hysteresis.

pub mod backoff;
pub mod budget;
pub mod hysteresis;
pub mod priority;
