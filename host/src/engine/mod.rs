//! The engine: for each event, load the job, call the pure core, and write what it
//! answers in one version-checked transaction; on a conflict, reread and derive again
//! within a bounded budget (seed 001, concurrency).
//!
//! Callers reach it through its rooms (`rooms`), one narrow handle per part of the work:
//! [`submission`](Engine::submission), [`execution`](Engine::execution),
//! [`workflows`](Engine::workflows), [`capacity`](Engine::capacity),
//! [`tenancy`](Engine::tenancy) and [`operations`](Engine::operations). Beneath them:
//!
//! - [`plan`](mod@plan): a core transition as a store write; [`HostDeriver`]: the core's answers
//!   inside store transactions; `group_commit`: outcomes that share a transaction.
//! - `commands`: `apply` and `commit`, the one way a job's state changes.
//! - `supervisor` renews a running step's claim on heartbeats; `hooks` runs failure
//!   effects and the outbox; `recovery` rescues lapsed claims and promotes due jobs.

mod admission;
mod breakers;
mod capacity;
mod commands;
mod config;
mod counters;
mod deriver;
mod error;
mod execute;
mod group_commit;
mod hooks;
mod meter;
mod operations;
mod outbound;
pub mod plan;
mod queries;
mod read_audit;
mod recovery;
mod rooms;
mod samples;
mod schedules;
mod submit;
mod supervisor;
mod tenancy;
mod upgrade;
mod workflow;

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::StdRng;
use spindle_core::policy::backoff::Backoff;
use spindle_core::{JobId, JobState, Timestamp};
use tokio::sync::{Notify, broadcast};

use crate::clock::Clock;
use crate::registry::Registry;
use crate::store::Storage;

/// The records the engine takes and answers with. The store keeps them; the API names
/// them through the engine, its one door to the store.
pub use crate::store::{
    Alert, DeployRecord, DeployState, HistoryEntry, Inserted, JobFilter, JobLogs, JobRecord, KindEntry, KindVersion,
    LiveCount, LogLine, MintedBy, Operation, OperationQuery, Presented, QueueDepth, RecordedCall, Role, ScheduleRow,
    SecretInfo, SqlSubmission, SqlVerdict, StoreError, Tenant, TenantId, TenantLimits, TokenInfo, Usage,
};
pub use admission::AdmissionPass;
pub use breakers::{BreakerView, Breakers};
pub use capacity::Capacity;
pub use commands::{Command, CommandChecks};
pub(crate) use commands::{Committed, Writer};
pub use config::EngineConfig;
pub use counters::{Counters, STEP_BUCKETS};
pub use deriver::HostDeriver;
pub use error::EngineError;
pub use execute::{Executed, NextFilter, Outcome};
use group_commit::{GroupCommit, StoreCommitter};
pub use operations::{BulkAction, BulkCount, DeadLetterFilter, JobSelection};
pub use plan::{Plan, plan};
pub use queries::STATE_COUNT_CAP;
pub use rooms::{CapacityRoom, Execution, Operations, Submission, Tenancy, Workflows};
pub use samples::SAMPLE_EVERY;
pub use schedules::{MAX_SCHEDULE_NAME, ScheduleRequest};
pub use submit::{Asked, MAX_DELAY, SubmitRequest, tenant_key, untenant_key};
pub use tenancy::{CONFIGURED_OPERATOR_TOKEN, MAX_TOKEN_LIFETIME, MAX_TOKEN_NAME_CHARS, TokenScope};
pub use workflow::{MAX_SIGNAL_KEY, MAX_SIGNAL_NAME, RelayPass, Signalled};

/// The engine.
#[derive(Debug)]
pub struct Engine {
    store: Arc<dyn Storage>,
    registry: Arc<Registry>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    rng: std::sync::Mutex<StdRng>,
    wake: Arc<Notify>,
    /// Wakes the workflow relay when a write queued work for it.
    relay_wake: Arc<Notify>,
    changes: broadcast::Sender<StateChange>,
    counters: Arc<Counters>,
    deriver: Arc<HostDeriver>,
    group: GroupCommit,
    /// Seals and opens tenants' secrets; set once by the host.
    secret_key: std::sync::OnceLock<crate::capabilities::SecretKey>,
    /// Usage not yet added to the store.
    meter: meter::Meter,
    /// This host's fault breakers, which its deriver asks before each claim.
    breakers: Arc<breakers::Breakers>,
    /// Tenants' sandbox ceilings as last read.
    ceilings: capacity::CeilingCache,
    /// Steps running over the last hour, per tenant (`samples`).
    samples: samples::Samples,
    /// The storage format this host writes, as its last announcement was answered.
    gate: Arc<crate::upgrade::Gate>,
    /// Operators' reads of tenants' jobs, as last written to their audit trails.
    read_audit: read_audit::ReadAudit,
    /// This process's instance: random, so that two processes of one host id announce
    /// themselves apart.
    instance: String,
}

/// A job changed state (sent after the change committed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StateChange {
    /// The job.
    pub job: JobId,
    /// Its state before.
    pub from: JobState,
    /// Its state now.
    pub to: JobState,
}

impl Engine {
    /// An engine over `store` and `registry`.
    pub fn new(store: Arc<dyn Storage>, registry: Arc<Registry>, clock: Arc<dyn Clock>, config: EngineConfig) -> Self {
        let rng = config.rng_seed.map_or_else(StdRng::from_os_rng, StdRng::seed_from_u64);
        let breakers = Arc::new(breakers::Breakers::new(config.breaker));
        let gate = Arc::new(crate::upgrade::Gate::unannounced(config.formats.clone()));
        let deriver = Arc::new(
            HostDeriver::new(&config.host_id, config.lease_ttl)
                .with_clock(clock.clone())
                .with_breakers(breakers.clone())
                .with_gate(gate.clone()),
        );
        let counters = Arc::new(Counters::default());
        let group =
            GroupCommit::new(Arc::new(StoreCommitter(store.clone())), deriver.clone(), clock.clone(), counters.clone());
        Self {
            store,
            registry,
            clock,
            config,
            rng: std::sync::Mutex::new(rng),
            wake: Arc::new(Notify::new()),
            relay_wake: Arc::new(Notify::new()),
            changes: broadcast::channel(4096).0,
            counters,
            deriver,
            group,
            secret_key: std::sync::OnceLock::new(),
            meter: meter::Meter::default(),
            breakers,
            ceilings: capacity::CeilingCache::default(),
            samples: samples::Samples::default(),
            gate,
            read_audit: read_audit::ReadAudit::default(),
            instance: hex::encode(rand::random::<[u8; 4]>()),
        }
    }

    /// This process's instance (`spindle hosts` lists it beside the host id).
    pub fn instance(&self) -> &str {
        &self.instance
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The storage format gate as this host last read it.
    pub fn gate(&self) -> &crate::upgrade::Gate {
        &self.gate
    }

    /// Whether this host may not write now (background work then does nothing).
    pub(crate) fn refusing(&self) -> bool {
        self.gate.check().is_err()
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The current time, from the injected clock.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Notified whenever work may have become ready.
    pub fn wake_signal(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    /// Notified whenever a write queued work for the workflow relay.
    pub fn relay_signal(&self) -> Arc<Notify> {
        self.relay_wake.clone()
    }

    /// State changes committed by this engine, as they happen: what tests and `wait`
    /// listen to instead of polling.
    pub fn subscribe(&self) -> broadcast::Receiver<StateChange> {
        self.changes.subscribe()
    }

    /// The engine's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// How this host's transactions ask the core about jobs they did not come with.
    pub fn deriver(&self) -> &HostDeriver {
        &self.deriver
    }

    pub(crate) fn backoff(&self, rules_attempt: u32, policy: Backoff) -> Duration {
        let mut rng = match self.rng.lock() {
            Ok(rng) => rng,
            Err(poisoned) => poisoned.into_inner(),
        };
        policy.delay(rules_attempt, &mut *rng)
    }

    /// Publishes a committed state change to subscribers.
    pub(crate) fn announce(&self, job: JobId, from: JobState, to: JobState) {
        if from != to {
            let _ = self.changes.send(StateChange { job, from, to });
        }
    }
}
