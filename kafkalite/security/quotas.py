"""Client quotas (KIP-13, KIP-55, KIP-124): Kafka's ClientQuotaManager, pure.

Quotas are entity configs: ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s) and
``request_percentage`` (percent of one request-handling thread's time), for a user, a client
id, or a user and client id, each with ``<default>`` entities. The quota of a request is the
first one set in Kafka's order (``/config/users/<u>/clients/<c>``, ``users/<u>/clients/<default>``,
``users/<u>``, ``users/<default>/clients/<c>``, ``users/<default>/clients/<default>``,
``users/<default>``, ``clients/<c>``, ``clients/<default>``), and usage is counted per the
entity that quota belongs to (all clients of a user share a user quota).

Usage is a rate over ``quota.window.num`` samples of ``quota.window.size.seconds`` (Kafka's
Rate with SampledStat: the current sample included, the window at least num-1 samples long).
When a recorded value takes the rate over the quota the request is throttled for
``(rate - quota) / quota * window`` (ClientQuotaManager.throttleTime): the response says so in
``throttle_time_ms`` and the connection is muted for that long (KIP-219).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEFAULT = "<default>"
QUOTA_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
MAX_THROTTLE_MS = 60_000

Entity = tuple[tuple[str, str], ...]
"""(("user", name), ("client-id", name)) in that order; DEFAULT for a default entity."""


def entity_of(user: str | None, client_id: str | None) -> Entity:
    parts = []
    if user is not None:
        parts.append(("user", user))
    if client_id is not None:
        parts.append(("client-id", client_id))
    return tuple(parts)


@dataclass
class _Rate:
    """Kafka's Rate over a SampledStat (see the module docstring)."""

    samples: int
    window_s: float
    starts: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def record(self, value: float, now: float) -> None:
        if not self.starts or now - self.starts[-1] >= self.window_s:
            self.starts.append(now)
            self.values.append(0.0)
            if len(self.starts) > self.samples:
                del self.starts[0], self.values[0]
        self.values[-1] += value

    def measure(self, now: float) -> tuple[float, float]:
        """(rate per second, window length in seconds)."""
        horizon = now - self.samples * self.window_s
        while self.starts and self.starts[0] + self.window_s < horizon:
            del self.starts[0], self.values[0]
        if not self.starts:
            return 0.0, self.window_s * (self.samples - 1)
        elapsed = max(now - self.starts[0], self.window_s * (self.samples - 1))
        return sum(self.values) / elapsed, elapsed


class QuotaManager:
    def __init__(
        self,
        samples: int = 11,
        window_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.samples = samples
        self.window_s = window_s
        self.clock = clock
        self.configs: dict[Entity, dict[str, float]] = {}
        self._sensors: dict[tuple[str, Entity], _Rate] = {}
        self._resolved: dict[tuple[str, str, str], tuple[Entity, float] | None] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.configs)

    def set_entity(self, entity: Entity, config: Mapping[str, str | float]) -> None:
        values = {}
        for key in QUOTA_KEYS:
            if key in config:
                try:
                    values[key] = float(config[key])
                except (TypeError, ValueError):
                    continue
        if values:
            self.configs[entity] = values
        else:
            self.configs.pop(entity, None)
        self._resolved.clear()

    def quota(self, kind: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        """(the entity whose quota applies, its value), None when no quota applies."""
        key = (kind, user, client_id)
        if key in self._resolved:
            return self._resolved[key]
        found = None
        for entity in (
            entity_of(user, client_id),
            entity_of(user, DEFAULT),
            entity_of(user, None),
            entity_of(DEFAULT, client_id),
            entity_of(DEFAULT, DEFAULT),
            entity_of(DEFAULT, None),
            entity_of(None, client_id),
            entity_of(None, DEFAULT),
        ):
            value = self.configs.get(entity, {}).get(kind)
            if value is not None:
                # usage is counted per the entity quoted, with default names made concrete
                concrete = tuple((t, user if t == "user" else client_id) for t, _ in entity)
                found = (concrete, value)
                break
        if len(self._resolved) > 100_000:
            self._resolved.clear()
        self._resolved[key] = found
        return found

    def record(self, kind: str, user: str, client_id: str, value: float) -> int:
        """Count `value` against the applicable quota; the throttle time in ms (0: none)."""
        if not self.configs:
            return 0
        found = self.quota(kind, user, client_id)
        if found is None:
            return 0
        entity, bound = found
        sensor = self._sensors.get((kind, entity))
        if sensor is None:
            sensor = self._sensors[(kind, entity)] = _Rate(self.samples, self.window_s)
        now = self.clock()
        sensor.record(value, now)
        if bound <= 0:
            return MAX_THROTTLE_MS
        rate, window = sensor.measure(now)
        if rate <= bound:
            return 0
        return min(MAX_THROTTLE_MS, int((rate - bound) / bound * window * 1000))
