"""One call of a step: its input, its helpers, its line to the host."""

from __future__ import annotations

import enum
import types
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Type, TypeVar, overload

from . import _host, _json
from . import config as _config
from .errors import Cancelled, LeaseLost, Refused
from .log import Level
from .workflow import Awaited, AwaitedChildren, AwaitedSignal, ChildResult, SignalTimedOut

T = TypeVar("T")

__all__ = ["Step", "Checkpoint", "Heartbeat"]


@dataclass(frozen=True)
class Checkpoint:
    """Progress for a heartbeat: where to resume, units done, units in all if known."""

    cursor: str
    done: int
    total: Optional[int] = None


class Heartbeat(enum.Enum):
    """The host's answer to `Step.heartbeat`."""

    #: Keep working.
    PROCEED = "proceed"
    #: The job is being cancelled: stop soon; whatever the step returns, it settles cancelled.
    STOP_CANCELLED = "stop-cancelled"
    #: This host lost the job's lease: stop; whatever the step returns is refused.
    STOP_LEASE_LOST = "stop-lease-lost"

    @property
    def should_stop(self) -> bool:
        return self is not Heartbeat.PROCEED


@dataclass
class Step:
    """One call of one step of one job, as a step function receives it.

    Built by the SDK from the host's input; build one directly (or with
    `testing.make_step`) to unit-test a step function.
    """

    #: The key of the step to run, one of those the kind declared.
    key: str
    #: The job's input as submitted, raw.
    payload: bytes = b"{}"
    #: The job's id (a UUID in text form).
    job_id: str = "00000000-0000-7000-8000-000000000000"
    #: 1 for the first attempt of this step, 2 for the first retry, ...
    attempt: int = 1
    #: Stable across this step's attempts: use it to make side effects idempotent.
    idempotency_key: str = ""
    #: Outputs of the steps completed so far that came with this call, by step key.
    prior_outputs: Dict[str, bytes] = field(default_factory=dict)
    #: The cursor of this attempt's last `more` or await outcome, if any.
    cursor: Optional[str] = None
    #: What the step waited for, when this call follows one of its await outcomes.
    awaited: Optional[Awaited] = None
    #: The stop answer, if any heartbeat of this call got one.
    stop_requested: Optional[Heartbeat] = None

    def __post_init__(self) -> None:
        if not self.idempotency_key:
            self.idempotency_key = f"{self.job_id}/{self.key}"

    # -- the job's input ------------------------------------------------------------

    @overload
    def input(self) -> Any: ...
    @overload
    def input(self, into: Type[T]) -> T: ...
    def input(self, into: Optional[Type[Any]] = None) -> Any:
        """The job's input parsed from JSON and, given `into` (a dataclass, a TypedDict, a
        primitive or generic), built into that type. `InvalidInput` (refused
        `invalid-input`) if it does not parse or fit."""
        return _json.decode(self.payload, into, what="the job's input", code="invalid-input")

    # -- outputs of earlier steps ---------------------------------------------------

    def prior_bytes(self, step: str) -> Optional[bytes]:
        """The raw output of an earlier step of this job, if it completed: from this call's
        input, or else asked of the host, which has every output even when the input was
        capped."""
        raw = self.prior_outputs.get(step)
        return raw if raw is not None else _host.current().prior_output(step)

    @overload
    def prior(self, step: str) -> Any: ...
    @overload
    def prior(self, step: str, into: Type[T]) -> T: ...
    def prior(self, step: str, into: Optional[Type[Any]] = None) -> Any:
        """An earlier step's JSON output, built into `into` if given. Refused `missing-prior`
        if that step has not completed (skipped, or declared later); `InvalidInput` with code
        `invalid-prior` if its output does not fit."""
        raw = self.prior_bytes(step)
        if raw is None:
            raise Refused("missing-prior", f"step `{step}` has no output in this job")
        return _json.decode(raw, into, what=f"the output of step `{step}`", code="invalid-prior")

    @overload
    def prior_if_completed(self, step: str) -> Any: ...
    @overload
    def prior_if_completed(self, step: str, into: Type[T]) -> Optional[T]: ...
    def prior_if_completed(self, step: str, into: Optional[Type[Any]] = None) -> Any:
        """Like `prior`, but `None` when the step has not completed: for steps that may be skipped."""
        raw = self.prior_bytes(step)
        if raw is None:
            return None
        return _json.decode(raw, into, what=f"the output of step `{step}`", code="invalid-prior")

    # -- cursor and awaits ----------------------------------------------------------

    @overload
    def cursor_json(self) -> Any: ...
    @overload
    def cursor_json(self, into: Type[T]) -> Optional[T]: ...
    def cursor_json(self, into: Optional[Type[Any]] = None) -> Any:
        """The cursor parsed from JSON (see `more`), `None` on a first call; `InvalidInput`
        with code `invalid-cursor` if it does not parse."""
        if self.cursor is None:
            return None
        return _json.decode(self.cursor, into, what="the step's cursor", code="invalid-cursor")

    @property
    def children(self) -> Optional[List[ChildResult]]:
        """The children's results, when this call follows the step's `await_children`, in the
        order it asked for them; `None` otherwise."""
        return self.awaited.children if isinstance(self.awaited, AwaitedChildren) else None

    @property
    def signal_bytes(self) -> Optional[bytes]:
        """The raw body of the awaited signal, when this call follows it and it arrived."""
        return self.awaited.body if isinstance(self.awaited, AwaitedSignal) else None

    @overload
    def signal(self) -> Any: ...
    @overload
    def signal(self, into: Type[T]) -> Optional[T]: ...
    def signal(self, into: Optional[Type[Any]] = None) -> Any:
        """The awaited signal's body parsed from JSON; `None` if this call follows no signal
        (a timeout, or no wait). `InvalidInput` with code `invalid-signal` if it does not fit."""
        body = self.signal_bytes
        if body is None:
            return None
        return _json.decode(body, into, what="the signal's body", code="invalid-signal")

    @property
    def signal_timed_out(self) -> bool:
        """Whether this call follows an `await_signal` whose timeout passed first."""
        return isinstance(self.awaited, SignalTimedOut)

    # -- the host ---------------------------------------------------------------------

    def heartbeat(self, progress: Optional[Checkpoint] = None) -> Heartbeat:
        """Tells the host the step is alive (renewing its lease), optionally with progress,
        and returns its answer. Long steps call it regularly and return once it says stop;
        see `keep_alive` for the raising form."""
        reply = _host.current().heartbeat(progress)
        if reply.should_stop:
            self.stop_requested = reply
        return reply

    def keep_alive(self, progress: Optional[Checkpoint] = None) -> None:
        """A heartbeat that raises `Cancelled` or `LeaseLost` when the host says stop, for
        loops that would rather unwind than check. Escaping the step, either reports
        retryable `stopped`, which the host ignores: it settles the job as it decided."""
        reply = self.heartbeat(progress)
        if reply is Heartbeat.STOP_CANCELLED:
            raise Cancelled("the job is being cancelled")
        if reply is Heartbeat.STOP_LEASE_LOST:
            raise LeaseLost("this host no longer holds the job's lease")

    def log(self, level: Level, message: str) -> None:
        """Writes one line to the host's log (see `spindle_guest.log` for the level helpers)."""
        _host.current().log(level, str(message))

    @property
    def config(self) -> types.ModuleType:
        """The deployment's settings and the tenant's secrets: `get`, `secret`, `hmac_sha256`."""
        return _config
