"""Typed sync and async clients of Spindle's HTTP API.

>>> from spindle_client import Client
>>> with Client("http://127.0.0.1:8080", token) as client:
...     job = client.submit("greet", {"name": "Ada"}, idempotency_key="greet-ada").job
...     print(client.wait(job["id"], timeout=60)["state"])
"""

from ._core import NEVER, Event, Retry, Submitted
from .aio import AsyncClient
from .client import Client
from .errors import (
    BY_CODE,
    AlreadyExists,
    Busy,
    Contention,
    Forbidden,
    IllegalTransition,
    Internal,
    InvalidComponent,
    InvalidInput,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    QuotaExceeded,
    Refused,
    SpindleError,
    StorageFormat,
    TransportError,
    Unauthorised,
    UnexpectedAnswer,
    UnknownKind,
    UnknownVersion,
    Violation,
)

__all__ = [
    "AsyncClient",
    "Client",
    "Event",
    "NEVER",
    "Retry",
    "Submitted",
    "BY_CODE",
    "AlreadyExists",
    "Busy",
    "Contention",
    "Forbidden",
    "IllegalTransition",
    "Internal",
    "InvalidComponent",
    "InvalidInput",
    "InvalidRequest",
    "NotFound",
    "PayloadTooLarge",
    "QuotaExceeded",
    "Refused",
    "SpindleError",
    "StorageFormat",
    "TransportError",
    "Unauthorised",
    "UnexpectedAnswer",
    "UnknownKind",
    "UnknownVersion",
    "Violation",
]
