"""Write Spindle job kinds in Python.

A job kind is a WebAssembly component targeting the `job-kind` world (`wit/job.wit`).
With this package a kind is one `Kind` object, its steps and hooks declared by
decorators; `python -m spindle_guest.build` turns the module into a component with
componentize-py. The SDK turns JSON payloads into dataclasses, exceptions into
`retryable`/`refused` outcomes, and hides the generated bindings.

    from dataclasses import dataclass
    from spindle_guest import Kind, RetryPolicy, Step, log

    @dataclass
    class Greeting:
        name: str

    # `input=` declares the JSON Schema derived from the type (`schema_of`): the host
    # refuses a submission that does not follow it, before anything is queued.
    kind = Kind("greeting", input=Greeting, retry=RetryPolicy(max_attempts=5, initial_backoff_ms=100, max_backoff_ms=10_000))

    @kind.step("compose")
    def compose(step: Step) -> dict:
        greeting = step.input(Greeting)        # refused `invalid-input` if it does not fit
        return {"text": f"Hello, {greeting.name}!"}

    @kind.step("deliver", weight=3)
    def deliver(step: Step) -> dict:
        text = step.prior("compose")["text"]
        # Steps run at least once: the key lets a mailer drop duplicates.
        log.info(f"delivering {text!r} as {step.idempotency_key}")
        return {"delivered": True}

A step returns an outcome (`more`, `snooze`, `skip`, `await_children`, `await_signal`)
or any JSON-able value, which completes it. It fails by raising `Retryable` or
`Refused`; any other exception is reported as retryable `uncaught-exception`, its
traceback on stderr. Beyond its input, a step reaches only what the host grants: `log`,
heartbeats, `config` (settings, and secrets it never sees) and outbound `http`.

`spindle_guest.testing.run_job` runs a whole job in plain CPython, the way the host would.
"""

from . import config, http, log
from .errors import Cancelled, InvalidInput, LeaseLost, Refused, Retryable, StepError, Stopped
from .job import Failure, JobSummary
from .kind import Kind, KindSpec, RetryPolicy, StepSpec
from .log import Level
from .outcome import (
    AwaitChildren,
    AwaitSignal,
    Complete,
    More,
    Outcome,
    Skip,
    Snooze,
    await_children,
    await_signal,
    complete,
    more,
    skip,
    snooze,
)
from .schema import Schema, schema_of
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
    Priority,
    SignalTimedOut,
)

__all__ = [
    "Kind",
    "KindSpec",
    "StepSpec",
    "RetryPolicy",
    "schema_of",
    "Schema",
    "Step",
    "Checkpoint",
    "Heartbeat",
    "Level",
    "Outcome",
    "Complete",
    "Skip",
    "More",
    "Snooze",
    "AwaitChildren",
    "AwaitSignal",
    "complete",
    "skip",
    "more",
    "snooze",
    "await_children",
    "await_signal",
    "StepError",
    "Retryable",
    "Refused",
    "InvalidInput",
    "Stopped",
    "Cancelled",
    "LeaseLost",
    "Failure",
    "JobSummary",
    "Child",
    "ChildResult",
    "ChildState",
    "Priority",
    "Leftover",
    "Join",
    "Awaited",
    "AwaitedChildren",
    "AwaitedSignal",
    "SignalTimedOut",
    "config",
    "http",
    "log",
]
