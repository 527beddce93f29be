"""aiokafka against kafkalite."""

import asyncio
import time

import pytest

from kafkalite.testing import Broker
from tests.integration.common import (
    BASE_TS,
    CODECS,
    DEADLINE_S,
    MESSAGES,
    PARTITIONS,
    Received,
    check_consumed,
    expected_offset_for_time,
    messages,
)

try:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("aiokafka is missing: pip install -e '.[test]'") from e


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for the module (tests use distinct topics)."""
    with Broker(subprocess=True, data_dir=tmp_path_factory.mktemp("broker")) as broker:
        yield broker


async def produce_and_consume(bootstrap):
    topic = "aio-data"
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()
    sent = []
    per_codec = MESSAGES // len(CODECS)
    for n, codec in enumerate(CODECS):
        batch = messages(codec, per_codec, start=n * per_codec)
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=codec,
            enable_idempotence=True,
            linger_ms=5,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(
                    topic,
                    value=s.value,
                    key=s.key,
                    partition=s.partition,
                    headers=list(s.headers),
                    timestamp_ms=s.timestamp,
                )
                for s in batch
            ]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()
        sent += batch

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        received = []
        deadline = time.monotonic() + DEADLINE_S
        while len(received) < len(sent):
            assert time.monotonic() < deadline, "timed out consuming"
            batches = await consumer.getmany(timeout_ms=500, max_records=5000)
            for records in batches.values():
                for r in records:
                    received.append(
                        Received(
                            r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp
                        )
                    )
        check_consumed(sent, received)
        answers = await consumer.offsets_for_times({tp: BASE_TS + 5001 for tp in partitions})
        for tp, answer in answers.items():
            assert answer.offset == expected_offset_for_time(sent, tp.partition, BASE_TS + 5001)
        ends = await consumer.end_offsets(partitions)
        assert ends == {tp: MESSAGES // PARTITIONS for tp in partitions}
    finally:
        await consumer.stop()


def test_produce_and_consume_every_codec(shared_broker):
    asyncio.run(produce_and_consume(shared_broker.bootstrap_servers))


async def admin_ops(bootstrap):
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        response = await admin.create_topics(
            [NewTopic("aio-admin", 2, 1, topic_configs={"retention.ms": "3600000"})]
        )
        assert all(t[1] == 0 for t in response.topic_errors), response
        response = await admin.create_topics([NewTopic("aio-admin", 2, 1)])
        assert [t[1] for t in response.topic_errors] == [36]  # TOPIC_ALREADY_EXISTS
        described = await admin.describe_topics(["aio-admin"])
        assert len(described[0]["partitions"]) == 2
        configs = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "aio-admin")]
        )
        assert "3600000" in repr(configs)
        await admin.create_partitions({"aio-admin": NewPartitions(3)})
        described = await admin.describe_topics(["aio-admin"])
        assert len(described[0]["partitions"]) == 3
        await admin.delete_topics(["aio-admin"])
        assert "aio-admin" not in await admin.list_topics()
        cluster = await admin.describe_cluster()
        assert [b["node_id"] for b in cluster["brokers"]] == [0]
    finally:
        await admin.close()


def test_admin_create_describe_alter_delete(shared_broker):
    asyncio.run(admin_ops(shared_broker.bootstrap_servers))
