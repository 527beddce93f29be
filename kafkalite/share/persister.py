"""The persister (Kafka's DefaultStatePersister) as the share-partition leader sees it: reads and
writes of share-partition state, sent to the share coordinator of each key.

``LocalPersister`` serves the keys whose ``__share_group_state`` partition this broker leads by
calling the ``ShareCoordinator`` directly (the same code the state-API handlers call). A key led
by another broker is answered NOT_COORDINATOR, which the share-partition turns into a retriable
error for the client: in a cluster, the share coordinator of a share-partition must be its
partition leader's broker for now (docs/share-groups.md, Limits).
"""

from __future__ import annotations

import uuid

from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.coordinator import ShareCoordinator, StateResult
from kafkalite.share.partition import StateBatch


class LocalPersister:
    def __init__(self, coordinator: ShareCoordinator, time_ms=None) -> None:
        self.coordinator = coordinator
        self.time_ms = time_ms

    async def _ready(self, key) -> None:
        partition = self.coordinator.partition_for(*key)
        if not self.coordinator.is_loaded(partition):
            await self.coordinator.wait_loaded(partition)

    async def read(
        self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int
    ) -> StateResult:
        key = (group_id, topic_id, partition)
        await self._ready(key)
        return self.coordinator.read(key, leader_epoch)

    async def initialize(
        self, group_id: str, topic_id: uuid.UUID, partition: int, start_offset: int
    ) -> ErrorCode:
        key = (group_id, topic_id, partition)
        await self._ready(key)
        return await self.coordinator.initialize(key, 0, start_offset)

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
        await self._ready(key)
        now = self.time_ms() if self.time_ms is not None else -1
        return await self.coordinator.write(
            key, state_epoch, leader_epoch, start_offset, batches, now
        )
