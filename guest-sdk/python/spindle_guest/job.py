"""What the failure and success hooks receive: a settled job's summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Type, TypeVar, overload

from . import _json

T = TypeVar("T")

__all__ = ["Failure", "JobSummary"]


@dataclass(frozen=True)
class Failure:
    """An operator-safe account of a failure: a stable code and a short message."""

    code: str
    message: str


@dataclass(frozen=True)
class JobSummary:
    """A settled job, as `on_failure` and `on_success` hooks get it."""

    #: Stable: a hook that runs more than once can use it to be idempotent.
    job_id: str
    #: The job's input as submitted, raw.
    payload: bytes
    #: Outputs of the steps that completed, by step key, in declaration order.
    outputs: Dict[str, bytes] = field(default_factory=dict)
    #: Why the job failed; `None` in `on_success`.
    failure: Optional[Failure] = None

    @overload
    def input(self) -> Any: ...
    @overload
    def input(self, into: Type[T]) -> T: ...
    def input(self, into: Optional[Type[Any]] = None) -> Any:
        """The job's input parsed from JSON, built into `into` if given (`InvalidInput` if it does not fit)."""
        return _json.decode(self.payload, into, what="the job's input", code="invalid-input")

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
