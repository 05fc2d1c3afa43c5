"""Outbound HTTP from a step: a small blocking client over `wasi:http/outgoing-handler`.

The host's policy denies every request unless the operator, the tenant and the kind's
deployment all allow its destination; a denied request raises `Denied` before anything
leaves the host. The host also bounds each phase, the response body's size and the
requests one step call may make, so the timeouts here are only for a step that wants to
give up sooner. Credentials go in headers as the placeholders `config.secret` returns.
Unless a request has an `Idempotency-Key` header the host adds one, stable across the
step's attempts.

    response = http.get(url, headers={"authorization": f"Bearer {token}"}).raise_for_status()
    rate = response.json(Rate)

An `HttpError` escaping a step reports what it means: `Denied` and `InvalidRequest` are
refused (the same request fails the same way every time), the rest retryable
`upstream-unavailable`. In a kind's tests, the handler given to `testing.run_job` answers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Sequence, Tuple, Type, TypeVar, Union, overload

from . import _host, _json
from .errors import Refused, Retryable, StepError

T = TypeVar("T")

__all__ = [
    "Request",
    "Response",
    "HttpError",
    "Denied",
    "Timeout",
    "TooLarge",
    "ConnectionLimit",
    "ConnectFailed",
    "InvalidRequest",
    "request",
    "get",
    "post",
    "put",
    "patch",
    "delete",
]

#: One header: its name and its value's bytes. Names compare ASCII case-insensitively.
Header = Tuple[str, bytes]
Headers = Union[Mapping[str, Union[str, bytes]], Sequence[Tuple[str, Union[str, bytes]]]]

_MISSING: Any = object()


class HttpError(Exception):
    """A request that got no response (a response with any status is not an error here:
    see `Response.raise_for_status`). Also the class of failures no subclass names: a
    protocol error, a body cut short, an error inside the host."""

    def as_step_error(self) -> StepError:
        """The step failure this error means; the message names the class, the detail the cause."""
        return Retryable("upstream-unavailable", "the upstream service did not answer", detail=str(self))


class Denied(HttpError):
    """The host's policy refused the request (`HTTP-request-denied`): its destination is not
    allowed, or the call made more requests than the host allows one call."""

    def __init__(self, cause: str = "HTTP-request-denied: the host's outbound policy does not allow this request") -> None:
        super().__init__(cause)

    def as_step_error(self) -> StepError:
        return Refused("http-request-denied", "the outbound request is not allowed by policy", detail=str(self))


class Timeout(HttpError):
    """A phase ran out of time: DNS, connect, first byte, between bytes, the whole exchange."""


class TooLarge(HttpError):
    """The response body is larger than the host lets a step receive."""


class ConnectionLimit(HttpError):
    """The host has as many outbound connections open as it allows; later one may be free."""


class ConnectFailed(HttpError):
    """The destination could not be reached or its TLS was wrong (no such name, refused, bad certificate)."""


class InvalidRequest(HttpError):
    """The request cannot be sent as built: a malformed URL, header or method, a body that
    did not serialise. Sending it again cannot help."""

    def as_step_error(self) -> StepError:
        return Refused("http-request-invalid", "the outbound request is malformed", detail=str(self))


@dataclass(frozen=True)
class Target:
    """A URL split the way `wasi:http` takes it."""

    scheme: str
    #: `host` or `host:port`.
    authority: str
    #: From the first `/` on, fragment dropped; `/` when the URL has no path.
    path_with_query: str


def split_url(url: str) -> Target:
    """Splits `scheme://authority/path?query#fragment`; only as much parsing as that needs,
    since the host checks the destination against its policy anyway."""

    def invalid(why: str) -> InvalidRequest:
        return InvalidRequest(f"URL {url!r}: {why}")

    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise invalid("contains whitespace or control characters")
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise invalid("no scheme (expected `http://` or `https://`)")
    scheme = scheme.lower()
    if not scheme:
        raise invalid("empty scheme")
    if not all(c.isascii() and (c.isalnum() or c in "+-.") for c in scheme):
        raise invalid("malformed scheme")
    end = min([i for i in (rest.find(c) for c in "/?#") if i >= 0], default=len(rest))
    authority, rest = rest[:end], rest[end:]
    if not authority:
        raise invalid("no host")
    # The host would pass credentials on in the clear and log them with the URL.
    if "@" in authority:
        raise invalid("credentials in the URL (put them in a header)")
    rest = rest.split("#", 1)[0]
    return Target(scheme, authority, rest if rest.startswith("/") else "/" + rest)


def _header_list(headers: Optional[Headers]) -> List[Header]:
    if headers is None:
        return []
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    return [(name, value.encode("utf-8") if isinstance(value, str) else bytes(value)) for name, value in pairs]


@dataclass
class Request:
    """An outbound request. Usually built by `get`, `post`, ... which also send it."""

    method: str
    url: str
    headers: List[Header] = field(default_factory=list)
    body: bytes = b""
    #: Seconds to open the connection, to the response's head, between body chunks;
    #: `None` leaves a phase to the host's bound.
    connect_timeout: Optional[float] = None
    first_byte_timeout: Optional[float] = None
    between_bytes_timeout: Optional[float] = None

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name` (ASCII case-insensitive), if it is UTF-8."""
        return _find_header(self.headers, name)

    def send(self) -> "Response":
        """Sends the request and waits for the whole response, body included. Any response
        is returned, whatever its status; an `HttpError` means there was none."""
        split_url(self.url)
        return _host.current().send(self)


def _find_header(headers: Sequence[Header], name: str) -> Optional[str]:
    for key, value in headers:
        if key.lower() == name.lower():
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError:
                return None
    return None


@dataclass(frozen=True)
class Response:
    """A response: status, headers and the whole body."""

    status: int
    body: bytes = b""
    headers: Sequence[Header] = ()

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        """The body as text, invalid UTF-8 replaced."""
        return self.body.decode("utf-8", errors="replace")

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name` (ASCII case-insensitive), if it is UTF-8."""
        return _find_header(self.headers, name)

    @overload
    def json(self) -> Any: ...
    @overload
    def json(self, into: Type[T]) -> T: ...
    def json(self, into: Optional[Type[Any]] = None) -> Any:
        """The body parsed from JSON, built into `into` if given; `InvalidInput` with code
        `invalid-response` if it does not fit (call `raise_for_status` first, so an error
        page is not mistaken for a malformed answer)."""
        return _json.decode(self.body, into, what="the upstream's response", code="invalid-response")

    def raise_for_status(self) -> "Response":
        """The response if its status is not an error; otherwise raises the failure it means:
        429 and 5xx are `Retryable` (the upstream may recover), other 4xx `Refused` (the same
        request would be rejected again). The code is `upstream-<status>`; the body stays
        out of the failure and the log."""
        code = f"upstream-{self.status}"
        if self.status == 429 or 500 <= self.status <= 599:
            raise Retryable(code, f"the upstream service answered {self.status}; retrying later")
        if 400 <= self.status <= 499:
            raise Refused(code, f"the upstream service rejected the request ({self.status})")
        return self


def request(
    method: str,
    url: str,
    *,
    headers: Optional[Headers] = None,
    body: Union[bytes, str, None] = None,
    json: Any = _MISSING,
    connect_timeout: Optional[float] = None,
    first_byte_timeout: Optional[float] = None,
    between_bytes_timeout: Optional[float] = None,
) -> Response:
    """Builds and sends one request. `json` sets the body to that value as JSON and
    `content-type: application/json` unless one is given; `body` text goes as UTF-8."""
    header_list = _header_list(headers)
    payload = body.encode("utf-8") if isinstance(body, str) else (body or b"")
    if json is not _MISSING:
        try:
            payload = _json.dumps(json).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise InvalidRequest(f"the JSON body does not serialise: {e}") from None
        if _find_header(header_list, "content-type") is None:
            header_list.append(("content-type", b"application/json"))
    return Request(
        method.upper(), url, header_list, payload, connect_timeout, first_byte_timeout, between_bytes_timeout
    ).send()


def get(url: str, **options: Any) -> Response:
    """Sends a `GET`; `options` as for `request`."""
    return request("GET", url, **options)


def post(url: str, **options: Any) -> Response:
    """Sends a `POST`; `options` as for `request`."""
    return request("POST", url, **options)


def put(url: str, **options: Any) -> Response:
    """Sends a `PUT`; `options` as for `request`."""
    return request("PUT", url, **options)


def patch(url: str, **options: Any) -> Response:
    """Sends a `PATCH`; `options` as for `request`."""
    return request("PATCH", url, **options)


def delete(url: str, **options: Any) -> Response:
    """Sends a `DELETE`; `options` as for `request`."""
    return request("DELETE", url, **options)
