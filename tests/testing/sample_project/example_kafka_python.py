"""A user's tests with kafka-python and the kafkalite fixtures."""

import pytest
from kafka import KafkaConsumer, KafkaProducer


def consume(consumer, count, rounds=300):
    values = []
    for _ in range(rounds):
        for records in consumer.poll(timeout_ms=100).values():
            values.extend(r.value for r in records)
        if len(values) >= count:
            break
    return values


def test_produce_then_consume(kafkalite_bootstrap):
    producer = KafkaProducer(bootstrap_servers=kafkalite_bootstrap)
    for i in range(5):
        producer.send("orders", f"order-{i}".encode())
    producer.flush(30)
    producer.close()

    consumer = KafkaConsumer(
        "orders",
        bootstrap_servers=kafkalite_bootstrap,
        group_id="billing",
        auto_offset_reset="earliest",
    )
    try:
        assert consume(consumer, 5) == [f"order-{i}".encode() for i in range(5)]
    finally:
        consumer.close()


@pytest.mark.kafkalite(subprocess=True, config={"num.partitions": 4})
def test_in_a_subprocess_with_config(kafkalite_broker):
    assert kafkalite_broker.process is not None  # python -m kafkalite serve
    producer = KafkaProducer(bootstrap_servers=kafkalite_broker.bootstrap_servers)
    producer.send("auto-created", b"x").get(timeout=30)
    producer.close()
    assert sorted(kafkalite_broker.partitions("auto-created")) == [0, 1, 2, 3]


def test_leader_failover(kafkalite_cluster):
    cluster = kafkalite_cluster
    cluster.create_topic("payments", replication_factor=3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all")
    producer.send("payments", b"before").get(timeout=30)
    cluster.kill(cluster.partitions("payments")[0].leader)
    producer.send("payments", b"after").get(timeout=60)
    producer.close()
    assert [m.value for m in cluster.consume_all("payments")] == [b"before", b"after"]
