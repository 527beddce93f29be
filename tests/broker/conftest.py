"""Shared helpers for broker tests: a manual clock, record batches, a replica manager on the
real storage LogManager in a temporary directory."""

from __future__ import annotations

import asyncio
import heapq
import itertools

import pytest

from kafkalite.broker.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.broker.types import LeaderAndIsrPartitionState
from kafkalite.protocol.records import Record, build_batch
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager


class MockTime:
    """A clock that only moves when told; ``advance`` runs the callbacks that fall due."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self.now = start_ms
        self._timers: list[tuple[int, int, _Timer]] = []
        self._seq = itertools.count()

    def milliseconds(self) -> int:
        return self.now

    def call_later(self, delay_ms, callback):
        timer = _Timer(callback)
        heapq.heappush(self._timers, (self.now + max(0, delay_ms), next(self._seq), timer))
        return timer

    def advance(self, ms: int) -> None:
        target = self.now + ms
        while self._timers and self._timers[0][0] <= target:
            due, _, timer = heapq.heappop(self._timers)
            self.now = max(self.now, due)
            if not timer.cancelled:
                timer.callback()
        self.now = target

    @property
    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)


class _Timer:
    def __init__(self, callback) -> None:
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


async def wait_until(condition, timeout: float = 10.0) -> None:
    """Let the event loop run until ``condition()`` holds; fail after ``timeout`` seconds.
    (Waiting for a condition with a deadline, never for a fixed time.)"""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not reached before the deadline")
        await asyncio.sleep(0.001)  # polling interval of the condition with a deadline


def batch(
    n: int = 1,
    *,
    value: bytes = b"v",
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp: int = 1_000,
) -> bytearray:
    records = [Record(offset_delta=i, timestamp_delta=i, key=None, value=value) for i in range(n)]
    return bytearray(
        build_batch(
            records,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            base_timestamp=timestamp,
        )
    )


def leader_state(
    topic="t",
    partition=0,
    *,
    leader=1,
    leader_epoch=0,
    isr=(1,),
    replicas=None,
    zk_version=0,
    controller_epoch=1,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic=topic,
        partition=partition,
        controller_epoch=controller_epoch,
        leader=leader,
        leader_epoch=leader_epoch,
        isr=tuple(isr),
        zk_version=zk_version,
        replicas=tuple(replicas if replicas is not None else isr),
    )


@pytest.fixture
def mock_time() -> MockTime:
    return MockTime()


@pytest.fixture
def log_manager(tmp_path):
    manager = LogManager([str(tmp_path)], LogConfig())
    manager.startup()
    yield manager
    manager.shutdown()


@pytest.fixture
def make_rm(mock_time, log_manager):
    def make(
        broker_id=1,
        *,
        min_isr=1,
        alter_isr=None,
        alter_isr_batch=None,
        metadata_cache=None,
        lag_ms=10_000,
    ):
        config = LogConfig(min_insync_replicas=min_isr)
        log_manager.default_config = config
        return ReplicaManager(
            broker_id,
            log_manager,
            ReplicaManagerConfig(replica_lag_time_max_ms=lag_ms),
            mock_time,
            alter_isr=alter_isr,
            alter_isr_batch=alter_isr_batch,
            metadata_cache=metadata_cache,
        )

    return make
