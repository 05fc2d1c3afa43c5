"""How a step goes on: the outcomes it returns.

A step returns one outcome per call, or just a JSON-able value, which completes it. It
fails by raising (or returning) `Retryable` or `Refused`, which are outcomes too.

    return {"rows": 3}                       # complete, output {"rows":3}
    return more(cursor="300", done=300, total=1000)
    return snooze(30)
    return skip("no receipt requested")
    return await_children([Child("thumbnail", {"image": "a.png"})], join="all")
    return await_signal("shipped", timeout_secs=3 * 24 * 3600, cursor="waiting")
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional, Tuple, Union

from . import _json
from .errors import Refused, StepError
from .workflow import Child, Join, Leftover

__all__ = [
    "Complete",
    "Skip",
    "More",
    "Snooze",
    "AwaitChildren",
    "AwaitSignal",
    "Outcome",
    "complete",
    "skip",
    "more",
    "snooze",
    "await_children",
    "await_signal",
]

#: The bounds of the WIT's integer fields, checked here so a bad value fails in the step
#: (a clear refusal) rather than in the bindings (a trap with no code or message).
_U32 = 2**32 - 1
_U64 = 2**64 - 1


@dataclass(frozen=True)
class Complete:
    """The step finished; `output` (JSON by convention) is handed to later steps."""

    output: bytes


@dataclass(frozen=True)
class Skip:
    """The step does not apply to this job; the reason is shown to operators."""

    reason: str


@dataclass(frozen=True)
class More:
    """Progress saved: the host calls the step again (same attempt) with `cursor`."""

    cursor: str
    done: int
    total: Optional[int] = None


@dataclass(frozen=True)
class Snooze:
    """Call the step again after `seconds`; no attempt is consumed."""

    seconds: int


@dataclass(frozen=True)
class AwaitChildren:
    """Create `children` and call the step again once `join` is met."""

    children: Tuple[Child, ...]
    join: Join = "all"
    leftover: Leftover = Leftover.CANCEL
    cursor: Optional[str] = None


@dataclass(frozen=True)
class AwaitSignal:
    """Park the step until the signal `name` arrives or `timeout_secs` pass."""

    name: str
    timeout_secs: int
    cursor: Optional[str] = None


#: Everything one call of a step can report: a failure is a `Retryable` or `Refused`.
Outcome = Union[Complete, Skip, More, Snooze, AwaitChildren, AwaitSignal, StepError]

_OUTCOME_TYPES = (Complete, Skip, More, Snooze, AwaitChildren, AwaitSignal, StepError)


def complete(output: Any = None) -> Complete:
    """The step finished with `output`: written as JSON (dataclasses and enums included),
    or sent as it is if it is `bytes`. A value JSON cannot hold is a bug in the kind:
    `Refused` with code `invalid-output`."""
    if isinstance(output, (bytes, bytearray, memoryview)):
        return Complete(bytes(output))
    return Complete(_json.encode(output, what="the step's output", code="invalid-output"))


def skip(reason: str) -> Skip:
    """The step does not apply to this job."""
    return Skip(reason)


def _cursor(cursor: Any) -> str:
    """A cursor as the host keeps it: text as given, anything else as JSON (read it back
    with `Step.cursor_json`)."""
    if isinstance(cursor, str):
        return cursor
    return _json.encode(cursor, what="the step's cursor", code="invalid-cursor").decode("utf-8")


def _uint(value: int, bound: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= bound:
        raise Refused("invalid-outcome", f"{what} must be an integer from 0 to {bound}")
    return value


def more(cursor: Any, done: int, total: Optional[int] = None) -> More:
    """Progress saved: call the step again (same attempt) with `cursor`. `done` and `total`
    count units of work for progress; `total` may be unknown."""
    return More(
        _cursor(cursor),
        _uint(done, _U64, "`done`"),
        None if total is None else _uint(total, _U64, "`total`"),
    )


def snooze(seconds: int) -> Snooze:
    """Call the step again after `seconds`; no attempt is consumed."""
    return Snooze(_uint(seconds, _U32, "a snooze's seconds"))


def await_children(
    children: Iterable[Child],
    *,
    join: Join = "all",
    leftover: Leftover = Leftover.CANCEL,
    cursor: Any = None,
) -> AwaitChildren:
    """Creates `children` and calls the step again (same attempt, with `cursor`) once the
    join is met: `"all"` children final, `"any"` one, or a count of them. `Step.children`
    then has their results in this order; those still open were cancelled unless
    `leftover` is `Leftover.KEEP`."""
    if join not in ("all", "any"):
        _uint(join, _U32, "a join's count")  # type: ignore[arg-type]
    kids = tuple(children)
    for child in kids:
        child.input_bytes()  # An unserialisable input refuses now, from inside the step.
    return AwaitChildren(kids, join, leftover, None if cursor is None else _cursor(cursor))


def await_signal(name: str, timeout_secs: int, cursor: Any = None) -> AwaitSignal:
    """Parks the step until the signal `name` is sent to the job or `timeout_secs` pass;
    then calls it again (same attempt, with `cursor`): `Step.signal` has the body, or
    `Step.signal_timed_out` is true."""
    return AwaitSignal(name, _uint(timeout_secs, _U32, "a signal's timeout"), None if cursor is None else _cursor(cursor))


def coerce(value: Any) -> Outcome:
    """What a step returned, as an outcome: an outcome stays one, anything else completes."""
    if isinstance(value, _OUTCOME_TYPES):
        return value
    return complete(value)
