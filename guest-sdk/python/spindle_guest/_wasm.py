"""Inside a component: the host over the generated bindings, and the SDK's types to and from WIT.

Only `_component` imports this module, and only inside a componentize-py build, where
the `wit_world` bindings exist; nothing else in the SDK needs them. Everything it uses is
imported here, at build time: a component has no filesystem to import from once it runs.
"""

from __future__ import annotations

import sys
from typing import Optional

from componentize_py_types import Err
from wit_world.imports import config as wit_config
from wit_world.imports import host as wit_host
from wit_world.imports import spindle_job_types as wit

from . import _wasi_http
from .errors import Refused, Retryable
from .http import Request, Response
from .job import Failure, JobSummary
from .kind import KindSpec
from .log import Level
from .outcome import AwaitChildren, AwaitSignal, Complete, More, Outcome, Skip, Snooze
from .step import Checkpoint, Heartbeat, Step
from .workflow import Awaited, AwaitedChildren, AwaitedSignal, ChildResult, ChildState, SignalTimedOut

_HEARTBEATS = {
    wit.HeartbeatReply.PROCEED: Heartbeat.PROCEED,
    wit.HeartbeatReply.STOP_CANCELLED: Heartbeat.STOP_CANCELLED,
    wit.HeartbeatReply.STOP_LEASE_LOST: Heartbeat.STOP_LEASE_LOST,
}


class WasmHost:
    """The `Host` over the component's imports."""

    def log(self, level: Level, message: str) -> None:
        wit_host.log(wit.LogLevel[level.name], message)

    def heartbeat(self, progress: Optional[Checkpoint]) -> Heartbeat:
        checkpoint = None if progress is None else wit.Checkpoint(progress.cursor, progress.done, progress.total)
        return _HEARTBEATS[wit_host.heartbeat(checkpoint)]

    def prior_output(self, step: str) -> Optional[bytes]:
        return wit_host.prior_output(step)

    def config_get(self, name: str) -> Optional[str]:
        return wit_config.get(name)

    def secret(self, name: str) -> Optional[str]:
        return wit_config.secret(name)

    def hmac_sha256(self, name: str, message: bytes) -> Optional[bytes]:
        return wit_config.hmac_sha256(name, message)

    def send(self, request: Request) -> Response:
        return _wasi_http.send(request)

    def stderr(self, text: str) -> None:
        # The host keeps the last stderr lines of a failed attempt: they must be out
        # before the call returns.
        sys.stderr.write(text)
        sys.stderr.flush()


def kind_spec(spec: KindSpec) -> wit.KindSpec:
    return wit.KindSpec(
        name=spec.name,
        steps=[wit.StepSpec(s.key, s.weight, s.output_schema) for s in spec.steps],
        cancellable=spec.cancellable,
        retry=wit.RetryPolicy(spec.retry.max_attempts, spec.retry.initial_backoff_ms, spec.retry.max_backoff_ms),
        has_failure_effect=spec.has_failure_effect,
        notifies_on_success=spec.notifies_on_success,
        input_schema=spec.input_schema,
    )


def _failure(failure: Optional[wit.Failure]) -> Optional[Failure]:
    return None if failure is None else Failure(failure.code, failure.message)


def _awaited(awaited: Optional[wit.Awaited]) -> Optional[Awaited]:
    if awaited is None:
        return None
    if isinstance(awaited, wit.Awaited_Children):
        return AwaitedChildren(
            [
                ChildResult(
                    job_id=c.job_id,
                    kind=c.kind,
                    state=None if c.state is None else ChildState[c.state.name],
                    output=None if c.output is None else bytes(c.output),
                    failure=_failure(c.failure),
                )
                for c in awaited.value
            ]
        )
    if isinstance(awaited, wit.Awaited_Signal):
        return AwaitedSignal(bytes(awaited.value))
    return SignalTimedOut()


def step(input: wit.StepInput) -> Step:
    return Step(
        key=input.step,
        payload=bytes(input.payload),
        job_id=input.job_id,
        attempt=input.attempt,
        idempotency_key=input.idempotency_key,
        prior_outputs={p.step: bytes(p.output) for p in input.prior},
        cursor=input.cursor,
        awaited=_awaited(input.awaited),
    )


def job_summary(job: wit.JobSummary) -> JobSummary:
    return JobSummary(
        job_id=job.job_id,
        payload=bytes(job.payload),
        outputs={p.step: bytes(p.output) for p in job.outputs},
        failure=_failure(job.failure),
    )


def _join(join: object) -> wit.Join:
    if join == "all":
        return wit.Join_All()
    if join == "any":
        return wit.Join_Any()
    return wit.Join_Count(int(join))  # type: ignore[call-overload]


def outcome(outcome: Outcome) -> wit.StepOutcome:
    if isinstance(outcome, Complete):
        return wit.StepOutcome_Complete(outcome.output)
    if isinstance(outcome, Skip):
        return wit.StepOutcome_Skip(outcome.reason)
    if isinstance(outcome, Retryable):
        return wit.StepOutcome_Retryable(wit.Failure(outcome.code, outcome.message))
    if isinstance(outcome, Refused):
        return wit.StepOutcome_Refused(wit.Failure(outcome.code, outcome.message))
    if isinstance(outcome, More):
        return wit.StepOutcome_More(wit.Checkpoint(outcome.cursor, outcome.done, outcome.total))
    if isinstance(outcome, Snooze):
        return wit.StepOutcome_Snooze(outcome.seconds)
    if isinstance(outcome, AwaitChildren):
        children = [
            wit.ChildSpec(
                kind=c.kind,
                input=c.input_bytes(),
                idempotency_key=c.idempotency_key,
                priority=None if c.priority is None else wit.Priority[c.priority.name],
                lease_keys=list(c.lease_keys),
            )
            for c in outcome.children
        ]
        return wit.StepOutcome_AwaitChildren(
            wit.FanOut(children, _join(outcome.join), wit.Leftover[outcome.leftover.name], outcome.cursor)
        )
    if isinstance(outcome, AwaitSignal):
        return wit.StepOutcome_AwaitSignal(wit.SignalWait(outcome.name, outcome.timeout_secs, outcome.cursor))
    raise TypeError(f"not a step outcome: {type(outcome).__name__}")


def hook_result(failure: Optional[Failure]) -> None:
    """A hook's result as componentize-py takes a WIT `result`: return for ok, raise `Err` for an error."""
    if failure is not None:
        raise Err(wit.Failure(failure.code, failure.message))
