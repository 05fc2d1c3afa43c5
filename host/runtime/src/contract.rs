//! The contract versions a component may target, behind one face: a component built
//! against `spindle:job@0.1.0` runs unchanged beside one built against 0.2.0. Each
//! version's types are converted here to the runtime's own, and nowhere else.

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, InstancePre};

use crate::bindings::{v1, v2};
use crate::kind::{KindSpec, RetrySpec, SpecError, StepSpec};
use crate::load::LoadError;
use spindle_core::policy::priority::Priority;
use spindle_core::workflow::{Join, Leftover};

use crate::outcome::{Awaited, ChildSpec, ChildState, JobSummary, StepInput};
use crate::state::GuestState;

/// Which contract a component targets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contract {
    /// `spindle:job@0.1.0`.
    V0_1,
    /// `spindle:job@0.2.0`.
    V0_2,
}

impl Contract {
    /// Every contract this build runs, oldest first.
    pub const ALL: [Self; 2] = [Self::V0_1, Self::V0_2];

    /// The version, as the WIT package names it.
    pub fn version(self) -> &'static str {
        match self {
            Self::V0_1 => "0.1.0",
            Self::V0_2 => "0.2.0",
        }
    }
}

/// A linked component, ready to instantiate, of either contract.
pub(crate) struct KindPre {
    bindings: Bindings,
    /// Its `run-step` export, found once: a step instantiates the component and looks up
    /// and type-checks this one export, where the generated bindings would check all
    /// four (`describe` and the hooks too) on every instantiation.
    run_step: ComponentExportIndex,
}

/// The generated bindings of the contract a component targets.
enum Bindings {
    V1(v1::JobKindPre<GuestState>),
    V2(v2::JobKindPre<GuestState>),
}

impl Bindings {
    fn contract(&self) -> Contract {
        match self {
            Self::V1(_) => Contract::V0_1,
            Self::V2(_) => Contract::V0_2,
        }
    }
}

/// A step's outcome as the guest reported it, whatever its contract.
pub(crate) enum Reported {
    Complete(Vec<u8>),
    Skip(String),
    Retryable(String, String),
    Refused(String, String),
    More { cursor: String, done: u64, total: Option<u64> },
    Snooze(u32),
    AwaitChildren { children: Vec<ChildSpec>, join: Join, leftover: Leftover, cursor: Option<String> },
    AwaitSignal { name: String, timeout_secs: u32, cursor: Option<String> },
}

/// A validated [`KindSpec`] from a contract's `kind-spec` `$s`, its steps and input schema.
macro_rules! spec {
    ($s:ident, $steps:expr, $input_schema:expr) => {
        KindSpec::new(
            $s.name,
            $steps,
            $s.cancellable,
            RetrySpec {
                max_attempts: $s.retry.max_attempts,
                initial_backoff_ms: $s.retry.initial_backoff_ms,
                max_backoff_ms: $s.retry.max_backoff_ms,
            },
            ($s.has_failure_effect, $s.notifies_on_success),
            $input_schema,
        )
    };
}

/// One `run-step` call through contract `$v`'s bindings: the input with the contract's
/// own extra fields, the outcome with its own extra variants mapped.
macro_rules! step_call {
    ($v:ident, $pre:ident, $run_step:expr, $store:ident, $input:ident, { $($field:ident: $value:expr),* }, { $($variant:ident($bind:pat) => $arm:expr),* $(,)? }) => {{
        use $v::spindle::job::types as wit;
        let StepInput { job_id, step, attempt, idempotency_key, payload, prior, cursor, .. } = $input;
        let instance = $pre.instance_pre().instantiate_async(&mut *$store).await?;
        let run_step = instance.get_typed_func::<(&wit::StepInput,), (wit::StepOutcome,)>(&mut *$store, $run_step)?;
        let input = wit::StepInput {
            job_id,
            step,
            attempt,
            idempotency_key,
            payload,
            prior: prior.into_iter().map(|(step, output)| wit::PriorOutput { step, output }).collect(),
            cursor,
            $($field: $value,)*
        };
        run_step.call_async(&mut *$store, (&input,)).await.map(|(outcome,)| match outcome {
            wit::StepOutcome::Complete(output) => Reported::Complete(output),
            wit::StepOutcome::Skip(reason) => Reported::Skip(reason),
            wit::StepOutcome::Retryable(f) => Reported::Retryable(f.code, f.message),
            wit::StepOutcome::Refused(f) => Reported::Refused(f.code, f.message),
            wit::StepOutcome::More(c) => Reported::More { cursor: c.cursor, done: c.done, total: c.total },
            wit::StepOutcome::Snooze(secs) => Reported::Snooze(secs),
            $(wit::StepOutcome::$variant($bind) => $arm,)*
        })
    }};
}

/// One hook call through contract `$v`'s bindings.
macro_rules! hook_call {
    ($v:ident, $pre:ident, $store:ident, $on_failure:ident, $summary:ident) => {{
        use $v::spindle::job::types as wit;
        let JobSummary { job_id, payload, outputs, failure } = $summary;
        let summary = wit::JobSummary {
            job_id,
            payload,
            outputs: outputs.into_iter().map(|(step, output)| wit::PriorOutput { step, output }).collect(),
            failure: failure.map(|(code, message)| wit::Failure { code, message }),
        };
        let instance = $pre.instantiate_async(&mut *$store).await?;
        let guest = instance.spindle_job_kind();
        let result = if $on_failure {
            guest.call_on_failure(&mut *$store, &summary).await?
        } else {
            guest.call_on_success(&mut *$store, &summary).await?
        };
        Ok(result.map_err(|f| (f.code, f.message)))
    }};
}

impl KindPre {
    /// The component's pre-instance, as the contract its exports name.
    pub(crate) fn new(pre: InstancePre<GuestState>) -> Result<Self, LoadError> {
        let bindings = match v2::JobKindPre::new(pre.clone()) {
            Ok(v2) => Bindings::V2(v2),
            Err(_) => v1::JobKindPre::new(pre.clone())
                .map(Bindings::V1)
                .map_err(|e| LoadError::WrongWorld(format!("{e:#}")))?,
        };
        let contract = bindings.contract();
        // The bindings found the interface and its functions already: these lookups
        // cannot miss.
        let interface = format!("spindle:job/kind@{}", contract.version());
        let run_step = pre
            .component()
            .get_export_index(None, &interface)
            .and_then(|interface| pre.component().get_export_index(Some(&interface), "run-step"))
            .ok_or_else(|| LoadError::WrongWorld(format!("no `run-step` in `{interface}`")))?;
        Ok(Self { bindings, run_step })
    }

    pub(crate) fn contract(&self) -> Contract {
        self.bindings.contract()
    }

    pub(crate) fn instance_pre(&self) -> &InstancePre<GuestState> {
        match &self.bindings {
            Bindings::V1(pre) => pre.instance_pre(),
            Bindings::V2(pre) => pre.instance_pre(),
        }
    }

    /// Calls `describe` in a fresh instance.
    pub(crate) async fn describe(
        &self,
        store: &mut Store<GuestState>,
    ) -> wasmtime::Result<Result<KindSpec, SpecError>> {
        Ok(match &self.bindings {
            Bindings::V1(pre) => {
                let s = pre.instantiate_async(&mut *store).await?.spindle_job_kind().call_describe(&mut *store).await?;
                let steps = s.steps.into_iter().map(|s| StepSpec { key: s.key, weight: s.weight, output_schema: None });
                spec!(s, steps.collect(), None)
            }
            Bindings::V2(pre) => {
                let s = pre.instantiate_async(&mut *store).await?.spindle_job_kind().call_describe(&mut *store).await?;
                let steps = s.steps.into_iter().map(|s| StepSpec {
                    key: s.key,
                    weight: s.weight,
                    output_schema: s.output_schema,
                });
                spec!(s, steps.collect(), s.input_schema)
            }
        })
    }

    /// Instantiates the component (the first failure point of a call, told apart by the
    /// caller) and then runs one step.
    pub(crate) async fn run_step(
        &self,
        store: &mut Store<GuestState>,
        input: StepInput,
    ) -> Result<wasmtime::Result<Reported>, wasmtime::Error> {
        match &self.bindings {
            Bindings::V1(pre) => Ok(step_call!(v1, pre, &self.run_step, store, input, {}, {})),
            Bindings::V2(pre) => {
                let awaited = input.awaited.clone().map(v2_awaited);
                Ok(step_call!(v2, pre, &self.run_step, store, input, { awaited: awaited }, {
                    AwaitChildren(fan_out) => v2_fan_out(fan_out),
                    AwaitSignal(wait) => Reported::AwaitSignal {
                        name: wait.name,
                        timeout_secs: wait.timeout_secs,
                        cursor: wait.cursor,
                    },
                }))
            }
        }
    }

    /// Runs a hook in a fresh instance: `Ok(Err((code, message)))` is the guest's failure.
    pub(crate) async fn run_hook(
        &self,
        store: &mut Store<GuestState>,
        on_failure: bool,
        summary: JobSummary,
    ) -> wasmtime::Result<Result<(), (String, String)>> {
        match &self.bindings {
            Bindings::V1(pre) => hook_call!(v1, pre, store, on_failure, summary),
            Bindings::V2(pre) => hook_call!(v2, pre, store, on_failure, summary),
        }
    }
}

/// What a 0.2.0 step awaited, in its contract's types.
fn v2_awaited(awaited: Awaited) -> v2::spindle::job::types::Awaited {
    use v2::spindle::job::types as wit;
    match awaited {
        Awaited::Signal(body) => wit::Awaited::Signal(body),
        Awaited::SignalTimeout => wit::Awaited::SignalTimeout,
        Awaited::Children(children) => wit::Awaited::Children(
            children
                .into_iter()
                .map(|c| wit::ChildResult {
                    job_id: c.job_id,
                    kind: c.kind,
                    state: c.state.map(|s| match s {
                        ChildState::Succeeded => wit::ChildState::Succeeded,
                        ChildState::Failed => wit::ChildState::Failed,
                        ChildState::Cancelled => wit::ChildState::Cancelled,
                    }),
                    output: c.output,
                    failure: c.failure.map(|(code, message)| wit::Failure { code, message }),
                })
                .collect(),
        ),
    }
}

/// A 0.2.0 fan-out, in the runtime's types.
fn v2_fan_out(fan_out: v2::spindle::job::types::FanOut) -> Reported {
    use v2::spindle::job::types as wit;
    let children = fan_out
        .children
        .into_iter()
        .map(|c| ChildSpec {
            kind: c.kind,
            input: c.input,
            idempotency_key: c.idempotency_key,
            priority: match c.priority {
                Some(wit::Priority::Critical) => Priority::Critical,
                Some(wit::Priority::Scheduled) => Priority::Scheduled,
                Some(wit::Priority::Background) => Priority::Background,
                Some(wit::Priority::Normal) | None => Priority::Normal,
            },
            lease_keys: c.lease_keys,
        })
        .collect();
    let join = match fan_out.join {
        wit::Join::All => Join::All,
        wit::Join::Any => Join::Any,
        wit::Join::Count(n) => Join::Count(n),
    };
    let leftover = match fan_out.leftover {
        wit::Leftover::Cancel => Leftover::Cancel,
        wit::Leftover::Keep => Leftover::Keep,
    };
    Reported::AwaitChildren { children, join, leftover, cursor: fan_out.cursor }
}
