"""A job kind: its description, its step functions and its hooks, in one `Kind` object.

    kind = Kind("greet", input=Greeting, retry=RetryPolicy(max_attempts=3, initial_backoff_ms=100, max_backoff_ms=1000))

    @kind.step("compose", output=Composed)
    def compose(step: Step) -> Composed:
        return Composed(f"Hello, {step.input(Greeting).name}!")

    @kind.on_failure
    def undo(job: JobSummary) -> None: ...

Steps run in the order they are declared. The decorators return the function unchanged,
so a step stays a plain function a test can call.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from . import _host
from .errors import Refused, Retryable, StepError, Stopped, uncaught
from .http import HttpError
from .job import Failure, JobSummary
from .log import Level
from .outcome import Outcome, coerce
from .schema import schema_text
from .step import Step

__all__ = ["Kind", "KindSpec", "StepSpec", "RetryPolicy", "StepFunction", "Hook"]

#: A step function: takes the call, returns an outcome or a JSON-able value.
StepFunction = Callable[[Step], Any]
#: A hook: takes the settled job's summary; raises to report a failure.
Hook = Callable[[JobSummary], None]

F = TypeVar("F", bound=StepFunction)
H = TypeVar("H", bound=Hook)

_U32 = 2**32 - 1


def _check_u32(value: int, what: str, least: int = 0) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= _U32:
        raise ValueError(f"{what} must be an integer from {least} to {_U32}")


def _schema_text(schema: Union[str, Dict[str, Any], None], what: str) -> Optional[str]:
    """A JSON Schema as the host takes it: text, from a `dict` or as given."""
    if schema is None or isinstance(schema, str):
        return schema
    if isinstance(schema, dict):
        return json.dumps(schema, separators=(",", ":"))
    raise TypeError(f"{what} must be JSON Schema text or a dict")


def _declared_schema(tp: Any, schema: Union[str, Dict[str, Any], None], what: str) -> Optional[str]:
    """The schema text of `what=T` (derived from the type) or `what_schema=` (as written)."""
    if tp is not None and schema is not None:
        raise TypeError(f"give `{what}=` (a type) or `{what}_schema=` (a schema), not both")
    if tp is not None:
        return schema_text(tp)
    return _schema_text(schema, f"{what}_schema")


@dataclass(frozen=True)
class RetryPolicy:
    """How the host retries a step that ends retryable: `max_attempts` in all (the first
    included; the host takes 1 to 100), backoff from `initial_backoff_ms` (at most an hour)
    doubling up to `max_backoff_ms` (at most a day). The defaults (three attempts, 1 s then
    2 s apart) ride out a blip without hiding a persistent fault for long; kinds with side
    effects should choose deliberately."""

    max_attempts: int = 3
    initial_backoff_ms: int = 1_000
    max_backoff_ms: int = 60_000

    def __post_init__(self) -> None:
        _check_u32(self.max_attempts, "max_attempts", least=1)
        _check_u32(self.initial_backoff_ms, "initial_backoff_ms")
        _check_u32(self.max_backoff_ms, "max_backoff_ms")


@dataclass(frozen=True)
class StepSpec:
    """One declared step: its key, its share of progress, its output's schema if declared."""

    key: str
    weight: int = 1
    output_schema: Optional[str] = None


@dataclass(frozen=True)
class KindSpec:
    """What a kind declares about itself; the host reads it once per deployed version."""

    name: str
    steps: Tuple[StepSpec, ...]
    cancellable: bool
    retry: RetryPolicy
    has_failure_effect: bool
    notifies_on_success: bool
    input_schema: Optional[str]


class Kind:
    """A job kind: name, policies, step functions and hooks.

    `cancellable` (default false, as in the Rust SDK: a kind says when stopping its jobs
    midway is safe) lets callers cancel its jobs; long steps should then heartbeat and
    stop when told to. `input` (a dataclass, TypedDict or other type `schema_of` takes)
    or `input_schema` (JSON Schema text or a dict) declares the JSON Schema a job's input
    must follow: the host refuses a submission that breaks it (HTTP 422 `invalid-input`)
    before anything is queued.
    """

    def __init__(
        self,
        name: str,
        *,
        cancellable: bool = False,
        retry: RetryPolicy = RetryPolicy(),
        input: Any = None,
        input_schema: Union[str, Dict[str, Any], None] = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("a kind's name must be a non-empty string")
        self.name = name
        self.cancellable = cancellable
        self.retry = retry
        self.input_schema = _declared_schema(input, input_schema, "input")
        self._steps: Dict[str, Tuple[StepSpec, StepFunction]] = {}
        self._on_failure: Optional[Hook] = None
        self._on_success: Optional[Hook] = None

    def __repr__(self) -> str:
        return f"Kind({self.name!r}, steps={list(self._steps)})"

    # -- declaring ------------------------------------------------------------------

    def step(
        self,
        key: str,
        *,
        weight: int = 1,
        output: Any = None,
        output_schema: Union[str, Dict[str, Any], None] = None,
    ) -> Callable[[F], F]:
        """Declares the next step, run by the decorated function. `weight` is its share of
        the job's progress relative to the other steps (0 counts as 1). `output` (a type)
        or `output_schema` (text or a dict) is the JSON Schema its output follows, shown
        with the kind."""
        if not isinstance(key, str) or not key:
            raise ValueError("a step's key must be a non-empty string")
        if key in self._steps:
            raise ValueError(f"kind `{self.name}` declares step `{key}` twice")
        _check_u32(weight, f"the weight of step `{key}`")
        spec = StepSpec(key, weight, _declared_schema(output, output_schema, "output"))

        def declare(function: F) -> F:
            if key in self._steps:
                raise ValueError(f"kind `{self.name}` declares step `{key}` twice")
            self._steps[key] = (spec, function)
            return function

        return declare

    def on_failure(self, hook: H) -> H:
        """Declares the business failure effect (compensate, refund, release), which the host
        calls when a job fails. It runs at least once, so it must be idempotent; the job id
        is stable. Raise `Retryable`/`Refused` to report that it failed."""
        self._on_failure = hook
        return hook

    def on_success(self, hook: H) -> H:
        """Declares the success notification, called after a job succeeds; runs at least once."""
        self._on_success = hook
        return hook

    # -- what the host asks ---------------------------------------------------------

    def spec(self) -> KindSpec:
        """The kind's description. Refuses a kind with no step: the host would not deploy it."""
        if not self._steps:
            raise ValueError(f"kind `{self.name}` declares no step")
        return KindSpec(
            name=self.name,
            steps=tuple(spec for spec, _ in self._steps.values()),
            cancellable=self.cancellable,
            retry=self.retry,
            has_failure_effect=self._on_failure is not None,
            notifies_on_success=self._on_success is not None,
            input_schema=self.input_schema,
        )

    @property
    def step_keys(self) -> List[str]:
        """The declared step keys, in order."""
        return list(self._steps)

    def run_step(self, step: Step) -> Outcome:
        """Runs one call of `step.key` and reports its outcome, never raising: exceptions
        become failures by type (see `failure_of`)."""
        entry = self._steps.get(step.key)
        if entry is None:
            failure: StepError = Refused("unknown-step", "the kind does not implement this step")
            _log_failure(f"step `{step.key}`", failure.with_detail(f"step key {step.key!r}"))
            return failure
        _, function = entry
        try:
            return coerce(function(step))
        except (Exception, Stopped) as error:
            failure = failure_of(error)
            _log_failure(f"step `{step.key}`", failure)
            return failure

    def run_on_failure(self, job: JobSummary) -> Optional[Failure]:
        """Runs the failure hook, if declared: `None` if it succeeded, else its failure."""
        return _run_hook("on-failure", self._on_failure, job)

    def run_on_success(self, job: JobSummary) -> Optional[Failure]:
        """Runs the success hook, if declared: `None` if it succeeded, else its failure."""
        return _run_hook("on-success", self._on_success, job)


def failure_of(error: BaseException) -> StepError:
    """The failure an exception escaping a step or hook reports.

    `Retryable` and `Refused` (`InvalidInput` included) as they are; an `HttpError` as the
    refusal or retry it means; a stop as retryable `stopped`; anything else as retryable
    `uncaught-exception` with `<Type>: <message>`, its traceback written to stderr, where
    the host keeps the last lines of a failed attempt.
    """
    if isinstance(error, StepError):
        return error
    if isinstance(error, HttpError):
        return error.as_step_error()
    if isinstance(error, Stopped):
        return Retryable(Stopped.code, "the step stopped as the host asked")
    _host.current().stderr("".join(traceback.format_exception(type(error), error, error.__traceback__)))
    return uncaught(error)


def _log_failure(context: str, failure: StepError) -> None:
    disposition = "retryable" if failure.retryable else "refused"
    _host.current().log(Level.WARN, f"{context} {disposition} {failure.code}: {failure.detail or failure.message}")


def _run_hook(name: str, hook: Optional[Hook], job: JobSummary) -> Optional[Failure]:
    if hook is None:
        return None
    try:
        hook(job)
        return None
    except (Exception, Stopped) as error:
        failure = failure_of(error)
        _log_failure(name, failure)
        return Failure(failure.code, failure.message)

