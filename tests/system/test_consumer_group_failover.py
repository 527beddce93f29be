"""A KIP-848 consumer group across a kill -9 of its coordinator: three brokers on a real
ZooKeeper, ``__consumer_offsets`` replicated three times, confluent-kafka consumers with
``group.protocol=consumer``.

The coordinator wrote the group's records (metadata, members, target and current assignments)
before it answered each heartbeat; the broker that takes over the ``__consumer_offsets``
partition replays them, so the members heartbeat to it with their epochs and keep their
partitions: no revocation, no partition lost, the same member ids and epochs, and every record
produced after the kill is consumed once.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer

from kafkalite.group.records import partition_for
from kafkalite.testing import ZooKeeperServer
from tests.system.support import create_topic, logs, system_cluster, wait_for

GROUP = "kip848-failover"
TOPIC = "kip848-failover-topic"
PARTITIONS = 6
OFFSETS_PARTITIONS = 3
DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    base = tmp_path_factory.mktemp("kip848-failover")
    config = {
        "offsets.topic.replication.factor": "3",
        "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
        "default.replication.factor": "3",
        # longer than the failover: a member must not be fenced while its coordinator moves
        "group.consumer.session.timeout.ms": "45000",
        "group.consumer.heartbeat.interval.ms": "500",
    }
    with (
        ZooKeeperServer(base / "zk", max_session_timeout_ms=60000) as zk,
        system_cluster(zk, base, config) as (cluster, reader),
    ):
        yield cluster, reader


class Member:
    def __init__(self, bootstrap: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": GROUP,
                "group.protocol": "consumer",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        self.owned: set[int] = set()
        self.revoked: list[set[int]] = []
        self.lost: list[set[int]] = []
        self.values: list[str] = []
        self.consumer.subscribe(
            [TOPIC], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lost
        )

    def _assign(self, _c, partitions) -> None:
        self.owned |= {tp.partition for tp in partitions}

    def _revoke(self, _c, partitions) -> None:
        gone = {tp.partition for tp in partitions}
        if gone:
            self.revoked.append(gone)
        self.owned -= gone

    def _lost(self, _c, partitions) -> None:
        gone = {tp.partition for tp in partitions}
        self.lost.append(gone)
        self.owned -= gone

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            self.values.append(msg.value().decode())


def poll_until(members: list[Member], condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        for m in members:
            m.poll()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what}; owned {[sorted(m.owned) for m in members]}, "
                f"revoked {[m.revoked for m in members]}, lost {[m.lost for m in members]}"
            )


def describe(cluster, node: int):
    """ConsumerGroupDescribe at ``node`` (None unless it answers for the group)."""
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    async def ask():
        client = KafkaClient(cluster.bootstrap_of(node), client_id="kip848-failover-test")
        try:
            await client.start()
            return await client.send(
                ApiKey.CONSUMER_GROUP_DESCRIBE,
                request_builder(
                    ApiKey.CONSUMER_GROUP_DESCRIBE,
                    group_ids=[GROUP],
                    include_authorized_operations=False,
                ),
                node_id=node,
            )
        finally:
            await client.close()

    group = asyncio.run(ask()).groups[0]
    return group if group.error_code == 0 else None


def test_members_keep_their_partitions_and_epochs_across_a_coordinator_kill(running):
    cluster, zk = running
    create_topic(cluster, zk, TOPIC, PARTITIONS)
    members = [Member(cluster.bootstrap_servers) for _ in range(2)]
    try:
        poll_until(
            members,
            lambda: (
                all(len(m.owned) == PARTITIONS // 2 for m in members)
                and not members[0].owned & members[1].owned
            ),
            "two members with three partitions each",
        )
        offsets_partition = partition_for(GROUP, OFFSETS_PARTITIONS)
        coordinator = zk.partition_state("__consumer_offsets", offsets_partition).leader
        before = wait_for(lambda: describe(cluster, coordinator), "the group at its coordinator")
        # settled: every member at the group's epoch, nothing pending
        assert all(m.member_epoch == before.group_epoch for m in before.members)
        owned_before = [set(m.owned) for m in members]
        for m in members:
            m.revoked.clear()
        cluster.kill(coordinator)
        new = wait_for(
            lambda: (
                (s := zk.partition_state("__consumer_offsets", offsets_partition))
                and s.leader not in (-1, coordinator)
                and s.leader
            ),
            "a new leader of the group's __consumer_offsets partition",
        )
        after = wait_for(
            lambda: describe(cluster, new), "the group at its new coordinator", DEADLINE_S
        )
        assert after.group_epoch == before.group_epoch
        assert after.assignment_epoch == before.assignment_epoch
        assert sorted((m.member_id, m.member_epoch) for m in after.members) == sorted(
            (m.member_id, m.member_epoch) for m in before.members
        )
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5})
        values = [f"v{i}" for i in range(60)]
        for i, v in enumerate(values):
            producer.produce(TOPIC, v.encode(), partition=i % PARTITIONS)
        assert producer.flush(60) == 0
        poll_until(
            members,
            lambda: sum(len(m.values) for m in members) >= len(values),
            "the records produced after the kill",
        )
        assert sorted(v for m in members for v in m.values) == sorted(values)
        # the members heartbeated to the new coordinator and nobody was fenced or rebalanced
        final = describe(cluster, new)
        assert final is not None and final.group_epoch == before.group_epoch, logs(cluster)
        assert [set(m.owned) for m in members] == owned_before
        assert [m.revoked for m in members] == [[], []]
        assert [m.lost for m in members] == [[], []]
    finally:
        for m in members:
            m.consumer.close()
