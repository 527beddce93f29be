"""Drive the asyncio GroupCoordinator by hand: a manual clock, an in-memory writer, and the
client side of JoinGroup/SyncGroup (forming a whole group)."""

from __future__ import annotations

import asyncio
import heapq
import itertools

from kafkalite.group.config import GroupConfig, OffsetConfig
from kafkalite.group.coordinator import GroupCoordinator
from kafkalite.group.metadata import GroupState
from kafkalite.protocol.consumer_protocol import encode_subscription
from kafkalite.protocol.errors import ErrorCode

PARTITIONS = 3
PROTOCOLS = [("range", encode_subscription(["t"]))]


class ManualTime:
    """``kafkalite.broker.clock.Time`` that moves only on ``advance``."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms
        self._timers: list = []
        self._seq = itertools.count()

    def milliseconds(self) -> int:
        return self.now

    def call_later(self, delay_ms, callback):
        handle = _Handle(callback)
        heapq.heappush(self._timers, (self.now + max(0, delay_ms), next(self._seq), handle))
        return handle

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while self._timers and self._timers[0][0] <= target:
            due, _, handle = heapq.heappop(self._timers)
            self.now = max(self.now, due)
            if not handle.cancelled:
                handle.callback()
        self.now = target


class _Handle:
    def __init__(self, callback) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class MemoryWriter:
    """``GroupLogWriter`` over lists; ``gate`` holds appends/reads until set."""

    def __init__(self) -> None:
        self.partitions: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.append_gate = asyncio.Event()
        self.append_gate.set()
        self.read_gate = asyncio.Event()
        self.read_gate.set()
        self.fail_with: Exception | None = None

    async def append(self, partition, records):
        log = self.partitions.setdefault(partition, [])
        base = len(log)
        if self.fail_with is not None:
            raise self.fail_with
        for i, (k, v) in enumerate(records):
            log.append((base + i, k, v))
        await self.append_gate.wait()
        return ErrorCode.NONE, base

    async def read(self, partition):
        await self.read_gate.wait()
        for record in list(self.partitions.get(partition, [])):
            yield record


async def until(predicate, timeout=5.0):
    """Let the loop run until ``predicate()`` holds (fails after ``timeout`` seconds)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0)  # polling: the loop runs until the predicate or the timeout


async def start(
    writer=None, time=None, delay_ms=3000
) -> tuple[GroupCoordinator, MemoryWriter, ManualTime]:
    writer = writer or MemoryWriter()
    time = time or ManualTime()
    coordinator = GroupCoordinator(
        1,
        writer,
        GroupConfig(group_initial_rebalance_delay_ms=delay_ms),
        OffsetConfig(offsets_topic_num_partitions=PARTITIONS),
        time,
    )
    coordinator.startup()
    for p in range(PARTITIONS):
        await coordinator.on_election(p, 0)
    return coordinator, writer, time


def join(c: GroupCoordinator, group: str, member_id: str = "", **kw):
    return asyncio.ensure_future(
        c.join_group(
            group,
            member_id,
            kw.get("instance"),
            True,
            "client",
            "/127.0.0.1",
            30_000,
            kw.get("session_ms", 10_000),
            "consumer",
            PROTOCOLS,
        )
    )


async def form_group(c: GroupCoordinator, time: ManualTime, group: str, n: int):
    ids = []
    for _ in range(n):
        r = await join(c, group)
        assert r.error is ErrorCode.MEMBER_ID_REQUIRED
        ids.append(r.member_id)
    tasks = [join(c, group, mid) for mid in ids]
    await until(lambda: c.core.groups[group].num_members_awaiting_join == n)
    # newcomers extend the initial rebalance delay (up to the rebalance timeout)
    while c.core.groups[group].state is GroupState.PREPARING_REBALANCE:
        time.advance(3001)
    await until(lambda: all(t.done() for t in tasks))
    results = [t.result() for t in tasks]
    leader = results[0].leader_id
    generation = results[0].generation_id
    syncs = [
        asyncio.ensure_future(
            c.sync_group(
                group,
                generation,
                mid,
                None,
                "consumer",
                "range",
                {m: m.encode() for m in ids} if mid == leader else {},
            )
        )
        for mid in ids
    ]
    sync_results = await asyncio.gather(*syncs)
    assert [r.assignment for r in sync_results] == [m.encode() for m in ids]
    return ids, generation, leader
