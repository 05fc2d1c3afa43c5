"""What a call can fail with: the host's refusal, carrying the API's code, or a failure to
reach the host or read its answer. Each API code has its own class, so a caller can
``except QuotaExceeded`` or branch on ``error.code``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Type


class SpindleError(Exception):
    """Every error this client raises."""


class TransportError(SpindleError):
    """The host could not be reached, or the connection failed mid-answer."""


class UnexpectedAnswer(SpindleError):
    """The host answered something this client cannot decode."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"the host's answer ({status}) is not what this client expects: {detail}")
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class Violation:
    """One way a job's input breaks its kind's schema."""

    pointer: str
    """JSON Pointer (RFC 6901) to the offending value; ``""`` is the whole input."""
    message: str
    """What is wrong there."""


class Refused(SpindleError):
    """An error the host answered: ``{"error": {code, message, reason?, state?, index?, violations?}}``."""

    code: str = ""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        reason: Optional[str] = None,
        state: Optional[str] = None,
        index: Optional[int] = None,
        violations: Optional[List[Violation]] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        shown = f"{code} ({reason}): {message}" if reason else f"{code}: {message}"
        super().__init__(shown)
        self.status = status
        self.code = code
        self.message = message
        self.reason = reason
        self.state = state
        self.index = index
        self.violations = violations or []
        self.retry_after = retry_after


class InvalidRequest(Refused):
    """400: the request is malformed (its body, its query or a field's value)."""


class Unauthorised(Refused):
    """401: no valid bearer token."""


class Forbidden(Refused):
    """403: a valid token of the wrong role."""


class NotFound(Refused):
    """404: no such route, job or tenant (another tenant's job included)."""


class UnknownKind(Refused):
    """404: the tenant has no such kind."""


class UnknownVersion(Refused):
    """404: the kind has no such version."""


class PayloadTooLarge(Refused):
    """413: a body, a job input or a component over its cap."""


class InvalidInput(Refused):
    """422: the input does not follow its kind's schema; ``violations`` says where. Nothing was written."""


class InvalidComponent(Refused):
    """422: the upload is not a valid job-kind component."""


class IllegalTransition(Refused):
    """409: the job's machine refused the command: ``reason`` says which refusal, ``state`` where the job was."""


class AlreadyExists(Refused):
    """409: a unique name is taken."""


class Contention(Refused):
    """503: concurrent writers kept changing the job; nothing was done."""


class Busy(Refused):
    """503: the host is doing as much of this as it may; nothing was done."""


class QuotaExceeded(Refused):
    """429: a tenant's quota refused the request (``reason`` says which); nothing was written."""


class StorageFormat(Refused):
    """503: this host may not write (storage format, or it lost the database); nothing was written."""


class Internal(Refused):
    """500: the host failed; the detail is in its log under the reference in the message."""


#: The class of each code the API answers.
BY_CODE: Dict[str, Type[Refused]] = {
    "invalid-request": InvalidRequest,
    "unauthorised": Unauthorised,
    "forbidden": Forbidden,
    "not-found": NotFound,
    "unknown-kind": UnknownKind,
    "unknown-version": UnknownVersion,
    "payload-too-large": PayloadTooLarge,
    "invalid-input": InvalidInput,
    "invalid-component": InvalidComponent,
    "illegal-transition": IllegalTransition,
    "already-exists": AlreadyExists,
    "contention": Contention,
    "busy": Busy,
    "quota-exceeded": QuotaExceeded,
    "storage-format": StorageFormat,
    "internal": Internal,
}


def refusal(status: int, body: object, retry_after: Optional[float]) -> SpindleError:
    """The error an answer of ``status`` with the decoded ``body`` stands for."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return UnexpectedAnswer(status, str(body)[:200])
    violations = [Violation(v.get("pointer", ""), v.get("message", "")) for v in error.get("violations") or []]
    cls = BY_CODE.get(error["code"], Refused)
    return cls(
        status,
        error["code"],
        error.get("message", ""),
        reason=error.get("reason"),
        state=error.get("state"),
        index=error.get("index"),
        violations=violations,
        retry_after=retry_after,
    )
