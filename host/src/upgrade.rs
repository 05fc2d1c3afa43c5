//! Hosts of two builds on one database: this host's side of the storage format gate
//! (`spindle_core::upgrade` decides; `store::hosts` keeps the rows).
//!
//! A host announces itself when it opens and again every few seconds (its build, the
//! formats it reads and writes, its contracts, whether it drains). Each announcement
//! answers the format the database is at, which this host's claims then write; or the
//! core's refusal, after which the host claims nothing and refuses every job write
//! until a later announcement is admitted. A host that could not renew its announcement
//! within its lifetime (the database unreachable) stops claiming too: other hosts may
//! already count it gone and move the gate without it.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use spindle_core::upgrade::{ClaimRecord, Format, Formats, GateRefusal};

/// The gate as this host last read it.
#[derive(Debug)]
pub struct Gate {
    formats: Formats,
    /// The format the database is at and this host writes; 0 while refused.
    format: AtomicU32,
    /// Milliseconds after `origin` until which the last admission holds; `u64::MAX`
    /// for an engine that never announces (tests, benchmarks: no other host to agree with).
    valid_until: AtomicU64,
    origin: Instant,
    refusal: Mutex<Option<String>>,
    /// When this host first announced itself (what its renewals repeat).
    started_at: Mutex<Option<spindle_core::Timestamp>>,
    /// Held while a writer renews a lapsed admission, so that one renewal serves all.
    pub(crate) renewing: tokio::sync::Mutex<()>,
}

/// What `/v1/health` and `/metrics` say of the gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateStatus {
    /// This build's formats.
    pub formats: Formats,
    /// The format this host writes, if it may write.
    pub writing: Option<Format>,
    /// Why it may not, if it may not.
    pub refusal: Option<String>,
}

impl Gate {
    /// A gate for a build of `formats` that has not announced itself: open at the newest
    /// format it writes, for as long as it never announces.
    pub fn unannounced(formats: Formats) -> Self {
        let format = formats.writes;
        Self {
            formats,
            format: AtomicU32::new(format),
            valid_until: AtomicU64::new(u64::MAX),
            origin: Instant::now(),
            refusal: Mutex::new(None),
            started_at: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
        }
    }

    /// This build's formats.
    pub fn formats(&self) -> &Formats {
        &self.formats
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// An announcement sent at `sent` was admitted at `format`, holding for `lifetime`
    /// from when it was sent (never longer than the row other hosts read says).
    pub fn admitted(&self, format: Format, sent: Instant, lifetime: Duration) {
        let sent_ms = u64::try_from(sent.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX);
        let until = sent_ms.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        self.format.store(format, Ordering::Release);
        self.valid_until.store(until, Ordering::Release);
        if let Ok(mut refusal) = self.refusal.lock() {
            *refusal = None;
        }
    }

    /// An announcement was refused.
    pub fn refused(&self, refusal: &GateRefusal) {
        self.format.store(0, Ordering::Release);
        if let Ok(mut said) = self.refusal.lock() {
            *said = Some(refusal.to_string());
        }
    }

    /// Records when this host first announced itself.
    pub fn started(&self, at: spindle_core::Timestamp) {
        if let Ok(mut started) = self.started_at.lock() {
            started.get_or_insert(at);
        }
    }

    /// When this host first announced itself, if it did.
    pub fn started_at(&self) -> Option<spindle_core::Timestamp> {
        self.started_at.lock().ok().and_then(|s| *s)
    }

    /// Whether the last admission ran out without a renewal (the host was paused, or the
    /// database unreachable) rather than being refused.
    pub fn lapsed(&self) -> bool {
        self.format.load(Ordering::Acquire) != 0 && self.elapsed_ms() >= self.valid_until.load(Ordering::Acquire)
    }

    /// The format this host writes now, or why it may not write.
    pub fn check(&self) -> Result<Format, String> {
        let format = self.format.load(Ordering::Acquire);
        if format == 0 {
            let said = self.refusal.lock().ok().and_then(|r| r.clone());
            return Err(said.unwrap_or_else(|| "this host has not joined the database's storage format gate".into()));
        }
        if self.elapsed_ms() >= self.valid_until.load(Ordering::Acquire) {
            return Err("this host could not renew its announcement in time: other hosts may count it gone, so it \
                        claims and writes nothing until the database answers again"
                .into());
        }
        Ok(format)
    }

    /// What a claim writes now, or `None` when this host may not claim.
    pub fn claim_record(&self) -> Option<ClaimRecord> {
        self.check().ok().map(ClaimRecord::of)
    }

    /// The gate as this host sees it.
    pub fn status(&self) -> GateStatus {
        let check = self.check();
        GateStatus { formats: self.formats.clone(), writing: check.as_ref().ok().copied(), refusal: check.err() }
    }
}

/// The loop that renews this host's announcement, six times per lifetime (the claim
/// lease's TTL), so that one missed beat never makes it count as gone.
#[derive(Debug)]
pub struct Announcer {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Announcer {
    /// Renews `engine`'s announcement (first made at `started_at`) until stopped.
    pub fn start(engine: std::sync::Arc<crate::engine::Engine>, started_at: spindle_core::Timestamp) -> Self {
        let every = (engine.config().lease_ttl / 6).max(Duration::from_millis(100));
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    _ = stopped.changed() => break,
                }
                if let Err(e) = engine.announce_host(started_at).await {
                    tracing::warn!(error = %e, "could not renew this host's announcement");
                }
            }
        });
        Self { stop, task }
    }

    /// Stops renewing.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

#[cfg(test)]
mod tests {
    use spindle_core::upgrade::{ClaimRecord, Formats};

    use super::*;

    #[test]
    fn an_engine_that_never_announces_writes_its_newest_format() {
        let gate = Gate::unannounced(Formats::this_build());
        assert_eq!(gate.check(), Ok(3));
        assert_eq!(gate.claim_record(), Some(ClaimRecord::JobAlone));
        let pinned = Gate::unannounced(Formats::pinned(1).expect("format 1"));
        assert_eq!(pinned.claim_record(), Some(ClaimRecord::JobAndStep));
    }

    #[test]
    fn a_refused_host_may_not_write_until_it_is_admitted_again() {
        let gate = Gate::unannounced(Formats::pinned(1).expect("format 1"));
        let refusal = spindle_core::upgrade::join(Some(2), gate.formats()).expect_err("refused");
        gate.refused(&refusal);
        let said = gate.check().expect_err("refusing");
        assert!(said.contains("storage format is 2"), "{said}");
        assert_eq!(gate.claim_record(), None, "no claim while refused");
        let status = gate.status();
        assert_eq!((status.writing, status.refusal.is_some()), (None, true));
        gate.admitted(1, Instant::now(), Duration::from_secs(60));
        assert_eq!(gate.check(), Ok(1));
        assert_eq!(gate.status().refusal, None);
    }

    #[test]
    fn an_admission_not_renewed_within_its_lifetime_stops_the_host() {
        let gate = Gate::unannounced(Formats::this_build());
        gate.admitted(2, Instant::now(), Duration::ZERO);
        let said = gate.check().expect_err("lapsed");
        assert!(said.contains("could not renew its announcement"), "{said}");
        assert_eq!(gate.claim_record(), None);
        assert!(gate.lapsed(), "a lapse, which a writer renews, not a refusal");
        let refusal = spindle_core::upgrade::join(Some(4), gate.formats()).expect_err("refused");
        gate.refused(&refusal);
        assert!(!gate.lapsed(), "a refusal is not renewed by writers");
    }
}
