"""Runs a kind's jobs in plain CPython, without a host or a component, for the kind's tests.

`run_job` drives the steps the way the host's contract describes: declared order, `more`
calls again with the cursor, a retryable failure retries up to the kind's
`max_attempts` (attempt numbers increase), a refusal fails the job, and the hooks run
when the kind declares them. It does not wait: backoff and snoozes are skipped, leases
and cancellation do not exist, and heartbeats proceed (unless scripted). It checks the
kind's logic, not the host.

Workflows run at once too. An `await_children` step is called again straight away with
its children settled by the `children` handler (without one, each succeeds with its
input as its output), as far as the join needs: `"all"` settles every child, `"any"` the
first, a count that many, and the rest are reported open. An `await_signal` step is
called again with the first queued signal of that name, which it consumes, or else with
a timeout.

    run = run_job(kind, {"name": "Ada"}, config={"region": "eu"})
    assert run.succeeded
    assert run.output("deliver") == {"delivered": "Hello, Ada!", "attempt": 1}
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, overload

from . import _host, _json
from ._local import HttpHandler, LocalHost, LogLine
from .errors import StepError
from .job import Failure, JobSummary
from .kind import Kind
from .outcome import AwaitChildren, AwaitSignal, Complete, More, Outcome, Skip, Snooze
from .step import Checkpoint, Heartbeat, Step
from .workflow import (
    Awaited,
    AwaitedChildren,
    AwaitedSignal,
    Child,
    ChildResult,
    ChildState,
    Join,
    Leftover,
    SignalTimedOut,
)

T = TypeVar("T")

__all__ = [
    "run_job",
    "imports_as_in_the_component",
    "make_step",
    "local_host",
    "JobRun",
    "Call",
    "JobFailure",
    "HookRun",
    "FanOutRun",
    "ChildRun",
    "SignalWaitRun",
    "ChildOutcome",
    "LogLine",
    "LocalHost",
    "LOCAL_JOB_ID",
    "MAX_CALLS_PER_STEP",
    "local_child_id",
]

#: The job id `run_job` hands to every step.
LOCAL_JOB_ID = "00000000-0000-7000-8000-000000000000"

#: Calls of one step (`more` continuations and snoozes included) before `run_job` gives up
#: on it, so a kind that never settles fails its test instead of hanging it.
MAX_CALLS_PER_STEP = 100_000


def local_child_id(n: int) -> str:
    """The id `run_job` gives the `n`th child job it creates in a run, from 1."""
    return f"00000000-0000-7000-8001-{n:012x}"


def _payload(input: Any) -> bytes:
    """A job's input as submitted: `bytes` as they are (to test a non-JSON payload), else JSON."""
    if isinstance(input, (bytes, bytearray)):
        return bytes(input)
    return _json.dumps(input).encode("utf-8")


@dataclass(frozen=True)
class ChildOutcome:
    """How a child job ended, as a `children` handler says."""

    state: ChildState
    #: Its last step's output when it succeeded.
    output: Optional[bytes] = None
    failure: Optional[Failure] = None

    @staticmethod
    def succeeded(output: Any = None) -> "ChildOutcome":
        """Succeeded with `output` (as JSON; `bytes` as they are)."""
        return ChildOutcome(ChildState.SUCCEEDED, _payload(output))

    @staticmethod
    def failed(code: str, message: str) -> "ChildOutcome":
        return ChildOutcome(ChildState.FAILED, failure=Failure(code, message))

    @staticmethod
    def cancelled() -> "ChildOutcome":
        return ChildOutcome(ChildState.CANCELLED)

    @staticmethod
    def from_run(run: "JobRun") -> "ChildOutcome":
        """How a job `run_job` ran ended, for a handler that runs the child's kind too."""
        if run.failure is not None:
            return ChildOutcome(ChildState.FAILED, failure=Failure(run.failure.code, run.failure.message))
        last = run.calls[-1].outcome if run.calls else None
        return ChildOutcome(ChildState.SUCCEEDED, last.output if isinstance(last, Complete) else None)


#: Settles a child: its kind and its input in, how it ended out.
ChildHandler = Callable[[str, bytes], ChildOutcome]


@dataclass(frozen=True)
class Call:
    """One call of a step and what it reported."""

    step: str
    attempt: int
    #: The cursor the call received.
    cursor: Optional[str]
    #: What the step waited for, when this call follows one of its await outcomes.
    awaited: Optional[Awaited]
    outcome: Outcome


@dataclass(frozen=True)
class JobFailure:
    """Why a job failed: the step and its failure's code and message."""

    step: str
    code: str
    message: str


@dataclass(frozen=True)
class HookRun:
    """A hook the kind declared and how it went: `failure` is `None` if it succeeded."""

    hook: str
    failure: Optional[Failure]


@dataclass(frozen=True)
class ChildRun:
    """One child of a fan-out: what the step asked for and what it was told."""

    child: Child
    result: ChildResult


@dataclass(frozen=True)
class FanOutRun:
    """One `await_children` outcome and how its children were settled."""

    step: str
    attempt: int
    join: Join
    leftover: Leftover
    cursor: Optional[str]
    children: List[ChildRun]


@dataclass(frozen=True)
class SignalWaitRun:
    """One `await_signal` outcome and how it ended: `body` is `None` if it timed out."""

    step: str
    attempt: int
    name: str
    timeout_secs: int
    body: Optional[bytes]


@dataclass
class JobRun:
    """What happened to a job `run_job` ran."""

    kind: str
    #: Every call, in order.
    calls: List[Call] = field(default_factory=list)
    #: Outputs of the steps that completed, by key, in order.
    outputs: Dict[str, bytes] = field(default_factory=dict)
    #: Why the job failed, if it did.
    failure: Optional[JobFailure] = None
    #: The failure or success hook, if the kind declares the one that applied.
    hook: Optional[HookRun] = None
    fan_outs: List[FanOutRun] = field(default_factory=list)
    signal_waits: List[SignalWaitRun] = field(default_factory=list)
    #: Signals given to `run_job` that no wait consumed.
    signals_left: List[Tuple[str, bytes]] = field(default_factory=list)
    #: Every line the kind logged.
    logs: List[LogLine] = field(default_factory=list)
    #: What the kind wrote to stderr: tracebacks of the exceptions no step caught.
    stderr: str = ""
    #: The progress its heartbeats reported.
    progress: List[Checkpoint] = field(default_factory=list)

    @property
    def state(self) -> str:
        """`succeeded` or `failed`, as the host would settle the job."""
        return "failed" if self.failure is not None else "succeeded"

    @property
    def succeeded(self) -> bool:
        return self.failure is None

    @overload
    def output(self, step: str) -> Any: ...
    @overload
    def output(self, step: str, into: Type[T]) -> Optional[T]: ...
    def output(self, step: str, into: Optional[Type[Any]] = None) -> Any:
        """A completed step's JSON output (built into `into` if given), `None` if it did not complete."""
        raw = self.outputs.get(step)
        if raw is None:
            return None
        return _json.decode(raw, into, what=f"the output of step `{step}`", code="invalid-prior")

    def calls_of(self, step: str) -> List[Call]:
        return [call for call in self.calls if call.step == step]

    def children_of(self, step: str) -> List[ChildRun]:
        """The children one step fanned out, over all its fan-outs, in order."""
        return [child for fan_out in self.fan_outs if fan_out.step == step for child in fan_out.children]

    def signals_consumed(self) -> List[Tuple[str, bytes]]:
        """The signals the job consumed, in order: name and body."""
        return [(wait.name, wait.body) for wait in self.signal_waits if wait.body is not None]

    def log_messages(self, step: Optional[str] = None) -> List[str]:
        """The logged messages, of one step if given."""
        return [line.message for line in self.logs if step is None or line.step == step]


class _ChildJobs:
    """The child jobs of one run: their ids, and what those with an idempotency key ended
    as, so that a key names one job however often it is asked for."""

    def __init__(self, handler: Optional[ChildHandler]) -> None:
        self.handler = handler
        self.created = 0
        self.by_key: Dict[str, Tuple[str, Optional[ChildOutcome]]] = {}

    def fan_out(self, outcome: AwaitChildren) -> List[ChildRun]:
        join = outcome.join
        settled = len(outcome.children) if join == "all" else 1 if join == "any" else int(join)
        runs = []
        for index, child in enumerate(outcome.children):
            known = self.by_key.get(child.idempotency_key) if child.idempotency_key is not None else None
            if known is not None:
                job_id, ended = known
            else:
                self.created += 1
                job_id, ended = local_child_id(self.created), None
            if ended is None and index < settled:
                ended = self.settle(child)
            # What the job is once the join is met: open ones run on, or are cancelled.
            after_join = ended
            if ended is None and outcome.leftover is Leftover.CANCEL:
                after_join = ChildOutcome.cancelled()
            if child.idempotency_key is not None:
                self.by_key[child.idempotency_key] = (job_id, after_join)
            if ended is None:
                result = ChildResult(job_id, child.kind, None)
            else:
                result = ChildResult(job_id, child.kind, ended.state, ended.output, ended.failure)
            runs.append(ChildRun(child, result))
        return runs

    def settle(self, child: Child) -> ChildOutcome:
        if self.handler is not None:
            return self.handler(child.kind, child.input_bytes())
        return ChildOutcome(ChildState.SUCCEEDED, child.input_bytes())


def run_job(
    kind: Kind,
    input: Any,
    *,
    config: Optional[Mapping[str, str]] = None,
    secrets: Optional[Mapping[str, str]] = None,
    http: Optional[HttpHandler] = None,
    children: Optional[ChildHandler] = None,
    signals: Iterable[Tuple[str, Any]] = (),
    heartbeats: Sequence[Heartbeat] = (),
    echo: bool = False,
) -> JobRun:
    """Runs one job of `kind` with `input` (JSON-able, or `bytes` as they are) to its end.

    `config` and `secrets` are what `config.get` and `config.secret` answer from; `http`
    answers outbound requests (it sees secrets in place of their placeholders in headers,
    as an upstream would); `children` settles child jobs; `signals` are `(name, body)`
    pairs queued for the job's waits (bodies JSON-able or `bytes`); `heartbeats` scripts
    the host's first answers. With `echo`, log lines and stderr also print.
    """
    spec = kind.spec()
    payload = _payload(input)
    run = JobRun(kind=spec.name)
    host = LocalHost(
        settings=dict(config or {}),
        secrets=dict(secrets or {}),
        http=http,
        heartbeats=list(heartbeats),
        echo=echo,
        logs=run.logs,
        progress=run.progress,
        outputs=run.outputs,
    )
    queued = [(name, _payload(body)) for name, body in signals]
    jobs = _ChildJobs(children)
    max_attempts = max(spec.retry.max_attempts, 1)

    with _host.using(host), imports_as_in_the_component():
        for step_spec in spec.steps:
            host.running = step_spec.key
            if not _run_step(kind, step_spec.key, payload, max_attempts, run, jobs, queued):
                break
        host.running = None
        run.signals_left = queued
        summary = JobSummary(
            LOCAL_JOB_ID,
            payload,
            dict(run.outputs),
            None if run.failure is None else Failure(run.failure.code, run.failure.message),
        )
        if run.failure is not None and spec.has_failure_effect:
            run.hook = HookRun("on-failure", kind.run_on_failure(summary))
        elif run.failure is None and spec.notifies_on_success:
            run.hook = HookRun("on-success", kind.run_on_success(summary))
    run.stderr = "".join(host.stderr_text)
    return run


class _ImportsAsInTheComponent:
    """A finder placed first on `sys.meta_path` while a job runs: a module the kind's own
    code imports that is not loaded yet fails with `ModuleNotFoundError`, as it does in
    the component. The component is a snapshot taken after the kind's module was
    imported at build time, and it has no file system, so an import inside a step finds
    nothing there; without this the local test would pass and the deployed kind fail.
    Imports made by the standard library and the SDK themselves are left alone."""

    def __init__(self) -> None:
        paths = sysconfig.get_paths()
        roots = {paths["stdlib"], paths["platstdlib"], str(Path(__file__).resolve().parent)}
        self._trusted = tuple(os.path.join(root, "") for root in roots)
        self._importlib = os.path.join(os.path.dirname(importlib.__file__), "")

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name in sys.builtin_module_names:
            return None
        importer = self._importer()
        if importer is None or importer.startswith(self._trusted):
            return None
        raise ModuleNotFoundError(
            f"No module named {name!r}: a component imports nothing once it runs (it has no file system);"
            " import it at the top of the kind's module, which the build imports and keeps",
            name=name,
        )

    def _importer(self) -> Optional[str]:
        """The file whose code asked for the import, past the import machinery's frames."""
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if not (filename.startswith("<frozen importlib") or filename.startswith(self._importlib)):
                return os.path.abspath(filename)
            frame = frame.f_back
        return None


@contextlib.contextmanager
def imports_as_in_the_component() -> Iterator[None]:
    """While inside, an import the kind's code makes of a module not loaded yet fails as
    it would in the component (see `_ImportsAsInTheComponent`); `run_job` runs inside."""
    finder = _ImportsAsInTheComponent()
    sys.meta_path.insert(0, finder)  # type: ignore[arg-type]
    try:
        yield
    finally:
        sys.meta_path.remove(finder)  # type: ignore[arg-type]


def _run_step(
    kind: Kind,
    key: str,
    payload: bytes,
    max_attempts: int,
    run: JobRun,
    jobs: _ChildJobs,
    queued: List[Tuple[str, bytes]],
) -> bool:
    """Runs one step to its end; whether the job goes on."""
    attempt = 1
    cursor: Optional[str] = None
    awaited: Optional[Awaited] = None
    for _ in range(MAX_CALLS_PER_STEP):
        step = Step(
            key=key,
            payload=payload,
            job_id=LOCAL_JOB_ID,
            attempt=attempt,
            idempotency_key=f"{LOCAL_JOB_ID}/{key}",
            prior_outputs=dict(run.outputs),
            cursor=cursor,
            awaited=awaited,
        )
        outcome = kind.run_step(step)
        run.calls.append(Call(key, attempt, cursor, awaited, outcome))
        awaited = None
        if isinstance(outcome, Complete):
            run.outputs[key] = outcome.output
            return True
        if isinstance(outcome, Skip):
            return True
        if isinstance(outcome, More):
            cursor = outcome.cursor
        elif isinstance(outcome, Snooze):
            pass
        elif isinstance(outcome, StepError):
            if not outcome.retryable or attempt >= max_attempts:
                run.failure = JobFailure(key, outcome.code, outcome.message)
                return False
            attempt += 1
            cursor = None
        elif isinstance(outcome, AwaitChildren):
            settled = jobs.fan_out(outcome)
            awaited = AwaitedChildren([child.result for child in settled])
            cursor = outcome.cursor
            run.fan_outs.append(FanOutRun(key, attempt, outcome.join, outcome.leftover, outcome.cursor, settled))
        elif isinstance(outcome, AwaitSignal):
            at = next((i for i, (name, _) in enumerate(queued) if name == outcome.name), None)
            body = queued.pop(at)[1] if at is not None else None
            awaited = SignalTimedOut() if body is None else AwaitedSignal(body)
            cursor = outcome.cursor
            run.signal_waits.append(SignalWaitRun(key, attempt, outcome.name, outcome.timeout_secs, body))
    run.failure = JobFailure(key, "call-limit", f"step `{key}` did not settle in {MAX_CALLS_PER_STEP} calls")
    return False


def make_step(
    key: str,
    input: Any = None,
    *,
    attempt: int = 1,
    prior: Optional[Mapping[str, Any]] = None,
    cursor: Optional[str] = None,
    awaited: Optional[Awaited] = None,
) -> Step:
    """A step call for testing one step function directly: `input` and `prior` outputs
    JSON-able (or `bytes` as they are). Pair it with `local_host` to set config or HTTP."""
    return Step(
        key=key,
        payload=_payload({} if input is None else input),
        job_id=LOCAL_JOB_ID,
        attempt=attempt,
        prior_outputs={step: _payload(output) for step, output in (prior or {}).items()},
        cursor=cursor,
        awaited=awaited,
    )


@contextlib.contextmanager
def local_host(
    *,
    config: Optional[Mapping[str, str]] = None,
    secrets: Optional[Mapping[str, str]] = None,
    http: Optional[HttpHandler] = None,
    heartbeats: Sequence[Heartbeat] = (),
    echo: bool = False,
) -> Iterator[LocalHost]:
    """Installs a recording local host for the block, for calling step functions directly:

        with local_host(config={"region": "eu"}) as host:
            compose(make_step("compose", {"name": "Ada"}))
        assert host.logs[0].message == "composing a greeting for Ada"
    """
    host = LocalHost(
        settings=dict(config or {}), secrets=dict(secrets or {}), http=http, heartbeats=list(heartbeats), echo=echo
    )
    with _host.using(host):
        yield host
