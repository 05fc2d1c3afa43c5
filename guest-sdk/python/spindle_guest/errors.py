"""The ways a step fails, as exceptions a step raises (or returns).

`Retryable` and `Refused` carry a code and a message that tenants and operators see, so
they must stay free of secrets and transient detail; such detail goes in `detail`, which
the SDK writes to the host log instead. Any other exception escaping a step is a bug or an
unforeseen failure: the SDK reports it as retryable `uncaught-exception` (see
`uncaught`), with the traceback on stderr.
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "StepError",
    "Retryable",
    "Refused",
    "InvalidInput",
    "Stopped",
    "Cancelled",
    "LeaseLost",
    "UNCAUGHT_EXCEPTION",
    "uncaught",
]

#: The code of the retryable failure an exception no step caught turns into.
UNCAUGHT_EXCEPTION = "uncaught-exception"

#: Longest message `uncaught` keeps: a failure's message is a short explanation.
_MAX_UNCAUGHT_MESSAGE = 500


class StepError(Exception):
    """A failed step: `Retryable` (the host retries with backoff) or `Refused` (the job fails)."""

    #: Whether the host may retry; set by the subclasses.
    retryable: bool = False

    def __init__(self, code: str, message: Optional[str] = None, *, detail: Optional[str] = None) -> None:
        self.code = code
        #: Defaults to the code, so a bare `Refused("bad-amount")` still reads sensibly.
        self.message = code if message is None else message
        #: Log-only context (an upstream error, an id); never reaches the job's record.
        self.detail = detail
        super().__init__(code, self.message)

    def with_detail(self, detail: str) -> "StepError":
        """Sets the log-only detail and returns the error, for `raise Refused(...).with_detail(e)`."""
        self.detail = detail
        return self

    def __str__(self) -> str:
        disposition = "retryable" if self.retryable else "refused"
        return f"{disposition} {self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code!r}, {self.message!r})"

    # Value semantics, so that a test can compare recorded outcomes.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, StepError):
            return NotImplemented
        return (self.retryable, self.code, self.message) == (other.retryable, other.code, other.message)

    def __hash__(self) -> int:
        return hash((self.retryable, self.code, self.message))


class Retryable(StepError):
    """A transient failure: the host retries the step while the kind's budget lasts."""

    retryable = True


class Refused(StepError):
    """A permanent failure: the step and the job fail without retry."""

    retryable = False


class InvalidInput(Refused):
    """Data the step was handed does not parse or does not fit the expected type.

    Retrying the same bytes cannot help, so it is a refusal. The typed helpers raise it
    with a code naming the source: `invalid-input` for the job's input, `invalid-prior`,
    `invalid-cursor`, `invalid-signal`, `invalid-child-output`, `invalid-response` for the
    others. Its message names the place and the mismatch, never the value (it may be a
    card number); the parser's own text goes to the detail.
    """

    def __init__(self, message: str, *, code: str = "invalid-input", detail: Optional[str] = None) -> None:
        super().__init__(code, message, detail=detail)


class Stopped(BaseException):
    """The host told the step to stop (see `Step.keep_alive`).

    A `BaseException`, like `asyncio.CancelledError`, so that `except Exception` in a
    step's own code does not swallow it. Escaping the step, it reports retryable
    `stopped`, which the host ignores anyway: it settles the job as it decided.
    """

    code = "stopped"


class Cancelled(Stopped):
    """A cancellation of the job was requested: whatever the step reports, it settles cancelled."""


class LeaseLost(Stopped):
    """This host no longer holds the job's lease: another may run the step, and this call's report is refused."""


def uncaught(error: BaseException) -> Retryable:
    """The failure reported for an exception no step caught: `<Type>: <message>`.

    Retryable, because an unforeseen error may well be transient (a timeout deep in a
    library); the kind's retry budget bounds a deterministic one.
    """
    text = str(error)
    message = type(error).__name__ + (f": {text}" if text else "")
    if len(message) > _MAX_UNCAUGHT_MESSAGE:
        message = message[: _MAX_UNCAUGHT_MESSAGE - 1] + "…"
    return Retryable(UNCAUGHT_EXCEPTION, message)
