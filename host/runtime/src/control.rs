//! How a running step reaches the engine: its heartbeat, the lines it logged so far, and
//! the record of its outbound requests.

use std::future::Future;
use std::pin::Pin;

pub use spindle_core::job::HeartbeatReply;
pub use spindle_core::step::Partial;

/// The engine's side of a running step. The sandbox calls it when the guest
/// heartbeats; the answer tells the guest whether to go on.
pub trait StepControl: Send + Sync {
    /// The step is alive and has done `progress`; renew its claim and say whether to stop.
    fn heartbeat(&self, progress: Option<Partial>) -> Pin<Box<dyn Future<Output = HeartbeatReply> + Send + '_>>;

    /// The call's outbound requests, once it has ended (none are sent after).
    fn outbound_calls(&self, calls: Vec<crate::outbound::OutboundCall>) {
        let _ = calls;
    }

    /// The `log` lines the guest wrote since the last heartbeat, handed over just before
    /// the next one, so that a long step's lines are seen while it runs. Answers whether
    /// the control keeps them; those it does not keep stay for the call's end
    /// ([`StepCall::lines`](crate::StepCall::lines)).
    fn lines_so_far(&self, lines: &mut Vec<crate::GuestLine>) -> bool {
        let _ = lines;
        false
    }
}

/// A control that always says "go on": for hooks, benchmarks and tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unsupervised;

/// A control that says "go on" and keeps the call's outbound requests: for hooks, whose
/// requests are recorded once they end.
#[derive(Debug, Default)]
pub struct Recording(pub std::sync::Mutex<Vec<crate::outbound::OutboundCall>>);

impl StepControl for Recording {
    fn heartbeat(&self, _progress: Option<Partial>) -> Pin<Box<dyn Future<Output = HeartbeatReply> + Send + '_>> {
        Box::pin(std::future::ready(HeartbeatReply::Proceed))
    }

    fn outbound_calls(&self, calls: Vec<crate::outbound::OutboundCall>) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = calls;
    }
}

impl StepControl for Unsupervised {
    fn heartbeat(&self, _progress: Option<Partial>) -> Pin<Box<dyn Future<Output = HeartbeatReply> + Send + '_>> {
        Box::pin(std::future::ready(HeartbeatReply::Proceed))
    }
}
