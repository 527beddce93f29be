"""KafkaClient: metadata-aware access to a cluster, one connection per broker.

``KafkaClient(bootstrap, client_id)`` starts from bootstrap addresses ("h1:9092,h2:9092" or a
list), asks one of them for cluster metadata (brokers, controller, topics), and then opens a
``KafkaConnection`` per node id on demand. ``send(api_key, request, version=None,
node_id=None)`` routes to that node (any live connection when node_id is None, the controller
for ``node_id=CONTROLLER``); a node the cached metadata does not know triggers one metadata
refresh before failing. A connection that broke is replaced on the next send to its node; the
send that saw it break fails (the caller decides whether to retry: the error is retriable).

Convenience methods used by the CLI and tests: ``metadata``, ``create_topics``,
``delete_topics``, ``list_offsets``, ``produce``, ``fetch``; for the admin API's cluster-wide
views ``find_coordinator``, ``list_groups``, ``describe_groups``, ``offset_fetch``,
``offset_commit``, ``delete_groups``, ``describe_log_dirs``, ``describe_configs``. They return kio responses; error
codes inside responses are data, not exceptions.
"""

from __future__ import annotations

import asyncio
import datetime
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition

from .acks import normalize_acks
from .connection import KafkaConnection, RequestSpec, request_builder
from .errors import KafkaConnectionError, NoBrokersAvailableError

CONTROLLER = -2
"""``node_id`` value routing a request to the current controller."""


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error_code: int


def parse_bootstrap(bootstrap: str | Iterable[str]) -> list[tuple[str, int]]:
    """ "h1:9092,h2" -> [("h1", 9092), ("h2", 9092)]; IPv6 as "[::1]:9092"."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") else 9092
        elif item.count(":") == 1:
            host, port_text = item.split(":")
            port = int(port_text)
        else:
            host, port = item, 9092
        out.append((host, port))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


class KafkaClient:
    def __init__(
        self,
        bootstrap: str | Iterable[str],
        client_id: str = "kafkalite",
        *,
        request_timeout: float = 30.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.connect_timeout = connect_timeout
        self.brokers: dict[int, BrokerAddress] = {}
        self.controller_id: int = -1
        self.cluster_id: str | None = None
        self.partitions: dict[TopicPartition, PartitionInfo] = {}
        self._bootstrap_conn: KafkaConnection | None = None
        self._conns: dict[int, KafkaConnection] = {}
        self._connecting: dict[int, asyncio.Future[KafkaConnection]] = {}
        self._bootstrap_lock = asyncio.Lock()
        self._closed = False

    async def start(self) -> None:
        """Connect to a bootstrap server and load the broker list (closes the client again if
        that fails)."""
        try:
            await self._any_connection()
            await self.refresh_metadata(topics=[])
        except BaseException:
            await self.close()
            raise

    async def __aenter__(self) -> KafkaClient:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        self._closed = True
        conns = list(self._conns.values())
        if self._bootstrap_conn is not None:
            conns.append(self._bootstrap_conn)
        self._conns.clear()
        self._bootstrap_conn = None
        for conn in conns:
            await conn.close()

    def _new_connection(self, host: str, port: int, node_id: int | None) -> KafkaConnection:
        return KafkaConnection(
            host,
            port,
            client_id=self.client_id,
            request_timeout=self.request_timeout,
            connect_timeout=self.connect_timeout,
            node_id=node_id,
        )

    async def _any_connection(self) -> KafkaConnection:
        if self._closed:
            raise KafkaConnectionError("client is closed")
        for conn in list(self._conns.values()):
            if conn.connected:
                return conn
        async with self._bootstrap_lock:
            if self._bootstrap_conn is not None and self._bootstrap_conn.connected:
                return self._bootstrap_conn
            if self._bootstrap_conn is not None:
                await self._bootstrap_conn.close()
            return await self._connect_bootstrap()

    async def _connect_bootstrap(self) -> KafkaConnection:
        candidates = [(b.host, b.port) for b in self.brokers.values()] or []
        candidates += self.bootstrap
        errors = []
        for host, port in candidates:
            conn = self._new_connection(host, port, None)
            try:
                await conn.connect()
            except KafkaError as e:  # refused, timed out, or ApiVersions failed
                errors.append(str(e))
                continue
            self._bootstrap_conn = conn
            return conn
        raise NoBrokersAvailableError("no broker reachable: " + "; ".join(errors))

    async def connection(self, node_id: int) -> KafkaConnection:
        """The live connection to ``node_id``, opened if needed (one attempt at a time)."""
        if self._closed:
            raise KafkaConnectionError("client is closed")
        conn = self._conns.get(node_id)
        if conn is not None and conn.connected:
            return conn
        pending = self._connecting.get(node_id)
        if pending is not None:
            return await asyncio.shield(pending)
        if node_id not in self.brokers:
            await self.refresh_metadata(topics=[])
            if node_id not in self.brokers:
                raise NoBrokersAvailableError(f"unknown broker id {node_id}")
        address = self.brokers[node_id]
        future: asyncio.Future[KafkaConnection] = asyncio.get_running_loop().create_future()
        self._connecting[node_id] = future
        try:
            conn = self._new_connection(address.host, address.port, node_id)
            await conn.connect()
            if self._closed:  # closed while connecting: do not keep it
                await conn.close()
                raise KafkaConnectionError("client is closed")
            if old := self._conns.get(node_id):
                await old.close()
            self._conns[node_id] = conn
            future.set_result(conn)
            return conn
        except BaseException as e:
            # Waiters get a retriable error, never this caller's cancellation (they were not
            # cancelled themselves).
            error = (
                KafkaConnectionError(f"connecting to broker {node_id} was abandoned")
                if isinstance(e, asyncio.CancelledError)
                else e
            )
            future.set_exception(error)
            future.exception()  # marks it retrieved; waiters get it through shield
            raise
        finally:
            del self._connecting[node_id]

    async def send(
        self,
        api_key: int,
        request: RequestSpec,
        version: int | None = None,
        node_id: int | None = None,
    ) -> Any:
        """Send to ``node_id`` (None: any broker; CONTROLLER: the controller) and return the
        response. See KafkaConnection.send for the accepted request forms."""
        if node_id == CONTROLLER:
            if self.controller_id < 0:
                await self.refresh_metadata(topics=[])
            node_id = self.controller_id
            if node_id < 0:
                raise NoBrokersAvailableError("the cluster has no controller")
        conn = await (self._any_connection() if node_id is None else self.connection(node_id))
        return await conn.send(api_key, request, version)

    # -- metadata ---------------------------------------------------------------------------

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> Any:
        """Fetch metadata (``topics=None``: all topics, ``[]``: brokers only) and update
        ``brokers``, ``controller_id``, ``cluster_id`` and ``partitions``."""
        conn = await self._any_connection()
        names = None if topics is None else [{"name": t} for t in topics]
        response = await conn.send(
            ApiKey.METADATA,
            request_builder(ApiKey.METADATA, topics=names, allow_auto_topic_creation=False),
        )
        self.brokers = {
            b.node_id: BrokerAddress(b.node_id, b.host, b.port, getattr(b, "rack", None))
            for b in response.brokers
        }
        self.controller_id = getattr(response, "controller_id", -1)
        self.cluster_id = getattr(response, "cluster_id", None)
        for topic in response.topics:
            if topics is None or topic.name in set(topics):
                for key in [k for k in self.partitions if k.topic == topic.name]:
                    del self.partitions[key]
            for p in topic.partitions:
                tp = TopicPartition(topic.name, p.partition_index)
                self.partitions[tp] = PartitionInfo(
                    topic.name,
                    p.partition_index,
                    p.leader_id,
                    getattr(p, "leader_epoch", -1),
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    int(p.error_code),
                )
        return response

    async def metadata(self, topics: Iterable[str] | None = None) -> Any:
        return await self.refresh_metadata(topics)

    def leader_for(self, tp: TopicPartition) -> int:
        info = self.partitions.get(tp)
        return -1 if info is None else info.leader

    # -- admin ------------------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Iterable[dict[str, Any]],
        *,
        timeout_ms: int = 30000,
        validate_only: bool = False,
    ) -> Any:
        """CreateTopics on the controller. Each topic: {"name", "num_partitions",
        "replication_factor", "assignments"?, "configs"?: [{"name", "value"}]}; -1 for the
        broker defaults."""
        return await self.send(
            ApiKey.CREATE_TOPICS,
            request_builder(
                ApiKey.CREATE_TOPICS,
                topics=list(topics),
                timeout=datetime.timedelta(milliseconds=timeout_ms),
                validate_only=validate_only,
            ),
            node_id=CONTROLLER,
        )

    async def delete_topics(self, names: Iterable[str], *, timeout_ms: int = 30000) -> Any:
        names = list(names)

        def build(version: int) -> Any:
            values: dict[str, Any] = {"timeout": datetime.timedelta(milliseconds=timeout_ms)}
            if version >= 6:
                values["topics"] = [{"name": n} for n in names]
            else:
                values["topic_names"] = names
            return request_builder(ApiKey.DELETE_TOPICS, **values)(version)

        return await self.send(ApiKey.DELETE_TOPICS, build, node_id=CONTROLLER)

    # -- data -------------------------------------------------------------------------------

    def _forget_if_stale(self, tp: TopicPartition, error_code: Any) -> None:
        """An answer saying the cached leader is wrong (NOT_LEADER_OR_FOLLOWER, an unknown
        partition, a fenced epoch...): drop the cache entry so the next call asks for metadata
        again (the client used to keep asking the old leader for ever)."""
        if ErrorCode.of(int(error_code)).invalid_metadata:
            self.partitions.pop(tp, None)

    async def _send_to_leader(
        self,
        tp: TopicPartition,
        api_key: ApiKey,
        request: Any,
        error_of: Callable[[Any], Any],
    ) -> Any:
        leader = await self._leader(tp)
        try:
            response = await self.send(api_key, request, node_id=leader)
        except KafkaConnectionError:
            self.partitions.pop(tp, None)  # the leader may be gone: learn the new one next time
            raise
        if response is not None:
            self._forget_if_stale(tp, error_of(response))
        return response

    async def _leader(self, tp: TopicPartition) -> int:
        leader = self.leader_for(tp)
        if leader < 0:
            await self.refresh_metadata([tp.topic])
            leader = self.leader_for(tp)
        if leader < 0:
            raise NoBrokersAvailableError(f"no leader known for {tp}")
        return leader

    async def list_offsets(
        self, tp: TopicPartition, timestamp: int = -1, *, isolation_level: int = 0
    ) -> Any:
        """ListOffsets for one partition (-1 latest, -2 earliest, or a timestamp in ms)."""
        return await self._send_to_leader(
            tp,
            ApiKey.LIST_OFFSETS,
            request_builder(
                ApiKey.LIST_OFFSETS,
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    {
                        "name": tp.topic,
                        "partitions": [
                            {
                                "partition_index": tp.partition,
                                "current_leader_epoch": -1,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            ),
            lambda r: r.topics[0].partitions[0].error_code,
        )

    async def list_offsets_of(
        self,
        node_id: int,
        partitions: Iterable[TopicPartition],
        timestamp: int = -1,
        *,
        isolation_level: int = 0,
    ) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """One ListOffsets to ``node_id`` (their leader) for several partitions: each one's
        (error, offset); a partition the answer leaves out is absent from the result."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = request_builder(
            ApiKey.LIST_OFFSETS,
            replica_id=-1,
            isolation_level=isolation_level,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": p, "current_leader_epoch": -1, "timestamp": timestamp}
                        for p in indexes
                    ],
                }
                for topic, indexes in by_topic.items()
            ],
        )
        response = await self.send(ApiKey.LIST_OFFSETS, request, node_id=node_id)
        out: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.name, answer.partition_index)
                self._forget_if_stale(tp, answer.error_code)
                out[tp] = (ErrorCode.of(int(answer.error_code)), int(answer.offset))
        return out

    async def produce(
        self,
        tp: TopicPartition,
        records: bytes,
        *,
        acks: int | str = -1,
        timeout_ms: int = 30000,
    ) -> Any:
        """Produce one record-batch buffer (build it with protocol.records.build_batch) to the
        partition's leader. ``acks``: all, -1, 0, 1 or an int (client/acks.py). Returns None for
        acks=0."""
        acks = normalize_acks(acks)
        return await self._send_to_leader(
            tp,
            ApiKey.PRODUCE,
            request_builder(
                ApiKey.PRODUCE,
                transactional_id=None,
                acks=acks,
                timeout=datetime.timedelta(milliseconds=timeout_ms),
                topic_data=[
                    {
                        "name": tp.topic,
                        "partition_data": [{"index": tp.partition, "records": records}],
                    }
                ],
            ),
            lambda r: r.responses[0].partition_responses[0].error_code,
        )

    async def fetch(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        max_bytes: int = 1024 * 1024,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        isolation_level: int = 0,
    ) -> Any:
        """One Fetch (no fetch session) for one partition from its leader."""
        return await self._send_to_leader(
            tp,
            ApiKey.FETCH,
            request_builder(
                ApiKey.FETCH,
                replica_id=-1,
                max_wait=datetime.timedelta(milliseconds=max_wait_ms),
                min_bytes=min_bytes,
                max_bytes=max_bytes,
                isolation_level=isolation_level,
                session_id=0,
                session_epoch=-1,
                topics=[
                    {
                        "topic": tp.topic,
                        "partitions": [
                            {
                                "partition": tp.partition,
                                "current_leader_epoch": -1,
                                "fetch_offset": offset,
                                "log_start_offset": -1,
                                "partition_max_bytes": max_bytes,
                            }
                        ],
                    }
                ],
                forgotten_topics_data=[],
                rack_id="",
            ),
            lambda r: r.responses[0].partitions[0].error_code,
        )

    # -- groups and cluster state (the admin API's cluster-wide views) -----------------------

    async def find_coordinator(self, key: str, key_type: int = 0) -> tuple[ErrorCode, int]:
        """FindCoordinator for a group (``key_type`` 0) or a transactional id (1): (error, the
        coordinator's node id, -1 with an error)."""
        response = await self.send(
            ApiKey.FIND_COORDINATOR,
            request_builder(
                ApiKey.FIND_COORDINATOR, key=key, key_type=key_type, coordinator_keys=[key]
            ),
        )
        answer = response.coordinators[0] if getattr(response, "coordinators", None) else response
        code = ErrorCode.of(int(answer.error_code))
        return code, int(answer.node_id) if code == ErrorCode.NONE else -1

    async def list_groups(self, node_id: int) -> Any:
        """ListGroups to ``node_id``: the groups that broker coordinates."""
        return await self.send(
            ApiKey.LIST_GROUPS,
            request_builder(ApiKey.LIST_GROUPS, states_filter=[], types_filter=[]),
            node_id=node_id,
        )

    async def describe_groups(self, node_id: int, group_ids: Iterable[str]) -> Any:
        """DescribeGroups to ``node_id`` (their coordinator)."""
        return await self.send(
            ApiKey.DESCRIBE_GROUPS,
            request_builder(
                ApiKey.DESCRIBE_GROUPS,
                groups=list(group_ids),
                include_authorized_operations=False,
            ),
            node_id=node_id,
        )

    async def offset_fetch(
        self, node_id: int, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """OffsetFetch of one group at ``node_id`` (its coordinator): the committed offset of
        each partition (``partitions`` None: every partition it committed). A group-level error
        raises KafkaError; partitions without a commit are absent."""
        topics: list[dict[str, Any]] | None = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for tp in partitions:
                by_topic.setdefault(tp.topic, []).append(tp.partition)
            topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        response = await self.send(
            ApiKey.OFFSET_FETCH,
            request_builder(
                ApiKey.OFFSET_FETCH,
                group_id=group_id,
                topics=topics,
                groups=[{"group_id": group_id, "topics": topics}],
                require_stable=False,
            ),
            node_id=node_id,
        )
        group = response.groups[0] if getattr(response, "groups", None) else response
        code = ErrorCode.of(int(getattr(group, "error_code", 0)))
        if code != ErrorCode.NONE:
            raise KafkaError(f"OffsetFetch of group {group_id!r}: {code.name}", error_code=code)
        out: dict[TopicPartition, int] = {}
        for topic in group.topics:
            for p in topic.partitions:
                if int(p.error_code) == 0 and p.committed_offset >= 0:
                    out[TopicPartition(topic.name, p.partition_index)] = int(p.committed_offset)
        return out

    async def offset_commit(
        self, node_id: int, group_id: str, offsets: dict[TopicPartition, int]
    ) -> dict[TopicPartition, ErrorCode]:
        """OffsetCommit of an inactive group at ``node_id`` (its coordinator), as an admin
        client commits (generation -1, no member): each partition's error."""
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp, offset in offsets.items():
            by_topic.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "commit_timestamp": -1,
                    "committed_metadata": "",
                }
            )
        response = await self.send(
            ApiKey.OFFSET_COMMIT,
            request_builder(
                ApiKey.OFFSET_COMMIT,
                group_id=group_id,
                generation_id_or_member_epoch=-1,
                generation_id=-1,
                member_id="",
                group_instance_id=None,
                retention_time_ms=-1,
                topics=[{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            ),
            node_id=node_id,
        )
        return {
            TopicPartition(topic.name, p.partition_index): ErrorCode.of(int(p.error_code))
            for topic in response.topics
            for p in topic.partitions
        }

    async def delete_groups(self, node_id: int, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        """DeleteGroups at ``node_id`` (their coordinator): each group's error."""
        response = await self.send(
            ApiKey.DELETE_GROUPS,
            request_builder(ApiKey.DELETE_GROUPS, groups_names=list(group_ids)),
            node_id=node_id,
        )
        return {r.group_id: ErrorCode.of(int(r.error_code)) for r in response.results}

    async def describe_log_dirs(self, node_id: int) -> Any:
        """DescribeLogDirs of every partition at ``node_id``."""
        return await self.send(
            ApiKey.DESCRIBE_LOG_DIRS,
            request_builder(ApiKey.DESCRIBE_LOG_DIRS, topics=None),
            node_id=node_id,
        )

    async def describe_configs(
        self,
        resources: Iterable[tuple[int, str]],
        *,
        node_id: int | None = None,
        include_synonyms: bool = False,
    ) -> Any:
        """DescribeConfigs of (resource type, name) pairs (2 topic, 4 broker: send a broker's
        to that broker) at ``node_id`` (None: any broker)."""
        return await self.send(
            ApiKey.DESCRIBE_CONFIGS,
            request_builder(
                ApiKey.DESCRIBE_CONFIGS,
                resources=[
                    {"resource_type": t, "resource_name": n, "configuration_keys": None}
                    for t, n in resources
                ],
                include_synonyms=include_synonyms,
                include_documentation=False,
            ),
            node_id=node_id,
        )

    def random_node(self) -> int:
        """A known broker id (for requests any broker can answer)."""
        if not self.brokers:
            raise NoBrokersAvailableError("no brokers known")
        return random.choice(sorted(self.brokers))


__all__ = [
    "CONTROLLER",
    "BrokerAddress",
    "KafkaClient",
    "PartitionInfo",
    "parse_bootstrap",
]
