"""``ShareCoordinator``: the share-group state store on ``__share_group_state`` (Kafka's share
coordinator), serving Initialize/Read/Write/Delete/ReadSummary ShareGroupState.

The state of share-partition (group, topic id, partition) belongs to the leader of
``__share_group_state-<partition_for(...)>``. Every accepted write is appended to that partition
as a ShareSnapshot record (the whole state: start offset and the in-flight window as state
batches) before it is answered, so the log always holds the latest state of every key;
compaction keeps one record per key. On becoming leader of a partition (LeaderAndIsr) the
coordinator reads it back (ShareSnapshot replaces, ShareUpdate merges, a null value deletes)
before it answers for its keys: a broker restart or a coordinator failover resumes from the
persisted state. Until then requests for its keys get COORDINATOR_LOAD_IN_PROGRESS; keys of a
partition led elsewhere get NOT_COORDINATOR.

Fencing as Kafka: a write with a state epoch below the stored one is FENCED_STATE_EPOCH, a write
or read with a leader epoch below the stored one FENCED_LEADER_EPOCH.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

import structlog

from kafkalite.broker.internal_log import (
    apply_leadership_change,
    current_load,
    iter_leader_batches,
    start_load,
)
from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.share.partition import StateBatch
from kafkalite.share.records import (
    SHARE_GROUP_STATE_TOPIC_NAME,
    SNAPSHOT_KEY,
    ShareSnapshot,
    ShareStateKey,
    StateRecordError,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    partition_for,
)

log = structlog.get_logger(__name__)

LOAD_BUFFER_SIZE = 5 * 1024 * 1024
APPEND_TIMEOUT_MS = 5000

Key = tuple[str, uuid.UUID, int]


@dataclass(frozen=True, slots=True)
class StateResult:
    error: ErrorCode
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = -1
    state_batches: tuple[StateBatch, ...] = ()


class ShareCoordinator:
    def __init__(self, broker_id: int, replica_manager: Any, num_partitions: int = 50) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        self.num_partitions = num_partitions
        self.states: dict[Key, ShareSnapshot] = {}
        self.owned: set[int] = set()
        """Partitions led here and loaded."""
        self._loads: dict[int, asyncio.Task] = {}
        self._epochs: dict[int, int] = {}
        self._locks: dict[int, asyncio.Lock] = {}

    # -- ownership -------------------------------------------------------------------------

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return partition_for(group_id, topic_id, partition, self.num_partitions)

    def on_leadership_change(
        self, broker_id: int, states: Iterable[Any], errors: dict | None = None
    ) -> list[Any]:
        return apply_leadership_change(
            SHARE_GROUP_STATE_TOPIC_NAME,
            broker_id,
            states,
            errors,
            self.on_election,
            self.on_resignation,
        )

    def on_election(self, partition: int, epoch: int) -> asyncio.Task:
        self._epochs[partition] = epoch
        self.owned.discard(partition)
        return start_load(self._loads, partition, self._load(partition))

    def on_resignation(self, partition: int, epoch: int | None = None) -> None:
        current = self._epochs.get(partition)
        if epoch is not None and current is not None and epoch < current:
            return
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self.owned.discard(partition)
        for key in [k for k in self.states if self.partition_for(*k) == partition]:
            del self.states[key]

    def is_loaded(self, partition: int) -> bool:
        return partition in self.owned

    async def wait_loaded(self, partition: int) -> None:
        await current_load(self._loads, partition)

    async def _load(self, partition: int) -> None:
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC_NAME, partition)
        loaded = 0
        try:
            for header, records in iter_leader_batches(self.replica_manager, tp, LOAD_BUFFER_SIZE):
                if header.is_control:
                    continue
                for record in records:
                    if record.key is None:
                        continue
                    try:
                        self._replay(decode_key(record.key), record.value)
                    except StateRecordError as e:
                        log.warning("skipping a bad share state record", error=str(e))
                    loaded += 1
                if loaded % 1000 == 0:
                    await asyncio.sleep(0)
        except Exception as e:  # noqa: BLE001 - a failed load leaves the partition unowned
            log.warning("loading share state failed", partition=partition, error=str(e))
            return
        self.owned.add(partition)
        log.info("share state loaded", partition=partition, records=loaded)

    def _replay(self, key: ShareStateKey, value: bytes | None) -> None:
        k = (key.group_id, key.topic_id, key.partition)
        if value is None:
            self.states.pop(k, None)
        elif key.record_type == SNAPSHOT_KEY:
            self.states[k] = decode_snapshot(value)
        else:
            update = decode_update(value)
            base = self.states.get(k)
            if base is None:
                return
            self.states[k] = replace(
                base,
                leader_epoch=update.leader_epoch,
                start_offset=update.start_offset,
                state_batches=merge_batches(
                    base.state_batches, update.state_batches, update.start_offset
                ),
            )

    def _check_owner(self, key: Key) -> ErrorCode:
        partition = self.partition_for(*key)
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self._loads:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    async def _append(self, key: Key, value: bytes | None) -> ErrorCode:
        partition = self.partition_for(*key)
        tp = TopicPartition(SHARE_GROUP_STATE_TOPIC_NAME, partition)
        record_key = encode_key(ShareStateKey(SNAPSHOT_KEY, *key))
        batch = build_batch([Record(offset_delta=0, key=record_key, value=value)])
        results = await self.replica_manager.append_records(
            APPEND_TIMEOUT_MS,
            -1,
            {tp: bytearray(batch)},
            origin=AppendOrigin.COORDINATOR,
            internal_topics_allowed=True,
        )
        error = results[tp].error_code
        if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
            return ErrorCode.NOT_COORDINATOR
        return error

    def _lock(self, key: Key) -> asyncio.Lock:
        partition = self.partition_for(*key)
        lock = self._locks.get(partition)
        if lock is None:
            lock = self._locks[partition] = asyncio.Lock()
        return lock

    # -- the state APIs --------------------------------------------------------------------

    async def initialize(self, key: Key, state_epoch: int, start_offset: int) -> ErrorCode:
        error = self._check_owner(key)
        if error is not ErrorCode.NONE:
            return error
        async with self._lock(key):
            current = self.states.get(key)
            if current is not None and state_epoch < current.state_epoch:
                return ErrorCode.FENCED_STATE_EPOCH
            value = ShareSnapshot(
                snapshot_epoch=(current.snapshot_epoch + 1) if current else 0,
                state_epoch=state_epoch,
                leader_epoch=-1,
                start_offset=start_offset,
            )
            error = await self._append(key, encode_snapshot(value))
            if error is ErrorCode.NONE:
                self.states[key] = value
            return error

    def read(self, key: Key, leader_epoch: int = -1) -> StateResult:
        error = self._check_owner(key)
        if error is not ErrorCode.NONE:
            return StateResult(error)
        current = self.states.get(key)
        if current is None:
            return StateResult(ErrorCode.NONE)  # never initialised: start offset -1
        if 0 <= leader_epoch < current.leader_epoch:
            return StateResult(ErrorCode.FENCED_LEADER_EPOCH)
        return StateResult(
            ErrorCode.NONE,
            current.state_epoch,
            current.leader_epoch,
            current.start_offset,
            current.state_batches,
        )

    async def write(
        self,
        key: Key,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: Iterable[StateBatch],
        now_ms: int = -1,
    ) -> ErrorCode:
        error = self._check_owner(key)
        if error is not ErrorCode.NONE:
            return error
        async with self._lock(key):
            current = self.states.get(key)
            if current is not None:
                if state_epoch < current.state_epoch:
                    return ErrorCode.FENCED_STATE_EPOCH
                if leader_epoch < current.leader_epoch:
                    return ErrorCode.FENCED_LEADER_EPOCH
            value = ShareSnapshot(
                snapshot_epoch=(current.snapshot_epoch + 1) if current else 0,
                state_epoch=state_epoch,
                leader_epoch=leader_epoch,
                start_offset=start_offset,
                create_timestamp=current.create_timestamp if current else now_ms,
                write_timestamp=now_ms,
                state_batches=tuple(batches),
            )
            error = await self._append(key, encode_snapshot(value))
            if error is ErrorCode.NONE:
                self.states[key] = value
            return error

    async def delete(self, key: Key) -> ErrorCode:
        error = self._check_owner(key)
        if error is not ErrorCode.NONE:
            return error
        async with self._lock(key):
            error = await self._append(key, None)
            if error is ErrorCode.NONE:
                self.states.pop(key, None)
            return error

    def read_summary(self, key: Key, leader_epoch: int = -1) -> StateResult:
        result = self.read(key, leader_epoch)
        return replace(result, state_batches=())


def merge_batches(
    base: tuple[StateBatch, ...], update: tuple[StateBatch, ...], start_offset: int
) -> tuple[StateBatch, ...]:
    """``base`` with ``update``'s batches laid over it, below ``start_offset`` dropped."""
    states: dict[int, tuple[int, int]] = {}
    for batch in (*base, *update):
        for offset in range(max(batch.first_offset, start_offset), batch.last_offset + 1):
            states[offset] = (batch.delivery_state, batch.delivery_count)
    out: list[StateBatch] = []
    for offset in sorted(states):
        state, count = states[offset]
        last = out[-1] if out else None
        if (
            last is not None
            and last.last_offset == offset - 1
            and (last.delivery_state, last.delivery_count) == (state, count)
        ):
            out[-1] = StateBatch(last.first_offset, offset, state, count)
        else:
            out.append(StateBatch(offset, offset, state, count))
    return tuple(out)
