"""Online migration between a classic and a consumer group, with real clients
(confluent-kafka / librdkafka), as Kafka 4.x's ``group.consumer.migration.policy=bidirectional``
does it:

- two classic members (``group.protocol=classic``, cooperative-sticky or range) share a topic;
- a ``group.protocol=consumer`` member joins the same group: the group becomes a consumer group,
  the classic members keep being served through JoinGroup/SyncGroup/Heartbeat and give up
  partitions to the newcomer; every partition ends up owned by exactly one member, no
  partition is ever owned by two members at once, and every record is consumed;
- ConsumerGroupDescribe shows the classic members as classic (MemberType 0);
- the consumer-protocol member leaves: the group becomes classic again, rebalances, and the
  classic members share every partition;
- kafka-python classic members (older JoinGroup and OffsetCommit versions) are served the same
  way inside the upgraded group and commit with their generation.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from kafkalite.testing import Broker
from tests.integration.support import kafka_python_metadata_before_poll

PARTITIONS = 6
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def broker():
    with Broker(
        config={
            "group.consumer.migration.policy": "bidirectional",
            "group.consumer.heartbeat.interval.ms": 500,
            "group.consumer.session.timeout.ms": 10000,
        }
    ) as b:
        yield b


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        producer.produce(topic, v.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


class Member:
    """An in-process consumer whose callbacks track what it owns."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str, **extra) -> None:
        from confluent_kafka import Consumer

        config = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 1000,
            **extra,
        }
        if protocol == "classic":
            config.setdefault("heartbeat.interval.ms", 300)
            config.setdefault("session.timeout.ms", 10000)
        self.protocol = protocol
        self.consumer = Consumer(config)
        self.owned: set[int] = set()
        self.values: list[str] = []
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, consumer, partitions) -> None:
        # eager (range): the whole assignment after everything was revoked; cooperative and
        # the consumer protocol: what is added
        self.owned |= {tp.partition for tp in partitions}

    def _on_revoke(self, consumer, partitions) -> None:
        self.owned -= {tp.partition for tp in partitions}

    def poll(self) -> None:
        msg = self.consumer.poll(0.02)
        if msg is not None and msg.error() is None:
            self.values.append(msg.value().decode())

    def close(self) -> None:
        self.consumer.close()


class Watch:
    """Polls the members in turn and checks, after every poll, that no partition is owned by
    two of them."""

    def __init__(self, members: list[Member]) -> None:
        self.members = members

    def until(self, condition, what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            for m in self.members:
                m.poll()
                self.check()
            if condition():
                return
            if time.monotonic() > deadline:
                owned = [sorted(m.owned) for m in self.members]
                raise AssertionError(f"timed out waiting for {what}; owned: {owned}")

    def check(self) -> None:
        seen: set[int] = set()
        for m in self.members:
            assert not (m.owned & seen), [sorted(x.owned) for x in self.members]
            seen |= m.owned

    def covered(self) -> bool:
        owned = [m.owned for m in self.members]
        return all(owned) and set().union(*owned) == set(range(PARTITIONS))


async def _member_types(bootstrap: str, group: str) -> list[int]:
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    client = KafkaClient(bootstrap, client_id="migration-test")
    try:
        await client.start()
        r = await client.send(
            ApiKey.CONSUMER_GROUP_DESCRIBE,
            request_builder(
                ApiKey.CONSUMER_GROUP_DESCRIBE,
                group_ids=[group],
                include_authorized_operations=False,
            ),
        )
        return sorted(m.member_type for m in r.groups[0].members)
    finally:
        await client.close()


async def _group_type(bootstrap: str, group: str) -> str | None:
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    client = KafkaClient(bootstrap, client_id="migration-test")
    try:
        await client.start()
        r = await client.send(
            ApiKey.LIST_GROUPS,
            request_builder(ApiKey.LIST_GROUPS, states_filter=[], types_filter=[]),
        )
        types = {g.group_id: g.group_type for g in r.groups}
        return types.get(group)
    finally:
        await client.close()


def group_type(bootstrap: str, group: str) -> str | None:
    return asyncio.run(_group_type(bootstrap, group))


async def _describe_groups(bootstrap: str, group: str, version: int):
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    client = KafkaClient(bootstrap, client_id="migration-test")
    try:
        await client.start()
        r = await client.send(
            ApiKey.DESCRIBE_GROUPS,
            request_builder(
                ApiKey.DESCRIBE_GROUPS, groups=[group], include_authorized_operations=False
            ),
            version=version,
        )
        return r.groups[0]
    finally:
        await client.close()


def assert_described_as_kafka_describes_a_consumer_group(bootstrap: str, group: str, n: int):
    """DescribeGroups (API 15) answers only for classic groups: Kafka 4.x's
    GroupMetadataManager.describeGroups describes any other group, a consumer group with
    classic members included, as Dead with no members (v6+: GROUP_ID_NOT_FOUND, "Group ... is
    not a classic group."; kafkalite serves v0-v5, which carry no error). The admin clients
    see the group through ConsumerGroupDescribe (confluent-kafka) instead."""
    from confluent_kafka import ConsumerGroupState, ConsumerGroupType
    from confluent_kafka.admin import AdminClient

    for version in (0, 5):
        described = asyncio.run(_describe_groups(bootstrap, group, version))
        assert (described.error_code, described.group_state) == (0, "Dead")
        assert (described.protocol_type, described.protocol_data) == ("", "")
        assert list(described.members) == []
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description = admin.describe_consumer_groups([group])[group].result(30)
    assert description.type == ConsumerGroupType.CONSUMER
    assert description.state not in (ConsumerGroupState.DEAD, ConsumerGroupState.EMPTY)
    assert len(description.members) == n


@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range"])
def test_classic_group_upgraded_by_a_consumer_member_and_downgraded_when_it_leaves(
    broker, strategy
):
    bootstrap = broker.bootstrap_servers
    topic, group = f"migrate-{strategy}", f"migrate-{strategy}-group"
    create_topic(bootstrap, topic)
    classic = []
    for _ in range(2):
        classic.append(
            Member(
                bootstrap, group, topic, "classic", **{"partition.assignment.strategy": strategy}
            )
        )
    modern: Member | None = None
    try:
        watch = Watch(classic)
        watch.until(watch.covered, "the classic members to share the topic")
        assert group_type(bootstrap, group) == "classic"

        # the consumer-protocol member converts the group and gets a share
        modern = Member(bootstrap, group, topic, "consumer")
        watch = Watch([*classic, modern])
        watch.until(
            lambda: (
                watch.covered()
                and all(len(m.owned) == 2 for m in watch.members)  # the uniform target, reached
                and group_type(bootstrap, group) == "consumer"
            ),
            "the upgraded group to share the topic among all three",
        )
        # ConsumerGroupDescribe v1: two classic members (0) and one of the consumer protocol
        assert asyncio.run(_member_types(bootstrap, group)) == [0, 0, 1]
        # DescribeGroups: not a classic group any more, classic members or not
        assert_described_as_kafka_describes_a_consumer_group(bootstrap, group, 3)
        values = [f"v{i}" for i in range(300)]
        produce(bootstrap, topic, values)
        watch.until(
            lambda: {v for m in watch.members for v in m.values} == set(values), "every record"
        )
        # every member commits what it read in the consumer group, the classic ones with their
        # generation (their member epoch), at the OffsetCommit version librdkafka picks
        for m in watch.members:
            if m.owned:
                m.consumer.commit(asynchronous=False)
        # every record reached a member (a partition that moves is read again from the start
        # by its new owner, nothing being committed here, so a record may come twice; no
        # partition was ever owned by two members at once: Watch checks after every poll)

        # the consumer-protocol member leaves: the group is classic again
        modern.close()
        modern = None
        watch = Watch(classic)
        watch.until(
            lambda: watch.covered() and group_type(bootstrap, group) == "classic",
            "the downgraded group to share the topic among the classic members",
        )
        # a classic group again: DescribeGroups describes it with its members
        described = asyncio.run(_describe_groups(bootstrap, group, 5))
        assert (described.error_code, described.protocol_type) == (0, "consumer")
        assert described.group_state != "Dead" and len(described.members) == 2
        more = [f"w{i}" for i in range(120)]
        produce(bootstrap, topic, more)
        watch.until(
            lambda: {v for m in classic for v in m.values if v.startswith("w")} == set(more),
            "every record after the downgrade",
        )
    finally:
        for m in classic:
            m.close()
        if modern is not None:
            modern.close()


def test_describe_groups_of_a_consumer_group(broker):
    bootstrap = broker.bootstrap_servers
    topic, group = "describe-consumer", "describe-consumer-group"
    create_topic(bootstrap, topic)
    member = Member(bootstrap, group, topic, "consumer")
    try:
        watch = Watch([member])
        watch.until(lambda: member.owned == set(range(PARTITIONS)), "the member's assignment")
        assert_described_as_kafka_describes_a_consumer_group(bootstrap, group, 1)
    finally:
        member.close()


class KafkaPythonMember:
    """A kafka-python (classic protocol, range, older JoinGroup/OffsetCommit versions) member
    with the same interface as ``Member``."""

    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        owner = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                owner.owned -= {tp.partition for tp in revoked}

            def on_partitions_assigned(self, assigned):
                owner.owned |= {tp.partition for tp in assigned}

        self.owned: set[int] = set()
        self.values: list[str] = []
        self.consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=300,
        )
        self.consumer.subscribe([topic], listener=Listener())
        # kafka-python 3.0.12 must have built its topic-metadata snapshot before its first poll
        # (see the helper)
        kafka_python_metadata_before_poll(self.consumer, topic)

    def poll(self) -> None:
        # 100 ms as tests/integration/test_groups_clients.py: much shorter polls meet
        # kafka-python's stalled-rebalance bug (tests/integration/support.py) more often
        for records in self.consumer.poll(timeout_ms=100).values():
            self.values.extend(r.value.decode() for r in records)

    def close(self) -> None:
        self.consumer.close()


def test_a_kafka_python_member_is_served_inside_the_upgraded_group(broker):
    bootstrap = broker.bootstrap_servers
    topic, group = "migrate-kafka-python", "migrate-kafka-python-group"
    create_topic(bootstrap, topic)
    classic = [KafkaPythonMember(bootstrap, group, topic)]
    members: list = list(classic)
    try:
        # one at a time: the second joins a stable group (a rejoin the coordinator asks for)
        watch = Watch(members)
        watch.until(watch.covered, "the first kafka-python member to own the topic")
        classic.append(KafkaPythonMember(bootstrap, group, topic))
        members.append(classic[-1])
        watch = Watch(members)
        watch.until(watch.covered, "the kafka-python members to share the topic")
        members.append(Member(bootstrap, group, topic, "consumer"))
        watch = Watch(members)
        watch.until(
            lambda: (
                watch.covered()
                and all(len(m.owned) == 2 for m in members)
                and group_type(bootstrap, group) == "consumer"
            ),
            "the upgraded group to share the topic among all three",
        )
        values = [f"k{i}" for i in range(120)]
        produce(bootstrap, topic, values)
        watch.until(lambda: {v for m in members for v in m.values} == set(values), "every record")
        for m in classic:
            m.consumer.commit()  # an OffsetCommit below v9, with its generation
    finally:
        for m in members:
            m.close()
