"""Delayed operations and the purgatory that holds them (Kafka's DelayedOperationPurgatory).

A delayed operation (a produce waiting for acks=all, a fetch waiting for ``min_bytes``) is
watched under one or more keys (its partitions). Whoever changes a partition's state (an append,
a high-watermark move, a leadership change) calls ``check_and_complete(key)``; each operation
watching that key re-checks its condition in ``try_complete`` and, when met, completes. No
polling: an operation is examined only on an event for one of its keys, and once more when its
timer fires (``call_later`` on the injected clock), which force-completes it.

Invariants: an operation completes exactly once (``force_complete`` returns True only to the
first caller); a completed operation is no longer watched and its timer is cancelled. Waiters
await ``operation.future``; cancelling the waiter cancels the operation. Single event loop, not
thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable

from kafkalite.broker.clock import Time, TimerHandle


class DelayedOperation:
    """Subclasses implement ``try_complete`` (call ``force_complete`` when the condition holds,
    return its result) and ``on_complete`` (set ``self.future``'s result)."""

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self.future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._completed = False
        self._timer: TimerHandle | None = None
        self._purgatory: DelayedOperationPurgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        return self._completed

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after ``on_complete`` when the operation completed by timing out."""

    def _mark_completed(self) -> bool:
        """Stop the timer and the watching; False if the operation had completed already."""
        if self._completed:
            return False
        self._completed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        return True

    def force_complete(self) -> bool:
        if not self._mark_completed():
            return False
        self.on_complete()
        return True

    def cancel(self) -> None:
        """The waiter went away: stop watching without completing the future normally."""
        if self._mark_completed() and not self.future.done():
            self.future.cancel()


class DelayedOperationPurgatory:
    def __init__(self, name: str, time: Time) -> None:
        self.name = name
        self.time = time
        self._watchers: dict[Hashable, dict[int, DelayedOperation]] = {}
        self._delayed = 0

    def try_complete_else_watch(
        self, operation: DelayedOperation, keys: Iterable[Hashable]
    ) -> bool:
        """Complete ``operation`` now if it can, else watch it under ``keys`` until an event or
        its timeout completes it. Returns True if it completed now."""
        if operation.try_complete():
            return True
        operation._keys = tuple(keys)
        operation._purgatory = self
        for key in operation._keys:
            self._watchers.setdefault(key, {})[id(operation)] = operation
        self._delayed += 1
        operation._timer = self.time.call_later(operation.delay_ms, lambda: self._expire(operation))
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Re-check the operations watching ``key``; returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        for operation in list(watchers.values()):
            if not operation.is_completed and operation.try_complete():
                completed += 1
        return completed

    def _expire(self, operation: DelayedOperation) -> None:
        operation._timer = None
        if operation.force_complete():
            operation.on_expiration()

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in operation._keys:
            watchers = self._watchers.get(key)
            if watchers is not None:
                watchers.pop(id(operation), None)
                if not watchers:
                    del self._watchers[key]
        if operation._keys:
            self._delayed -= 1
        operation._keys = ()

    @property
    def delayed(self) -> int:
        """Operations waiting (Kafka's purgatory size metric)."""
        return self._delayed

    def watched(self, key: Hashable) -> int:
        return len(self._watchers.get(key, ()))

    def shutdown(self) -> None:
        for watchers in list(self._watchers.values()):
            for operation in list(watchers.values()):
                operation.force_complete()
