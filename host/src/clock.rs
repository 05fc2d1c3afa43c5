//! Time and identity, injected: the engine asks a [`Clock`] for `now` and an id source
//! for new ids, so tests drive time by hand and never sleep.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use spindle_core::{JobId, Timestamp};
use uuid::Uuid;

/// Where `now` comes from.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current time.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        let micros = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros());
        Timestamp::from_micros(i64::try_from(micros).unwrap_or(i64::MAX))
    }
}

/// A clock that only moves when told to: for tests.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(start.as_micros())))
    }

    /// Moves the clock forward.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(i64::try_from(by.as_micros()).unwrap_or(i64::MAX), Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, to: Timestamp) {
        self.0.store(to.as_micros(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_micros(self.0.load(Ordering::SeqCst))
    }
}

/// A new job id: UUIDv7, so that ids sort by creation time in indexes.
pub fn new_job_id() -> JobId {
    JobId(Uuid::now_v7())
}
