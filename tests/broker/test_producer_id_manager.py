"""ProducerIdManager: blocks reserved through /latest_producer_id_block with CAS."""

from __future__ import annotations

import asyncio
import json

import pytest

from kafkalite.broker.producer_id_manager import (
    PRODUCER_ID_BLOCK_PATH,
    InMemoryProducerIdBlockStore,
    ProducerIdBlock,
    ProducerIdManager,
)
from kafkalite.coord.embedded import EmbeddedStore


async def test_ids_are_consecutive_within_a_block_and_blocks_advance():
    store = InMemoryProducerIdBlockStore()
    manager = ProducerIdManager(3, store, block_size=5)
    ids = [await manager.generate_producer_id() for _ in range(7)]
    assert ids == [0, 1, 2, 3, 4, 5, 6]
    assert json.loads(store.data) == {
        "version": 1,
        "broker": 3,
        "block_start": "5",
        "block_end": "9",
    }


async def test_two_brokers_never_share_ids_and_concurrent_calls_are_serialised():
    store = InMemoryProducerIdBlockStore()
    a = ProducerIdManager(1, store, block_size=10)
    b = ProducerIdManager(2, store, block_size=10)
    ids = await asyncio.gather(*(m.generate_producer_id() for m in [a, b] * 25))
    assert len(set(ids)) == 50
    # 25 ids each = 3 blocks each (the last partly used), 6 blocks in total.
    assert json.loads(store.data)["block_end"] == str(6 * 10 - 1)


async def test_lost_race_retries_next_block():
    store = InMemoryProducerIdBlockStore()
    manager = ProducerIdManager(1, store, block_size=10)
    real_cas = store.compare_and_set

    async def racing_cas(data, version):
        if store.data is None:
            # Another broker reserves block 0-9 between our read and our write.
            await real_cas(ProducerIdBlock(2, 0, 10).to_json(), version)
        return await real_cas(data, version)

    store.compare_and_set = racing_cas
    assert await manager.generate_producer_id() == 10
    assert json.loads(store.data)["broker"] == 1


async def test_over_the_embedded_coordination_store():
    store = EmbeddedStore(None)
    session = await store.open_session()
    try:
        first = ProducerIdManager(1, session)
        assert await first.generate_producer_id() == 0
        data, stat = await session.get_data(PRODUCER_ID_BLOCK_PATH)
        assert json.loads(data) == {
            "version": 1,
            "broker": 1,
            "block_start": "0",
            "block_end": "999",
        }
        second = ProducerIdManager(2, session)
        assert await second.generate_producer_id() == 1000
        _, stat2 = await session.get_data(PRODUCER_ID_BLOCK_PATH)
        assert stat2.version == stat.version + 1
    finally:
        await session.close()
        await store.close()


async def test_store_failure_is_a_retriable_kafka_error():
    from kafkalite.coord.errors import ConnectionLoss
    from kafkalite.protocol.errors import ErrorCode, KafkaError

    class Unreachable:
        async def get(self):
            raise ConnectionLoss("store unreachable")

        async def compare_and_set(self, data, version):
            raise AssertionError("not reached")

    manager = ProducerIdManager(1, Unreachable())
    with pytest.raises(KafkaError) as info:
        await manager.generate_producer_id()
    assert info.value.error_code is ErrorCode.COORDINATOR_NOT_AVAILABLE and info.value.retriable
