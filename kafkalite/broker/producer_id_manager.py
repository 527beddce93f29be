"""Producer id allocation for InitProducerId (Kafka's ZkProducerIdManager).

Ids are handed out from blocks of ``PRODUCER_ID_BLOCK_SIZE`` (1000) consecutive ids. A broker
reserves a block by advancing the coordination node ``/latest_producer_id_block`` with a
compare-and-set on its version, so two brokers never get the same block; a lost race re-reads
and tries the next block. The node holds Kafka's JSON (ids as strings)::

    {"version":1,"broker":<broker id>,"block_start":"<first id>","block_end":"<last id>"}

An absent or empty node means no block was ever allocated: the first block starts at 0. Ids of
a block left unused when a broker restarts are skipped, as in Kafka.

The node is reached through a ``ProducerIdBlockStore``: ``CoordProducerIdBlockStore`` over a
coordination session (kafkalite/coord/base.py), or ``InMemoryProducerIdBlockStore`` for tests
and single-process use. Concurrent ``generate_producer_id`` calls are serialised.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Protocol

from kafkalite.coord.errors import BadVersion, CoordError, NodeExists, NoNode
from kafkalite.protocol.errors import ErrorCode, KafkaError

PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
PRODUCER_ID_BLOCK_SIZE = 1000
PRODUCER_ID_BLOCK_VERSION = 1
LONG_MAX = 2**63 - 1
ABSENT = -1  # version of a node that does not exist


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    assigned_broker_id: int
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": PRODUCER_ID_BLOCK_VERSION,
                "broker": self.assigned_broker_id,
                "block_start": str(self.first_producer_id),
                "block_end": str(self.last_producer_id),
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ProducerIdBlock:
        obj = json.loads(data)
        start = int(obj["block_start"])
        end = int(obj["block_end"])
        return cls(int(obj["broker"]), start, end - start + 1)


class ProducerIdBlockStore(Protocol):
    async def get(self) -> tuple[bytes | None, int]:
        """(data or None when the node is absent, its version or -1)."""
        ...

    async def compare_and_set(self, data: bytes, version: int) -> bool:
        """Write ``data`` if the node is still at ``version`` (-1: still absent)."""
        ...


class InMemoryProducerIdBlockStore:
    def __init__(self) -> None:
        self.data: bytes | None = None
        self.version = ABSENT

    async def get(self) -> tuple[bytes | None, int]:
        return self.data, self.version

    async def compare_and_set(self, data: bytes, version: int) -> bool:
        if version != self.version:
            return False
        self.data = data
        self.version += 1
        return True


class CoordProducerIdBlockStore:
    """The block node in a coordination store session (ZooKeeper or embedded)."""

    def __init__(self, session, path: str = PRODUCER_ID_BLOCK_PATH) -> None:
        self.session = session
        self.path = path

    async def get(self) -> tuple[bytes | None, int]:
        try:
            data, stat = await self.session.get_data(self.path)
        except NoNode:
            return None, ABSENT
        return data, stat.version

    async def compare_and_set(self, data: bytes, version: int) -> bool:
        try:
            if version == ABSENT:
                await self.session.create(self.path, data, makepath=True)
            else:
                await self.session.set_data(self.path, data, version)
        except (BadVersion, NodeExists, NoNode):
            return False
        return True


class ProducerIdsExhaustedError(KafkaError):
    """No producer id block is left (ids reached 2**63 - 1)."""


class ProducerIdManager:
    def __init__(self, broker_id: int, store, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        """``store``: a ``ProducerIdBlockStore``, or a coordination session to wrap."""
        self.broker_id = broker_id
        if not (hasattr(store, "compare_and_set") and hasattr(store, "get")):
            store = CoordProducerIdBlockStore(store)
        self.store = store
        self.block_size = block_size
        self.current_block: ProducerIdBlock | None = None
        self.next_producer_id = -1
        self._lock = asyncio.Lock()

    async def allocate_new_block(self) -> ProducerIdBlock:
        """Reserve the block after the latest one in the store (retrying lost races)."""
        while True:
            data, version = await self.store.get()
            if data:
                current = ProducerIdBlock.from_json(data)
                if current.last_producer_id > LONG_MAX - self.block_size:
                    raise ProducerIdsExhaustedError(
                        "Have exhausted all producerIds; no more blocks to allocate"
                    )
                block = ProducerIdBlock(
                    self.broker_id, current.last_producer_id + 1, self.block_size
                )
            else:
                block = ProducerIdBlock(self.broker_id, 0, self.block_size)
            if await self.store.compare_and_set(block.to_json(), version):
                return block

    async def generate_producer_id(self) -> int:
        """The next id. Raises ``KafkaError`` COORDINATOR_NOT_AVAILABLE (retriable) when the
        store cannot be reached, ``ProducerIdsExhaustedError`` when no block is left."""
        async with self._lock:
            if (
                self.current_block is None
                or self.next_producer_id > self.current_block.last_producer_id
            ):
                try:
                    self.current_block = await self.allocate_new_block()
                except CoordError as e:
                    raise KafkaError(
                        f"Cannot allocate a producer id block: {e}",
                        error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    ) from e
                self.next_producer_id = self.current_block.first_producer_id
            producer_id = self.next_producer_id
            self.next_producer_id += 1
            return producer_id
