"""ZkIsrChangeWriter on the embedded coordination store."""

from __future__ import annotations

import json

from kafkalite.broker.isr_writer import ZkIsrChangeWriter
from kafkalite.broker.types import LeaderAndIsr
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.coord.paths import ISR_CHANGE_NOTIFICATION, partition_state_path
from kafkalite.protocol.types import TopicPartition

TP = TopicPartition("t", 0)
PATH = partition_state_path("t", 0)


async def _session():
    store = EmbeddedStore(None)
    session = await store.open_session()
    initial = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2]}
    await session.create(PATH, json.dumps(initial).encode(), makepath=True)
    return store, session


async def test_cas_write_and_notification():
    store, session = await _session()
    try:
        writer = ZkIsrChangeWriter(session)
        version = await writer(TP, LeaderAndIsr(1, 0, (1,), 0, 1))
        assert version == 1
        data, _ = await session.get_data(PATH)
        assert json.loads(data) == {
            "controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1]
        }
        [name] = await session.get_children(ISR_CHANGE_NOTIFICATION)
        assert name.startswith("isr_change_")
        note, _ = await session.get_data(f"{ISR_CHANGE_NOTIFICATION}/{name}")
        assert json.loads(note) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
        # Retrying the same write at the old version: the data is ours, so it succeeded.
        assert await writer(TP, LeaderAndIsr(1, 0, (1,), 0, 1)) == 1
        # The controller moved on (new leader epoch): the stale leader's CAS fails.
        await session.set_data(PATH, b'{"controller_epoch":2,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}', 1)
        assert await writer(TP, LeaderAndIsr(1, 0, (1, 2), 1, 1)) is None
        assert await writer(TopicPartition("gone", 0), LeaderAndIsr(1, 0, (1,), 0, 1)) is None
    finally:
        await session.close()
        await store.close()
