//! The `spindle` command: `serve` runs a host; the other commands are clients of one.

pub mod bench;
pub mod client;
pub mod demo;
mod demo_services;
pub mod guest;
pub mod serve;
