"""What the sync and async clients share: the requests they build, how an answer is
decoded or refused, when a refused call is tried again, and a reader of server-sent events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import quote

from .errors import SpindleError, UnexpectedAnswer, refusal

#: Longest a host holds one ``wait`` request; ``wait`` asks again until its own deadline.
LONGEST_HELD_WAIT = 300.0


@dataclass(frozen=True)
class Retry:
    """How answers the API promises wrote nothing (429 ``quota-exceeded``, 503 ``busy``,
    ``contention``, ``storage-format``) are tried again: after the host's ``Retry-After``
    when it gave one, else ``initial`` seconds doubled per try, never more than ``max`` apart."""

    attempts: int = 5
    initial: float = 0.2
    max: float = 30.0

    def delay(self, attempt: int, status: int, retry_after: Optional[float]) -> Optional[float]:
        """Seconds to wait before try ``attempt + 1``; ``None``: do not try again."""
        if status not in (429, 503) or attempt >= self.attempts:
            return None
        backoff = self.initial * (2 ** min(attempt - 1, 16))
        return min(retry_after if retry_after is not None else backoff, self.max)


#: Never try again.
NEVER = Retry(attempts=1)


@dataclass(frozen=True)
class Submitted:
    """A submitted job."""

    job: Dict[str, Any]
    """The job (a ``types.JobView``)."""
    created: bool
    """Whether this call made it (False: its idempotency key named a job made before)."""


@dataclass(frozen=True)
class Event:
    """One of a job's live events: ``history`` (one entry, a ``types.HistoryEntryView``) or
    ``job`` (its state and progress, a ``types.JobLive``)."""

    name: str
    data: Dict[str, Any]


def segment(text: str) -> str:
    """A path segment, with what would end or split it escaped."""
    return quote(text, safe="-_.~:")


@dataclass
class Request:
    method: str
    path: str
    params: Optional[Dict[str, Any]] = None
    body: Optional[bytes] = None
    headers: Optional[Dict[str, str]] = None


def submission(
    kind: str,
    input: Any,
    idempotency_key: Optional[str],
    traceparent: Optional[str],
    priority: Optional[str],
    run_at: Optional[str],
    delay_secs: Optional[float],
    lease_keys: Iterable[str],
) -> Request:
    body: Dict[str, Any] = {"kind": kind, "input": {} if input is None else input, "lease_keys": list(lease_keys)}
    for field, value in (
        ("idempotency_key", idempotency_key),
        ("priority", priority),
        ("run_at", run_at),
        ("delay_secs", delay_secs),
    ):
        if value is not None:
            body[field] = value
    headers = {"traceparent": traceparent} if traceparent else {}
    return Request("POST", "/v1/jobs", body=encode(body), headers=headers)


def signal(job_id: str, name: str, body: Any, idempotency_key: Optional[str]) -> Request:
    headers = {"idempotency-key": idempotency_key} if idempotency_key else {}
    path = f"/v1/jobs/{segment(job_id)}/signals/{segment(name)}"
    return Request("POST", path, body=encode(body), headers=headers)


def listing(**filters: Any) -> Request:
    params = {key: value for key, value in filters.items() if value is not None}
    return Request("GET", "/v1/jobs", params=params)


def logs(job_id: str, step: Optional[str], follow: bool) -> Request:
    params: Dict[str, Any] = {"follow": "true" if follow else "false"}
    if step is not None:
        params["step"] = step
    return Request("GET", f"/v1/jobs/{segment(job_id)}/logs", params=params)


def encode(body: Any) -> bytes:
    return json.dumps(body).encode("utf-8")


def retry_after(headers: Mapping[str, str]) -> Optional[float]:
    value = headers.get("retry-after")
    try:
        return float(int(value.strip())) if value else None
    except ValueError:
        return None


def failure(status: int, content: bytes, headers: Mapping[str, str]) -> SpindleError:
    """The error an unsuccessful answer stands for."""
    try:
        body = json.loads(content)
    except ValueError:
        return UnexpectedAnswer(status, content[:200].decode("utf-8", "replace"))
    return refusal(status, body, retry_after(headers))


def decode(status: int, content: bytes) -> Any:
    try:
        return json.loads(content)
    except ValueError as error:
        raise UnexpectedAnswer(status, str(error)) from None


class EventReader:
    """Server-sent events from a streamed answer's lines: ``event:`` names one, ``data:``
    lines carry it, a blank line ends it."""

    def __init__(self) -> None:
        self.name = ""
        self.data: List[str] = []

    def line(self, line: str) -> Optional[Tuple[str, str]]:
        """Takes one line; answers ``(name, data)`` when it completes an event."""
        line = line.rstrip("\r\n")
        if not line:
            if not self.name and not self.data:
                return None
            event = (self.name or "message", "\n".join(self.data))
            self.name, self.data = "", []
            return event
        if line.startswith("event:"):
            self.name = line[len("event:") :].lstrip()
        elif line.startswith("data:"):
            value = line[len("data:") :]
            self.data.append(value[1:] if value.startswith(" ") else value)
        return None


def job_event(name: str, data: str) -> Optional[Event]:
    """The client's event for a ``/events`` event; ``None`` for one it does not know."""
    if name in ("history", "job"):
        return Event(name, json.loads(data))
    return None
