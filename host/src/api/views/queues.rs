//! The queues at a glance, and the bulk operations and alerts looked back on.

use crate::api::time::rfc3339;
use crate::engine::{Alert, Operation, QueueDepth};
use spindle_views::{AlertView, OperationView, QueueDepthView};

impl From<&QueueDepth> for QueueDepthView {
    fn from(d: &QueueDepth) -> Self {
        Self {
            kind: d.kind.clone(),
            priority: d.priority.as_str().to_owned(),
            ready: d.ready,
            delayed: d.delayed,
            blocked: d.blocked,
            waiting: d.waiting,
            running: d.running,
            paused: d.paused,
        }
    }
}

impl From<&Operation> for OperationView {
    fn from(o: &Operation) -> Self {
        Self {
            id: o.id.clone(),
            action: o.action.clone(),
            filter: serde_json::from_str(&o.filter).unwrap_or(serde_json::Value::Null),
            state: o.state.clone(),
            matched: o.matched,
            done: o.done,
            retried: o.done,
            failed: o.failed,
            actor: o.actor.clone(),
            created_at: rfc3339(o.created_at),
            finished_at: o.finished_at.map(rfc3339),
        }
    }
}

impl From<&Alert> for AlertView {
    fn from(a: &Alert) -> Self {
        Self {
            at: rfc3339(a.last_at),
            first_at: rfc3339(a.at),
            code: a.code.clone(),
            tenant: a.tenant.0.clone(),
            kind: a.kind.clone(),
            job: a.job.clone(),
            message: a.message.clone(),
            count: a.count,
        }
    }
}
