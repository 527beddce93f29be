"""The persister (Kafka's DefaultStatePersister) as the share-partition leader sees it: reads and
writes of share-partition state, sent to the share coordinator of each key.

The share coordinator of key (group, topic id, partition) is the leader of its
``__share_group_state`` partition. When that is this broker, ``BrokerPersister`` calls the local
``ShareCoordinator`` (the same code the state-API handlers run, waiting for the partition's load
when one is under way); otherwise it sends InitializeShareGroupState, ReadShareGroupState or
WriteShareGroupState to the leader over the inter-broker listener, one connection per broker.
A leader that cannot be reached, or that answers NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS
(leadership moving), gives the caller COORDINATOR_NOT_AVAILABLE: the share-partition is not
served until it can read its state, and a write is retried by the next change.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import structlog

from kafkalite.client.connection import KafkaConnection
from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.share.coordinator import ShareCoordinator, StateResult
from kafkalite.share.partition import StateBatch
from kafkalite.share.records import SHARE_GROUP_STATE_TOPIC_NAME

log = structlog.get_logger(__name__)

REQUEST_TIMEOUT_S = 10.0


class BrokerPersister:
    def __init__(
        self,
        coordinator: ShareCoordinator,
        metadata_cache: Any = None,
        listener_name: str = "PLAINTEXT",
        time_ms: Callable[[], int] | None = None,
    ) -> None:
        self.coordinator = coordinator
        self.metadata_cache = metadata_cache
        self.listener_name = listener_name
        self.time_ms = time_ms
        self._connections: dict[int, KafkaConnection] = {}

    # -- where a key lives -------------------------------------------------------------------

    def _leader(self, key: tuple[str, uuid.UUID, int]) -> int | None:
        """The broker leading the key's state partition: None when unknown, this broker's id
        when there is no metadata (a broker on its own)."""
        if self.metadata_cache is None:
            return self.coordinator.broker_id
        info = self.metadata_cache.get_partition_info(
            SHARE_GROUP_STATE_TOPIC_NAME, self.coordinator.partition_for(*key)
        )
        if info is None or info.leader < 0:
            return None
        return info.leader

    async def _local_ready(self, key: tuple[str, uuid.UUID, int]) -> None:
        partition = self.coordinator.partition_for(*key)
        if not self.coordinator.is_loaded(partition):
            await self.coordinator.wait_loaded(partition)

    async def _remote(self, broker_id: int, api_key: ApiKey, request: dict[str, Any]) -> Any:
        connection = self._connections.get(broker_id)
        if connection is None or not connection.connected:
            endpoint = self.metadata_cache.get_alive_broker_node(broker_id, self.listener_name)
            if endpoint is None:
                raise KafkaConnectionError(f"broker {broker_id} has no live endpoint")
            connection = KafkaConnection(
                endpoint.host,
                endpoint.port,
                client_id=f"broker-{self.coordinator.broker_id}-share-persister",
                request_timeout=REQUEST_TIMEOUT_S,
                node_id=broker_id,
            )
            await connection.connect()
            self._connections[broker_id] = connection
        try:
            return await connection.send(api_key, request)
        except (KafkaConnectionError, KafkaTimeoutError):
            self._connections.pop(broker_id, None)
            await connection.close()
            raise

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    # -- the persister's calls ---------------------------------------------------------------

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult:
        key = (group_id, topic_id, partition)
        leader = self._leader(key)
        if leader is None:
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if leader == self.coordinator.broker_id:
            await self._local_ready(key)
            return self.coordinator.read(key, leader_epoch)
        try:
            response = await self._remote(
                leader,
                ApiKey.READ_SHARE_GROUP_STATE,
                {
                    "group_id": group_id,
                    "topics": [
                        {
                            "topic_id": topic_id,
                            "partitions": [{"partition": partition, "leader_epoch": leader_epoch}],
                        }
                    ],
                },
            )
        except (KafkaError, OSError) as e:
            log.info("share state read failed", broker=leader, error=str(e))
            return StateResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        p = response.results[0].partitions[0]
        if p.error_code != ErrorCode.NONE:
            return StateResult(ErrorCode.of(int(p.error_code)))
        return StateResult(
            ErrorCode.NONE,
            p.state_epoch,
            leader_epoch,
            p.start_offset,
            tuple(
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in p.state_batches
            ),
        )

    async def initialize(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        start_offset: int,
        state_epoch: int = 0,
    ) -> ErrorCode:
        """A new state (no in-flight records) at ``start_offset``; a higher ``state_epoch`` than
        the stored one replaces the state (an operator's reset) and fences its old writers."""
        key = (group_id, topic_id, partition)
        leader = self._leader(key)
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if leader == self.coordinator.broker_id:
            await self._local_ready(key)
            return await self.coordinator.initialize(key, state_epoch, start_offset)
        return await self._remote_result(
            leader,
            ApiKey.INITIALIZE_SHARE_GROUP_STATE,
            {
                "group_id": group_id,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition": partition,
                                "state_epoch": state_epoch,
                                "start_offset": start_offset,
                            }
                        ],
                    }
                ],
            },
        )

    async def write(
        self,
        group_id: str,
        topic_id: uuid.UUID,
        partition: int,
        state_epoch: int,
        leader_epoch: int,
        start_offset: int,
        batches: list[StateBatch],
    ) -> ErrorCode:
        key = (group_id, topic_id, partition)
        leader = self._leader(key)
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if leader == self.coordinator.broker_id:
            await self._local_ready(key)
            now = self.time_ms() if self.time_ms is not None else -1
            return await self.coordinator.write(
                key, state_epoch, leader_epoch, start_offset, batches, now
            )
        return await self._remote_result(
            leader,
            ApiKey.WRITE_SHARE_GROUP_STATE,
            {
                "group_id": group_id,
                "topics": [
                    {
                        "topic_id": topic_id,
                        "partitions": [
                            {
                                "partition": partition,
                                "state_epoch": state_epoch,
                                "leader_epoch": leader_epoch,
                                "start_offset": start_offset,
                                "state_batches": [
                                    {
                                        "first_offset": b.first_offset,
                                        "last_offset": b.last_offset,
                                        "delivery_state": b.delivery_state,
                                        "delivery_count": b.delivery_count,
                                    }
                                    for b in batches
                                ],
                            }
                        ],
                    }
                ],
            },
        )

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> ErrorCode:
        key = (group_id, topic_id, partition)
        leader = self._leader(key)
        if leader is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if leader == self.coordinator.broker_id:
            await self._local_ready(key)
            return await self.coordinator.delete(key)
        return await self._remote_result(
            leader,
            ApiKey.DELETE_SHARE_GROUP_STATE,
            {
                "group_id": group_id,
                "topics": [{"topic_id": topic_id, "partitions": [{"partition": partition}]}],
            },
        )

    async def _remote_result(self, broker_id: int, api_key: ApiKey, request: dict) -> ErrorCode:
        try:
            response = await self._remote(broker_id, api_key, request)
        except (KafkaError, OSError) as e:
            log.info("share state request failed", broker=broker_id, error=str(e))
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.of(int(response.results[0].partitions[0].error_code))
