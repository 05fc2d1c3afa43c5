"""Workflows: child jobs a step fans out and awaits, signals it waits for, and what it gets back.

A step returns `await_children(...)` or `await_signal(...)`; the host calls it again (same
attempt, with the outcome's cursor) once the join is met or the signal arrives or times
out, and `Step.awaited` says which.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, List, Literal, Optional, Sequence, Type, TypeVar, Union, overload

from . import _json
from .job import Failure

T = TypeVar("T")

__all__ = [
    "Priority",
    "Leftover",
    "Join",
    "Child",
    "ChildState",
    "ChildResult",
    "AwaitedChildren",
    "AwaitedSignal",
    "SignalTimedOut",
    "Awaited",
]


class Priority(enum.Enum):
    """How urgent a child job is, as the host's priority layers order it."""

    CRITICAL = "critical"
    SCHEDULED = "scheduled"
    NORMAL = "normal"
    BACKGROUND = "background"


class Leftover(enum.Enum):
    """What happens to children still open when the join is met early."""

    #: They are cancelled (the default).
    CANCEL = "cancel"
    #: They run on; the step does not see how they end.
    KEEP = "keep"


#: When the step is called again: once `"all"` children are final, once `"any"` is, or
#: once a count of them are (an `int`).
Join = Union[Literal["all", "any"], int]


@dataclass(frozen=True)
class Child:
    """A child job to create: its kind (in the parent's tenant) and its input.

    `input` is written as JSON, unless it is `bytes`, which go as they are.
    """

    kind: str
    input: Any = None
    #: A key among the tenant's jobs: a child whose key is taken is that job, not a new one.
    idempotency_key: Optional[str] = None
    #: `None`: normal.
    priority: Optional[Priority] = None
    #: Lease keys the child must hold while a step of it runs.
    lease_keys: Sequence[str] = ()

    def input_bytes(self) -> bytes:
        """The input as the host gets it; `Refused` `invalid-child-input` if it is not JSON-able."""
        if isinstance(self.input, (bytes, bytearray)):
            return bytes(self.input)
        return _json.encode(self.input, what=f"the input of a `{self.kind}` child", code="invalid-child-input")


class ChildState(enum.Enum):
    """The final state of a child job."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class ChildResult:
    """One child's result as its parent's step receives it."""

    job_id: str
    kind: str
    #: Final state, or `None` while still open (join `any` or a count).
    state: Optional[ChildState]
    #: Its last step's output, raw, when it succeeded.
    output: Optional[bytes] = None
    #: Why it failed or was cancelled.
    failure: Optional[Failure] = None

    @property
    def succeeded(self) -> bool:
        return self.state is ChildState.SUCCEEDED

    @property
    def is_final(self) -> bool:
        return self.state is not None

    @overload
    def output_json(self) -> Any: ...
    @overload
    def output_json(self, into: Type[T]) -> Optional[T]: ...
    def output_json(self, into: Optional[Type[Any]] = None) -> Any:
        """The output parsed from JSON (built into `into` if given); `None` if it has none.
        `InvalidInput` with code `invalid-child-output` if it does not fit."""
        if self.output is None:
            return None
        return _json.decode(
            self.output, into, what=f"the output of child {self.job_id}", code="invalid-child-output"
        )


@dataclass(frozen=True)
class AwaitedChildren:
    """The step is called again after `await_children`: the children, in the order it asked."""

    children: List[ChildResult] = field(default_factory=list)


@dataclass(frozen=True)
class AwaitedSignal:
    """The step is called again after `await_signal`, and the signal came with this body."""

    body: bytes


@dataclass(frozen=True)
class SignalTimedOut:
    """The step is called again after `await_signal`, and the timeout passed first."""


#: What a step that reported an await outcome is called again with.
Awaited = Union[AwaitedChildren, AwaitedSignal, SignalTimedOut]
