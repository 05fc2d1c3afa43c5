"""The asyncio client: the same calls as ``Client``, awaited."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Iterable, Optional

import httpx

from . import _core
from ._core import Event, Retry, Submitted
from .errors import TransportError
from .types import JobPage, JobView, LogLineView, LogPage, SubmissionView


class AsyncClient:
    """``async with AsyncClient("http://127.0.0.1:8080", token) as client: ...``"""

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        *,
        retry: Retry = Retry(),
        timeout: float = 330.0,
        transport: Optional[httpx.AsyncBaseTransport] = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.retry = retry
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def submit(
        self,
        kind: str,
        input: Any = None,
        *,
        idempotency_key: Optional[str] = None,
        traceparent: Optional[str] = None,
        priority: Optional[str] = None,
        run_at: Optional[str] = None,
        delay_secs: Optional[float] = None,
        lease_keys: Iterable[str] = (),
    ) -> Submitted:
        """Submits a job (see ``Client.submit``)."""
        request = _core.submission(
            kind, input, idempotency_key, traceparent, priority, run_at, delay_secs, lease_keys
        )
        status, job = await self._call(request)
        return Submitted(job=job, created=status == 201)

    async def job(self, job_id: str) -> JobView:
        """The job, with its steps and history."""
        return (await self._call(_core.Request("GET", f"/v1/jobs/{_core.segment(job_id)}")))[1]

    async def submission(self, submission_id: str) -> SubmissionView:
        """A submission ``spindle.submit`` made: queued, waiting, admitted (with its job) or
        refused (with its code). Every job call also takes its id in place of the job's."""
        return (await self._call(_core.Request("GET", f"/v1/submissions/{_core.segment(submission_id)}")))[1]

    async def wait(self, job_id: str, timeout: float = 60.0) -> JobView:
        """The job once it is final, or as it is when ``timeout`` seconds have passed."""
        deadline = time.monotonic() + timeout
        while True:
            left = min(max(deadline - time.monotonic(), 0.0), _core.LONGEST_HELD_WAIT)
            path = f"/v1/jobs/{_core.segment(job_id)}/wait"
            job = (await self._call(_core.Request("GET", path, params={"timeout": left})))[1]
            if job["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() >= deadline:
                return job

    async def signal(
        self, job_id: str, name: str, body: Any = None, *, idempotency_key: Optional[str] = None
    ) -> JobView:
        """Sends the signal ``name`` with a JSON body; one delivery per ``idempotency_key``."""
        return (await self._call(_core.signal(job_id, name, body, idempotency_key)))[1]

    async def cancel(self, job_id: str, reason: str) -> JobView:
        """Cancels the job, saying why; a running step is asked to stop."""
        path = f"/v1/jobs/{_core.segment(job_id)}/cancel"
        return (await self._call(_core.Request("POST", path, body=_core.encode({"reason": reason}))))[1]

    async def list(
        self,
        *,
        state: Optional[str] = None,
        kind: Optional[str] = None,
        parent: Optional[str] = None,
        priority: Optional[str] = None,
        q: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[int] = None,
    ) -> JobPage:
        """A page of the tenant's jobs, newest first; pass ``next_cursor`` as ``cursor``."""
        request = _core.listing(
            state=state, kind=kind, parent=parent, priority=priority, q=q, limit=limit, cursor=cursor
        )
        return (await self._call(request))[1]

    async def logs(self, job_id: str, step: Optional[str] = None) -> LogPage:
        """The job's log lines so far (only ``step``'s, when given)."""
        return (await self._call(_core.logs(job_id, step, follow=False)))[1]

    async def follow_logs(self, job_id: str, step: Optional[str] = None) -> AsyncIterator[LogLineView]:
        """Each log line as it is written, from the first, until the job is final."""
        async for name, data in self._stream(_core.logs(job_id, step, follow=True)):
            if name == "line":
                yield _core.decode(200, data.encode("utf-8"))
            elif name == "end":
                return

    async def events(self, job_id: str) -> AsyncIterator[Event]:
        """The job's events as they happen, from its first history entry, until it is final."""
        async for name, data in self._stream(_core.Request("GET", f"/v1/jobs/{_core.segment(job_id)}/events")):
            if name == "end":
                return
            event = _core.job_event(name, data)
            if event is not None:
                yield event

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        """Any other call of the API (``path`` from ``/v1/…``), with a JSON body when given."""
        encoded = None if body is None else _core.encode(body)
        return (await self._call(_core.Request(method, path, body=encoded)))[1]

    async def _send(self, request: _core.Request, stream: bool) -> httpx.Response:
        headers = dict(request.headers or {})
        if request.body is not None:
            headers["content-type"] = "application/json"
        if stream:
            headers["accept"] = "text/event-stream"
        attempt = 1
        while True:
            built = self._http.build_request(
                request.method, request.path, params=request.params, content=request.body, headers=headers
            )
            try:
                response = await self._http.send(built, stream=stream)
            except httpx.HTTPError as error:
                raise TransportError(f"cannot reach the host at {self.base_url}: {error}") from error
            if response.is_success:
                return response
            content = await response.aread()
            await response.aclose()
            error = _core.failure(response.status_code, content, response.headers)
            delay = self.retry.delay(attempt, response.status_code, _core.retry_after(response.headers))
            if delay is None:
                raise error
            await asyncio.sleep(delay)
            attempt += 1

    async def _call(self, request: _core.Request) -> Any:
        response = await self._send(request, stream=False)
        return response.status_code, _core.decode(response.status_code, response.content)

    async def _stream(self, request: _core.Request) -> AsyncIterator[tuple]:
        response = await self._send(request, stream=True)
        reader = _core.EventReader()
        try:
            async for line in response.aiter_lines():
                event = reader.line(line)
                if event is not None:
                    yield event
        except httpx.HTTPError as error:
            raise TransportError(f"the host's events broke off: {error}") from error
        finally:
            await response.aclose()
