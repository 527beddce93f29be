"""Log compaction seen by a real client (confluent-kafka).

* A topic with cleanup.policy=compact, small segments and min.cleanable.dirty.ratio=0.01 gets
  many updates of a few keys: the partition shrinks on disk, and a consumer reading from the
  beginning gets exactly the latest value of each key, at the offset it was produced at.
* A record without a key is refused by that topic with INVALID_RECORD.
* ``__consumer_offsets``: many commits of one group shrink the offsets partition; after a
  SIGKILL restart (recovery of a compacted log with offset gaps) the group still resumes at its
  last committed offset.

Waits are polls of a condition with a deadline. The broker is given log.cleaner.backoff.ms=200
(Kafka's default is 15 s).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from tests.integration.common import wait_for

DEADLINE_S = 120.0
KEYS = [f"key-{i}".encode() for i in range(5)]
UPDATES = 2000
CLEANER_OVERRIDES = {"log.cleaner.backoff.ms": "200"}


def log_bytes(partition_dir: Path) -> float:
    """The partition's segment bytes; infinite when the cleaner swapped a segment between the
    listing and its stat (a half-counted directory would look smaller than it is)."""
    try:
        return sum(p.stat().st_size for p in partition_dir.glob("*.log"))
    except FileNotFoundError:
        return math.inf


def read_from_beginning(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    try:
        deadline_polls = 200
        while deadline_polls and (not got or got[-1][0] < end - 1):
            deadline_polls -= 1
            for m in consumer.consume(1000, 0.1):
                if m.error() is None:
                    got.append((m.offset(), m.key(), m.value()))
    finally:
        consumer.close()
    return got


def test_compacted_topic_keeps_the_latest_value_per_key(start_broker):
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    broker = start_broker(CLEANER_OVERRIDES)
    topic = "compacted"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    configs = {
        "cleanup.policy": "compact",
        "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01",
    }
    admin.create_topics([NewTopic(topic, 1, 1, config=configs)])[topic].result(30)
    described = admin.describe_configs([ConfigResource("TOPIC", topic)])
    shown = {k: v.value for k, v in next(iter(described.values())).result(30).items()}
    assert shown["min.cleanable.dirty.ratio"] == "0.01"
    assert shown["delete.retention.ms"] == "86400000"
    assert shown["min.compaction.lag.ms"] == "0"
    assert shown["max.compaction.lag.ms"] == "9223372036854775807"

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "linger.ms": 1,
            "compression.type": "lz4",
            "batch.size": 1000,  # below segment.bytes: a larger batch would be refused
        }
    )
    latest: dict[bytes, tuple[int, bytes]] = {}
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            latest[msg.key()] = (msg.offset(), msg.value())

    for i in range(UPDATES):
        producer.produce(topic, key=KEYS[i % len(KEYS)], value=b"v-%d" % i, on_delivery=delivered)
        producer.poll(0)
    producer.flush(30)
    # Two large incompressible records of new keys: the second surely rolls the active
    # segment, so everything else becomes cleanable (the active segment never is).
    for n in range(2):
        producer.produce(topic, key=b"roll-%d" % n, value=os.urandom(1500), on_delivery=delivered)
        producer.flush(30)
    assert errors == []
    end = max(offset for offset, _ in latest.values()) + 1

    # A record without a key: refused, nothing appended.
    refused = []
    producer.produce(topic, value=b"no key", on_delivery=lambda err, msg: refused.append(err))
    producer.flush(30)
    assert len(refused) == 1 and refused[0] is not None
    assert refused[0].code() == KafkaError.INVALID_RECORD, refused[0]

    partition_dir = broker.log_dir / f"{topic}-0"
    produced_bytes = UPDATES * 20  # at least ~20 bytes per record on disk
    wait_for(
        lambda: log_bytes(partition_dir) < produced_bytes / 4,
        "the compacted partition to shrink on disk",
        timeout=DEADLINE_S,
        interval=0.2,
    )

    def compacted_view():
        got = read_from_beginning(broker.bootstrap_servers, topic, end)
        return got if len(got) == len(latest) else None

    got = wait_for(compacted_view, "one record per key", timeout=DEADLINE_S, interval=0.5)
    assert {key: (offset, value) for offset, key, value in got} == latest
    assert [offset for offset, _, _ in got] == sorted(offset for offset, _ in latest.values())


def test_consumer_offsets_are_compacted_and_survive_a_restart(start_broker):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = start_broker(
        {
            **CLEANER_OVERRIDES,
            "offsets.topic.num.partitions": "1",
            "offsets.topic.segment.bytes": "4096",
        }
    )
    topic = "events"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(20):
        producer.produce(topic, value=b"m-%d" % i)
    producer.flush(30)

    commits = 1500
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.commit": False,
        }
    )
    try:
        for i in range(commits):
            consumer.commit(offsets=[TopicPartition(topic, 0, i % 13)], asynchronous=False)
        consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    finally:
        consumer.close()

    offsets_dir = broker.log_dir / "__consumer_offsets-0"
    # Each commit record is ~70 bytes or more: 1500 of them are ~100 KiB before compaction.
    wait_for(
        lambda: log_bytes(offsets_dir) < 20_000,
        "__consumer_offsets-0 to shrink on disk",
        timeout=DEADLINE_S,
        interval=0.2,
    )
    checkpoint = broker.log_dir / "cleaner-offset-checkpoint"
    wait_for(
        lambda: checkpoint.exists() and "__consumer_offsets 0 " in checkpoint.read_text(),
        "the cleaner checkpoint",
        timeout=DEADLINE_S,
    )

    broker.restart(hard=True)
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "g",
            "enable.auto.commit": False,
        }
    )
    try:
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert committed[0].offset == 7
        consumer.assign([TopicPartition(topic, 0)])  # resumes at the committed offset

        def first_message():
            for m in consumer.consume(1, 0.2):
                if m.error() is None:
                    return m
            return None

        message = wait_for(first_message, "a message after the restart", timeout=DEADLINE_S)
        assert (message.offset(), message.value()) == (7, b"m-7")
    finally:
        consumer.close()
