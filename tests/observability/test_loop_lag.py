"""The event-loop lag monitor (kafkalite/observability/loop_lag.py): its windows against an
oracle with a fake clock, and the real probe on a loop that a callback holds."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.observability import (
    LAG_BUCKETS,
    LoopLagMonitor,
    event_loop_lag_max,
    loop_lag_monitor,
    start_loop_lag_monitor,
)
from tests.controller.shell_support import eventually

WINDOW = 10.0


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.floats(0, 25, allow_nan=False), st.floats(0, 5, allow_nan=False)),
        max_size=30,
    ),
    read_after=st.floats(0, 25, allow_nan=False),
)
def test_max_lag_covers_the_last_window_and_never_older_than_two(events, read_after):
    """Oracle: the reported max is at least every lag recorded within the last window and at
    most the largest recorded within the last two windows (0 when there was none)."""
    clock = [0.0]
    monitor = LoopLagMonitor(window=WINDOW, clock=lambda: clock[0])
    recorded = []
    for gap, lag in events:
        clock[0] += gap
        monitor.record(lag, clock[0])
        recorded.append((clock[0], lag))
    now = clock[0] + read_after
    reported = monitor.max_lag(now)
    recent = [lag for t, lag in recorded if now - t < WINDOW]
    older = [lag for t, lag in recorded if now - t < 2 * WINDOW]
    assert reported >= max(recent, default=0.0)
    assert reported <= max(older, default=0.0)
    assert monitor.count == len(events)
    assert sum(monitor.bucket_counts) == len(events)


def test_histogram_buckets():
    monitor = LoopLagMonitor(clock=lambda: 0.0)
    for lag in (0.0005, 0.002, 0.06, 0.06, 30.0):
        monitor.record(lag, 0.0)
    counts = dict(zip((*LAG_BUCKETS, "inf"), monitor.bucket_counts, strict=True))
    assert counts[0.001] == 1 and counts[0.005] == 1 and counts[0.1] == 2 and counts["inf"] == 1
    assert monitor.sum == 0.0005 + 0.002 + 0.06 + 0.06 + 30.0
    assert monitor.max_lag(0.0) == 30.0


async def test_a_callback_holding_the_loop_shows_as_lag():
    monitor = start_loop_lag_monitor()
    try:
        assert start_loop_lag_monitor() is monitor  # one per loop
        assert loop_lag_monitor() is monitor
        await eventually(lambda: monitor.count >= 3, message="probes")
        # The system under test: a callback that holds the loop for 300 ms.
        asyncio.get_running_loop().call_soon(time.sleep, 0.3)
        await eventually(lambda: monitor.max_lag() >= 0.25, message="lag seen")
        assert event_loop_lag_max() == monitor.max_lag()
        assert sum(monitor.bucket_counts[LAG_BUCKETS.index(0.25) :]) >= 1
    finally:
        monitor.stop()
    count = monitor.count
    await asyncio.sleep(0.05)  # probes would have run five times meanwhile
    assert monitor.count == count and not monitor.running


def test_the_monitor_does_not_keep_its_loop_alive():
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_started())
        assert loop_lag_monitor(loop) is not None
    finally:
        loop.close()
    ref = weakref.ref(loop)
    del loop
    gc.collect()
    assert ref() is None


async def _started():
    start_loop_lag_monitor()
    await asyncio.sleep(0.05)


def test_no_monitor_outside_a_loop():
    assert loop_lag_monitor() is None and event_loop_lag_max() is None
