"""The controller's watch on every topic's node: partitions added to a topic.

Kafka's controller registers one ``PartitionModificationsHandler`` per topic on
``/brokers/topics/<t>``; ZooKeeper's watches are one-shot callbacks, so a watch costs the
controller nothing while it waits. ``TopicNodeWatcher`` keeps that shape on asyncio: one task
for all topics, and per topic only the store's watch and a callback on it. (A task per topic,
with its coroutine, generator and awaited future, made a controller of 10,000 topics keep
10,000 suspended tasks: 5% of the broker's loop creating topics, 12% of it at a start with
10,000 topics.)

For each watched topic the watcher reads the node and arms its watch, in batches that are sent
at once (``CoordSession.get_data_and_watch_many``), with a yield between batches. When a watch
fires, the topic is read and watched again. ``on_modified(topic, data)`` is called for each
read that finds the node present with content other than what was last seen:

- the first read of a topic watched with ``known`` (the content its controller context was
  just loaded from) that finds exactly that is not a modification;
- a read that finds the node absent is none either (a deleted topic; its controller stops
  watching it), and a later read that finds it again is one.

A watch that fails with ``ConnectionLoss`` is read again once the session is back; with
``SessionExpired``, ``on_expired()`` is called once and the watcher stops; ``SessionClosed``
stops it. ``unwatch`` cancels the topic's watch; ``close`` stops everything.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import Callable, Iterable

import structlog

from kafkalite.coord.base import CoordSession, SessionState, Watch, WatchEvent
from kafkalite.coord.errors import ConnectionLoss, SessionClosed, SessionExpired
from kafkalite.zk import data as paths

log = structlog.get_logger(__name__)

READ_BATCH = 1024
"""Topics read and armed at once; the watcher yields to the loop between batches."""

_UNREAD = object()


class TopicNodeWatcher:
    """One task watching every topic's node (module docstring)."""

    def __init__(
        self,
        session: CoordSession,
        on_modified: Callable[[str, bytes], object],
        on_expired: Callable[[], object],
        *,
        name: str = "topic-watch",
    ) -> None:
        self.session = session
        self._on_modified = on_modified
        self._on_expired = on_expired
        self._name = name
        self._seen: dict[str, object] = {}
        """Topic -> the node's content last read (None: absent; ``_UNREAD``: not read yet)."""
        self._watches: dict[str, Watch] = {}
        self._due: dict[str, None] = {}
        """Topics to read (and watch) again, in order."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopped = False

    def __contains__(self, topic: str) -> bool:
        return topic in self._seen

    def __len__(self) -> int:
        return len(self._seen)

    def watch(self, topic: str, known: bytes | None = None) -> None:
        """Watch ``topic`` (no-op when watched already); ``known``: the content the caller
        holds, which the first read does not report."""
        if self._stopped or topic in self._seen:
            return
        self._seen[topic] = _UNREAD if known is None else known
        self._due[topic] = None
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)
        self._wake.set()

    def watch_many(self, topics: Iterable[tuple[str, bytes | None]]) -> None:
        """``watch(topic, known)`` for each (topic, known) of ``topics``, in one call."""
        if self._stopped:
            return
        seen, due = self._seen, self._due
        added = False
        for topic, known in topics:
            if topic in seen:
                continue
            seen[topic] = _UNREAD if known is None else known
            due[topic] = None
            added = True
        if added:
            if self._task is None:
                self._task = asyncio.get_running_loop().create_task(self._run(), name=self._name)
            self._wake.set()

    def unwatch(self, topic: str) -> None:
        self._seen.pop(topic, None)
        self._due.pop(topic, None)
        watch = self._watches.pop(topic, None)
        if watch is not None:
            watch.cancel()

    async def close(self) -> None:
        self._stopped = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        for watch in self._watches.values():
            watch.cancel()
        self._watches.clear()
        self._seen.clear()
        self._due.clear()

    # -- the task --

    def _fired(self, topic: str, watch: Watch, future: asyncio.Future[WatchEvent]) -> None:
        if self._watches.get(topic) is not watch:
            return  # unwatched (cancelled), or replaced
        del self._watches[topic]
        if future.cancelled():
            return
        error = future.exception()
        if isinstance(error, SessionClosed):
            return
        if isinstance(error, SessionExpired):
            self._expire()
            return
        # The node changed (or the connection was lost): read it again.
        self._due[topic] = None
        self._wake.set()

    def _expire(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._on_expired()

    async def _run(self) -> None:
        try:
            while not self._stopped:
                await self._wake.wait()
                self._wake.clear()
                while self._due and not self._stopped:
                    if not await self._read_batch():
                        state = await self.session.wait_for_state(SessionState.CONNECTED)
                        if state is SessionState.EXPIRED:
                            self._expire()
                        elif state is SessionState.CLOSED:
                            self._stopped = True
                    await asyncio.sleep(0)  # bulk work yields (docs/architecture.md)
        except SessionExpired:
            self._expire()
        except SessionClosed:
            self._stopped = True

    async def _read_batch(self) -> bool:
        """Read and watch the next batch of due topics; False when the connection was lost
        for some of them (they stay due)."""
        topics = list(itertools.islice(self._due, READ_BATCH))
        for topic in topics:
            del self._due[topic]
        try:
            results = await self.session.get_data_and_watch_many(
                [paths.topic_path(topic) for topic in topics]
            )
        except ConnectionLoss:
            for topic in topics:
                if topic in self._seen:
                    self._due[topic] = None
            return False
        connected = True
        for topic, result in zip(topics, results, strict=True):
            if isinstance(result, SessionExpired | SessionClosed):
                raise result
            if isinstance(result, ConnectionLoss):
                if topic in self._seen:
                    self._due[topic] = None
                connected = False
                continue
            if isinstance(result, Exception):
                # Not a state a topic's node can be in: stop watching it, as a watch task
                # ended by the error did.
                log.warning("topic watch failed", topic=topic, error=repr(result))
                self.unwatch(topic)
                continue
            data, watch = result
            seen = self._seen.get(topic, _UNREAD)
            if topic not in self._seen:
                watch.cancel()  # unwatched while it was read
                continue
            self._watches[topic] = watch
            watch.add_done_callback(functools.partial(self._fired, topic, watch))
            self._seen[topic] = data
            if data is not None and data != seen:
                self._on_modified(topic, data)
        return connected
