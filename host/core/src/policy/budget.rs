//! What one step attempt may spend on checkpoints and snoozes: a guest that answers
//! `more` or `snooze(0)` in a loop would otherwise keep a core busy and write without
//! end (one did 9,544 history rows in 15 s).

use std::time::Duration;

/// Least time a snooze waits, whatever the guest asked.
pub const SNOOZE_FLOOR: Duration = Duration::from_secs(1);

/// Most checkpoints (`more`) one attempt may make; past it the attempt fails with
/// `checkpoint.budget-exceeded` (retried while the kind's attempts last). 100,000 slices
/// of a thousand rows is a hundred million rows per attempt.
pub const MAX_SLICES_PER_ATTEMPT: u32 = 100_000;

/// Checkpoints an attempt may make before its rate is judged.
pub const SLICE_RATE_GRACE: u32 = 1_000;

/// Most checkpoints per second, averaged over the attempt once past the grace; past it
/// the attempt fails with `checkpoint.rate-exceeded`. A slice that does real work takes
/// milliseconds; a loop that does none runs as fast as the database commits.
pub const MAX_SLICES_PER_SECOND: u32 = 200;

/// Delay before the next attempt of a step whose attempt ran over its checkpoint budget.
pub const OVER_BUDGET_BACKOFF: Duration = Duration::from_secs(10);

/// Whether an attempt that began at `started_micros` and is now at `now_micros` may make
/// its `slices`th checkpoint: `Ok`, or the host failure that ends it.
pub fn check_slices(slices: u32, started_micros: i64, now_micros: i64) -> Result<(), (&'static str, &'static str)> {
    use crate::failure::host_codes::{CHECKPOINT_BUDGET, CHECKPOINT_RATE};
    if slices > MAX_SLICES_PER_ATTEMPT {
        return Err(CHECKPOINT_BUDGET);
    }
    let elapsed_ms = u64::try_from(now_micros.saturating_sub(started_micros) / 1_000).unwrap_or(0);
    let allowed = elapsed_ms.saturating_mul(u64::from(MAX_SLICES_PER_SECOND)) / 1_000;
    if slices > SLICE_RATE_GRACE && u64::from(slices) > allowed {
        return Err(CHECKPOINT_RATE);
    }
    Ok(())
}
