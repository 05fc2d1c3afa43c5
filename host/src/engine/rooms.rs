//! The engine's rooms: one narrow handle per part of the work, so that a change has one
//! place to go and a caller says which part it uses.
//!
//! | handle | what it owns | modules |
//! |---|---|---|
//! | [`Submission`] | jobs in: kinds resolved, inputs checked, quotas admitted | `submit` |
//! | [`Execution`] | steps claimed, run and settled; lapsed claims rescued; due jobs promoted; the outbox | `execute`, `supervisor`, `group_commit`, `recovery`, `hooks` |
//! | [`Workflows`] | signals, the relay that counts children, cron schedules | `workflow`, `schedules` |
//! | [`CapacityRoom`] | tenants' limits, usage, queue depths, fault breakers, steps running over time | `capacity`, `meter`, `samples`, `breakers` |
//! | [`Tenancy`] | tenants, tokens, retention, secrets, outbound rules, operators' audited reads | `tenancy`, `outbound`, `read_audit` |
//! | [`Operations`] | a job's reads and run control, lists and counts, bulk operations, alerts | `commands`, `queries`, `operations` |
//!
//! The [`Engine`] keeps what every room shares (the store, the registry, the clock, the
//! settings, the deriver, the signals of change) and the machinery the rooms call into
//! (`apply`, `commit`, `settle`); each handle borrows it and derefs to it for that.

use std::ops::Deref;
use std::sync::Arc;

use super::Engine;

macro_rules! room {
    ($(#[$doc:meta])* $name:ident, $accessor:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name<'e>(&'e Engine);

        impl Deref for $name<'_> {
            type Target = Engine;

            fn deref(&self) -> &Engine {
                self.0
            }
        }

        impl Engine {
            $(#[$doc])*
            pub fn $accessor(&self) -> $name<'_> {
                $name(self)
            }
        }
    };
    // A room whose work outlives the call (a running step's supervisor, a bulk operation
    // in the background) holds the engine's `Arc`.
    ($(#[$doc:meta])* shared $name:ident, $accessor:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name<'e>(&'e Arc<Engine>);

        impl $name<'_> {
            /// The engine, for work that outlives the call.
            pub(super) fn shared(&self) -> Arc<Engine> {
                self.0.clone()
            }
        }

        impl Deref for $name<'_> {
            type Target = Engine;

            fn deref(&self) -> &Engine {
                self.0
            }
        }

        impl Engine {
            $(#[$doc])*
            pub fn $accessor(self: &Arc<Self>) -> $name<'_> {
                $name(self)
            }
        }
    };
}

room!(
    /// Jobs in: kinds resolved, inputs checked, quotas admitted.
    Submission,
    submission
);
room!(
    /// Steps claimed, run and settled; lapsed claims rescued; due jobs promoted; the outbox.
    shared Execution,
    execution
);
room!(
    /// Signals, the relay that counts children, cron schedules.
    Workflows,
    workflows
);
room!(
    /// Tenants' limits, usage, queue depths, fault breakers.
    CapacityRoom,
    capacity
);
room!(
    /// Tenants, tokens, retention, secrets and outbound rules.
    Tenancy,
    tenancy
);
room!(
    /// A job's reads and run control, lists, dead-letter retries, alerts.
    shared Operations,
    operations
);
