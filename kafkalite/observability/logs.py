"""Logging set-up: every line the broker process writes goes through structlog, and a flood of
the same failure is rate limited.

`configure_logging` is called once by the process that runs a broker (``kafkalite serve``);
`loop_exception_handler` is installed on its event loop by `KafkaServer.run`.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog


def configure_logging(level: str = "INFO", *, json_output: bool | None = None) -> None:
    """structlog: a console renderer on a terminal, JSON lines otherwise.

    Every line the process logs goes through the same renderer: structlog's own loggers, the
    standard library's `logging` (aiozk, asyncio, uvloop, aiohttp, any library), Python warnings
    (`logging.captureWarnings`), and the event loop's exception handler
    (`loop_exception_handler`, installed by `KafkaServer.run`). A traceback is a field of its
    line (`exception`), never loose text on stderr.
    """
    if json_output is None:
        json_output = not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=True)
    )
    numeric_level = logging.getLevelName(level.upper())
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[*shared, structlog.stdlib.add_logger_name],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    # Libraries' info lines (aiozk's connection chatter) stay out, as before they were routed
    # here (Python's last-resort handler showed warnings and up only).
    root.setLevel(max(numeric_level, logging.WARNING))
    logging.captureWarnings(True)


def loop_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler ("Task exception was never retrieved", a failing
    callback): one structlog line with the exception as a field, not plain text on stderr."""
    error = context.get("exception")
    fields: dict[str, Any] = {}
    for key in ("task", "future", "handle", "protocol", "transport"):
        if key in context:
            fields[key] = repr(context[key])[:300]
    structlog.get_logger("kafkalite.asyncio").error(
        context.get("message", "unhandled exception in the event loop"),
        exc_info=error if isinstance(error, BaseException) else None,
        **fields,
    )


class LogRateLimiter:
    """Lets one log line per kind through every ``interval_s`` and counts the ones held back
    in between, so a flood of the same failure (a client sending garbage in a loop) writes a
    line a minute, not a line a request."""

    def __init__(self, interval_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self._next_at: dict[object, float] = {}
        self._suppressed: dict[object, int] = {}

    def allow(self, kind: object) -> int | None:
        """None when a line of ``kind`` was let through less than ``interval_s`` ago (this one
        is counted); else how many were held back since that line."""
        now = self.clock()
        if now < self._next_at.get(kind, float("-inf")):
            self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
            return None
        self._next_at[kind] = now + self.interval_s
        return self._suppressed.pop(kind, 0)
