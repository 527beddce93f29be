"""Failed authentications, rate-limited per source address (a token bucket per address).

Each address starts with ``burst`` tokens and gets ``per_second`` back each second, up to
``burst``; a failed authentication (a wrong password, an unknown user) takes one. While an
address has less than one token its attempts are refused before any credential is checked, so
guessing costs the broker no key derivation: the admin API answers 429 with Retry-After, a
SASL listener fails the authentication (SASL_AUTHENTICATION_FAILED, after
``connection.failed.authentication.delay.ms``) as Kafka fails a bad password. Successful
authentications take nothing, so a client with the right password is refused only while its
address is over the limit.

Memory is bounded: at ``max_sources`` addresses the ones whose bucket has refilled are dropped,
and if that is not enough the table starts afresh (it errs towards letting attempts through).

The limits are ``failed.authentication.burst.per.ip`` (default 10; 0 turns the limit off) and
``failed.authentication.refill.ms`` (default 1000: one attempt a second once the burst is
spent); ``from_config`` reads them.

Pure: no I/O, a clock passed in; not thread-safe (one per event loop).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

DEFAULT_BURST = 10
DEFAULT_PER_SECOND = 1.0
DEFAULT_MAX_SOURCES = 10_000


class FailedAuthLimiter:
    __slots__ = ("burst", "per_second", "max_sources", "_clock", "_buckets")

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        per_second: float = DEFAULT_PER_SECOND,
        *,
        max_sources: int = DEFAULT_MAX_SOURCES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or per_second <= 0:
            raise ValueError("burst must be at least 1 and per_second positive")
        self.burst = burst
        self.per_second = per_second
        self.max_sources = max_sources
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}
        """address -> (tokens, when counted)."""

    @classmethod
    def from_config(cls, config: Any) -> FailedAuthLimiter | None:
        """The limiter a broker config asks for (duck-typed), None when it is turned off."""
        burst = getattr(config, "failed_authentication_burst_per_ip", DEFAULT_BURST)
        refill_ms = getattr(config, "failed_authentication_refill_ms", 1000)
        if not isinstance(burst, int) or burst <= 0:
            return None
        return cls(burst, 1000 / refill_ms)

    def _tokens(self, source: str, now: float) -> float:
        entry = self._buckets.get(source)
        if entry is None:
            return float(self.burst)
        tokens, at = entry
        return min(float(self.burst), tokens + (now - at) * self.per_second)

    def retry_after(self, source: str) -> float:
        """Seconds until `source` may try again; 0.0: it may now."""
        tokens = self._tokens(source, self._clock())
        if tokens >= 1.0:
            return 0.0
        return (1.0 - tokens) / self.per_second

    def failed(self, source: str) -> None:
        """Count one failed authentication from `source`."""
        now = self._clock()
        tokens = max(0.0, self._tokens(source, now) - 1.0)
        if source not in self._buckets and len(self._buckets) >= self.max_sources:
            self._prune(now)
        self._buckets[source] = (tokens, now)

    def _prune(self, now: float) -> None:
        full = [s for s in self._buckets if self._tokens(s, now) >= self.burst]
        for source in full:
            del self._buckets[source]
        if len(self._buckets) >= self.max_sources:
            self._buckets.clear()

    def __len__(self) -> int:
        return len(self._buckets)
