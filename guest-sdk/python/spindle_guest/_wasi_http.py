"""`Request.send` inside a component: one `wasi:http/outgoing-handler` call, the body
streamed out, the response read whole.

Resources are dropped children first (a pollable before its future, a stream before its
body, a body before its response), explicitly rather than left to the garbage collector:
the host traps a guest that drops a parent while a child lives.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Type

from componentize_py_types import Err, Ok
from wit_world.imports import outgoing_handler
from wit_world.imports import streams as wit_streams
from wit_world.imports import wasi_http_types as h

from .http import (
    ConnectFailed,
    ConnectionLimit,
    Denied,
    HttpError,
    InvalidRequest,
    Request,
    Response,
    Timeout,
    TooLarge,
    split_url,
)

#: Most bytes one `blocking-write-and-flush` may carry: WASI streams take 4096 per call.
_WRITE_CHUNK = 4096
#: Bytes asked for per `blocking-read`; the host caps the body's total size.
_READ_CHUNK = 64 * 1024

_METHODS: Dict[str, Callable[[], h.Method]] = {
    "GET": h.Method_Get,
    "HEAD": h.Method_Head,
    "POST": h.Method_Post,
    "PUT": h.Method_Put,
    "DELETE": h.Method_Delete,
    "CONNECT": h.Method_Connect,
    "OPTIONS": h.Method_Options,
    "TRACE": h.Method_Trace,
    "PATCH": h.Method_Patch,
}

#: Each `error-code` case: its WIT name (as the host's records spell it) and the error
#: class a step acts on; unlisted cases are a plain `HttpError`.
_ERROR_CODES: Dict[str, Tuple[str, Type[HttpError]]] = {
    "DnsTimeout": ("DNS-timeout", Timeout),
    "DnsError": ("DNS-error", ConnectFailed),
    "DestinationNotFound": ("destination-not-found", ConnectFailed),
    "DestinationUnavailable": ("destination-unavailable", ConnectFailed),
    "DestinationIpProhibited": ("destination-IP-prohibited", Denied),
    "DestinationIpUnroutable": ("destination-IP-unroutable", ConnectFailed),
    "ConnectionRefused": ("connection-refused", ConnectFailed),
    "ConnectionTerminated": ("connection-terminated", ConnectFailed),
    "ConnectionTimeout": ("connection-timeout", Timeout),
    "ConnectionReadTimeout": ("connection-read-timeout", Timeout),
    "ConnectionWriteTimeout": ("connection-write-timeout", Timeout),
    "ConnectionLimitReached": ("connection-limit-reached", ConnectionLimit),
    "TlsProtocolError": ("TLS-protocol-error", ConnectFailed),
    "TlsCertificateError": ("TLS-certificate-error", ConnectFailed),
    "TlsAlertReceived": ("TLS-alert-received", ConnectFailed),
    "HttpRequestDenied": ("HTTP-request-denied", Denied),
    "HttpRequestLengthRequired": ("HTTP-request-length-required", InvalidRequest),
    "HttpRequestBodySize": ("HTTP-request-body-size", InvalidRequest),
    "HttpRequestMethodInvalid": ("HTTP-request-method-invalid", InvalidRequest),
    "HttpRequestUriInvalid": ("HTTP-request-URI-invalid", InvalidRequest),
    "HttpRequestUriTooLong": ("HTTP-request-URI-too-long", InvalidRequest),
    "HttpRequestHeaderSectionSize": ("HTTP-request-header-section-size", InvalidRequest),
    "HttpRequestHeaderSize": ("HTTP-request-header-size", InvalidRequest),
    "HttpRequestTrailerSectionSize": ("HTTP-request-trailer-section-size", InvalidRequest),
    "HttpRequestTrailerSize": ("HTTP-request-trailer-size", InvalidRequest),
    "HttpResponseIncomplete": ("HTTP-response-incomplete", HttpError),
    "HttpResponseHeaderSectionSize": ("HTTP-response-header-section-size", HttpError),
    "HttpResponseHeaderSize": ("HTTP-response-header-size", HttpError),
    "HttpResponseBodySize": ("HTTP-response-body-size", TooLarge),
    "HttpResponseTrailerSectionSize": ("HTTP-response-trailer-section-size", HttpError),
    "HttpResponseTrailerSize": ("HTTP-response-trailer-size", HttpError),
    "HttpResponseTransferCoding": ("HTTP-response-transfer-coding", HttpError),
    "HttpResponseContentCoding": ("HTTP-response-content-coding", HttpError),
    "HttpResponseTimeout": ("HTTP-response-timeout", Timeout),
    "HttpUpgradeFailed": ("HTTP-upgrade-failed", HttpError),
    "HttpProtocolError": ("HTTP-protocol-error", HttpError),
    "LoopDetected": ("loop-detected", HttpError),
    "ConfigurationError": ("configuration-error", HttpError),
    "InternalError": ("internal-error", HttpError),
}


def http_error(code: Any) -> HttpError:
    """An `error-code` as the error class a step acts on, named as the host's records name it."""
    case = type(code).__name__.removeprefix("ErrorCode_")
    name, cls = _ERROR_CODES.get(case, (case, HttpError))
    value = getattr(code, "value", None)
    detail = None
    if isinstance(value, str):
        detail = value
    elif value is not None:
        detail = getattr(value, "rcode", None) or getattr(value, "alert_message", None)
    return cls(f"{name} ({detail})" if detail else name)


def _drop(resource: Any) -> None:
    resource.__exit__(None, None, None)


def send(request: Request) -> Response:
    target = split_url(request.url)
    outgoing = _outgoing_request(request, target.scheme, target.authority, target.path_with_query)
    options = _options(request)
    # An empty body is never opened, so the host sends none rather than an empty chunked
    # one (which some servers refuse on a GET).
    body = outgoing.body() if request.body else None
    try:
        future = outgoing_handler.handle(outgoing, options)
    except Err as e:
        if body is not None:
            _drop(body)
        raise http_error(e.value) from None
    # The body goes out after `handle`, while the host sends: written before, a large one
    # would fill the host's buffer with nobody reading it.
    sent: Optional[HttpError] = None
    if body is not None:
        sent = _write_body(body, request.body)
        try:
            h.OutgoingBody.finish(body, None)
        except Err as e:
            sent = sent or http_error(e.value)
    # A failed response explains a failed body write (a denied request closes the body
    # stream), so it is reported first.
    try:
        response = _wait(future)
    finally:
        _drop(future)
    try:
        if sent is not None:
            raise sent
        status = response.status()
        fields = response.headers()
        headers: List[Tuple[str, bytes]] = [(name, bytes(value)) for name, value in fields.entries()]
        _drop(fields)
        return Response(status, _read_body(response), headers)
    finally:
        _drop(response)


def _outgoing_request(request: Request, scheme: str, authority: str, path: str) -> Any:
    headers = h.Fields()
    for name, value in request.headers:
        try:
            headers.append(name, value)
        except Err as e:
            problem = {
                "HeaderError_InvalidSyntax": "is malformed",
                "HeaderError_Forbidden": "may not be set by a guest",
                "HeaderError_Immutable": "cannot be changed",
            }.get(type(e.value).__name__, "is not accepted")
            _drop(headers)
            raise InvalidRequest(f"header `{name}` {problem}") from None
    # The body's size is known: say it, rather than send it chunked (which some servers
    # read as an empty body).
    if request.body and not any(name.lower() == "content-length" for name, _ in request.headers):
        headers.append("content-length", str(len(request.body)).encode("ascii"))
    outgoing = h.OutgoingRequest(headers)
    known = _METHODS.get(request.method.upper())
    method: h.Method = known() if known else h.Method_Other(request.method)
    wit_scheme: h.Scheme
    if scheme == "http":
        wit_scheme = h.Scheme_Http()
    elif scheme == "https":
        wit_scheme = h.Scheme_Https()
    else:
        wit_scheme = h.Scheme_Other(scheme)
    steps: List[Tuple[str, Callable[[], None]]] = [
        ("the method", lambda: outgoing.set_method(method)),
        ("the scheme", lambda: outgoing.set_scheme(wit_scheme)),
        ("the host", lambda: outgoing.set_authority(authority)),
        ("the path", lambda: outgoing.set_path_with_query(path)),
    ]
    for what, apply in steps:
        try:
            apply()
        except Err:
            _drop(outgoing)
            raise InvalidRequest(f"{what} of {request.url!r} is not valid") from None
    return outgoing


def _options(request: Request) -> Any:
    """The request's options, if it asked for any timeout."""
    timeouts = [
        ("connect", request.connect_timeout, "set_connect_timeout"),
        ("first-byte", request.first_byte_timeout, "set_first_byte_timeout"),
        ("between-bytes", request.between_bytes_timeout, "set_between_bytes_timeout"),
    ]
    if all(seconds is None for _, seconds, _ in timeouts):
        return None
    options = h.RequestOptions()
    for what, seconds, setter in timeouts:
        if seconds is None:
            continue
        try:
            getattr(options, setter)(max(0, int(seconds * 1e9)))
        except Err:
            _drop(options)
            raise InvalidRequest(f"the host does not support a {what} timeout") from None
    return options


def _write_body(body: Any, data: bytes) -> Optional[HttpError]:
    try:
        stream = body.write()
    except Err:
        return HttpError("the request body stream was already taken")
    try:
        for start in range(0, len(data), _WRITE_CHUNK):
            stream.blocking_write_and_flush(data[start : start + _WRITE_CHUNK])
        return None
    except Err as e:
        return _stream_error(e.value, "request body")
    finally:
        _drop(stream)


def _wait(future: Any) -> Any:
    """Blocks until the response's head arrives or the request fails."""
    while True:
        ready = future.get()
        if ready is None:
            pollable = future.subscribe()
            pollable.block()
            _drop(pollable)
            continue
        if isinstance(ready, Err):
            raise HttpError("the response was already taken")
        inner = ready.value if isinstance(ready, Ok) else ready
        if isinstance(inner, Err):
            raise http_error(inner.value)
        return inner.value if isinstance(inner, Ok) else inner


def _read_body(response: Any) -> bytes:
    """Reads the body to its end; the host fails the read once the body passes its cap."""
    try:
        body = response.consume()
    except Err:
        raise HttpError("the response body was already taken") from None
    chunks: List[bytes] = []
    failed: Optional[HttpError] = None
    try:
        stream = body.stream()
    except Err:
        _drop(body)
        raise HttpError("the response body stream was already taken") from None
    try:
        while True:
            try:
                chunks.append(bytes(stream.blocking_read(_READ_CHUNK)))
            except Err as e:
                if not isinstance(e.value, wit_streams.StreamError_Closed):
                    failed = _stream_error(e.value, "response body")
                break
    finally:
        _drop(stream)
    # Trailers are not read: the host reports a body that failed through the stream.
    _drop(h.IncomingBody.finish(body))
    if failed is not None:
        raise failed
    return b"".join(chunks)


def _stream_error(error: Any, what: str) -> HttpError:
    if isinstance(error, wit_streams.StreamError_Closed):
        return HttpError(f"the {what} stream closed early")
    io_error = error.value
    try:
        code = h.http_error_code(io_error)
        return http_error(code) if code is not None else HttpError(f"{what}: {io_error.to_debug_string()}")
    finally:
        _drop(io_error)
