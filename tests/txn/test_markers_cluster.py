"""The marker pipeline on three in-process brokers with confluent-kafka: one EndTxn over
partitions led by two other brokers is one WriteTxnMarkers to each, and back-to-back
transactions (the next one's first AddPartitionsToTxn waiting for the previous markers) keep
read_committed exact."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafkalite.testing import Cluster
from kafkalite.testing import wait_for as shared_wait_for

PARTITIONS = 6


@pytest.fixture(scope="module")
def cluster():
    with Cluster(brokers=3) as c:
        yield c


def wait_for(condition, what: str, timeout: float = 30.0):
    return shared_wait_for(condition, what, timeout=timeout, interval=0.02)


def transactional(cluster: Cluster, txn_id: str) -> Producer:
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id}
    )
    producer.init_transactions(60)
    return producer


def coordinator_of(cluster: Cluster, txn_id: str) -> int:
    def find():
        owners = [b for b, s in cluster.servers.items() if s.txn_coordinator.is_local(txn_id)]
        return owners[0] if len(owners) == 1 else None

    return wait_for(find, f"the coordinator of {txn_id}")


def read_committed(cluster: Cluster, topic: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 30
    try:
        while len(at_end) < PARTITIONS and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                at_end.add(message.partition())
                continue
            values.append(message.value())
    finally:
        consumer.close()
    assert len(at_end) == PARTITIONS, "read_committed never reached the end"
    return values


def test_one_end_txn_over_two_brokers_sends_one_write_txn_markers_to_each(cluster):
    txn_id = f"markers-{uuid.uuid4().hex[:6]}"
    producer = transactional(cluster, txn_id)
    coordinator = coordinator_of(cluster, txn_id)
    topic = cluster.create_topic(f"spread-{uuid.uuid4().hex[:6]}", PARTITIONS, 3)
    leaders = {p: state.leader for p, state in cluster.partitions(topic).items()}
    others = sorted({b for b in leaders.values() if b != coordinator})
    assert len(others) == 2, f"partitions not spread over the brokers: {leaders}"
    chosen = [p for p, leader in leaders.items() if leader in others]  # >= 2 per broker
    channel = cluster.servers[coordinator].txn_markers
    before = dict(channel.requests_sent)

    producer.begin_transaction()
    for p in chosen:
        producer.produce(topic, f"r{p}".encode(), partition=p)
    producer.commit_transaction(60)

    def sent():
        return {b: n - before.get(b, 0) for b, n in channel.requests_sent.items()}

    wait_for(lambda: all(sent().get(b) for b in others), "the markers")
    wait_for(
        lambda: (
            cluster.servers[coordinator].txn_coordinator.describe(txn_id).state == "CompleteCommit"
        ),
        "the completion",
    )
    assert {b: n for b, n in sent().items() if n} == dict.fromkeys(others, 1)
    assert sorted(read_committed(cluster, topic)) == sorted(f"r{p}".encode() for p in chosen)


def test_back_to_back_transactions_stay_exact(cluster):
    txn_id = f"b2b-{uuid.uuid4().hex[:6]}"
    producer = transactional(cluster, txn_id)
    topic = cluster.create_topic(f"b2b-{uuid.uuid4().hex[:6]}", PARTITIONS, 3)
    expected = []
    for n in range(12):
        producer.begin_transaction()
        values = [f"{n}-{p}".encode() for p in range(PARTITIONS)]
        for p, value in enumerate(values):
            producer.produce(topic, value, partition=p)
        if n % 4 == 1:  # the last one commits: its state is checked below
            producer.abort_transaction(60)
        else:
            producer.commit_transaction(60)
            expected += values
    assert sorted(read_committed(cluster, topic)) == sorted(expected)
    coordinator = coordinator_of(cluster, txn_id)
    wait_for(
        lambda: (
            cluster.servers[coordinator].txn_coordinator.describe(txn_id).state == "CompleteCommit"
        ),
        "the last completion",
    )
