"""Partition ceilings: how many partitions one request, one topic and the whole cluster may have.

Why: every partition costs every broker memory, files and start-up time, and the controller work
proportional to it, all on one event loop. Unbounded, one CreateTopics asking for 8,388,610
partitions (a single mutated byte) held a broker's loop for minutes and grew it to 6 GB. Kafka is
bounded too: on ZooKeeper by a topic's assignment znode having to fit in jute.maxbuffer (1 MiB),
on KRaft by ReplicationControlManager refusing a CreateTopics of more than 10,000 partitions
(POLICY_VIOLATION, "Excessively large number of partitions per request.") and any operation of
more than 10,000 records (a CreatePartitions that large: POLICY_VIOLATION, "Unable to perform
excessively large batch operation.").

The ceilings (config.py): ``max.partitions.per.request`` (10,000), ``max.partitions.per.topic``
(10,000), ``max.partitions`` (20,000, the whole cluster).

Errors, as Kafka's: INVALID_PARTITIONS for a count that is wrong in itself (not positive, not
above the topic's current count); POLICY_VIOLATION for a valid count the broker's policy refuses
(over a ceiling). A request over ``max.partitions.per.request`` is refused whole (every topic
answered POLICY_VIOLATION, nothing created), as KRaft refuses it.

Invariants:

- Counts are checked from the raw request before anything proportional to them is built (no
  assignment, no znode, no log); validate-only requests are checked the same way.
- ``max.partitions`` counts what exists (this broker's metadata: every topic's partitions) plus
  what this broker is creating and its metadata does not show yet (``PartitionBudget``'s
  reservations), so one request cannot slip past it by creating topics concurrently. Creations
  through different brokers at the same moment each see only their own reservations until the
  metadata reaches them, and can together overshoot by what they create at once (at most a
  request's worth each).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkalite.protocol.errors import PolicyViolationError

TOO_MANY_PER_REQUEST = "Excessively large number of partitions per request."
"""KRaft's message for a CreateTopics over its 10,000-partition batch."""
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."
"""KRaft's message for a CreatePartitions over its 10,000-record batch."""

RESERVATION_HOLD_S = 120.0
"""How long a reservation counts while this broker's metadata does not show the topic's new
partitions (a creation the controller never finished must not hold the budget for good)."""
_EXACT_BELOW = 64
"""Up to this many open reservations, each check re-reads them all against the metadata; with
more, at most every ``_PRUNE_EVERY_S`` (in between the count errs high: a creation may be
refused early, never let past the ceiling)."""
_PRUNE_EVERY_S = 0.1


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    per_request: int = 10_000
    per_topic: int = 10_000
    cluster: int = 20_000

    @classmethod
    def of(cls, config: Any) -> PartitionLimits:
        default = cls()
        return cls(
            getattr(config, "max_partitions_per_request", default.per_request),
            getattr(config, "max_partitions_per_topic", default.per_topic),
            getattr(config, "max_partitions", default.cluster),
        )

    def check_topic(self, topic: str, partitions: int) -> None:
        """Raise ``PolicyViolationError`` when one topic would have more than ``per_topic``."""
        if partitions > self.per_topic:
            raise PolicyViolationError(
                f"Topic '{topic}' would have {partitions} partitions, more than "
                f"max.partitions.per.topic ({self.per_topic})."
            )


def requested_partitions(topics: Iterable[Any], default_partitions: int) -> int:
    """The partitions a CreateTopics asks for, counted from the raw request as KRaft's
    ``validateTotalNumberOfPartitions`` does: a manual assignment counts its entries, -1 the
    default, a positive count itself, anything else nothing (it is refused on its own)."""
    total = 0
    for topic in topics:
        assignments = getattr(topic, "assignments", None) or ()
        if assignments:
            total += len(assignments)
        elif topic.num_partitions == -1:
            total += default_partitions
        elif topic.num_partitions > 0:
            total += topic.num_partitions
    return total


class PartitionBudget:
    """``max.partitions`` for one broker: the partitions its metadata shows plus the ones it is
    creating (reservations, until the metadata shows them or ``RESERVATION_HOLD_S`` passes)."""

    def __init__(
        self,
        limits: PartitionLimits,
        metadata_cache: Any,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limits = limits
        self.cache = metadata_cache
        self._clock = clock
        # topic -> (the partition count it is being brought to, when the reservation lapses)
        self._pending: dict[str, tuple[int, float]] = {}
        self._in_flight = 0  # what the reservations add to the metadata's count
        self._next_prune = 0.0

    def _shown(self, topic: str) -> int:
        if self.cache is None:
            return 0
        return self.cache.num_partitions(topic) or 0

    def _existing(self) -> int:
        if self.cache is None:
            return 0
        return int(self.cache.partition_count())

    def _prune(self) -> None:
        now = self._clock()
        if len(self._pending) > _EXACT_BELOW and now < self._next_prune:
            return
        self._next_prune = now + _PRUNE_EVERY_S
        in_flight = 0
        for topic, (target, lapses) in list(self._pending.items()):
            missing = target - self._shown(topic)
            if missing <= 0 or now >= lapses:
                del self._pending[topic]
            else:
                in_flight += missing
        self._in_flight = in_flight

    def counted(self) -> int:
        """The partitions that count against ``max.partitions`` now."""
        self._prune()
        return self._existing() + self._in_flight

    def reserve(self, topic: str, target: int, *, hold: bool = True, alongside: int = 0) -> int:
        """Account for bringing ``topic`` to ``target`` partitions, or raise
        ``PolicyViolationError`` when that would go past ``max.partitions``; returns the
        partitions it adds. ``hold=False`` (validate-only) checks without reserving, counting
        ``alongside`` more (what the request's earlier topics would add)."""
        counted = self.counted() + alongside
        pending = self._pending.get(topic)
        adding = target - max(self._shown(topic), pending[0] if pending is not None else 0)
        if counted + adding > self.limits.cluster:
            raise PolicyViolationError(
                f"Adding {adding} partitions would bring the cluster to {counted + adding}, more "
                f"than max.partitions ({self.limits.cluster})."
            )
        if hold and adding > 0:
            self._pending[topic] = (target, self._clock() + RESERVATION_HOLD_S)
            self._in_flight += adding
        return max(0, adding)

    def release(self, topic: str) -> None:
        """Drop ``topic``'s reservation (its creation failed)."""
        entry = self._pending.pop(topic, None)
        if entry is not None:
            self._in_flight = max(0, self._in_flight - (entry[0] - self._shown(topic)))


def partition_budget(services: Any) -> PartitionBudget:
    """The broker's budget, kept in its services (one per broker, shared by the Kafka handlers
    and the admin API)."""
    budget = services.extra.get("partition_budget")
    if budget is None or budget.cache is not services.metadata_cache:
        budget = PartitionBudget(PartitionLimits.of(services.config), services.metadata_cache)
        services.extra["partition_budget"] = budget
    return budget
