"""The host a step talks to: the real one inside a component, a stand-in everywhere else.

Every capability a kind reaches (log, heartbeat, prior outputs, config, outbound HTTP,
stderr) goes through the `Host` installed here. The component glue (`_component`)
installs the one over the generated bindings; `testing` installs a local one per run; a
kind's code run directly gets a quiet default that logs to stderr.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Iterator, Optional, Protocol

if TYPE_CHECKING:
    from .http import Request, Response
    from .log import Level
    from .step import Checkpoint, Heartbeat


class Host(Protocol):
    """What the `host`, `config` and `wasi:http/outgoing-handler` imports offer a step."""

    def log(self, level: "Level", message: str) -> None: ...
    def heartbeat(self, progress: Optional["Checkpoint"]) -> "Heartbeat": ...
    def prior_output(self, step: str) -> Optional[bytes]: ...
    def config_get(self, name: str) -> Optional[str]: ...
    def secret(self, name: str) -> Optional[str]: ...
    def hmac_sha256(self, name: str, message: bytes) -> Optional[bytes]: ...
    def send(self, request: "Request") -> "Response": ...
    def stderr(self, text: str) -> None: ...


_current: Optional[Host] = None


def current() -> Host:
    """The installed host, or a default local one (nothing set, logs to stderr)."""
    global _current
    if _current is None:
        from ._local import LocalHost

        _current = LocalHost()
    return _current


def install(host: Host) -> None:
    """Makes `host` the one every capability goes through."""
    global _current
    _current = host


@contextlib.contextmanager
def using(host: Host) -> Iterator[Host]:
    """Installs `host` for the block, then puts the previous one back."""
    global _current
    previous = _current
    _current = host
    try:
        yield host
    finally:
        _current = previous
