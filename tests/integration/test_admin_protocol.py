"""The admin protocol APIs behind tools' partition operations, on one broker, through the real
clients that expose them: DescribeLogDirs (kafka-python), ElectLeaders (confluent-kafka and
kafka-python), Alter/ListPartitionReassignments (kafka-python). Elections and reassignments
that move something between brokers are in tests/admin/test_cluster_protocol.py."""

import os

import pytest

from kafkalite.testing import Broker
from tests.integration.common import wait_for

try:
    from kafka import KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("kafka-python is missing: pip install -e '.[test]'") from e

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python internals


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for the module (tests use distinct topics)."""
    with Broker(subprocess=True, data_dir=tmp_path_factory.mktemp("broker")) as broker:
        yield broker


@pytest.fixture
def kp_admin(shared_broker):
    client = KafkaAdminClient(
        bootstrap_servers=shared_broker.bootstrap_servers, client_id="kp-admin"
    )
    yield client
    client.close()


def create_topic(admin, name, partitions=1):
    admin.create_topics([NewTopic(name, partitions, 1)])


def produce(broker, topic, partition, count):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for f in [producer.send(topic, b"x" * 100, partition=partition) for _ in range(count)]:
        f.get(timeout=30)
    producer.close()


def test_describe_log_dirs_sizes_and_lag(shared_broker, kp_admin):
    create_topic(kp_admin, "ld", 2)
    produce(shared_broker, "ld", 1, 20)
    log_dir = os.path.realpath(shared_broker.log_dir)

    def described():
        [answer] = kp_admin.describe_log_dirs({"ld": [0, 1]})
        return answer

    answer = described()
    assert answer["broker"] == 0
    [result] = answer["log_dirs"]
    assert result["error_code"] == 0 and result["log_dir"] == log_dir
    statvfs = os.statvfs(log_dir)
    assert result["total_bytes"] == statvfs.f_blocks * statvfs.f_frsize
    assert 0 < result["usable_bytes"] <= result["total_bytes"]
    [topic] = [t for t in result["topics"] if t["name"] == "ld"]
    parts = {p["partition_index"]: p for p in topic["partitions"]}
    assert set(parts) == {0, 1}
    assert parts[0]["partition_size"] == 0
    on_disk = sum(
        e.stat().st_size
        for e in os.scandir(os.path.join(log_dir, "ld-1"))
        if e.name.endswith(".log")
    )
    assert parts[1]["partition_size"] == on_disk > 20 * 100
    assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in parts.values())

    # only what was asked: a topic not named is absent or listed without partitions
    create_topic(kp_admin, "ld-other")
    wait_for(lambda: os.path.isdir(os.path.join(log_dir, "ld-other-0")), "ld-other's log")
    [answer] = kp_admin.describe_log_dirs({"ld": [1]})
    topics = {t["name"]: t["partitions"] for t in answer["log_dirs"][0]["topics"]}
    assert [p["partition_index"] for p in topics["ld"]] == [1]
    assert topics.get("ld-other", []) == []


def test_elect_leaders_on_one_broker_kafka_python(shared_broker, kp_admin):
    create_topic(kp_admin, "el-kp", 2)
    # the only replica leads already: nothing to elect (the client ignores ELECTION_NOT_NEEDED)
    response = kp_admin.elect_leaders(0, {"el-kp": [0, 1]}, timeout_ms=10_000)
    assert response.error_code == 0
    got = {
        (r.topic, p.partition_id): p.error_code
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert got == {("el-kp", 0): 84, ("el-kp", 1): 84}  # ELECTION_NOT_NEEDED
    response = kp_admin.elect_leaders(1, {"el-kp": [0, 7]}, timeout_ms=10_000, raise_errors=False)
    got = {
        (r.topic, p.partition_id): (p.error_code, p.error_message)
        for r in response.replica_election_results
        for p in r.partition_result
    }
    assert got == {
        ("el-kp", 0): (84, "Leader election not needed for topic partition."),
        ("el-kp", 7): (3, "The partition does not exist."),  # UNKNOWN_TOPIC_OR_PARTITION
    }


def test_elect_leaders_on_one_broker_confluent_kafka(shared_broker, kp_admin):
    from confluent_kafka import ElectionType, KafkaError
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import AdminClient

    create_topic(kp_admin, "el-ck", 1)
    ck = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    result = ck.elect_leaders(
        ElectionType.PREFERRED,
        [CkTopicPartition("el-ck", 0), CkTopicPartition("el-ck", 5)],
    ).result(timeout=30)  # (no timeout kwargs: this binding's elect_leaders rejects them)
    errors = {(tp.topic, tp.partition): e for tp, e in result.items()}
    assert errors[("el-ck", 0)].code() == KafkaError.ELECTION_NOT_NEEDED
    assert errors[("el-ck", 5)].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # every partition (null): those not needing an election are left out of the answer
    result = ck.elect_leaders(ElectionType.UNCLEAN, None).result(timeout=30)
    assert result == {}


def test_partition_reassignments_on_one_broker(shared_broker, kp_admin):
    create_topic(kp_admin, "ra", 2)
    t0, t1 = TopicPartition("ra", 0), TopicPartition("ra", 1)
    assert kp_admin.list_partition_reassignments() == {}
    answers = kp_admin.alter_partition_reassignments(
        {t0: [0], t1: [7], TopicPartition("ra", 9): [0], TopicPartition("ra-none", 0): None}
    )
    assert answers == {
        t0: None,  # to its own replica set: nothing to move, done at once
        t1: InvalidReplicationAssignmentError,  # broker 7 is not alive
        TopicPartition("ra", 9): UnknownTopicOrPartitionError,
        TopicPartition("ra-none", 0): NoReassignmentInProgressError,
    }
    assert kp_admin.list_partition_reassignments({"ra": [0, 1]}) == {}
    assert kp_admin.alter_partition_reassignments({t0: None}) == {t0: NoReassignmentInProgressError}
    assert kp_admin.describe_topics(["ra"])[0]["partitions"][0]["replica_nodes"] == [0]
