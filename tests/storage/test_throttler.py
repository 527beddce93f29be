"""The cleaner's I/O throttle (Kafka's Throttler) on a fake clock."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.storage.throttler import NANOS_PER_SECOND, Throttler

MS = 1_000_000  # ns


class NanoClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += round(seconds * NANOS_PER_SECOND)


@given(
    rate=st.sampled_from([1_000.0, 50_000.0, 1e6]),
    steps=st.lists(
        st.tuples(st.integers(0, 200_000), st.integers(0, 400 * MS)), min_size=1, max_size=60
    ),
)
def test_completed_periods_never_exceed_the_rate(rate, steps):
    """Work of `observed` units taking `work_ns` each step, waiting what the throttler says:
    whenever a period closes, everything counted so far took at least observed / rate."""
    clock = NanoClock()
    throttler = Throttler(rate, check_interval_ms=100, clock_ns=clock)
    counted = 0  # units in periods the throttler has closed
    pending = 0
    for observed, work_ns in steps:
        clock.now += work_ns
        pending += observed
        before = throttler._period_start_ns
        delay = throttler.maybe_throttle(observed)
        assert delay >= 0
        closed = throttler._period_start_ns != before
        clock.sleep(delay)
        if closed:
            counted, pending = counted + pending, 0
            # One nanosecond of rounding per closed period at most.
            assert counted / rate <= clock.now / NANOS_PER_SECOND + len(steps) / NANOS_PER_SECOND
        else:
            assert delay == 0


def test_a_fast_period_is_slowed_to_the_rate_and_a_slow_one_is_not():
    clock = NanoClock()
    throttler = Throttler(1000.0, check_interval_ms=100, clock_ns=clock)
    assert throttler.maybe_throttle(500) == 0.0  # the period is not over yet
    clock.now += 200 * MS
    # 500 + 500 units in 0.2 s: 1 s at 1000/s, so 0.8 s more.
    assert throttler.maybe_throttle(500) == pytest.approx(0.8)
    clock.sleep(0.8)
    clock.now += 1000 * MS
    assert throttler.maybe_throttle(100) == 0.0  # 100 units in 1 s: under the rate


def test_callers_during_a_delay_wait_for_its_end():
    clock = NanoClock()
    throttler = Throttler(1000.0, check_interval_ms=100, clock_ns=clock)
    clock.now += 200 * MS
    assert throttler.maybe_throttle(1000) == pytest.approx(0.8)
    clock.now += 300 * MS  # another thread, 0.3 s into the first one's delay
    assert throttler.maybe_throttle(10) == pytest.approx(0.5)


def test_an_unlimited_rate_never_waits_and_a_rate_must_be_positive():
    clock = NanoClock()
    throttler = Throttler(math.inf, clock_ns=clock)
    clock.now += 10**12
    assert throttler.maybe_throttle(10**15) == 0.0
    for bad in (0.0, -1.0):
        with pytest.raises(ValueError, match="positive"):
            Throttler(bad)
