"""The partition admin APIs between brokers: three `kafkalite serve` processes on a real
ZooKeeper, driven by the real clients that expose the APIs.

- AlterPartitionReassignments / ListPartitionReassignments (kafka-python): a partition moves to
  another broker and its records with it (the old replica's log is deleted, DescribeLogDirs
  shows the new one); a reassignment held in progress by a paused target broker is listed with
  its adding/removing replicas, then cancelled (the replica being added is deleted).
- ElectLeaders (confluent-kafka, kafka-python): a preferred election moves leadership back to a
  restarted preferred replica; an unclean election gives a leaderless partition an out-of-sync
  leader, where a preferred one fails with PREFERRED_LEADER_NOT_AVAILABLE.
- Forwarding (the project's client): the three APIs sent to a broker that is not the controller
  are answered by the controller through it.

Every wait is a condition with a deadline (`wait_for`), never a sleep.
"""

from __future__ import annotations

import asyncio
import datetime
import time

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.testing import Cluster, ZooKeeperServer
from tests.integration.common import wait_for

try:
    from confluent_kafka import ElectionType, KafkaError
    from confluent_kafka import TopicPartition as CkTopicPartition
    from confluent_kafka.admin import AdminClient as CkAdminClient
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import KafkaConnectionError
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError(
        "kafka-python and confluent-kafka are required: pip install -e '.[test]'"
    ) from e

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python internals

BROKER_IDS = (1, 2, 3)
DEADLINE_S = 60.0


def bootstrap(cluster: Cluster) -> str:
    """The running brokers (a stopped one's proxy refuses connections)."""
    return cluster.bootstrap_of(*cluster.running_brokers)


def admin_client(cluster: Cluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap(cluster), client_id="kp-admin")


def controller_id(cluster: Cluster) -> int:
    admin = admin_client(cluster)
    try:
        return admin.describe_cluster()["controller_id"]
    finally:
        admin.close()


def all_registered(cluster: Cluster) -> bool:
    try:
        admin = admin_client(cluster)
        try:
            return len(admin.describe_cluster()["brokers"]) == len(BROKER_IDS)
        finally:
            admin.close()
    except KafkaConnectionError:  # a broker just stopped may still be listed
        return False


def others(cluster: Cluster) -> list[int]:
    """The brokers that are not the controller, by id."""
    controller = controller_id(cluster)
    return [b for b in BROKER_IDS if b != controller]


def _describe_topics(cluster: Cluster, topics: list[str]) -> list[dict]:
    """DescribeTopics, asked again when the node the client picked refuses the connection:
    right after a broker stops, the others' metadata may still list it for a moment."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            admin = admin_client(cluster)
            try:
                return admin.describe_topics(topics)
            finally:
                admin.close()
        except KafkaConnectionError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)  # polling interval of the retry, not synchronisation


def partition(cluster: Cluster, topic: str, index: int = 0) -> dict:
    state = partition_if_known(cluster, topic, index)
    assert state is not None, f"{topic}-{index} is not in the metadata"
    return state


def partition_if_known(cluster: Cluster, topic: str, index: int = 0) -> dict | None:
    """The partition's metadata, or None while the answering broker does not know it yet
    (a topic just created is in ZooKeeper before UpdateMetadata reaches every broker)."""
    [described] = _describe_topics(cluster, [topic])
    states = [p for p in described["partitions"] if p["partition_index"] == index]
    return states[0] if states else None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("admin-protocol-cluster")
    with ZooKeeperServer(root / "zk") as zk:
        c = Cluster(
            brokers=len(BROKER_IDS),
            config={
                "replica.lag.time.max.ms": "2000",
                "replica.fetch.wait.max.ms": "200",
                "controlled.shutdown.retry.backoff.ms": "200",
                "auto.leader.rebalance.enable": "false",
            },
            zookeeper_connect=zk.connect_string("/admin-protocol"),
            # a paused broker keeps its session (and stays "alive") meanwhile
            session_timeout_ms=30000,
            subprocess=True,
            data_dir=root / "brokers",
            admin=False,
        )
        with c:
            wait_for(lambda: all_registered(c), "every broker registered", DEADLINE_S)
            yield c


@pytest.fixture(autouse=True)
def every_broker_running(cluster):
    """Each test starts with the three brokers up, whatever the one before it left stopped
    (a failed test must not fail the next ones)."""
    for broker_id in BROKER_IDS:
        if broker_id not in cluster.running_brokers:
            cluster.restart(broker_id)
    wait_for(lambda: all_registered(cluster), "every broker registered", DEADLINE_S)


def produce(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[bytes]:
    values = [f"{topic}-{i}".encode() for i in range(count)]
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for f in [producer.send(topic, v, partition=partition) for v in values]:
        f.get(timeout=30)
    producer.close()
    return values


def consume(bootstrap: str, topic: str, count: int, partition: int = 0) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    tp = TopicPartition(topic, partition)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values: list[bytes] = []

    def poll():
        for records in consumer.poll(timeout_ms=500).values():
            values.extend(r.value for r in records)
        return len(values) >= count

    try:
        wait_for(poll, f"{count} records of {topic}", DEADLINE_S)
    finally:
        consumer.close()
    return values


def create_topic(cluster: Cluster, name: str, assignment: dict[int, list[int]]) -> None:
    admin = admin_client(cluster)
    try:
        admin.create_topics([NewTopic(name, replica_assignments=assignment)])
    finally:
        admin.close()

    def has_leader() -> bool:
        state = partition_if_known(cluster, name)
        return state is not None and state["leader_id"] >= 0

    wait_for(has_leader, f"{name} has a leader", DEADLINE_S)


def log_dir_partitions(cluster: Cluster, broker_id: int, topic: str) -> dict[int, dict]:
    admin = admin_client(cluster)
    try:
        [answer] = admin.describe_log_dirs({topic: [0]}, brokers=[broker_id])
    finally:
        admin.close()
    return {
        p["partition_index"]: p
        for d in answer["log_dirs"]
        for t in d["topics"]
        if t["name"] == topic
        for p in t["partitions"]
    }


def test_reassignment_moves_a_partition_and_its_records(cluster) -> None:
    a, b = others(cluster)
    create_topic(cluster, "mv", {0: [a]})
    values = produce(bootstrap(cluster), "mv", 50)
    tp = TopicPartition("mv", 0)
    admin = admin_client(cluster)
    try:
        assert admin.alter_partition_reassignments({tp: [b]}) == {tp: None}

        def moved():
            state = partition(cluster, "mv")
            return (
                admin.list_partition_reassignments() == {}
                and state["replica_nodes"] == [b]
                and state["leader_id"] == b
            )

        wait_for(moved, "mv-0 moved to the other broker", DEADLINE_S)
    finally:
        admin.close()
    assert consume(bootstrap(cluster), "mv", 50) == values
    on_b = log_dir_partitions(cluster, b, "mv")
    assert on_b[0]["partition_size"] > 0 and on_b[0]["offset_lag"] == 0
    wait_for(lambda: log_dir_partitions(cluster, a, "mv") == {}, "the old replica deleted")


def test_reassignment_in_progress_is_listed_then_cancelled(cluster) -> None:
    a, b = others(cluster)
    create_topic(cluster, "held", {0: [a]})
    produce(bootstrap(cluster), "held", 10)
    tp = TopicPartition("held", 0)
    admin = admin_client(cluster)
    # the client learns the controller now: its metadata requests must not go to a paused broker
    assert admin.list_partition_reassignments() == {}
    cluster.pause(b, 10 * DEADLINE_S)  # SIGSTOP: b cannot catch up: the reassignment waits
    try:
        assert admin.alter_partition_reassignments({tp: [b]}) == {tp: None}
        ongoing = {"replicas": [b, a], "adding_replicas": [b], "removing_replicas": [a]}
        assert admin.list_partition_reassignments() == {tp: ongoing}
        assert admin.list_partition_reassignments({"held": [0, 1]}) == {tp: ongoing}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}  # cancel
        assert admin.list_partition_reassignments() == {}
    finally:
        cluster.resume(b)
        admin.close()
    wait_for(
        lambda: partition(cluster, "held")["replica_nodes"] == [a], "held-0 back on its broker"
    )
    # the replica b was adding is stopped and deleted once b runs again
    wait_for(lambda: log_dir_partitions(cluster, b, "held") == {}, "the added replica deleted")
    assert consume(bootstrap(cluster), "held", 10) == [f"held-{i}".encode() for i in range(10)]


def test_preferred_election_moves_leadership_back(cluster) -> None:
    a, b = others(cluster)
    create_topic(cluster, "pref", {0: [a, b]})
    values = produce(bootstrap(cluster), "pref", 20)
    cluster.stop_broker(a)  # controlled shutdown: b leads
    wait_for(lambda: partition(cluster, "pref")["leader_id"] == b, "b leads", DEADLINE_S)
    cluster.restart(a)
    wait_for(
        lambda: sorted(partition(cluster, "pref")["isr_nodes"]) == sorted([a, b]),
        "a back in the ISR",
        DEADLINE_S,
    )
    assert partition(cluster, "pref")["leader_id"] == b
    ck = CkAdminClient({"bootstrap.servers": bootstrap(cluster)})
    result = ck.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("pref", 0)]).result(60)
    assert {(tp.topic, tp.partition): e for tp, e in result.items()} == {("pref", 0): None}
    # (the answer waited for the controller broker's metadata; the others follow)
    wait_for(lambda: partition(cluster, "pref")["leader_id"] == a, "a leads again", DEADLINE_S)
    again = ck.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("pref", 0)]).result(60)
    [error] = again.values()
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED
    assert consume(bootstrap(cluster), "pref", 20) == values


def test_unclean_election_of_a_leaderless_partition(cluster) -> None:
    a, b = others(cluster)
    create_topic(cluster, "dirty", {0: [a, b]})
    cluster.stop_broker(b)  # the follower goes: ISR {a}
    wait_for(lambda: partition(cluster, "dirty")["isr_nodes"] == [a], "ISR {a}", DEADLINE_S)
    produce(bootstrap(cluster), "dirty", 5)  # records b never gets
    cluster.stop_broker(a)  # the last ISR member goes: no leader
    cluster.restart(b)  # out of sync, not electable cleanly
    wait_for(lambda: partition(cluster, "dirty")["leader_id"] == -1, "dirty-0 leaderless")
    admin = admin_client(cluster)
    try:
        preferred = admin.elect_leaders(0, {"dirty": [0]}, timeout_ms=10_000, raise_errors=False)
        [[result]] = [r.partition_result for r in preferred.replica_election_results]
        assert result.error_code == 80  # PREFERRED_LEADER_NOT_AVAILABLE
        assert result.error_message == (
            "Failed to elect leader for partition dirty-0 under strategy "
            "PreferredReplicaPartitionLeaderElectionStrategy"
        )
        unclean = admin.elect_leaders(1, {"dirty": [0]}, timeout_ms=30_000)
        [[result]] = [r.partition_result for r in unclean.replica_election_results]
        assert (result.error_code, result.error_message) == (0, None)
    finally:
        admin.close()
    wait_for(
        lambda: (lambda s: (s["leader_id"], s["isr_nodes"]) == (b, [b]))(
            partition(cluster, "dirty")
        ),
        "b leads dirty-0 alone",
        DEADLINE_S,
    )
    cluster.restart(a)  # a truncates to b's log and follows
    wait_for(
        lambda: sorted(partition(cluster, "dirty")["isr_nodes"]) == sorted([a, b]),
        "a rejoined the ISR",
        DEADLINE_S,
    )


async def _send_to(bootstrap: str, node_id: int, api_key: ApiKey, **fields):
    async with KafkaClient(bootstrap) as client:
        await client.refresh_metadata(topics=[])
        return await client.send(api_key, request_builder(api_key, **fields), node_id=node_id)


def test_a_broker_that_is_not_the_controller_forwards(cluster) -> None:
    a, b = others(cluster)
    create_topic(cluster, "fwd", {0: [a, b]})
    timeout = datetime.timedelta(seconds=10)
    listed = asyncio.run(
        _send_to(bootstrap(cluster), a, ApiKey.LIST_PARTITION_REASSIGNMENTS, timeout=timeout)
    )
    assert (int(listed.error_code), listed.topics) == (0, ())
    altered = asyncio.run(
        _send_to(
            bootstrap(cluster),
            b,
            ApiKey.ALTER_PARTITION_REASSIGNMENTS,
            timeout=timeout,
            topics=[{"name": "fwd", "partitions": [{"partition_index": 0, "replicas": None}]}],
        )
    )
    assert int(altered.error_code) == 0
    [[partition]] = [t.partitions for t in altered.responses]
    assert int(partition.error_code) == 85  # NO_REASSIGNMENT_IN_PROGRESS, from the controller
    elected = asyncio.run(
        _send_to(
            bootstrap(cluster),
            a,
            ApiKey.ELECT_LEADERS,
            election_type=0,
            topic_partitions=[{"topic": "fwd", "partitions": [0]}],
            timeout=timeout,
        )
    )
    [[partition]] = [r.partition_result for r in elected.replica_election_results]
    assert int(partition.error_code) == 84  # ELECTION_NOT_NEEDED: a leads already
