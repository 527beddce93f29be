"""The clock the broker's replication logic reads, injected so tests can drive time.

``Time`` is the interface: wall-clock milliseconds (replica lag, producer expiration, fetch
session eviction) and ``call_later`` for delayed-operation timeouts. ``SystemTime`` is the
production implementation on the running asyncio loop; tests use a manual clock whose
``advance(ms)`` runs the callbacks that fall due, so timeouts fire without sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Time(Protocol):
    def milliseconds(self) -> int:
        """Wall-clock time in milliseconds since the epoch."""
        ...

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback`` once after ``delay_ms``; the handle cancels it."""
        ...


class SystemTime:
    """``Time`` backed by ``time.time()`` and the running loop's ``call_later``."""

    def milliseconds(self) -> int:
        return time.time_ns() // 1_000_000

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0, delay_ms) / 1000.0, callback)


SYSTEM_TIME = SystemTime()
