"""Event-loop lag: no callback may hold the loop for long (docs/architecture.md). A
`LoopLagMonitor` schedules a timer every `LAG_PROBE_INTERVAL_S` and notes how late it runs:
when a callback holds the loop for D seconds, the probe due meanwhile runs up to D late (D
minus the part of the probe interval that had already passed, so a block shorter than the
interval may be seen shorter than it was; timers have a resolution of about 1 ms). It keeps:

- the largest lag of the current and of the previous window of `LAG_WINDOW_S` (`max_lag()`:
  the worst stall of the last 10-20 s, 0 after a quiet window);
- a histogram of every probe's lag over `LAG_BUCKETS` (cumulative; a benchmark compares two
  scrapes to count stalls above 50 ms in a phase).

One monitor per event loop, however many brokers share it (in-process test clusters):
`start_loop_lag_monitor()` is idempotent, and the monitor stops with its loop. Its own cost
is one timer callback per interval (about 5 µs on uvloop, 0.05% of a core at 10 ms).
"""

from __future__ import annotations

import asyncio
import bisect
import collections
import time
import weakref
from collections.abc import Callable

LAG_PROBE_INTERVAL_S = 0.01
LAG_WINDOW_S = 10.0
LAG_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class LoopLagMonitor:
    """How late a periodic timer runs on one event loop (see the module docstring).

    Not thread-safe: called on its loop only. `record()` is the pure part (tests feed it)."""

    def __init__(
        self,
        interval: float = LAG_PROBE_INTERVAL_S,
        window: float = LAG_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self.window = window
        self._clock = clock
        self._window_start = clock()
        self._current_max = 0.0
        self._previous_max = 0.0
        self.bucket_counts = [0] * (len(LAG_BUCKETS) + 1)
        """Non-cumulative: one count per LAG_BUCKETS bound, the last one for +Inf."""
        self.count = 0
        self.sum = 0.0
        self._running = False
        self._generation = 0
        self._due = 0.0
        self.runs: collections.deque[tuple[float, float]] = collections.deque(maxlen=16)
        """(due, ran) of the last probes: the stall reporter (loop_stall.py) reads them from
        its own thread (a deque's append and iteration are atomic under the GIL)."""

    # ------------------------------------------------------------------ measuring

    def record(self, lag: float, now: float) -> None:
        """One probe that ran `lag` seconds late at `now`."""
        elapsed = now - self._window_start
        if elapsed >= self.window:
            # Windows are consecutive slices of time: the one before `now`'s is the previous
            # one only if no whole window passed without a probe.
            passed = int(elapsed // self.window)
            self._previous_max = self._current_max if passed == 1 else 0.0
            self._current_max = 0.0
            self._window_start += passed * self.window
        if lag > self._current_max:
            self._current_max = lag
        self.count += 1
        self.sum += lag
        self.bucket_counts[bisect.bisect_left(LAG_BUCKETS, lag)] += 1

    def max_lag(self, now: float | None = None) -> float:
        """The largest lag seen in the current and the previous window, in seconds."""
        now = self._clock() if now is None else now
        elapsed = now - self._window_start
        if elapsed >= 2 * self.window:
            return 0.0
        if elapsed >= self.window:
            return self._current_max
        return max(self._current_max, self._previous_max)

    # ------------------------------------------------------------------ running

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self._running:
            self._running = True
            self._generation += 1
            self._schedule(loop, self._generation)

    def stop(self) -> None:
        self._running = False

    @property
    def running(self) -> bool:
        return self._running

    @property
    def due(self) -> float:
        """When the next probe is due (the monitor's clock); read by the stall reporter."""
        return self._due

    # Only the timer handle refers to the loop (the monitor does not keep a closed loop alive).

    def _schedule(self, loop: asyncio.AbstractEventLoop, generation: int) -> None:
        self._due = self._clock() + self.interval
        loop.call_later(self.interval, self._tick, loop, generation)

    def _tick(self, loop: asyncio.AbstractEventLoop, generation: int) -> None:
        if not self._running or generation != self._generation:
            return  # stopped (and perhaps restarted: that started its own timer)
        now = self._clock()
        self.runs.append((self._due, now))
        self.record(max(0.0, now - self._due), now)
        self._schedule(loop, generation)


_monitors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopLagMonitor] = (
    weakref.WeakKeyDictionary()
)


def start_loop_lag_monitor(loop: asyncio.AbstractEventLoop | None = None) -> LoopLagMonitor:
    """The running (or given) loop's monitor, started on first use."""
    loop = loop or asyncio.get_running_loop()
    monitor = _monitors.get(loop)
    if monitor is None:
        monitor = _monitors[loop] = LoopLagMonitor()
    monitor.start(loop)
    return monitor


def loop_lag_monitor(loop: asyncio.AbstractEventLoop | None = None) -> LoopLagMonitor | None:
    """The running (or given) loop's monitor, if one was started."""
    if loop is None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
    return _monitors.get(loop)


def event_loop_lag_max(loop: asyncio.AbstractEventLoop | None = None) -> float | None:
    """The longest event-loop stall of the last 10-20 s in seconds; None when not monitored."""
    monitor = loop_lag_monitor(loop)
    return None if monitor is None else monitor.max_lag()
