"""A keyed timer queue for sans-I/O state machines (Kafka's purgatories, without threads).

Each timer has a hashable key; setting a key again replaces its deadline, cancelling removes it.
``pop_due(now)`` returns the keys whose deadline has passed, earliest first (ties: the order they
were set). The heap is cleaned lazily: replaced or cancelled entries stay in it until they reach
the top, and are then dropped because their sequence number no longer matches.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class TimerQueue(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, K]] = []
        self._live: dict[K, tuple[int, int]] = {}  # key -> (deadline, seq)
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: K) -> bool:
        return key in self._live

    def set(self, key: K, deadline_ms: int) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline_ms, seq)
        heapq.heappush(self._heap, (deadline_ms, seq, key))
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._live):
            self._compact()

    def cancel(self, key: K) -> None:
        self._live.pop(key, None)

    def deadline(self, key: K) -> int | None:
        entry = self._live.get(key)
        return entry[0] if entry else None

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now_ms: int) -> list[K]:
        due: list[K] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return due
            _, _, key = heapq.heappop(self._heap)
            del self._live[key]
            due.append(key)

    def pop_one_due(self, now_ms: int) -> K | None:
        self._drop_stale()
        if not self._heap or self._heap[0][0] > now_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._live[key]
        return key

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            if self._live.get(key) == (deadline, seq):
                return
            heapq.heappop(heap)

    def _compact(self) -> None:
        self._heap = [(d, s, k) for k, (d, s) in self._live.items()]
        heapq.heapify(self._heap)
