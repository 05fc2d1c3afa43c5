//! Workflows around the core's waits: children resolved before an `await-children`
//! outcome is committed, what a woken step is called with, the relay that counts a
//! parent's children and cancels leftovers after the writes that decided them, and
//! signals.

use std::collections::BTreeMap;
use std::time::Duration;

use spindle_core::job::{JobEvent, StepReport};
use spindle_core::workflow::{ChildOrder, Met, WaitFor};
use spindle_core::{Actor, JobId, JobState, SafeFailure};
use spindle_runtime::{Awaited, ChildResult, ChildSpec, ChildState};

use super::{Engine, EngineError, Writer, tenant_key};
use crate::clock::new_job_id;
use crate::registry::RegistryError;
use crate::store::{JobRecord, OutboxEffect, TenantId};

/// Longest a signal's name may be.
pub use spindle_core::workflow::MAX_SIGNAL_NAME;
/// Longest a signal's idempotency key may be.
pub const MAX_SIGNAL_KEY: usize = 255;

/// How long a parent still contended after the relay's quick retries waits before it
/// is counted again.
pub const RELAY_RETRY: Duration = Duration::from_millis(50);

/// What one relay pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayPass {
    /// Queued effects it took.
    pub ran: usize,
    /// When a count it could not finish is due again.
    pub retry_at: Option<spindle_core::Timestamp>,
}

/// What sending a signal came to.
#[derive(Clone, Debug)]
pub struct Signalled {
    /// The job as it now is.
    pub record: JobRecord,
    /// The signal's key was stored already: nothing was sent again.
    pub repeated: bool,
}

impl Engine {
    /// Resolves the children an `await-children` outcome asks for (each kind's current
    /// version in the parent's tenant) into the report the core decides on; a child
    /// the host cannot create refuses the step with a typed failure.
    pub(crate) async fn fan_out_report(
        &self,
        record: &JobRecord,
        children: Vec<ChildSpec>,
        join: spindle_core::workflow::Join,
        leftover: spindle_core::workflow::Leftover,
        cursor: Option<String>,
    ) -> StepReport {
        let mut orders = Vec::with_capacity(children.len());
        let mut resolved = BTreeMap::new();
        for (index, child) in children.into_iter().enumerate() {
            if child.input.len() > self.config.max_payload_bytes {
                let message = format!("child {index}'s input is over {} bytes", self.config.max_payload_bytes);
                return refused("workflow.child-input-too-large", message);
            }
            if child.lease_keys.len() > self.config.max_lease_keys {
                return refused(
                    "workflow.invalid-child",
                    format!("child {index} has over {} lease keys", self.config.max_lease_keys),
                );
            }
            if !resolved.contains_key(&child.kind) {
                match self.registry.current(&record.tenant, &child.kind).await {
                    Ok(current) => {
                        resolved.insert(child.kind.clone(), current);
                    }
                    Err(RegistryError::UnknownKind(kind)) => {
                        return refused(
                            "workflow.unknown-kind",
                            format!("child {index}'s kind {kind:?} is not deployed"),
                        );
                    }
                    Err(e) => {
                        tracing::error!(job = %record.job.id, error = %e, "could not resolve a child's kind");
                        let failure =
                            SafeFailure::host("workflow.kind-unavailable", "a child's kind could not be loaded");
                        return StepReport::Retryable { failure, backoff: self.config.rescue_backoff };
                    }
                }
            }
            let current = &resolved[&child.kind];
            let spec = &current.kind.spec;
            orders.push(ChildOrder {
                id: new_job_id(),
                kind: child.kind,
                kind_version: current.version.version,
                rules: self.rules_of(current),
                steps: spec.steps.iter().map(|s| (s.key.clone(), s.weight)).collect(),
                payload: child.input,
                idempotency_key: child.idempotency_key,
                priority: child.priority,
                lease_keys: child.lease_keys.iter().map(|k| tenant_key(&record.tenant, k)).collect(),
            });
        }
        StepReport::AwaitChildren { children: orders, join, leftover, cursor }
    }

    /// What the step at `index` is called with when its wait is over: its children's
    /// results, the oldest pending signal, or the timeout.
    pub(crate) async fn awaited(&self, record: &JobRecord, index: usize) -> Result<Option<Awaited>, EngineError> {
        let Some(wait) = record.job.wait.as_ref().filter(|w| w.step == index) else { return Ok(None) };
        Ok(match (&wait.what, wait.met) {
            (WaitFor::Children { slot, .. }, Some(Met::Children)) => {
                let children = self.store.children(record.job.id, slot).await?;
                Some(Awaited::Children(children.iter().map(child_result).collect()))
            }
            (WaitFor::Signal { name, .. }, Some(Met::Signal)) => {
                match self.store.oldest_signal(record.job.id, name).await? {
                    Some(body) => Some(Awaited::Signal(body)),
                    None => Some(Awaited::SignalTimeout),
                }
            }
            (WaitFor::Signal { .. }, Some(Met::Timeout)) => Some(Awaited::SignalTimeout),
            _ => None,
        })
    }

    /// [`count_children`](Self::count_children), again after 1, 2, 4 and 8 ms while
    /// other writers keep changing the parent (another host's relay, its own step):
    /// answers whether it was counted.
    async fn count_children_soon(&self, parent: JobId) -> Result<bool, EngineError> {
        for backoff_ms in [1, 2, 4, 8, 0] {
            match self.count_children(parent).await {
                Ok(()) => return Ok(true),
                Err(EngineError::Contention) if backoff_ms > 0 => {
                    tokio::time::sleep(Duration::from_millis(backoff_ms)).await;
                }
                Err(EngineError::Contention) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }

    /// Counts the children of the fan-out `parent` waits for, and tells it.
    async fn count_children(&self, parent: JobId) -> Result<(), EngineError> {
        let Some(record) = self.store.job(parent).await? else { return Ok(()) };
        let Some(wait @ WaitFor::Children { slot, .. }) =
            record.job.wait.as_ref().filter(|w| w.met.is_none()).map(|w| &w.what)
        else {
            return Ok(());
        };
        let settled = self.store.settled_children(parent, slot).await?;
        if !spindle_core::workflow::count_worth_writing(wait, settled) {
            return Ok(());
        }
        let event = JobEvent::ChildrenSettled { slot: slot.clone(), settled };
        match self.apply(None, parent, Writer::Recovery, |_| Some(event.clone())).await {
            Ok(_) | Err(EngineError::Refused { .. } | EngineError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Cancels `parent`'s open children (detail: `{"slot": .., "reason": ..}`).
    async fn cancel_children(&self, parent: JobId, detail: Option<&str>) -> Result<(), EngineError> {
        let detail: serde_json::Value = detail.and_then(|d| serde_json::from_str(d).ok()).unwrap_or_default();
        let slot = detail["slot"].as_str();
        let reason = detail["reason"].as_str().unwrap_or("the parent closed").to_owned();
        let actor = Actor::new(format!("parent:{parent}"));
        for child in self.store.open_children(parent, slot).await? {
            let event = JobEvent::Cancel { actor: actor.clone(), reason: reason.clone() };
            match self.apply(None, child, Writer::Command, |_| Some(event.clone())).await {
                Ok(_) | Err(EngineError::Refused { .. } | EngineError::NotFound) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl super::Workflows<'_> {
    /// Sends signal `name` to a tenant's job: the signal is stored and the job told (a
    /// step waiting for that name wakes) in one transaction, decided by the core. With
    /// an idempotency `key`, a signal already stored under it is not sent again: the
    /// answer is the job as it now is, marked a repeat. A finished job refuses a new
    /// signal and nothing is kept.
    pub async fn signal(
        &self,
        tenant: &TenantId,
        id: JobId,
        name: &str,
        body: Vec<u8>,
        key: Option<&str>,
    ) -> Result<Signalled, EngineError> {
        if !spindle_core::workflow::is_valid_signal_name(name) {
            return Err(EngineError::Invalid(format!(
                "signal name {name:?}: 1-{MAX_SIGNAL_NAME} characters of letters, digits, '-', '_', '.', ':'"
            )));
        }
        if let Some(key) = key
            && (key.is_empty() || key.len() > MAX_SIGNAL_KEY || !key.chars().all(|c| c.is_ascii_graphic()))
        {
            return Err(EngineError::Invalid(format!(
                "idempotency key: 1-{MAX_SIGNAL_KEY} printable ASCII characters, no spaces"
            )));
        }
        if body.len() > self.config.max_payload_bytes {
            return Err(EngineError::PayloadTooLarge { bytes: body.len(), cap: self.config.max_payload_bytes });
        }
        crate::failpoints::reach("signal.arrived").await;
        let event = JobEvent::Signal { name: name.to_owned(), body, key: key.map(str::to_owned) };
        let (record, repeated) = self.apply_locked_keyed(Some(tenant), id, key, |_| Some(event.clone())).await?;
        crate::failpoints::reach("signal.stored").await;
        Ok(Signalled { record, repeated })
    }

    /// Carries out queued workflow effects: counts parents' children again (waking a
    /// parent whose join is met) and cancels children. A parent other writers keep
    /// changing is counted again at once, after a short backoff; one still contended
    /// after that is left for [`RelayPass::retry_at`].
    pub async fn run_relay(&self, limit: u32) -> Result<RelayPass, EngineError> {
        if self.refusing() {
            return Ok(RelayPass { ran: 0, retry_at: None });
        }
        const LEASE: Duration = Duration::from_secs(30);
        let lease = i64::try_from(LEASE.as_micros()).unwrap_or(i64::MAX);
        let items = self.store.outbox_claim(OutboxEffect::WORKFLOW, self.now(), lease, limit).await?;
        let mut pass = RelayPass { ran: items.len(), retry_at: None };
        let mut done = Vec::new();
        // One count per parent, however many of its children settled.
        let mut parents: BTreeMap<JobId, Vec<i64>> = BTreeMap::new();
        for item in items {
            match item.effect {
                OutboxEffect::ChildSettled => parents.entry(item.job_id).or_default().push(item.id),
                OutboxEffect::CancelChildren => {
                    self.cancel_children(item.job_id, item.detail.as_deref()).await?;
                    self.store.outbox_done(&[item.id]).await?;
                }
                OutboxEffect::NotifySuccess | OutboxEffect::FailureEffect => {}
            }
        }
        for (parent, ids) in parents {
            if self.count_children_soon(parent).await? {
                done.extend(ids);
            } else {
                let soon = self.now().plus(RELAY_RETRY);
                self.store.outbox_retry(&ids, soon).await?;
                pass.retry_at = Some(pass.retry_at.map_or(soon, |at| at.min(soon)));
            }
        }
        self.store.outbox_done(&done).await?;
        Ok(pass)
    }
}

fn refused(code: &str, message: String) -> StepReport {
    StepReport::Refused {
        failure: SafeFailure { code: code.to_owned(), message, correlation: None, guest_stderr: None },
    }
}

/// A child's result as its parent's step receives it.
fn child_result(child: &JobRecord) -> ChildResult {
    let state = match child.job.state {
        JobState::Succeeded => Some(ChildState::Succeeded),
        JobState::Failed => Some(ChildState::Failed),
        JobState::Cancelled => Some(ChildState::Cancelled),
        _ => None,
    };
    let output = (state == Some(ChildState::Succeeded))
        .then(|| child.job.steps.iter().rev().find_map(|s| s.output.clone()))
        .flatten();
    let failure = child.job.failure.as_ref().map(|f| (f.code.clone(), f.message.clone()));
    ChildResult { job_id: child.job.id.to_string(), kind: child.kind.clone(), state, output, failure }
}
