//! The engine's side of a running step: its heartbeats renew the claim (at most every
//! `heartbeat_interval`) and answer whether to stop, and keep the lines the guest logged
//! so far in the job's logs, so that a long step is seen while it runs.

use std::sync::Arc;
use std::time::Instant;

use spindle_core::Fence;
use spindle_core::job::JobEvent;
use spindle_core::step::Partial;
use spindle_runtime::outbound::OutboundCall;
use spindle_runtime::{GuestLine, HeartbeatReply, StepControl};
use tokio::sync::Mutex;

use super::{Committed, Engine, EngineError, Writer};
use crate::store::JobRecord;

/// What a supervisor knows about the step it watches.
#[derive(Debug)]
pub(super) struct Watch {
    pub(super) record: JobRecord,
    pub(super) renewed: Instant,
    pub(super) reply: HeartbeatReply,
}

/// The engine's side of a running step: heartbeats renew the claim (at most every
/// `heartbeat_interval`) and answer whether to stop.
#[derive(Debug)]
pub(super) struct Supervisor {
    pub(super) engine: Arc<Engine>,
    pub(super) fence: Fence,
    pub(super) state: Mutex<Watch>,
    /// The outbound requests of the step call, handed over when it ends.
    pub(super) calls: std::sync::Mutex<Vec<OutboundCall>>,
    /// The step and attempt its lines belong to.
    pub(super) step: String,
    /// See [`step`](Self::step).
    pub(super) attempt: u32,
    /// Lines handed over with heartbeats, not yet kept.
    pub(super) lines: std::sync::Mutex<Vec<GuestLine>>,
}

impl Supervisor {
    /// Keeps the lines handed over so far in the job's logs.
    pub(super) async fn keep_lines(&self, job: spindle_core::JobId) {
        let lines = std::mem::take(&mut *self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if lines.is_empty() {
            return;
        }
        let caps = self.engine.config.log_caps;
        if let Err(e) = self.engine.store.append_logs(job, &self.step, self.attempt, &lines, caps).await {
            tracing::error!(job = %job, step = %self.step, error = %e, "could not keep the step's log lines");
        }
    }
}

impl StepControl for Supervisor {
    fn outbound_calls(&self, calls: Vec<OutboundCall>) {
        let mut kept = self.calls.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *kept = calls;
    }

    fn lines_so_far(&self, lines: &mut Vec<GuestLine>) -> bool {
        self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner).append(lines);
        true
    }

    fn heartbeat(
        &self,
        progress: Option<Partial>,
    ) -> std::pin::Pin<Box<dyn Future<Output = HeartbeatReply> + Send + '_>> {
        Box::pin(async move {
            let mut watch = self.state.lock().await;
            if watch.renewed.elapsed() < self.engine.config.heartbeat_interval || watch.reply != HeartbeatReply::Proceed
            {
                return watch.reply;
            }
            self.keep_lines(watch.record.job.id).await;
            let event = JobEvent::Heartbeat { fence: self.fence, ttl: self.engine.config.lease_ttl, progress };
            let mut reply = HeartbeatReply::StopLeaseLost;
            for _ in 0..=self.engine.config.conflict_retries {
                match self.engine.commit(&watch.record, &event, Writer::Holder).await {
                    Ok(Committed::Written(r) | Committed::Unchanged(r)) => {
                        reply = r.job.heartbeat_reply(self.fence);
                        watch.record = r;
                        break;
                    }
                    Ok(Committed::Conflict) => match self.engine.store.job(watch.record.job.id).await {
                        Ok(Some(fresh)) => watch.record = fresh,
                        _ => break,
                    },
                    Err(EngineError::Refused { refusal: spindle_core::Refusal::StaleFence { .. }, .. }) => {
                        // Another claim (or a lost lease key) supersedes this one.
                        reply = HeartbeatReply::StopLeaseLost;
                        break;
                    }
                    Err(EngineError::Refused { .. }) => {
                        if let Ok(Some(fresh)) = self.engine.store.job(watch.record.job.id).await {
                            reply = fresh.job.heartbeat_reply(self.fence);
                        }
                        break;
                    }
                    Err(e) => {
                        // A store hiccup is not the step's problem: let it go on; its
                        // claim lapses if the store stays away.
                        tracing::warn!(job = %watch.record.job.id, error = %e, "heartbeat not recorded");
                        reply = HeartbeatReply::Proceed;
                        break;
                    }
                }
            }
            watch.renewed = Instant::now();
            watch.reply = reply;
            reply
        })
    }
}
