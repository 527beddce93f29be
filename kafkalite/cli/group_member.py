"""One consumer-group member over the Kafka protocol, for `kafkalite consume --group`.

The simplest correct member, as Kafka's classic consumer protocol wants it: FindCoordinator,
JoinGroup (protocol type ``consumer``, one assignor: ``range``; a second JoinGroup with the
member id the coordinator hands out, KIP-394), SyncGroup (the leader computes the range
assignment for every member from their subscriptions), Heartbeat every third of the session
timeout from a background task, OffsetFetch for the starting positions, OffsetCommit of the
positions consumed, LeaveGroup at the end. A heartbeat or commit answered REBALANCE_IN_PROGRESS,
ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID sets ``needs_rejoin``; the consumer commits what it can
and joins again. Not safe to call concurrently except ``heartbeat_loop`` beside the others.
"""

from __future__ import annotations

import asyncio
import datetime
import struct
from collections.abc import Iterable, Mapping
from typing import Any

from kafkalite.cli.console_producer import TopicProblem, explain, partitions_of
from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.client.errors import KafkaConnectionError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    assigned_partitions,
    encode_subscription,
    subscribed_topics,
)
from kafkalite.protocol.errors import ErrorCode

ASSIGNOR = "range"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
COORDINATOR_WAIT_S = 30.0
REJOIN_ERRORS = frozenset(
    {ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID}
)
COORDINATOR_ERRORS = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def encode_assignment(assignment: Mapping[str, Iterable[int]]) -> bytes:
    """A ConsumerProtocolAssignment v0: version, [topic, [partition]], user_data (null)."""
    out = bytearray(struct.pack(">hi", 0, len(assignment)))
    for topic, partitions in sorted(assignment.items()):
        name = topic.encode("utf-8")
        ps = sorted(partitions)
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += struct.pack(">i", -1)
    return bytes(out)


def range_assignment(
    subscriptions: Mapping[str, Iterable[str]], partition_counts: Mapping[str, int]
) -> dict[str, dict[str, list[int]]]:
    """Kafka's RangeAssignor: per topic, its subscribers sorted by member id get consecutive
    ranges, the first ``count % members`` one partition more."""
    out: dict[str, dict[str, list[int]]] = {member: {} for member in subscriptions}
    topics = {t for ts in subscriptions.values() for t in ts}
    for topic in sorted(topics):
        members = sorted(m for m, ts in subscriptions.items() if topic in ts)
        count = partition_counts.get(topic, 0)
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            if n:
                out[member][topic] = list(range(start, start + n))
            start += n
    return out


class GroupMember:
    def __init__(self, client: KafkaClient, group_id: str, topic: str) -> None:
        self.client = client
        self.group_id = group_id
        self.topic = topic
        self.coordinator = -1
        self.member_id = ""
        self.generation_id = -1
        self.needs_rejoin = True

    async def _send(self, api_key: ApiKey, **values: Any) -> Any:
        """A request to the coordinator; a lost connection forgets it (found again next)."""
        if self.coordinator < 0:
            await self.find_coordinator()
        try:
            return await self.client.send(
                api_key, request_builder(api_key, **values), node_id=self.coordinator
            )
        except KafkaConnectionError:
            self.coordinator = -1
            raise

    async def find_coordinator(self) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COORDINATOR_WAIT_S
        while True:
            response = await self.client.send(
                ApiKey.FIND_COORDINATOR,
                request_builder(
                    ApiKey.FIND_COORDINATOR,
                    key=self.group_id,
                    key_type=0,
                    coordinator_keys=[self.group_id],
                ),
            )
            answer = response.coordinators[0] if hasattr(response, "coordinators") else response
            code = ErrorCode.of(int(answer.error_code))
            if code == ErrorCode.NONE:
                self.coordinator = answer.node_id
                return
            if code == ErrorCode.INVALID_GROUP_ID:
                raise TopicProblem(f"{self.group_id!r} is not a valid group id")
            if not code.retriable or loop.time() > deadline:
                raise TopicProblem(f"group {self.group_id!r}: no coordinator: {explain(code)}")
            await asyncio.sleep(0.2)

    async def join(self) -> list[int]:
        """Join (or rejoin) the group; the partitions of ``topic`` assigned to this member."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + REBALANCE_TIMEOUT_MS / 1000 + COORDINATOR_WAIT_S
        while True:
            if loop.time() > deadline:
                raise TopicProblem(f"group {self.group_id!r}: could not join in time")
            response = await self._send(
                ApiKey.JOIN_GROUP,
                group_id=self.group_id,
                session_timeout=datetime.timedelta(milliseconds=SESSION_TIMEOUT_MS),
                rebalance_timeout=datetime.timedelta(milliseconds=REBALANCE_TIMEOUT_MS),
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocols=[{"name": ASSIGNOR, "metadata": encode_subscription([self.topic])}],
                reason=None,
            )
            code = ErrorCode.of(int(response.error_code))
            if code == ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: join again with this id
                self.member_id = response.member_id
                continue
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if code in COORDINATOR_ERRORS:
                self.coordinator = -1
                await asyncio.sleep(0.2)
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if code != ErrorCode.NONE:
                raise TopicProblem(f"group {self.group_id!r}: JoinGroup: {explain(code)}")
            self.member_id = response.member_id
            self.generation_id = response.generation_id
            assignments = []
            if response.leader == self.member_id:
                assignments = await self._assign(response.members)
            sync = await self._send(
                ApiKey.SYNC_GROUP,
                group_id=self.group_id,
                generation_id=self.generation_id,
                member_id=self.member_id,
                group_instance_id=None,
                protocol_type=CONSUMER_PROTOCOL_TYPE,
                protocol_name=ASSIGNOR,
                assignments=assignments,
            )
            code = ErrorCode.of(int(sync.error_code))
            if code in REJOIN_ERRORS or code in COORDINATOR_ERRORS:
                if code in COORDINATOR_ERRORS:
                    self.coordinator = -1
                continue
            if code != ErrorCode.NONE:
                raise TopicProblem(f"group {self.group_id!r}: SyncGroup: {explain(code)}")
            self.needs_rejoin = False
            mine = assigned_partitions(sync.assignment) or []
            return sorted(p for topic, ps in mine if topic == self.topic for p in ps)

    async def _assign(self, members: Iterable[Any]) -> list[dict[str, Any]]:
        """The leader's part: the range assignment of every member's subscribed topics."""
        subscriptions = {m.member_id: subscribed_topics(m.metadata) or set() for m in members}
        counts = {}
        for topic in sorted({t for ts in subscriptions.values() for t in ts}):
            try:
                counts[topic] = await partitions_of(self.client, topic, create=False)
            except TopicProblem:
                counts[topic] = 0  # Kafka's assignor skips topics without metadata too
        plan = range_assignment(subscriptions, counts)
        return [
            {"member_id": member, "assignment": encode_assignment(assignment)}
            for member, assignment in sorted(plan.items())
        ]

    async def committed(self, partitions: Iterable[int]) -> dict[int, int]:
        """The group's committed offsets of these partitions (absent: none committed)."""
        wanted = [{"name": self.topic, "partition_indexes": sorted(partitions)}]
        response = await self._send(
            ApiKey.OFFSET_FETCH,
            group_id=self.group_id,
            topics=wanted,
            groups=[{"group_id": self.group_id, "topics": wanted}],
            require_stable=False,
        )
        group = response.groups[0] if hasattr(response, "groups") else response
        code = ErrorCode.of(int(getattr(group, "error_code", 0)))
        if code != ErrorCode.NONE:
            raise TopicProblem(f"group {self.group_id!r}: OffsetFetch: {explain(code)}")
        out = {}
        for topic in group.topics:
            for p in topic.partitions:
                code = ErrorCode.of(int(p.error_code))
                if code != ErrorCode.NONE:
                    raise TopicProblem(f"group {self.group_id!r}: OffsetFetch: {explain(code)}")
                if p.committed_offset >= 0:
                    out[p.partition_index] = p.committed_offset
        return out

    async def commit(self, offsets: Mapping[int, int]) -> bool:
        """Commit the next offsets to consume; whether every one was stored. A rebalance under
        way sets needs_rejoin (a commit with the current generation is still accepted while the
        group prepares the rebalance: the consumer commits before it joins again)."""
        if not offsets:
            return True
        response = await self._send(
            ApiKey.OFFSET_COMMIT,
            group_id=self.group_id,
            generation_id_or_member_epoch=self.generation_id,
            generation_id=self.generation_id,
            member_id=self.member_id,
            group_instance_id=None,
            retention_time=-1,
            topics=[
                {
                    "name": self.topic,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": offset,
                            "committed_leader_epoch": -1,
                            "commit_timestamp": -1,
                            "committed_metadata": "",
                        }
                        for p, offset in sorted(offsets.items())
                    ],
                }
            ],
        )
        stored = True
        for topic in response.topics:
            for p in topic.partitions:
                code = ErrorCode.of(int(p.error_code))
                if code == ErrorCode.NONE:
                    continue
                stored = False
                if code in REJOIN_ERRORS:
                    self.needs_rejoin = True
                elif code in COORDINATOR_ERRORS:
                    self.coordinator = -1
                else:
                    raise TopicProblem(f"group {self.group_id!r}: OffsetCommit: {explain(code)}")
        return stored

    async def heartbeat_loop(self) -> None:
        """Heartbeats every third of the session timeout until cancelled."""
        while True:
            await asyncio.sleep(SESSION_TIMEOUT_MS / 3000)
            if self.needs_rejoin or self.generation_id < 0:
                continue
            try:
                response = await self._send(
                    ApiKey.HEARTBEAT,
                    group_id=self.group_id,
                    generation_id=self.generation_id,
                    member_id=self.member_id,
                    group_instance_id=None,
                )
            except KafkaConnectionError:
                continue
            code = ErrorCode.of(int(response.error_code))
            if code in REJOIN_ERRORS:
                self.needs_rejoin = True
            elif code in COORDINATOR_ERRORS:
                self.coordinator = -1

    async def leave(self) -> None:
        if not self.member_id or self.coordinator < 0:
            return
        await self._send(
            ApiKey.LEAVE_GROUP,
            group_id=self.group_id,
            member_id=self.member_id,
            members=[{"member_id": self.member_id, "group_instance_id": None, "reason": None}],
        )
        self.generation_id = -1
