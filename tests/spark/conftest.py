"""Fixtures of the data-source tests: the shared SparkSession (tests/conftest.py) with the
data source registered, a broker per module that does not create topics on its own (so a
write to a missing topic fails, as the issue asks), and helpers to make topics and records
with confluent-kafka."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from kafkalite.testing import Broker
from kafkalite.testing import wait_for as shared_wait_for

T = TypeVar("T")
DEADLINE_S = 60.0


def wait_for(condition: Callable[[], T], what: str, deadline_s: float = DEADLINE_S) -> T:
    """Poll `condition` until it returns something truthy (returned); fail after the deadline."""
    return shared_wait_for(condition, what, timeout=deadline_s, interval=0.1)


class Kafka:
    """Topics and records on one cluster, through confluent-kafka."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.admin = AdminClient({"bootstrap.servers": bootstrap})

    def create(self, topic: str, partitions: int, replication_factor: int = 1) -> str:
        futures = self.admin.create_topics([NewTopic(topic, partitions, replication_factor)])
        futures[topic].result(30)
        self.wait_led(topic, partitions)
        return topic

    def add_partitions(self, topic: str, total: int) -> None:
        self.admin.create_partitions([NewPartitions(topic, total)])[topic].result(30)
        self.wait_led(topic, total)

    def wait_led(self, topic: str, partitions: int) -> None:
        def led() -> bool:
            found = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            return (
                found is not None
                and found.error is None
                and len(found.partitions) == partitions
                and all(p.leader >= 0 for p in found.partitions.values())
            )

        wait_for(led, f"{topic} with {partitions} led partitions")

    def produce(self, topic: str, records: list[dict[str, Any]]) -> None:
        """Each record: value, and optionally key, partition, timestamp, headers."""
        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                             "linger.ms": 5})  # fmt: skip
        errors = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for r in records:
            producer.produce(topic, on_delivery=on_delivery, **r)
            producer.poll(0)
        assert producer.flush(30) == 0
        assert not errors, errors


@pytest.fixture(scope="module")
def kafka_broker(tmp_path_factory):
    b = Broker(
        data_dir=tmp_path_factory.mktemp("spark-broker"),
        config={"auto.create.topics.enable": "false"},
        subprocess=True,
        admin=False,
    )
    b.start()
    yield b
    if b.running:
        try:
            b.stop()
        except TimeoutError:
            b.kill()


@pytest.fixture(scope="module")
def kafka(kafka_broker) -> Kafka:
    return Kafka(kafka_broker.bootstrap)


@pytest.fixture
def kspark(spark):
    """The shared session with ``format("kafkalite")`` registered (again after a rebuild)."""
    from kafkalite.spark import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)
    return spark
