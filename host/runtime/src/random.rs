//! `wasi:random`, served by Spindle instead of wasmtime-wasi's own: a draw allocates
//! `len` bytes in the host before they are copied into the guest, and the guest chooses
//! `len`. wasmtime-wasi allows 64 MiB per draw and fills it a byte at a time: 200 guests
//! each drawing 32 MiB took a host to 7.4 GB, and a 16 MiB draw held a thread for tens
//! of milliseconds. Here a draw is bounded per call ([`MAX_DRAW`]) and by what the
//! guest's own memory limit leaves (the bytes land there), and filled in one pass.

use rand::RngCore as _;
use wasmtime_wasi::p2::bindings::random::{insecure, random};

use crate::state::GuestState;

/// Most bytes one `get-random-bytes` call may ask for: plenty for keys and nonces (the
/// Web's `getRandomValues` stops at 64 KiB), and what a host holds at most per guest
/// call. A draw over it ends the step as over its memory limit.
pub const MAX_DRAW: u64 = 1 << 20;

impl GuestState {
    /// `len` random bytes, or the trap of a draw over its bounds.
    fn draw(&mut self, len: u64, call: &str) -> wasmtime::Result<Vec<u8>> {
        let headroom = self.limits.headroom() as u64;
        if len > MAX_DRAW || len > headroom {
            self.limits.exceeded = true;
            return Err(wasmtime::Error::msg(format!(
                "{call} of {len} bytes: a draw is at most {MAX_DRAW} bytes, and at most what the step's memory limit \
                 leaves ({headroom} bytes)"
            )));
        }
        let mut bytes = vec![0; usize::try_from(len).unwrap_or(0)];
        rand::rng().fill_bytes(&mut bytes);
        Ok(bytes)
    }
}

impl random::Host for GuestState {
    fn get_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        self.draw(len, "wasi:random get-random-bytes")
    }

    fn get_random_u64(&mut self) -> wasmtime::Result<u64> {
        Ok(rand::rng().next_u64())
    }
}

impl insecure::Host for GuestState {
    fn get_insecure_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        self.draw(len, "wasi:random get-insecure-random-bytes")
    }

    fn get_insecure_random_u64(&mut self) -> wasmtime::Result<u64> {
        Ok(rand::rng().next_u64())
    }
}
