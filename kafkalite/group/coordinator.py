"""The group coordinator as request handlers see it: async methods over the pure core.

``GroupCoordinator`` wraps ``GroupCoordinatorCore`` (all decisions) with the three effects the
core asks for:

- **responses**: each request gets a token and a future; the core names the token when the
  answer is known (possibly during a later call: a JoinGroup completes when the rebalance does);
- **appends**: records for ``__consumer_offsets`` go to the injected ``GroupLogWriter``, one task
  per append, started in the order the core produced them (so they reach the log in that order:
  the writer must put its records in the log before its first suspension point, as
  ``ReplicaManager.append_records`` does); the outcome goes back to the core;
- **timers**: one timer, armed at the core's ``next_deadline()`` through the injected ``Time``
  (``kafkalite.broker.clock``), calls ``tick()``.

Ownership follows leadership of ``__consumer_offsets`` partitions: ``on_election(partition,
epoch)`` (this broker became leader; Kafka's handleGroupImmigration) reads the partition back
through the writer and rebuilds its groups and offsets; ``on_resignation(partition, epoch)``
(handleGroupEmigration) forgets them and answers their waiting requests with NOT_COORDINATOR.

Everything runs on one event loop; the core is never re-entered. ``startup()`` must be called
from the running loop.

How request handlers map Kafka's request versions onto these calls (as Kafka's KafkaApis does):

- JoinGroup: ``require_known_member_id = version >= 4``; ``rebalance_timeout_ms = -1`` for v0
  (the session timeout is used); ``group_instance_id`` v5+; ``reason`` v8+;
  ``supports_skip_assignment = version >= 9``. Response: ``protocol_name`` None -> "" before v7.
- SyncGroup: ``protocol_type``/``protocol_name`` None before v5; assignments as
  ``{member_id: bytes}``.
- LeaveGroup: v0-v2 one ``MemberIdentity(member_id)`` (top-level error = the member's error
  when the result's error is NONE); v3+ the batch.
- OffsetCommit: build each partition with ``OffsetAndMetadata.from_request(offset,
  leader_epoch, metadata, now_ms, commit_timestamp (v1), retention_time_ms (v2-v4))``;
  ``generation_id`` -1 and ``member_id`` "" for simple/admin commits.
- OffsetFetch: ``partitions=None`` when the request asks for all topics; v8+ loops over groups;
  ``require_stable`` v7+.
- FindCoordinator: ``partition_for(key)`` names the ``__consumer_offsets`` partition whose
  leader is the coordinator (the topic is created on first use with
  ``offset_config.offsets_topic_configs()``).
- LeaderAndIsr / StopReplica: ``on_leadership_change(broker_id, states, errors)`` /
  ``on_resignation(partition, epoch)`` for ``__consumer_offsets`` partitions.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

import structlog

from kafkalite.broker.clock import SYSTEM_TIME, Time, TimerHandle
from kafkalite.broker.internal_log import apply_leadership_change, current_load, start_load
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME, GroupConfig, OffsetConfig
from kafkalite.group.consumer_group import HeartbeatResult
from kafkalite.group.core import (
    Append,
    Effects,
    GroupCoordinatorCore,
    JoinGroupResult,
    LeaveGroupResult,
    MemberIdentity,
    OffsetDeleteResult,
    OffsetFetchPartition,
    SyncGroupResult,
    Token,
)
from kafkalite.group.metadata import GroupOverview, GroupSummary, OffsetAndMetadata
from kafkalite.group.records import RecordFormatError
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition

log = structlog.get_logger(__name__)

#: records loaded between two yields to the event loop while rebuilding a partition
LOAD_YIELD_EVERY = 1000


class TxnLoadRecord(NamedTuple):
    """A record of a transactional batch, as ``GroupLogWriter.read`` yields it."""

    offset: int
    key: bytes
    value: bytes | None
    producer_id: int


class TxnLoadMarker(NamedTuple):
    """A transaction marker, as ``GroupLogWriter.read`` yields it."""

    offset: int
    producer_id: int
    commit: bool


class GroupLogWriter(Protocol):
    """Access to the ``__consumer_offsets`` partitions this broker leads."""

    async def append(
        self,
        partition: int,
        records: Sequence[tuple[bytes, bytes | None]],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[ErrorCode, int | None]:
        """Append ``records`` (key, value-or-None) as one batch to the partition and wait until
        written as the offsets topic requires (``offsets.commit.required.acks``). Returns the
        error (NONE on success) and the offset of the first record. The records must be in
        the log before the first suspension point, so appends keep the order of the calls. A
        producer id makes the batch transactional (TxnOffsetCommit)."""
        ...

    def read(
        self, partition: int
    ) -> AsyncIterator[tuple[int, bytes, bytes | None] | TxnLoadRecord | TxnLoadMarker]:
        """Every record of the partition, in offset order: (offset, key, value); those of
        transactional batches as ``TxnLoadRecord``, transaction markers as ``TxnLoadMarker``."""
        ...


class GroupCoordinator:
    def __init__(
        self,
        broker_id: int,
        writer: GroupLogWriter,
        group_config: GroupConfig | None = None,
        offset_config: OffsetConfig | None = None,
        time: Time = SYSTEM_TIME,
    ) -> None:
        self.writer = writer
        self.time = time
        self.core = GroupCoordinatorCore(
            broker_id, group_config, offset_config, time_ms=time.milliseconds
        )
        self._tokens = itertools.count()
        self._futures: dict[Token, asyncio.Future] = {}
        self._timer: TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._tasks: set[asyncio.Task] = set()
        self._loads: dict[int, asyncio.Task] = {}

    # ------------------------------------------------------------------ lifecycle

    @property
    def group_config(self) -> GroupConfig:
        return self.core.group_config

    @property
    def offset_config(self) -> OffsetConfig:
        return self.core.offset_config

    @property
    def is_active(self) -> bool:
        return self.core.is_active

    def startup(self) -> None:
        self.core.startup()
        self._rearm()

    async def shutdown(self) -> None:
        for task in self._loads.values():
            task.cancel()
        self._apply(self.core.shutdown())
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for fut in self._futures.values():
            if not fut.done():
                fut.cancel()
        self._futures.clear()
        tasks = list(self._tasks) + list(self._loads.values())
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def partition_for(self, group_id: str) -> int:
        return self.core.partition_for(group_id)

    # ------------------------------------------------------------------ plumbing

    def _new_request(self) -> tuple[int, asyncio.Future]:
        token = next(self._tokens)
        fut = asyncio.get_running_loop().create_future()
        self._futures[token] = fut
        return token, fut

    async def _await(self, token: int, fut: asyncio.Future, effects: Effects):
        self._apply(effects)
        try:
            return await fut
        finally:
            self._futures.pop(token, None)

    def _apply(self, effects: Effects) -> None:
        for token, response in effects.responses:
            fut = self._futures.get(token)
            if fut is not None and not fut.done():
                fut.set_result(response)
        for append in effects.appends:
            self._spawn(self._write(append))
        self._rearm()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _write(self, append: Append) -> None:
        try:
            if append.producer_id >= 0:
                error, base_offset = await self.writer.append(
                    append.partition,
                    append.records,
                    producer_id=append.producer_id,
                    producer_epoch=append.producer_epoch,
                )
            else:
                error, base_offset = await self.writer.append(append.partition, append.records)
        except KafkaError as e:
            error, base_offset = e.error_code, None
        except asyncio.CancelledError:
            error, base_offset = ErrorCode.NOT_COORDINATOR, None
        except Exception:
            log.exception("offsets topic append failed", partition=append.partition)
            error, base_offset = ErrorCode.UNKNOWN_SERVER_ERROR, None
        self._apply(self.core.on_append_complete(append.append_id, error, base_offset))

    def _rearm(self) -> None:
        deadline = self.core.next_deadline()
        if deadline == self._timer_deadline and (self._timer is not None or deadline is None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is not None:
            self._timer = self.time.call_later(
                max(0, deadline - self.time.milliseconds()), self._on_timer
            )

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        self._apply(self.core.tick())

    # ------------------------------------------------------------------ partition ownership

    def on_election(self, partition: int, epoch: int) -> asyncio.Future:
        """This broker leads ``__consumer_offsets-<partition>`` at ``epoch``: load its groups.
        Requests for them get COORDINATOR_LOAD_IN_PROGRESS until the returned task ends. A
        repeated election at the same (or an older) epoch changes nothing, and neither does a
        newer epoch of a partition already loaded here (the groups stay as they are: waiting
        joins and syncs, members that joined since the last stored generation)."""
        if not self.core.is_newer_epoch(partition, epoch) or self.core.continue_leading(
            partition, epoch
        ):
            return current_load(self._loads, partition)
        self._apply(self.core.begin_loading(partition, epoch))
        return start_load(self._loads, partition, self._load(partition, epoch))

    async def _load(self, partition: int, epoch: int) -> None:
        loaded = skipped = 0
        try:
            async for item in self.writer.read(partition):
                try:
                    if isinstance(item, TxnLoadMarker):
                        self.core.load_txn_marker(partition, item.producer_id, item.commit)
                        continue
                    if isinstance(item, TxnLoadRecord):
                        self.core.load_txn_record(
                            partition, item.producer_id, item.offset, item.key, item.value
                        )
                        loaded += 1
                        continue
                    offset, key, value = item
                    self.core.load_record(partition, offset, key, value)
                except RecordFormatError as e:
                    # record types of other coordinators (share, streams groups) are not ours
                    skipped += 1
                    log.warning(
                        "skipping unreadable offsets record",
                        partition=partition,
                        offset=item[0],
                        error=str(e),
                    )
                loaded += 1
                if loaded % LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading offsets partition failed", partition=partition, epoch=epoch)
            self._apply(self.core.unload_partition(partition, epoch))
            return
        self._apply(self.core.complete_loading(partition, epoch))
        log.info(
            "loaded offsets partition",
            partition=partition,
            epoch=epoch,
            records=loaded,
            skipped=skipped,
        )

    def on_resignation(self, partition: int, epoch: int | None = None) -> None:
        """Leadership of ``__consumer_offsets-<partition>`` moved away (or the replica was
        stopped): forget its groups. A resignation older than the current election is ignored."""
        if not self.core.is_current_resignation(partition, epoch):
            return
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self._apply(self.core.unload_partition(partition, epoch))

    def on_leadership_change(
        self, broker_id: int, states: Iterable, errors: dict | None = None
    ) -> list[asyncio.Future]:
        """Apply the ``__consumer_offsets`` part of a LeaderAndIsr request that the
        ReplicaManager accepted (Kafka's KafkaApis.onLeadershipChange): partitions this broker
        now leads are loaded, the others unloaded. ``states`` are LeaderAndIsrPartitionState
        (topic, partition, leader, leader_epoch); ``errors`` the per-TopicPartition result codes
        (a partition with an error is left alone). Returns the load tasks."""
        return apply_leadership_change(
            GROUP_METADATA_TOPIC_NAME,
            broker_id,
            states,
            errors,
            self.on_election,
            self.on_resignation,
        )

    def on_deleted_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """Topic partitions were deleted: drop the committed offsets for them."""
        self._apply(self.core.delete_partitions(partitions))

    # ------------------------------------------------------------------ requests

    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Sequence[tuple[str, bytes]],
        reason: str | None = None,
        supports_skip_assignment: bool = False,
        topics: Any = None,
    ) -> JoinGroupResult:
        """JoinGroup; ``require_known_member_id`` = (version >= 4), ``supports_skip_assignment``
        = (version >= 9), ``rebalance_timeout_ms`` -1 for v0. Completes when the rebalance does."""
        token, fut = self._new_request()
        effects = self.core.join_group(
            token,
            group_id,
            member_id,
            group_instance_id,
            require_known_member_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            protocol_type,
            list(protocols),
            reason,
            supports_skip_assignment,
            topics,
        )
        return await self._await(token, fut, effects)

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> SyncGroupResult:
        token, fut = self._new_request()
        effects = self.core.sync_group(
            token,
            group_id,
            generation_id,
            member_id,
            group_instance_id,
            protocol_type,
            protocol_name,
            assignments,
        )
        return await self._await(token, fut, effects)

    async def heartbeat(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        token, fut = self._new_request()
        effects = self.core.heartbeat(token, group_id, member_id, group_instance_id, generation_id)
        return await self._await(token, fut, effects)

    async def leave_group(
        self, group_id: str, members: Iterable[MemberIdentity]
    ) -> LeaveGroupResult:
        token, fut = self._new_request()
        effects = self.core.leave_group(token, group_id, members)
        return await self._await(token, fut, effects)

    async def commit_offsets(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
        api_version: int = 8,
    ) -> dict[TopicPartition, ErrorCode]:
        token, fut = self._new_request()
        effects = self.core.commit_offsets(
            token, group_id, member_id, group_instance_id, generation_id, offsets, api_version
        )
        return await self._await(token, fut, effects)

    def fetch_offsets(
        self,
        group_id: str,
        partitions: Iterable[TopicPartition] | None = None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetFetchPartition]]:
        return self.core.fetch_offsets(
            group_id, partitions, require_stable, member_id, member_epoch
        )

    async def consumer_group_heartbeat(
        self, group_id: str, member_id: str, member_epoch: int, **kwargs: Any
    ) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (KIP-848); see ``GroupCoordinatorCore.consumer_group_heartbeat``
        for the arguments. Answered once the group's records are written."""
        token, fut = self._new_request()
        effects = self.core.consumer_group_heartbeat(
            token, group_id, member_id, member_epoch, **kwargs
        )
        return await self._await(token, fut, effects)

    def consumer_group_describe(self, group_id: str) -> tuple[ErrorCode, str | None, Any]:
        return self.core.consumer_group_describe(group_id)

    def consumer_lag(
        self, group_id: str, high_watermark: Callable[[TopicPartition], int | None]
    ) -> tuple[ErrorCode, dict[TopicPartition, tuple[int, int | None]]]:
        """Committed offset and lag (high watermark - committed, never negative; None when the
        high watermark is unknown here) of every partition the group committed, for the admin
        API. ``high_watermark`` is typically the ReplicaManager's view or a ListOffsets answer."""
        error, offsets = self.core.fetch_offsets(group_id)
        result: dict[TopicPartition, tuple[int, int | None]] = {}
        for tp, data in offsets.items():
            hw = high_watermark(tp)
            result[tp] = (data.offset, None if hw is None or hw < 0 else max(hw - data.offset, 0))
        return error, result

    async def commit_transactional_offsets(
        self,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        token, fut = self._new_request()
        effects = self.core.commit_transactional_offsets(
            token,
            group_id,
            producer_id,
            producer_epoch,
            member_id,
            group_instance_id,
            generation_id,
            offsets,
        )
        return await self._await(token, fut, effects)

    def complete_transaction(self, producer_id: int, partitions: list[int], commit: bool) -> None:
        """Markers of ``producer_id`` were written to these ``__consumer_offsets`` partitions."""
        self._apply(self.core.complete_transaction(producer_id, partitions, commit))

    async def delete_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> OffsetDeleteResult:
        token, fut = self._new_request()
        effects = self.core.delete_offsets(token, group_id, partitions)
        return await self._await(token, fut, effects)

    def list_groups(
        self, states_filter: Iterable[str] | None = None, types_filter: Iterable[str] | None = None
    ) -> tuple[ErrorCode, list[GroupOverview]]:
        return self.core.list_groups(states_filter, types_filter)

    def describe_group(self, group_id: str, api_version: int = 0) -> tuple[ErrorCode, GroupSummary]:
        return self.core.describe_group(group_id, api_version)

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        token, fut = self._new_request()
        effects = self.core.delete_groups(token, group_ids)
        return await self._await(token, fut, effects)
