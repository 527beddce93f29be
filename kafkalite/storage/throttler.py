"""A rate limit on observed work (Kafka's ``org.apache.kafka.storage.internals.utils.Throttler``),
used by the log cleaner to keep its reads and writes under ``log.cleaner.io.max.bytes.per.second``.

Work is counted in periods of at least ``check_interval_ms``. When a period ends with a rate
above the desired one, ``maybe_throttle`` returns the delay that brings the period's average
down to it (observed / desired rate - elapsed) and the next period starts after that delay. The
throttler does not sleep itself: the caller waits (the cleaner on its stop event, so a shutdown
is not held up by a long delay). Safe to call from several threads (the cleaner threads share
one throttler, as in Kafka).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

NANOS_PER_SECOND = 1_000_000_000


class Throttler:
    """``maybe_throttle(observed)`` -> seconds to wait before doing more (0.0: go on)."""

    def __init__(
        self,
        desired_rate_per_second: float,
        check_interval_ms: int = 300,
        clock_ns: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        if not desired_rate_per_second > 0:
            raise ValueError(f"desired rate must be positive, got {desired_rate_per_second}")
        self.desired_rate_per_second = desired_rate_per_second
        self.unlimited = math.isinf(desired_rate_per_second)
        self._check_interval_ns = check_interval_ms * 1_000_000
        self._clock_ns = clock_ns
        self._lock = threading.Lock()
        self._period_start_ns = clock_ns()
        self._observed_so_far = 0.0

    def maybe_throttle(self, observed: float) -> float:
        if self.unlimited:
            return 0.0
        with self._lock:
            self._observed_so_far += observed
            now = self._clock_ns()
            elapsed_ns = now - self._period_start_ns
            if elapsed_ns < 0:
                # Another caller's delay is running: wait it out too (Kafka's callers block on
                # the throttler's lock while one of them sleeps).
                return -elapsed_ns / NANOS_PER_SECOND
            if elapsed_ns <= self._check_interval_ns or self._observed_so_far <= 0:
                return 0.0
            delay = max(
                0.0,
                self._observed_so_far / self.desired_rate_per_second
                - elapsed_ns / NANOS_PER_SECOND,
            )
            self._period_start_ns = now + round(delay * NANOS_PER_SECOND)
            self._observed_so_far = 0.0
            return delay
