"""Committed offsets survive broker restarts (SIGTERM and SIGKILL), for each client.

Per client, on its own broker: a consumer in a group consumes a 6-partition topic and commits
every partition's position with a metadata string (non-ASCII included); OffsetFetch returns the
strings unchanged. The broker is stopped with SIGTERM and restarted; more messages are produced;
a new consumer of the same group receives exactly the new ones (it resumed at the committed
offsets), commits, and the same again after a SIGKILL restart (the coordinator rebuilds its
groups and offsets from ``__consumer_offsets``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkalite.testing import Broker
from tests.integration.common import wait_for
from tests.integration.support import (
    CLIENTS,
    PARTITIONS,
    create_topic,
    kafka_python_metadata_before_poll,
    produce,
)

DEADLINE_S = 60.0


def metadata_for(partition: int, round_: int) -> str:
    return f"ckpt-{round_}-p{partition}-ünïcødé"


def stored_metadata(client: str, partition: int, round_: int) -> str:
    """The metadata string as the client puts it on the wire: confluent-kafka's binding sends
    the C string's terminating NUL as part of it (metadata_size = strlen + 1); the broker keeps
    whatever was sent, as Kafka does."""
    suffix = "\x00" if client == "confluent-kafka" else ""
    return metadata_for(partition, round_) + suffix


# ---------------------------------------------------------------------- one consumer per client


def consume_confluent(bootstrap, topic, group, want, round_):
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < want and time.monotonic() < deadline:
            for m in consumer.consume(500, 0.2):
                if m.error() is None:
                    got.append((m.partition(), m.offset(), m.value().decode()))
        ends = _ends(got)
        consumer.commit(
            offsets=[
                TopicPartition(topic, p, o, metadata=metadata_for(p, round_))
                for p, o in ends.items()
            ],
            asynchronous=False,
        )
    finally:
        consumer.close()
    return got


def consume_kafka_python(bootstrap, topic, group, want, round_):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
    )
    got = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        kafka_python_metadata_before_poll(consumer, topic)  # a kafka-python 3.0.12 bug, see there
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got.extend((m.partition, m.offset, m.value.decode()) for m in records)
        consumer.commit(
            {
                TopicPartition(topic, p): OffsetAndMetadata(o, metadata_for(p, round_), -1)
                for p, o in _ends(got).items()
            }
        )
    finally:
        consumer.close()
    return got


def consume_aiokafka(bootstrap, topic, group, want, round_):
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run():
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=6000,
        )
        await consumer.start()
        got = []
        deadline = time.monotonic() + DEADLINE_S
        try:
            while len(got) < want and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend((m.partition, m.offset, m.value.decode()) for m in records)
            await consumer.commit(
                {
                    TopicPartition(topic, p): (o, metadata_for(p, round_))
                    for p, o in _ends(got).items()
                }
            )
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


CONSUMERS = {
    "confluent-kafka": consume_confluent,
    "kafka-python": consume_kafka_python,
    "aiokafka": consume_aiokafka,
}


def _ends(got):
    """The position after the last consumed message of each partition."""
    ends: dict[int, int] = {}
    for p, o, _ in got:
        ends[p] = max(ends.get(p, 0), o + 1)
    return ends


async def _offset_fetch(bootstrap, group, topic):
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    client = KafkaClient(bootstrap, client_id="groups-test")
    try:
        await client.start()
        response = await client.send(
            ApiKey.OFFSET_FETCH,
            request_builder(
                ApiKey.OFFSET_FETCH,
                group_id=group,
                topics=[{"name": topic, "partition_indexes": list(range(PARTITIONS))}],
            ),
            version=5,
        )
    finally:
        await client.close()
    if response.error_code != 0:
        return {"group error": int(response.error_code)}  # e.g. still loading after a restart
    return {
        p.partition_index: (p.committed_offset, p.metadata, int(p.error_code))
        for t in response.topics
        for p in t.partitions
    }


def offset_fetch(bootstrap, group, topic):
    return asyncio.run(_offset_fetch(bootstrap, group, topic))


@pytest.fixture
def broker(tmp_path):
    """A subprocess broker whose offsets topic has several partitions."""
    config = {"offsets.topic.num.partitions": "5"}
    with Broker(config, subprocess=True, data_dir=tmp_path / "broker") as broker:
        yield broker


@pytest.mark.timeout(150)
@pytest.mark.parametrize("client", CLIENTS)
def test_consumers_resume_from_committed_offsets_after_restarts(broker, client):
    topic, group = "ledger", "accounts"
    consume = CONSUMERS[client]
    create_topic(broker.bootstrap_servers, topic)
    sent = [f"r0-{i}" for i in range(60)]
    produce(broker.bootstrap_servers, topic, sent)

    got = consume(broker.bootstrap_servers, topic, group, len(sent), 0)
    assert sorted(v for _, _, v in got) == sorted(sent)
    committed = offset_fetch(broker.bootstrap_servers, group, topic)
    assert committed == {p: (10, stored_metadata(client, p, 0), 0) for p in range(PARTITIONS)}

    total = len(sent)
    for round_, hard in ((1, False), (2, True)):
        broker.restart(hard=hard)
        wait_for(
            lambda want=committed: offset_fetch(broker.bootstrap_servers, group, topic) == want,
            "committed offsets reloaded after the restart",
            timeout=DEADLINE_S,
        )
        fresh = [f"r{round_}-{i}" for i in range(30)]
        produce(broker.bootstrap_servers, topic, fresh)
        got = consume(broker.bootstrap_servers, topic, group, len(fresh), round_)
        assert sorted(v for _, _, v in got) == sorted(fresh), f"round {round_}: only new messages"
        firsts = {p: min(o for q, o, _ in got if q == p) for p in range(PARTITIONS)}
        assert firsts == {p: total // PARTITIONS for p in range(PARTITIONS)}
        total += len(fresh)
        committed = offset_fetch(broker.bootstrap_servers, group, topic)
        assert committed == {
            p: (total // PARTITIONS, stored_metadata(client, p, round_), 0)
            for p in range(PARTITIONS)
        }
