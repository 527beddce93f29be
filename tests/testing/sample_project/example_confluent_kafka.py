"""A user's tests with confluent-kafka and the kafkalite fixtures (README: "Testing your
application with kafkalite"). Run by tests/testing/test_pytest_plugin.py through pytester."""

import time

from confluent_kafka import Consumer, Producer


def consume(consumer, count, timeout=30.0):
    values, deadline = [], time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is not None and message.error() is None:
            values.append(message.value())
    return values


def test_produce_then_consume(kafkalite_broker):
    kafkalite_broker.create_topic("orders", partitions=3)
    producer = Producer({"bootstrap.servers": kafkalite_broker.bootstrap_servers})
    for i in range(10):
        producer.produce("orders", key=str(i), value=f"order-{i}")
    assert producer.flush(10) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": kafkalite_broker.bootstrap_servers,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["orders"])
    try:
        assert sorted(consume(consumer, 10)) == sorted(f"order-{i}".encode() for i in range(10))
    finally:
        consumer.close()


def test_group_rebalance_shares_the_partitions(kafkalite_broker):
    kafkalite_broker.create_topic("events", partitions=2)

    def member():
        return Consumer(
            {
                "bootstrap.servers": kafkalite_broker.bootstrap_servers,
                "group.id": "workers",
                "heartbeat.interval.ms": 100,
                "auto.offset.reset": "earliest",
            }
        )

    def wait_for_assignment(consumers, sizes, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for c in consumers:
                c.poll(0.05)
            if sorted(len(c.assignment()) for c in consumers) == sizes:
                return [c.assignment() for c in consumers]
        raise AssertionError(f"no {sizes} assignment: {[c.assignment() for c in consumers]}")

    first = member()
    first.subscribe(["events"])
    wait_for_assignment([first], [2])
    second = member()
    second.subscribe(["events"])
    try:
        assignments = wait_for_assignment([first, second], [1, 1])
        assert {tp.partition for a in assignments for tp in a} == {0, 1}
    finally:
        second.close()
        first.close()


def test_leader_failover(kafkalite_cluster):
    cluster = kafkalite_cluster
    cluster.create_topic("payments", replication_factor=3, config={"min.insync.replicas": 2})
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
    producer.produce("payments", b"before")
    assert producer.flush(30) == 0

    old_leader = cluster.partitions("payments")[0].leader
    cluster.kill(old_leader)  # returns once another broker leads the partition
    assert cluster.partitions("payments")[0].leader != old_leader

    producer.produce("payments", b"after")
    assert producer.flush(30) == 0
    assert [m.value for m in cluster.consume_all("payments")] == [b"before", b"after"]
