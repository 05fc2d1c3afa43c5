"""Lines for the host's structured log, tagged by the host with the job and step.

The host caps line length and lines per call, so log what an operator needs to explain
an outcome, not a trace of every iteration. Unlike a failure's code and message, log
lines may carry detail (upstream errors, ids).

    from spindle_guest import log
    log.info("capturing")
    log.warn(f"processor said {status}")

`HostLogHandler` routes the standard `logging` module here, for libraries that use it.
Off a host (a kind's tests, `testing.run_job`), lines go to the local stand-in.
"""

from __future__ import annotations

import enum
import logging

from . import _host

__all__ = ["Level", "log", "trace", "debug", "info", "warn", "error", "HostLogHandler"]


class Level(enum.Enum):
    """Severity of a guest log line."""

    TRACE = "trace"
    DEBUG = "debug"
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


def log(level: Level, message: str) -> None:
    """Writes one line at `level`."""
    _host.current().log(level, str(message))


def trace(message: str) -> None:
    log(Level.TRACE, message)


def debug(message: str) -> None:
    log(Level.DEBUG, message)


def info(message: str) -> None:
    log(Level.INFO, message)


def warn(message: str) -> None:
    log(Level.WARN, message)


def error(message: str) -> None:
    log(Level.ERROR, message)


def _level_of(record: logging.LogRecord) -> Level:
    if record.levelno >= logging.ERROR:
        return Level.ERROR
    if record.levelno >= logging.WARNING:
        return Level.WARN
    if record.levelno >= logging.INFO:
        return Level.INFO
    if record.levelno >= logging.DEBUG:
        return Level.DEBUG
    return Level.TRACE


class HostLogHandler(logging.Handler):
    """A `logging` handler writing each record as one host log line.

        logging.getLogger().addHandler(HostLogHandler())
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            log(_level_of(record), self.format(record))
        except Exception:  # A log line must never fail the step.
            self.handleError(record)
