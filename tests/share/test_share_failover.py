"""Share groups on three brokers: the share-partition's leader and the share coordinator may be
different brokers (the persister then sends the state APIs over the inter-broker listener), and
when the partition's leader dies its successor resumes from the persisted state: an accepted
record is not delivered again, the others are."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer

from kafkalite.testing import Cluster, wait_for

pytestmark = pytest.mark.integration


def poll_until(c, done, handle, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        for m in c.poll(0.3):
            if m.error() is None:
                handle(m)


def test_accepted_records_stay_accepted_when_the_partition_leader_fails():
    settings = {
        "share.auto.offset.reset": "earliest",
        "offsets.topic.num.partitions": 1,
        "share.coordinator.state.topic.num.partitions": 3,
    }
    with Cluster(brokers=3, config=settings) as cluster:
        cluster.create_topic("failover", replication_factor=3)
        cluster.produce("failover", [f"r{i}".encode() for i in range(20)])
        c = ShareConsumer(
            {
                "bootstrap.servers": cluster.bootstrap_servers,
                "group.id": "g-failover",
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": 5,
            }
        )
        c.subscribe(["failover"])
        accepted: set[int] = set()

        def accept_first_ten(m):
            if m.offset() < 10:
                accepted.add(m.offset())
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            else:
                c.acknowledge(m, AcknowledgeType.RELEASE)

        poll_until(c, lambda: accepted >= set(range(10)), accept_first_ten)
        results = c.commit_sync()
        assert all(e is None for e in results.values()), results
        c.close()

        leader = cluster.partitions("failover")[0].leader
        cluster.kill(leader)
        wait_for(
            lambda: cluster.partitions("failover")[0].leader not in (-1, leader),
            "a new leader of failover-0",
        )

        c = ShareConsumer(
            {
                "bootstrap.servers": cluster.bootstrap_of(*cluster.running_brokers),
                "group.id": "g-failover",
            }
        )
        c.subscribe(["failover"])
        after: list[int] = []
        try:
            poll_until(
                c, lambda: set(after) >= set(range(10, 20)), lambda m: after.append(m.offset())
            )
        finally:
            c.close()
    assert not set(after) & accepted, "an accepted record was delivered again"
