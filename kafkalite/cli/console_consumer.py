"""`kafkalite consume`: the records of a topic, one per line (kafka-console-consumer).

Every partition is read unless ``--partition`` names one: one Fetch per leader for all the
partitions it leads, the leaders asked concurrently. Starting positions: ``--offset`` (with
``--partition``), the group's committed offsets with ``--group``, else the log start
(``--from-beginning``) or the log end. With ``--group`` the tool is a member of that consumer
group (group_member.py): it consumes the partitions the range assignor gives it and commits the
positions it printed (every few seconds and on exit), so a second run with the same group
continues where the first stopped.

Records are printed in the order each partition returns them; partitions interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafkalite.cli.console_producer import TopicProblem, check_partition, explain, partitions_of
from kafkalite.cli.group_member import GroupMember
from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.client.errors import KafkaConnectionError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batches
from kafkalite.protocol.types import TopicPartition

FETCH_MAX_WAIT_MS = 500
PARTITION_MAX_BYTES = 1024 * 1024
COMMIT_INTERVAL_S = 5.0  # Kafka's auto.commit.interval.ms


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class ConsumeOptions:
    partition: int | None = None
    from_beginning: bool = False
    offset: int | None = None
    group: str | None = None
    max_messages: int | None = None
    timeout_ms: int | None = None


class ConsoleConsumer:
    def __init__(
        self,
        client: KafkaClient,
        topic: str,
        options: ConsumeOptions,
        emit: Callable[[ConsumedRecord], None],
    ) -> None:
        self.client = client
        self.topic = topic
        self.options = options
        self.emit = emit
        self.positions: dict[int, int] = {}
        self.count = 0
        self.member: GroupMember | None = None
        self._committed: dict[int, int] = {}

    # -- positions --------------------------------------------------------------------------

    async def _list_offset(self, partition: int, timestamp: int) -> int:
        response = await self.client.list_offsets(TopicPartition(self.topic, partition), timestamp)
        answer = response.topics[0].partitions[0]
        code = ErrorCode.of(int(answer.error_code))
        if code != ErrorCode.NONE:
            raise TopicProblem(f"{self.topic}-{partition}: {explain(code)}")
        return answer.offset

    async def _reset(self, partition: int) -> int:
        """Where a partition without a committed or given offset starts."""
        return await self._list_offset(partition, -2 if self.options.from_beginning else -1)

    async def _assign(self, count: int) -> None:
        options = self.options
        if self.member is not None:
            partitions = await self.member.join()
            committed = await self.member.committed(partitions)
        else:
            partitions = [options.partition] if options.partition is not None else range(count)
            committed = {}
        self.positions = {}
        for p in partitions:
            if options.offset is not None:
                self.positions[p] = options.offset
            elif p in committed:
                self.positions[p] = committed[p]
            else:
                self.positions[p] = await self._reset(p)
        self._committed = dict(committed)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> int:
        options = self.options
        count = await partitions_of(self.client, self.topic, create=False)
        if options.partition is not None:
            check_partition(self.topic, options.partition, count)
        heartbeat = None
        if options.group is not None:
            self.member = GroupMember(self.client, options.group, self.topic)
            heartbeat = asyncio.create_task(self.member.heartbeat_loop(), name="heartbeat")
        try:
            await self._assign(count)
            await self._consume()
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat
            if self.member is not None:
                await self._finish_group()
        return self.count

    async def _finish_group(self) -> None:
        assert self.member is not None
        with contextlib.suppress(KafkaConnectionError):
            await self._commit()
            await self.member.leave()

    def _uncommitted(self) -> dict[int, int]:
        return {p: o for p, o in self.positions.items() if self._committed.get(p) != o}

    def _done(self) -> bool:
        limit = self.options.max_messages
        return limit is not None and self.count >= limit

    async def _consume(self) -> None:
        last_data = time.monotonic()
        last_commit = time.monotonic()
        timeout_ms = self.options.timeout_ms
        while not self._done():
            if self.member is not None:
                if self.member.needs_rejoin:
                    with contextlib.suppress(KafkaConnectionError):
                        await self._commit()  # what was printed, before the partitions move
                    await self._assign(0)
                elif time.monotonic() - last_commit > COMMIT_INTERVAL_S:
                    await self._commit()
                    last_commit = time.monotonic()
            got = await self._fetch_round() if self.positions else 0
            if not self.positions:
                await asyncio.sleep(FETCH_MAX_WAIT_MS / 1000)  # assigned nothing: wait
            if got:
                last_data = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - last_data) * 1000 > timeout_ms:
                break

    async def _commit(self) -> None:
        assert self.member is not None
        pending = self._uncommitted()
        if pending and self.member.generation_id >= 0 and await self.member.commit(pending):
            self._committed.update(pending)

    async def _fetch_round(self) -> int:
        """One Fetch to each leader of the assigned partitions; the records printed."""
        by_leader: dict[int, list[int]] = {}
        for p in sorted(self.positions):
            leader = self.client.leader_for(TopicPartition(self.topic, p))
            if leader < 0:
                await self.client.refresh_metadata([self.topic])
                leader = self.client.leader_for(TopicPartition(self.topic, p))
            if leader < 0:
                continue  # no leader right now: asked again next round
            by_leader.setdefault(leader, []).append(p)
        if not by_leader:
            await asyncio.sleep(FETCH_MAX_WAIT_MS / 1000)
            return 0
        responses = await asyncio.gather(
            *(self._fetch(leader, ps) for leader, ps in by_leader.items()),
            return_exceptions=True,
        )
        printed = 0
        for response in responses:
            if isinstance(response, KafkaConnectionError):
                continue  # the leader is gone: the client forgot it, metadata is asked again
            if isinstance(response, BaseException):
                raise response
            for topic in response.responses:
                for answer in topic.partitions:
                    printed += await self._take(answer)
                    if self._done():
                        return printed
        return printed

    async def _fetch(self, leader: int, partitions: list[int]) -> Any:
        request = request_builder(
            ApiKey.FETCH,
            replica_id=-1,
            max_wait=datetime.timedelta(milliseconds=FETCH_MAX_WAIT_MS),
            min_bytes=1,
            max_bytes=PARTITION_MAX_BYTES * max(1, len(partitions)),
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": self.topic,
                    "partitions": [
                        {
                            "partition": p,
                            "current_leader_epoch": -1,
                            "fetch_offset": self.positions[p],
                            "log_start_offset": -1,
                            "partition_max_bytes": PARTITION_MAX_BYTES,
                        }
                        for p in partitions
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        try:
            return await self.client.send(ApiKey.FETCH, request, node_id=leader)
        except KafkaConnectionError:
            for p in partitions:
                self.client.partitions.pop(TopicPartition(self.topic, p), None)
            raise

    async def _take(self, answer: Any) -> int:
        p = answer.partition_index
        if p not in self.positions:
            return 0
        code = ErrorCode.of(int(answer.error_code))
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self.positions[p] = await self._reset(p)
            return 0
        if code != ErrorCode.NONE:
            if code.retriable:
                self.client.partitions.pop(TopicPartition(self.topic, p), None)
                return 0
            raise TopicProblem(f"{self.topic}-{p}: {explain(code)}")
        printed = 0
        position = self.positions[p]
        for header, records in iter_batches(answer.records or b""):
            for record in records:
                offset = header.base_offset + record.offset_delta
                if offset < position:
                    continue
                self.emit(ConsumedRecord(p, offset, record.key, record.value))
                printed += 1
                self.count += 1
                position = offset + 1
                self.positions[p] = position
                if self._done():
                    return printed
            position = max(position, header.next_offset)
            self.positions[p] = position
        return printed
