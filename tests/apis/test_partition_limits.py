"""Partition ceilings: max.partitions.per.request, max.partitions.per.topic and
the cluster's max.partitions, through a real client (kafka-python's admin client, which, unlike
librdkafka, sends any count it is given).

One CreateTopics of 8,388,610 partitions (a single mutated byte) held the broker's loop for
minutes; now it is answered POLICY_VIOLATION at once and the broker goes on serving others.
"""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import Broker
from tests.server.support import started

HUGE = 8_388_610
POLICY_VIOLATION = int(ErrorCode.POLICY_VIOLATION)
# Without the ceilings a refused request runs for minutes: the client gives up well before.
CLIENT_TIMEOUT_MS = 30_000


PER_TOPIC = 4000  # below max.partitions.per.request (10,000 by default), to tell them apart


@pytest.fixture(scope="module")
def broker():
    with Broker(config={"max.partitions.per.topic": PER_TOPIC}) as b:
        yield b


@pytest.fixture
def admin(broker):
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=CLIENT_TIMEOUT_MS
    )
    yield client
    client.close()


def create(admin, topics: dict, *, validate_only: bool = False) -> dict[str, int]:
    result = admin.create_topics(
        topics, timeout_ms=10_000, validate_only=validate_only, raise_errors=False
    )
    return {t["name"]: t["error_code"] for t in result["topics"]}


def grow(admin, topics: dict, *, validate_only: bool = False) -> dict[str, int]:
    response = admin.create_partitions(
        topics, timeout_ms=10_000, validate_only=validate_only, raise_errors=False
    )
    return {r.name: r.error_code for r in response.results}


def partition_count(admin, topic: str) -> int | None:
    """The topic's partitions as Metadata shows them (None: no such topic); never auto-creates."""
    (found,) = admin.describe_topics([topic])
    if found["error_code"] == int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION):
        return None
    assert found["error_code"] == 0, found
    return len(found["partitions"])


def another_client_is_served(broker, topic: str) -> None:
    """A producer of its own gets a record acknowledged."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks=1)
    try:
        metadata = producer.send(topic, b"still serving").get(timeout=30)
        assert metadata.offset >= 0
    finally:
        producer.close()


def name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_create_topics_with_millions_of_partitions_is_refused_at_once(broker, admin):
    huge, served = name("huge"), name("served")
    assert create(admin, {huge: {"num_partitions": HUGE, "replication_factor": 1}}) == {
        huge: POLICY_VIOLATION
    }
    assert partition_count(admin, huge) is None
    broker.create_topic(served)
    another_client_is_served(broker, served)


def test_create_topics_over_the_per_request_or_per_topic_ceiling(broker, admin):
    # two topics of 6,000: each fits a topic, together past max.partitions.per.request; the
    # whole request is refused, nothing created (KRaft's rule)
    a, b = name("a"), name("b")
    answer = create(
        admin,
        {
            a: {"num_partitions": 6000, "replication_factor": 1},
            b: {"num_partitions": 6000, "replication_factor": 1},
        },
    )
    assert answer == {a: POLICY_VIOLATION, b: POLICY_VIOLATION}
    assert partition_count(admin, a) is None and partition_count(admin, b) is None
    # one topic past max.partitions.per.topic, beside a small one that is created
    big, small = name("big"), name("small")
    answer = create(
        admin,
        {
            big: {"num_partitions": PER_TOPIC + 1, "replication_factor": 1},
            small: {"num_partitions": 1, "replication_factor": 1},
        },
    )
    assert answer == {big: POLICY_VIOLATION, small: 0}
    # a manual assignment counts its entries
    manual = name("manual")
    assignments = {p: [broker.broker_id] for p in range(10_001)}
    assert create(admin, {manual: {"assignments": assignments}}) == {manual: POLICY_VIOLATION}
    assert partition_count(admin, manual) is None


def test_validate_only_is_held_to_the_same_ceilings(broker, admin):
    huge = name("huge")
    answer = create(
        admin, {huge: {"num_partitions": HUGE, "replication_factor": 1}}, validate_only=True
    )
    assert answer == {huge: POLICY_VIOLATION}
    big = name("big")
    answer = create(
        admin, {big: {"num_partitions": PER_TOPIC + 1, "replication_factor": 1}}, validate_only=True
    )
    assert answer == {big: POLICY_VIOLATION}
    fine = name("fine")
    answer = create(
        admin, {fine: {"num_partitions": 10, "replication_factor": 1}}, validate_only=True
    )
    assert answer == {fine: 0}
    assert partition_count(admin, fine) is None


def test_create_partitions_to_millions_is_refused_at_once(broker, admin):
    topic = name("grow")
    broker.create_topic(topic)
    assert grow(admin, {topic: HUGE}) == {topic: POLICY_VIOLATION}
    assert grow(admin, {topic: HUGE}, validate_only=True) == {topic: POLICY_VIOLATION}
    assert grow(admin, {topic: PER_TOPIC + 1}) == {topic: POLICY_VIOLATION}
    assert grow(admin, {topic: PER_TOPIC + 1}, validate_only=True) == {topic: POLICY_VIOLATION}
    assert partition_count(admin, topic) == 1
    another_client_is_served(broker, topic)
    # a count not above the current one stays INVALID_PARTITIONS, a fitting one is added
    assert grow(admin, {topic: 1}) == {topic: int(ErrorCode.INVALID_PARTITIONS)}
    assert grow(admin, {topic: 3}) == {topic: 0}
    assert partition_count(admin, topic) == 3


def test_the_cluster_ceiling_counts_the_partitions_that_exist():
    with Broker(config={"max.partitions": 20}) as broker:
        admin = KafkaAdminClient(
            bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=CLIENT_TIMEOUT_MS
        )
        try:
            assert create(admin, {"first": {"num_partitions": 12, "replication_factor": 1}}) == {
                "first": 0
            }
            # 12 exist: 9 more would make 21
            answer = create(admin, {"second": {"num_partitions": 9, "replication_factor": 1}})
            assert answer == {"second": POLICY_VIOLATION}
            answer = create(
                admin,
                {"second": {"num_partitions": 9, "replication_factor": 1}},
                validate_only=True,
            )
            assert answer == {"second": POLICY_VIOLATION}
            assert partition_count(admin, "second") is None
            # validate-only counts a request's topics together too, and creates nothing
            answer = create(
                admin,
                {
                    "v1": {"num_partitions": 5, "replication_factor": 1},
                    "v2": {"num_partitions": 4, "replication_factor": 1},
                },
                validate_only=True,
            )
            assert answer == {"v1": 0, "v2": POLICY_VIOLATION}
            assert partition_count(admin, "v1") is None
            # the topics of one request count together: 5 fit, 5 + 4 do not
            answer = create(
                admin,
                {
                    "third": {"num_partitions": 5, "replication_factor": 1},
                    "fourth": {"num_partitions": 4, "replication_factor": 1},
                },
            )
            assert answer == {"third": 0, "fourth": POLICY_VIOLATION}
            # 17 exist: growing "first" by 4 would make 21, by 3 makes 20
            assert grow(admin, {"first": 16}) == {"first": POLICY_VIOLATION}
            assert grow(admin, {"first": 15}) == {"first": 0}
            assert partition_count(admin, "first") == 15
            # full: even auto-creation is refused
            producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=3000)
            try:
                with pytest.raises(Exception):  # noqa: B017 - kafka-python's metadata timeout
                    producer.send("auto", b"x").get(timeout=10)
            finally:
                producer.close()
            assert partition_count(admin, "auto") is None
            another_client_is_served(broker, "third")
        finally:
            admin.close()


async def test_metadata_auto_creates_no_more_than_a_request_may(tmp_path):
    """Auto-creation through Metadata is held to max.partitions.per.request: a request naming
    many unknown topics creates that many partitions' worth and answers the rest
    POLICY_VIOLATION (as Kafka answers a failed auto-creation with its error)."""
    server = await started(tmp_path, **{"max.partitions.per.request": "2"})
    client = KafkaClient(server.bound_endpoints[0].connection_string.split("//")[1])
    try:
        await client.start()
        names = ["auto-a", "auto-b", "auto-c", "auto-d"]
        response = await client.send(
            ApiKey.METADATA,
            request_builder(
                ApiKey.METADATA,
                topics=[{"name": n} for n in names],
                allow_auto_topic_creation=True,
            ),
        )
        errors = {t.name: t.error_code for t in response.topics}
        assert errors == {
            "auto-a": ErrorCode.LEADER_NOT_AVAILABLE,
            "auto-b": ErrorCode.LEADER_NOT_AVAILABLE,
            "auto-c": ErrorCode.POLICY_VIOLATION,
            "auto-d": ErrorCode.POLICY_VIOLATION,
        }
        known = await client.metadata(names)
        unknown = {t.name for t in known.topics if t.error_code != ErrorCode.NONE}
        assert {"auto-c", "auto-d"} <= unknown
    finally:
        await client.close()
        await server.shutdown()
