"""The stand-in for the host off wasm: what a test set, and a record of what the kind did."""

from __future__ import annotations

import hashlib
import hmac
import sys
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Mapping, Optional

from .http import HttpError, Request, Response
from .log import Level
from .step import Checkpoint, Heartbeat

#: What answers a test's outbound requests: a request in, a response out (or an `HttpError`).
HttpHandler = Callable[[Request], Response]


@dataclass(frozen=True)
class LogLine:
    """One line a kind logged: its level, its text, and the step that logged it (`None` in a hook)."""

    level: Level
    message: str
    step: Optional[str] = None


def placeholder(name: str) -> str:
    """A secret's placeholder, shaped like the host's with a fixed tag for its random one."""
    return "{{spindle-secret:%s:local}}" % name


@dataclass
class LocalHost:
    """Answers a kind's calls from what a test set and records them.

    With `echo`, log lines and stderr also go to the process's stderr (the default host
    for code run directly); `testing.run_job` records them quietly instead.
    """

    settings: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    http: Optional[HttpHandler] = None
    heartbeats: List[Heartbeat] = field(default_factory=list)
    echo: bool = True
    logs: List[LogLine] = field(default_factory=list)
    stderr_text: List[str] = field(default_factory=list)
    progress: List[Checkpoint] = field(default_factory=list)
    #: Every output a step of the job completed, for `prior-output` asks.
    outputs: Dict[str, bytes] = field(default_factory=dict)
    #: The step (or hook) running now, to tag log lines.
    running: Optional[str] = None

    def log(self, level: Level, message: str) -> None:
        self.logs.append(LogLine(level, message, self.running))
        if self.echo:
            print(f"[{level.value}] {message}", file=sys.stderr)

    def heartbeat(self, progress: Optional[Checkpoint]) -> Heartbeat:
        if progress is not None:
            self.progress.append(progress)
        # Scripted replies first (a test of a step's stop handling), then proceed.
        return self.heartbeats.pop(0) if self.heartbeats else Heartbeat.PROCEED

    def prior_output(self, step: str) -> Optional[bytes]:
        return self.outputs.get(step)

    def config_get(self, name: str) -> Optional[str]:
        return self.settings.get(name)

    def secret(self, name: str) -> Optional[str]:
        return placeholder(name) if name in self.secrets else None

    def hmac_sha256(self, name: str, message: bytes) -> Optional[bytes]:
        key = self.secrets.get(name)
        if key is None:
            return None
        return hmac.new(key.encode("utf-8"), message, hashlib.sha256).digest()

    def reveal(self, value: bytes) -> bytes:
        """`value` with each set secret's placeholder replaced by the secret, as the host does."""
        for name, secret in self.secrets.items():
            value = value.replace(placeholder(name).encode("utf-8"), secret.encode("utf-8"))
        return value

    def send(self, request: Request) -> Response:
        if self.http is None:
            raise HttpError("no outbound HTTP off a host (give `run_job` an `http` handler)")
        # The upstream sees what the host would send: secrets in place in the headers.
        revealed = replace(request, headers=[(name, self.reveal(value)) for name, value in request.headers])
        return self.http(revealed)

    def stderr(self, text: str) -> None:
        self.stderr_text.append(text)
        if self.echo:
            sys.stderr.write(text)
