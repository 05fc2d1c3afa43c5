//! Hosts and the storage format gate, as the operations room offers them: this host's
//! announcement, the list of hosts, and the operator's move of the gate. The core
//! (`spindle_core::upgrade`) decides each; the store writes the answer in one
//! transaction under the gate's lock.

use spindle_core::upgrade::{self, Format};

use super::{Engine, EngineError, Operations};
use crate::store::{GateRow, HostRow};

/// The runtime's contract versions, as a host announces them.
fn contracts() -> Vec<String> {
    spindle_runtime::Contract::ALL.iter().map(|c| c.version().to_owned()).collect()
}

/// This build, as a host announces it: its version and the commit it was built from
/// (`unknown` outside a git checkout), so that hosts of two builds tell apart in
/// `spindle hosts` even at one version.
pub const BUILD: &str = concat!("spindle ", env!("CARGO_PKG_VERSION"), " (", env!("SPINDLE_COMMIT"), ")");

impl Engine {
    /// Announces this host (or renews it): the gate answers the format it writes from
    /// now on, or refuses it, after which it claims and writes nothing. Answers the
    /// format, or the refusal as said.
    pub async fn announce_host(
        &self,
        started_at: spindle_core::Timestamp,
    ) -> Result<Result<Format, String>, EngineError> {
        let sent = std::time::Instant::now();
        self.gate.started(started_at);
        let now = self.now();
        let ttl = self.config.lease_ttl;
        let host = HostRow {
            id: self.config.host_id.clone(),
            instance: self.instance.clone(),
            build: BUILD.to_owned(),
            formats: self.gate.formats().clone(),
            contracts: contracts(),
            draining: self.config.draining,
            started_at,
            heartbeat_at: now,
            expires_at: now.plus(ttl),
        };
        let formats = self.gate.formats().clone();
        match self.store.announce(&host, &|recorded| upgrade::join(recorded, &formats)).await? {
            Ok(format) => {
                let was = self.gate.check().ok();
                self.gate.admitted(format, sent, ttl);
                if was != Some(format) {
                    tracing::info!(format, build = %formats, "storage format gate: this host writes format {format}");
                    // Claims held back while refused may go now.
                    self.wake.notify_waiters();
                }
                Ok(Ok(format))
            }
            Err(refusal) => {
                tracing::error!(code = "storage-format", "{refusal}");
                self.gate.refused(&refusal);
                Ok(Err(refusal.to_string()))
            }
        }
    }

    /// The format this host writes, or why it may not write (a job write checks first).
    /// An admission that lapsed while the host was paused or cut off is renewed here, once
    /// for all the writers waiting, before they are refused.
    pub(crate) async fn may_write(&self) -> Result<Format, EngineError> {
        if let Ok(format) = self.gate.check() {
            return Ok(format);
        }
        if self.gate.lapsed() {
            let _renewing = self.gate.renewing.lock().await;
            if let (true, Some(started)) = (self.gate.lapsed(), self.gate.started_at())
                && let Err(e) = self.announce_host(started).await
            {
                tracing::warn!(error = %e, "could not renew this host's announcement");
            }
        }
        self.gate.check().map_err(EngineError::StorageFormat)
    }

    /// Removes this process's row (it is stopping): the gate no longer waits for it.
    /// Another process of the same host id keeps its own.
    pub async fn leave(&self) -> Result<(), EngineError> {
        Ok(self.store.leave(&self.config.host_id, &self.instance).await?)
    }
}

impl Operations<'_> {
    /// Every host recorded, live or expired, with the gate.
    pub async fn hosts(&self) -> Result<(Vec<HostRow>, Option<GateRow>), EngineError> {
        Ok((self.store.hosts().await?, self.store.gate().await?))
    }

    /// Moves the storage format gate to the newest format every live host reads and
    /// writes (`spindle upgrade finalize`); answers (from, to), or the core's refusal
    /// naming the hosts that hold it back. This host writes the new format at once.
    pub async fn finalize_format(&self, by: &str) -> Result<Result<(Format, Format), String>, EngineError> {
        let moved = self.store.move_gate(self.now(), by, &|from, live| upgrade::finalize(from, live)).await?;
        match moved {
            Ok((from, to)) => {
                tracing::info!(from, to, by, "storage format gate moved");
                self.announce_again().await?;
                Ok(Ok((from, to)))
            }
            Err(refusal) => Ok(Err(refusal.to_string())),
        }
    }

    async fn announce_again(&self) -> Result<(), EngineError> {
        let started = self
            .store
            .hosts()
            .await?
            .into_iter()
            .find(|h| h.id == self.config.host_id && h.instance == self.instance)
            .map(|h| h.started_at);
        if let Some(started) = started {
            let _ = self.announce_host(started).await?;
        }
        Ok(())
    }
}
