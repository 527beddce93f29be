"""Consumer groups seen from any broker: what GET /groups, /groups/{id} and a topic's consuming
groups answer, whichever broker coordinates each group.

A group lives at its coordinator (the leader of its `__consumer_offsets` partition). A group
this broker coordinates is read from its own group coordinator; any other is asked of its
coordinator over the Kafka protocol as an admin client would (FindCoordinator, then
DescribeGroups and OffsetFetch there), and the list of groups is ListGroups to every live broker.
So every broker's admin API answers alike, and none answers "ask another broker".

Lag covers every partition the group committed AND every partition assigned to a member: a
partition assigned but never committed is reported with no committed offset, and its lag
counts from the log start offset (where a consumer with auto.offset.reset=earliest starts;
Kafka's kafka-consumer-groups shows "-" for it). Lag is never negative; it is None when the
partition's leader cannot say where its log ends.

Invariant: what the caller may not see (access.py) is left out before anything is counted: a
group it may not DESCRIBE is not listed, and partitions of topics it may not DESCRIBE are in no
lag, member assignment or topic list.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import structlog

from kafkalite.admin.access import Access
from kafkalite.admin.errors import AdminError
from kafkalite.protocol.consumer_protocol import assigned_partitions
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.share.partition import RecordState

log = structlog.get_logger("kafkalite.admin")

GROUP_CONCURRENCY = 8
"""Groups described at once when the list of groups is built (each is a DescribeGroups and an
OffsetFetch at its coordinator, or local lookups)."""


def decode_consumer_assignment(data: bytes) -> list[dict[str, Any]]:
    """Kafka's ConsumerProtocolAssignment as [{"topic", "partitions"}]; [] when empty or not the
    consumer protocol."""
    decoded = assigned_partitions(data) if len(data) >= 6 else None
    return [{"topic": t, "partitions": list(p)} for t, p in decoded or ()]


GROUP_TYPES = ("classic", "consumer", "share")
"""The group types ListGroups v5 names: classic (JoinGroup/SyncGroup), consumer (KIP-848's
ConsumerGroupHeartbeat) and share (KIP-932)."""


@dataclass(frozen=True)
class Overview:
    """One group as ListGroups lists it."""

    group_id: str
    protocol_type: str
    state: str
    coordinator: int
    group_type: str


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    assignment: list[dict[str, Any]]
    # consumer (KIP-848) and share groups only
    member_epoch: int | None = None
    subscribed_topics: list[str] | None = None
    subscribed_topic_regex: str | None = None
    target_assignment: list[dict[str, Any]] | None = None


@dataclass
class GroupData:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: int
    members: list[Member] = field(default_factory=list)
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    group_type: str = "classic"
    # consumer (KIP-848) and share groups only
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    assignor: str | None = None

    def visible(self, access: Access) -> GroupData:
        """This group as `access` may see it: assignments and offsets of topics it may
        DESCRIBE only (as OffsetFetch of every topic answers)."""
        members = [
            replace(
                m,
                assignment=[a for a in m.assignment if access.topic(a["topic"])],
                subscribed_topics=None
                if m.subscribed_topics is None
                else [t for t in m.subscribed_topics if access.topic(t)],
                target_assignment=None
                if m.target_assignment is None
                else [a for a in m.target_assignment if access.topic(a["topic"])],
            )
            for m in self.members
        ]
        committed = {tp: o for tp, o in self.committed.items() if access.topic(tp.topic)}
        return replace(self, members=members, committed=committed)

    def owners(self) -> dict[TopicPartition, str]:
        return {
            TopicPartition(a["topic"], p): m.member_id
            for m in self.members
            for a in m.assignment
            for p in a["partitions"]
        }

    def partitions(self) -> set[TopicPartition]:
        """Every partition committed or assigned."""
        return set(self.committed) | set(self.owners())

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions()})


def lag_rows(
    group: GroupData,
    ends: dict[TopicPartition, tuple[int | None, int | None]],
) -> list[dict[str, Any]]:
    """The lag table of `group`: one row per partition committed or assigned, by topic and
    partition. `ends` gives each partition's (log start offset, high watermark), None when
    unknown."""
    owners = group.owners()
    rows = []
    for tp in sorted(group.partitions()):
        start, end = ends.get(tp, (None, None))
        committed = group.committed.get(tp)
        base = committed if committed is not None else start
        lag = None if end is None or base is None else max(end - base, 0)
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": committed,
                "log_start_offset": start,
                "high_watermark": end,
                "lag": lag,
                "member_id": owners.get(tp),
            }
        )
    return rows


def _state_name(value: int) -> str:
    try:
        return RecordState(value).name
    except ValueError:
        return f"UNKNOWN({value})"


class GroupView:
    """Reads groups for one admin request (`api` is the ApiBase of the route handlers)."""

    def __init__(self, api: Any, access: Access) -> None:
        self.api = api
        self.access = access
        self.server = api.server

    # -- where a group lives -----------------------------------------------------------------

    async def coordinator_of(self, group_id: str) -> int:
        """The coordinator's broker id: this broker when it leads the group's offsets partition,
        else FindCoordinator's answer. No offsets topic yet: 404 GROUP_ID_NOT_FOUND."""
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME

        coordinator = self.api.group_coordinator()
        cache = self.server.metadata_cache
        if not cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
            raise AdminError(
                404,
                "GROUP_ID_NOT_FOUND",
                f"group {group_id!r} does not exist (no group has committed offsets yet)",
            )
        info = cache.get_partition_info(
            GROUP_METADATA_TOPIC_NAME, coordinator.partition_for(group_id)
        )
        if info is not None and info.leader == self.server.broker_id:
            return int(self.server.broker_id)
        client = await self.api.kafka_client()
        error, node = await client.find_coordinator(group_id)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: no coordinator: {error.name}")
        return int(node)

    def is_local(self, node: int) -> bool:
        return node == self.server.broker_id

    # -- one group ---------------------------------------------------------------------------

    async def group(self, group_id: str) -> GroupData:
        """`group_id` as its coordinator describes it, with its committed offsets (all of them:
        filter with GroupData.visible). A group that does not exist: 404."""
        node = await self.coordinator_of(group_id)
        if self.is_local(node):
            data = await self._local(group_id)
        else:
            data = await self._remote(node, group_id)
        if data.state == "Dead" and not data.committed:
            raise AdminError(404, "GROUP_ID_NOT_FOUND", f"group {group_id!r} does not exist")
        return data

    async def _local(self, group_id: str) -> GroupData:
        coordinator = await self.api.coordinator_for(group_id)
        error, summary = coordinator.describe_group(group_id)
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.name}")
        _, committed = coordinator.fetch_offsets(group_id)
        consumer = summary.protocol_type == "consumer"
        return GroupData(
            group_id,
            summary.state,
            summary.protocol_type,
            summary.protocol,
            int(self.server.broker_id),
            [
                Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    decode_consumer_assignment(m.assignment) if consumer else [],
                )
                for m in summary.members
            ],
            {tp: int(data.offset) for tp, data in committed.items() if data.offset >= 0},
        )

    async def _remote(self, node: int, group_id: str) -> GroupData:
        response, committed = await self._ask(
            node,
            group_id,
            lambda client: asyncio.gather(
                client.describe_groups(node, [group_id]), client.offset_fetch(node, group_id)
            ),
        )
        described = response.groups[0]
        error = ErrorCode.of(int(described.error_code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.name}")
        consumer = described.protocol_type == "consumer"
        return GroupData(
            group_id,
            described.group_state,
            described.protocol_type,
            described.protocol_data,
            node,
            [
                Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    decode_consumer_assignment(m.member_assignment) if consumer else [],
                )
                for m in described.members
            ],
            committed,
        )

    # -- consumer (KIP-848) and share groups ---------------------------------------------------

    async def _ask(self, node: int, group_id: str, call: Any) -> Any:
        """`call(client)` at `node`, its I/O failures answered 503 as for a classic group."""
        client = await self.api.kafka_client()
        try:
            return await call(client)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            from kafkalite.protocol.errors import KafkaError

            # an error in the answer (offset_fetch raises it) rather than a failed request
            if type(e) is KafkaError and isinstance(e.error_code, ErrorCode):
                code = e.error_code
                raise AdminError.kafka(code, f"group {group_id!r}: {code.name}") from None
            log.info("remote group lookup failed", broker=node, group=group_id, error=repr(e))
            raise AdminError(
                503,
                "COORDINATOR_NOT_AVAILABLE",
                f"the coordinator of group {group_id!r} (broker {node}) did not answer; retry",
            ) from None

    @staticmethod
    def _assignment(assignment: Any) -> list[dict[str, Any]]:
        return [
            {"topic": tp.topic_name, "partitions": sorted(int(p) for p in tp.partitions)}
            for tp in sorted(assignment.topic_partitions, key=lambda tp: tp.topic_name)
            if tp.topic_name
        ]

    async def consumer_group(self, group_id: str) -> GroupData:
        """A consumer group (KIP-848) as ConsumerGroupDescribe and OffsetFetch at its
        coordinator answer them (this broker too is asked over the protocol). Not a consumer
        group: 404 GROUP_ID_NOT_FOUND."""
        from kafkalite.client.connection import request_builder
        from kafkalite.protocol.api import ApiKey

        node = await self.coordinator_of(group_id)

        async def call(client: Any) -> Any:
            return await asyncio.gather(
                client.send(
                    ApiKey.CONSUMER_GROUP_DESCRIBE,
                    request_builder(
                        ApiKey.CONSUMER_GROUP_DESCRIBE,
                        group_ids=[group_id],
                        include_authorized_operations=False,
                    ),
                    node_id=node,
                ),
                client.offset_fetch(node, group_id),
            )

        response, committed = await self._ask(node, group_id, call)
        described = response.groups[0]
        error = ErrorCode.of(int(described.error_code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.name}")
        return GroupData(
            group_id,
            described.group_state,
            "consumer",
            described.assignor_name,
            node,
            [
                Member(
                    mb.member_id,
                    mb.instance_id,
                    mb.client_id,
                    mb.client_host,
                    self._assignment(mb.assignment),
                    member_epoch=int(mb.member_epoch),
                    subscribed_topics=sorted(mb.subscribed_topic_names),
                    subscribed_topic_regex=mb.subscribed_topic_regex,
                    target_assignment=self._assignment(mb.target_assignment),
                )
                for mb in described.members
            ],
            committed,
            group_type="consumer",
            group_epoch=int(described.group_epoch),
            assignment_epoch=int(described.assignment_epoch),
            assignor=described.assignor_name,
        )

    async def share_group(self, group_id: str) -> tuple[GroupData, list[dict[str, Any]]]:
        """A share group (KIP-932) as ShareGroupDescribe answers it at its coordinator, and the
        start offset of each of its share-partitions (DescribeShareGroupOffsets of every
        subscribed topic). Not a share group: 404 GROUP_ID_NOT_FOUND."""
        from kafkalite.client.connection import request_builder
        from kafkalite.protocol.api import ApiKey

        node = await self.coordinator_of(group_id)

        async def call(client: Any) -> Any:
            return await asyncio.gather(
                client.send(
                    ApiKey.SHARE_GROUP_DESCRIBE,
                    request_builder(
                        ApiKey.SHARE_GROUP_DESCRIBE,
                        group_ids=[group_id],
                        include_authorized_operations=False,
                    ),
                    node_id=node,
                ),
                client.send(
                    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                    request_builder(
                        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS,
                        groups=[{"group_id": group_id, "topics": None}],
                    ),
                    node_id=node,
                ),
            )

        described_response, offsets_response = await self._ask(node, group_id, call)
        described = described_response.groups[0]
        error = ErrorCode.of(int(described.error_code))
        if error != ErrorCode.NONE:
            raise AdminError.kafka(error, f"group {group_id!r}: {error.name}")
        data = GroupData(
            group_id,
            described.group_state,
            "share",
            described.assignor_name,
            node,
            [
                Member(
                    mb.member_id,
                    None,
                    mb.client_id,
                    mb.client_host,
                    self._assignment(mb.assignment),
                    member_epoch=int(mb.member_epoch),
                    subscribed_topics=sorted(mb.subscribed_topic_names),
                )
                for mb in described.members
            ],
            group_type="share",
            group_epoch=int(described.group_epoch),
            assignment_epoch=int(described.assignment_epoch),
            assignor=described.assignor_name,
        )
        starts: list[dict[str, Any]] = []
        for group in offsets_response.groups:
            if int(group.error_code):
                continue  # the group's own error is ShareGroupDescribe's to tell
            for topic in group.topics:
                if not self.access.topic(topic.topic_name):
                    continue
                for p in topic.partitions:
                    code = ErrorCode.of(int(p.error_code))
                    starts.append(
                        {
                            "topic": topic.topic_name,
                            "partition": int(p.partition_index),
                            "start_offset": int(p.start_offset) if p.start_offset >= 0 else None,
                            "error": None if code == ErrorCode.NONE else code.name,
                        }
                    )
        starts.sort(key=lambda r: (r["topic"], r["partition"]))
        await self.in_flight(group_id, starts)
        return data, starts

    async def in_flight(self, group_id: str, rows: list[dict[str, Any]]) -> None:
        """Each share-partition row of `group_id` gets its tracked window: `view`, `leader`,
        `start_offset`, `end_offset` and `in_flight` (runs of offsets by state).

        The live view is the partition leader's memory (acquisitions, their owners and lock
        deadlines exist nowhere else): had when this broker leads the partition and has loaded
        its share state. Otherwise the persisted view: ReadShareGroupState with LeaderEpoch -1
        at the share coordinator (through the share-group service's persister; -1 reads
        without fencing and writes nothing), where an acquired record reads AVAILABLE. A state
        that cannot be read leaves `view` and `in_flight` null with the error named."""
        service = self.server.services.extra.get("share_groups")
        cache = self.server.metadata_cache
        gate = asyncio.Semaphore(GROUP_CONCURRENCY)

        async def one(row: dict[str, Any]) -> None:
            topic, partition = row["topic"], row["partition"]
            info = cache.get_partition_info(topic, partition) if cache is not None else None
            row.update(view=None, leader=None, end_offset=None, in_flight=None)
            if info is not None and info.leader >= 0:
                row["leader"] = int(info.leader)
            if service is None:
                return
            topic_id = cache.get_topic_id(topic) if cache is not None else None
            sp = None
            if row["leader"] == self.server.broker_id:
                sp = service.loaded_partition(group_id, topic, partition)
                if sp is not None and sp.topic_id not in (None, topic_id):
                    sp = None  # the state of a deleted topic of the same name
            if sp is not None:
                row.update(
                    view="live",
                    start_offset=sp.start_offset,
                    end_offset=sp.end_offset,
                    in_flight=[
                        {
                            "first_offset": r.first_offset,
                            "last_offset": r.last_offset,
                            "state": r.state.name,
                            "delivery_count": r.delivery_count,
                            "member_id": r.member_id,
                            "lock_expires_ms": r.deadline_ms,
                        }
                        for r in sp.in_flight_runs()
                    ],
                )
                return
            if topic_id is None:
                return
            async with gate:
                result = await service.persister.read(group_id, topic_id, partition, -1)
            if result.error != ErrorCode.NONE:
                row["error"] = row["error"] or result.error.name
                return
            batches = sorted(result.state_batches, key=lambda b: b.first_offset)
            start = int(result.start_offset) if result.start_offset >= 0 else None
            row.update(
                view="persisted",
                start_offset=start,
                end_offset=None
                if start is None
                else max([start, *(b.last_offset + 1 for b in batches)]),
                in_flight=[
                    {
                        "first_offset": b.first_offset,
                        "last_offset": b.last_offset,
                        "state": _state_name(b.delivery_state),
                        "delivery_count": b.delivery_count,
                        "member_id": None,
                        "lock_expires_ms": None,
                    }
                    for b in batches
                    if start is not None and b.last_offset >= start
                ],
            )

        await asyncio.gather(*(one(row) for row in rows))

    async def many_consumer(self, group_ids: list[str]) -> dict[str, GroupData | None]:
        """Each consumer group's data as the caller may see it; None for one not read."""
        return await self._many(group_ids, self.consumer_group)

    # -- every group -------------------------------------------------------------------------

    async def overviews(self) -> list[Overview]:
        """Every group the caller may see, with its type (ListGroups v5: classic, consumer or
        share): this broker's own (its group coordinator and the other listers ListGroups asks,
        as share groups), and ListGroups to every other live broker (one that does not answer
        is left out and logged)."""
        services = self.server.services
        coordinator = services.group_coordinator
        found: dict[str, Overview] = {}
        me = int(self.server.broker_id)
        if coordinator is not None:
            listers = [coordinator.list_groups, *services.extra.get("group_listers", ())]
            for lister in listers:
                error, local = lister(None, None)
                if error != ErrorCode.NONE:
                    continue
                for o in local:
                    kind = getattr(o, "group_type", "classic") or "classic"
                    found.setdefault(
                        o.group_id, Overview(o.group_id, o.protocol_type, o.state, me, kind)
                    )
        cache = self.server.metadata_cache
        others = (
            sorted(b.id for b in cache.get_alive_brokers() if b.id != self.server.broker_id)
            if cache is not None
            else []
        )

        async def ask(node: int) -> list[Overview]:
            try:
                client = await self.api.kafka_client()
                response = await client.list_groups(node)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the client's I/O and protocol failures, at the boundary
                log.info("remote ListGroups failed", broker=node, error=repr(e))
                return []
            if int(response.error_code):
                log.info("remote ListGroups refused", broker=node, error=response.error_code)
                return []
            return [
                Overview(
                    g.group_id,
                    g.protocol_type,
                    g.group_state,
                    node,
                    getattr(g, "group_type", "") or "classic",
                )
                for g in response.groups
            ]

        for answer in await asyncio.gather(*(ask(node) for node in others)):
            for entry in answer:
                found.setdefault(entry.group_id, entry)
        return [found[g] for g in sorted(found) if self.access.group(g)]

    async def many(self, group_ids: list[str]) -> dict[str, GroupData | None]:
        """Each group's data as the caller may see it; None for one that could not be read."""
        return await self._many(group_ids, self.group)

    async def _many(
        self, group_ids: list[str], describe: Callable[[str], Awaitable[GroupData]]
    ) -> dict[str, GroupData | None]:
        gate = asyncio.Semaphore(GROUP_CONCURRENCY)

        async def one(group_id: str) -> GroupData | None:
            async with gate:
                try:
                    return (await describe(group_id)).visible(self.access)
                except AdminError as e:
                    log.info("group not described", group=group_id, error=e.code)
                    return None

        found = await asyncio.gather(*(one(g) for g in group_ids))
        return dict(zip(group_ids, found, strict=True))

    async def ends(
        self, partitions: set[TopicPartition]
    ) -> dict[TopicPartition, tuple[int | None, int | None]]:
        """(log start offset, high watermark) of each partition, None where its leader cannot
        tell (ListOffsets earliest and latest, batched per leader)."""
        wanted = sorted(partitions)
        earliest, latest = await asyncio.gather(
            self.api.list_offsets(wanted, -2), self.api.list_offsets(wanted, -1)
        )

        def ok(answer: tuple[Any, int] | None) -> int | None:
            if answer is None:
                return None
            error, offset = answer
            return offset if error == ErrorCode.NONE and offset >= 0 else None

        return {tp: (ok(earliest.get(tp)), ok(latest.get(tp))) for tp in wanted}
