"""Helpers shared by the consumer-group tests with real clients (and
bench/group_rebalance_stress.py): the clients tested, the topic's partitions, producing,
creating the topic and describing a group."""

from __future__ import annotations

import asyncio

CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
PARTITIONS = 6


def kafka_python_metadata_before_poll(consumer, topic: str) -> None:
    """Have a subscribed kafka-python 3.0.12 consumer build its topic-metadata snapshot before
    its first poll: this keeps it off a client bug that stalls a rebalance whatever the broker
    (Kafka included). Call it after the consumer subscribed.

    The bug: ``join_group_async`` runs ``while need_rejoin()`` and, when poll's timeout ends
    first, leaves its JoinGroup+SyncGroup task running for the next poll to pick up. A leader
    that rejoins because its topic-metadata snapshot changed has ``rejoin_needed`` False, and
    the assignment the task performs copies the new snapshot, so ``need_rejoin()`` turns
    False. If the task completes between two polls, no poll ever looks at it again: the
    member stays REBALANCING with heartbeats off and its new assignment unused, is evicted
    after its session timeout and never rejoins. (Java's client loops on
    ``rejoinNeededOrPending()``, which counts the pending join.)

    The snapshot is rebuilt only when a metadata response arrives, from the topics subscribed
    at that moment. A first generation's leader whose snapshot was built before it subscribed
    (or before the topic's partitions were known) assigns with an empty snapshot, and the next
    metadata response changes it: exactly the rejoin above. ``partitions_for_topic`` answers
    from the cache when it can, so it does not rebuild the snapshot; ``topics()`` always asks
    the broker, and its response runs the coordinator's metadata listener on the subscription.
    bench/group_rebalance_stress.py runs test_groups_clients.py's scenario: with 5 ms polls 7
    runs of 11 stalled so, none of 40 with the snapshot built first (with 100 ms polls, 1 in
    5 to 1 in 20 stalled). Built first, the snapshot never changes in these tests, and every
    rejoin is one the coordinator asked for (``rejoin_needed`` stays True until the join is
    consumed), which kafka-python handles."""
    assert topic in consumer.subscription(), f"subscribe kafka-python to {topic} first"
    assert topic in consumer.topics()  # a metadata request, whatever the cache holds
    partitions = consumer.partitions_for_topic(topic)
    assert partitions == set(range(PARTITIONS)), f"kafka-python sees {topic} as {partitions}"


async def describe_group(bootstrap: str, group: str):
    from kafkalite.client.client import KafkaClient
    from kafkalite.client.connection import request_builder
    from kafkalite.protocol.api import ApiKey

    client = KafkaClient(bootstrap, client_id="groups-test")
    try:
        await client.start()
        response = await client.send(
            ApiKey.DESCRIBE_GROUPS, request_builder(ApiKey.DESCRIBE_GROUPS, groups=[group])
        )
    finally:
        await client.close()
    return response.groups[0]


def describe(bootstrap: str, group: str) -> tuple[str, int]:
    """(state, member count) of a group, through DescribeGroups."""
    described = asyncio.run(describe_group(bootstrap, group))
    return described.group_state, len(described.members)


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        producer.produce(topic, v.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
