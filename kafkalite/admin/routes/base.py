"""What every route module's handlers share: the broker they answer for, the coordination
session, the group coordinator, ListOffsets here or at the leader, and the path parameters."""

from __future__ import annotations

import asyncio
from typing import Any

import structlog
from aiohttp import web

from kafkalite.admin.errors import AdminError

log = structlog.get_logger("kafkalite.admin")

CREATE_WAIT_S = 10.0
"""How long POST /topics waits for the controller to elect leaders before answering."""

REMOTE_TIMEOUT_S = 5.0
"""Timeout of the Kafka requests the admin API sends to other brokers (ListOffsets)."""
REMOTE_BATCH = 1000
"""Partitions per ListOffsets the admin API sends to another broker."""
REMOTE_CONCURRENCY = 4
"""ListOffsets one admin request keeps in flight at most (partitions are asked in batches, never
one request or task per partition)."""


def is_valid_topic_name(name: str) -> bool:
    from kafkalite.protocol.errors import KafkaError
    from kafkalite.zk.admin import validate_topic_name

    try:
        validate_topic_name(name)
    except KafkaError:
        return False
    return True


def topic_name(request: web.Request) -> str:
    """The {name} path parameter; a name that no topic can have is answered 404 at once."""
    name = request.match_info["name"]
    if not is_valid_topic_name(name):
        raise AdminError(404, "UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    return name


class ApiBase:
    """The state and plumbing of the route handlers over a running KafkaServer (duck-typed:
    `services`, `config`, `socket_server`, `controller`, `replica_manager`, `log_manager`,
    `metadata_cache`, `dispatcher`)."""

    def __init__(self, server: Any, registry: Any, history: Any) -> None:
        self.server = server
        self.registry = registry
        self.history = history
        self._kafka_client: Any = None
        self._client_lock = asyncio.Lock()

    # -- plumbing --------------------------------------------------------------------------

    async def close(self, app: web.Application | None = None) -> None:
        client, self._kafka_client = self._kafka_client, None
        if client is not None:
            await client.close()

    async def kafka_client(self) -> Any:
        """The project's Kafka client, bootstrapped at this broker (for partitions led
        elsewhere); created on first use, closed with the app."""
        from kafkalite.client.client import KafkaClient

        async with self._client_lock:
            if self._kafka_client is None:
                # the inter-broker listener: the client speaks its protocol (TLS, SASL)
                listener = getattr(self.server, "inter_broker_listener", None)
                endpoints = [
                    e for e in self.server.advertised_endpoints if e.listener_name == listener
                ] or self.server.advertised_endpoints
                bootstrap = ",".join(f"{e.host}:{e.port}" for e in endpoints)
                client = KafkaClient(
                    bootstrap,
                    client_id=f"kafkalite-admin-{self.server.broker_id}",
                    request_timeout=REMOTE_TIMEOUT_S,
                    connect_timeout=REMOTE_TIMEOUT_S,
                )
                await client.start()
                self._kafka_client = client
            return self._kafka_client

    async def list_offset(self, tp: Any, timestamp: int) -> tuple[Any, int]:
        """(error, offset) of ListOffsets as a consumer sees it (-2 earliest, -1 latest = the
        high watermark, else the first offset at or after a time; -1 when none): answered by
        this broker's replica when it leads the partition, else asked of the leader."""
        from kafkalite.protocol.errors import ErrorCode

        rm = self.server.replica_manager
        status = rm.partition_status(tp) if rm is not None else None
        if status is not None and status.is_leader:
            result = rm.list_offset(tp, timestamp)
            return result.error_code, result.offset
        try:
            client = await self.kafka_client()
            response = await client.list_offsets(tp, timestamp)
            answer = response.topics[0].partitions[0]
            return ErrorCode.of(int(answer.error_code)), int(answer.offset)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the client's I/O and protocol failures, at the boundary
            log.info("remote ListOffsets failed", partition=str(tp), error=repr(e))
            return ErrorCode.LEADER_NOT_AVAILABLE, -1

    async def list_offsets(self, partitions: Any, timestamp: int) -> dict[Any, tuple[Any, int]]:
        """``list_offset`` for many partitions without a request (or a task) per partition:
        the ones this broker leads are answered here, the others with one ListOffsets per
        leader and ``REMOTE_BATCH`` partitions, at most ``REMOTE_CONCURRENCY`` in flight. (One
        task per partition left 137,000 pending ListOffsets and a 2.1 GB broker after 100,000
        partitions were added.)"""
        from kafkalite.protocol.errors import ErrorCode

        rm = self.server.replica_manager
        cache = self.server.metadata_cache
        out: dict[Any, tuple[Any, int]] = {}
        by_leader: dict[int, list[Any]] = {}
        for i, tp in enumerate(partitions):
            status = rm.partition_status(tp) if rm is not None else None
            if status is not None and status.is_leader:
                result = rm.list_offset(tp, timestamp)
                out[tp] = (result.error_code, result.offset)
            else:
                info = cache.get_partition_info(tp.topic, tp.partition) if cache else None
                if info is None or info.leader < 0:
                    out[tp] = (ErrorCode.LEADER_NOT_AVAILABLE, -1)
                else:
                    by_leader.setdefault(info.leader, []).append(tp)
            if i % REMOTE_BATCH == REMOTE_BATCH - 1:
                await asyncio.sleep(0)  # thousands of local lookups: let the loop breathe
        gate = asyncio.Semaphore(REMOTE_CONCURRENCY)

        async def ask(leader: int, batch: list[Any]) -> None:
            async with gate:
                try:
                    client = await self.kafka_client()
                    answers = await client.list_offsets_of(leader, batch, timestamp)
                except asyncio.CancelledError:
                    raise
                except Exception as e:  # the client's I/O and protocol failures, at the boundary
                    log.info("remote ListOffsets failed", broker=leader, error=repr(e))
                    answers = {}
            for tp in batch:
                out[tp] = answers.get(tp, (ErrorCode.LEADER_NOT_AVAILABLE, -1))

        await asyncio.gather(
            *(
                ask(leader, tps[i : i + REMOTE_BATCH])
                for leader, tps in by_leader.items()
                for i in range(0, len(tps), REMOTE_BATCH)
            )
        )
        return out

    async def high_watermarks(self, partitions: Any) -> dict[Any, int | None]:
        """The high watermark of each partition (None when its leader cannot tell)."""
        from kafkalite.protocol.errors import ErrorCode

        found = await self.list_offsets(sorted(set(partitions)), -1)
        return {
            tp: (offset if error == ErrorCode.NONE and offset >= 0 else None)
            for tp, (error, offset) in found.items()
        }

    @property
    def session(self) -> Any:
        session = self.server.services.store
        if session is None:
            raise AdminError(503, "UNAVAILABLE", "the coordination session is not open")
        return session

    def group_coordinator(self) -> Any:
        coordinator = self.server.services.group_coordinator
        if coordinator is None:
            raise AdminError(
                503,
                "UNAVAILABLE",
                "this broker has no group coordinator (consumer groups are not served)",
            )
        return coordinator

    async def coordinator_for(self, group_id: str, *, create: bool = False) -> Any:
        """This broker's group coordinator, once it owns `group_id` (leads the group's
        `__consumer_offsets` partition and has loaded it).

        No offsets topic: 404 GROUP_ID_NOT_FOUND (no group ever committed), unless `create`
        (an offset reset may seed a new group): the topic is then created as FindCoordinator
        does. Another broker leads the partition: 421 NOT_COORDINATOR naming it.
        """
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME

        coordinator = self.group_coordinator()
        cache = self.server.metadata_cache
        if not cache.contains_topic(GROUP_METADATA_TOPIC_NAME):
            if not create:
                raise AdminError(
                    404,
                    "GROUP_ID_NOT_FOUND",
                    f"group {group_id!r} does not exist (no group has committed offsets yet)",
                )
            await self._create_offsets_topic(coordinator)
        partition = coordinator.partition_for(group_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CREATE_WAIT_S
        while True:
            info = cache.get_partition_info(GROUP_METADATA_TOPIC_NAME, partition)
            if info is not None and info.leader >= 0 and info.leader != self.server.broker_id:
                raise AdminError(
                    421,
                    "NOT_COORDINATOR",
                    f"group {group_id!r} is coordinated by broker {info.leader} "
                    f"({GROUP_METADATA_TOPIC_NAME}-{partition}); ask that broker's admin API",
                )
            if info is not None and coordinator.core.is_group_local(group_id):
                return coordinator
            if loop.time() > deadline:
                raise AdminError(
                    503,
                    "COORDINATOR_LOAD_IN_PROGRESS",
                    f"the coordinator of group {group_id!r} is not ready yet; retry",
                )
            await asyncio.sleep(0.02)

    async def _create_offsets_topic(self, coordinator: Any) -> None:
        from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
        from kafkalite.protocol.errors import TopicAlreadyExistsError
        from kafkalite.zk import admin

        offset_config = coordinator.offset_config
        alive = len(self.server.metadata_cache.get_alive_brokers())
        try:
            await admin.create_topic(
                self.session,
                GROUP_METADATA_TOPIC_NAME,
                offset_config.offsets_topic_num_partitions,
                min(offset_config.offsets_topic_replication_factor, max(alive, 1)),
                offset_config.offsets_topic_configs(),
            )
        except TopicAlreadyExistsError:
            pass
