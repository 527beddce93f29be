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
from kafkalite.testing import Broker
from kafkalite.testing import ZooKeeperServer
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


class Cluster:
    def __init__(self, brokers: dict[int, Broker]) -> None:
        self.brokers = brokers

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap_servers for b in self.brokers.values() if b.running)

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id="kp-admin")

    def controller_id(self) -> int:
        admin = self.admin()
        try:
            return admin.describe_cluster()["controller_id"]
        finally:
            admin.close()

    def all_registered(self) -> bool:
        try:
            admin = self.admin()
            try:
                return len(admin.describe_cluster()["brokers"]) == len(BROKER_IDS)
            finally:
                admin.close()
        except KafkaConnectionError:  # a broker just stopped may still be listed
            return False

    def others(self) -> list[int]:
        """The brokers that are not the controller, by id."""
        controller = self.controller_id()
        return [b for b in BROKER_IDS if b != controller]

    def _describe_topics(self, topics: list[str]) -> list[dict]:
        """DescribeTopics, asked again when the node the client picked refuses the connection:
        right after a broker stops, the others' metadata may still list it for a moment."""
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                admin = self.admin()
                try:
                    return admin.describe_topics(topics)
                finally:
                    admin.close()
            except KafkaConnectionError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)  # polling interval of the retry, not synchronisation

    def partition(self, topic: str, partition: int = 0) -> dict:
        state = self.partition_if_known(topic, partition)
        assert state is not None, f"{topic}-{partition} is not in the metadata"
        return state

    def partition_if_known(self, topic: str, partition: int = 0) -> dict | None:
        """The partition's metadata, or None while the answering broker does not know it yet
        (a topic just created is in ZooKeeper before UpdateMetadata reaches every broker)."""
        [described] = self._describe_topics([topic])
        states = [p for p in described["partitions"] if p["partition_index"] == partition]
        return states[0] if states else None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("admin-protocol-cluster")
    with ZooKeeperServer(root / "zk") as zk:
        brokers: dict[int, Broker] = {}
        try:
            for broker_id in BROKER_IDS:
                brokers[broker_id] = Broker(
                    {
                        "zookeeper.connect": zk.connect_string("/admin-protocol"),
                        # a paused broker keeps its session (and stays "alive") meanwhile
                        "zookeeper.session.timeout.ms": "30000",
                        "replica.lag.time.max.ms": "2000",
                        "replica.fetch.wait.max.ms": "200",
                        "controlled.shutdown.retry.backoff.ms": "200",
                        "auto.leader.rebalance.enable": "false",
                    },
                    broker_id=broker_id,
                    subprocess=True,
                    data_dir=root / f"broker{broker_id}",
                ).start()
            c = Cluster(brokers)
            wait_for(
                lambda: len(c.admin().describe_cluster()["brokers"]) == len(BROKER_IDS),
                "every broker registered",
                DEADLINE_S,
            )
            yield c
        finally:
            for b in brokers.values():
                try:
                    b.close()  # a paused broker is continued first
                except TimeoutError:
                    pass  # killed after the deadline


@pytest.fixture(autouse=True)
def every_broker_running(cluster):
    """Each test starts with the three brokers up, whatever the one before it left stopped
    (a failed test must not fail the next ones)."""
    for broker in cluster.brokers.values():
        if not broker.running:
            broker.start()
    wait_for(cluster.all_registered, "every broker registered", DEADLINE_S)


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
    admin = cluster.admin()
    try:
        admin.create_topics([NewTopic(name, replica_assignments=assignment)])
    finally:
        admin.close()

    def has_leader() -> bool:
        state = cluster.partition_if_known(name)
        return state is not None and state["leader_id"] >= 0

    wait_for(has_leader, f"{name} has a leader", DEADLINE_S)


def log_dir_partitions(cluster: Cluster, broker_id: int, topic: str) -> dict[int, dict]:
    admin = cluster.admin()
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
    a, b = cluster.others()
    create_topic(cluster, "mv", {0: [a]})
    values = produce(cluster.bootstrap, "mv", 50)
    tp = TopicPartition("mv", 0)
    admin = cluster.admin()
    try:
        assert admin.alter_partition_reassignments({tp: [b]}) == {tp: None}

        def moved():
            state = cluster.partition("mv")
            return (
                admin.list_partition_reassignments() == {}
                and state["replica_nodes"] == [b]
                and state["leader_id"] == b
            )

        wait_for(moved, "mv-0 moved to the other broker", DEADLINE_S)
    finally:
        admin.close()
    assert consume(cluster.bootstrap, "mv", 50) == values
    on_b = log_dir_partitions(cluster, b, "mv")
    assert on_b[0]["partition_size"] > 0 and on_b[0]["offset_lag"] == 0
    wait_for(lambda: log_dir_partitions(cluster, a, "mv") == {}, "the old replica deleted")


def test_reassignment_in_progress_is_listed_then_cancelled(cluster) -> None:
    a, b = cluster.others()
    create_topic(cluster, "held", {0: [a]})
    produce(cluster.bootstrap, "held", 10)
    tp = TopicPartition("held", 0)
    paused = cluster.brokers[b]
    admin = cluster.admin()
    # the client learns the controller now: its metadata requests must not go to a paused broker
    assert admin.list_partition_reassignments() == {}
    paused.pause()  # b cannot catch up: the reassignment waits
    try:
        assert admin.alter_partition_reassignments({tp: [b]}) == {tp: None}
        ongoing = {"replicas": [b, a], "adding_replicas": [b], "removing_replicas": [a]}
        assert admin.list_partition_reassignments() == {tp: ongoing}
        assert admin.list_partition_reassignments({"held": [0, 1]}) == {tp: ongoing}
        assert admin.alter_partition_reassignments({tp: None}) == {tp: None}  # cancel
        assert admin.list_partition_reassignments() == {}
    finally:
        paused.resume()
        admin.close()
    wait_for(lambda: cluster.partition("held")["replica_nodes"] == [a], "held-0 back on its broker")
    # the replica b was adding is stopped and deleted once b runs again
    wait_for(lambda: log_dir_partitions(cluster, b, "held") == {}, "the added replica deleted")
    assert consume(cluster.bootstrap, "held", 10) == [f"held-{i}".encode() for i in range(10)]


def test_preferred_election_moves_leadership_back(cluster) -> None:
    a, b = cluster.others()
    create_topic(cluster, "pref", {0: [a, b]})
    values = produce(cluster.bootstrap, "pref", 20)
    cluster.brokers[a].stop()  # controlled shutdown: b leads
    wait_for(lambda: cluster.partition("pref")["leader_id"] == b, "b leads", DEADLINE_S)
    cluster.brokers[a].start()
    wait_for(
        lambda: sorted(cluster.partition("pref")["isr_nodes"]) == sorted([a, b]),
        "a back in the ISR",
        DEADLINE_S,
    )
    assert cluster.partition("pref")["leader_id"] == b
    ck = CkAdminClient({"bootstrap.servers": cluster.bootstrap})
    result = ck.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("pref", 0)]).result(60)
    assert {(tp.topic, tp.partition): e for tp, e in result.items()} == {("pref", 0): None}
    # (the answer waited for the controller broker's metadata; the others follow)
    wait_for(lambda: cluster.partition("pref")["leader_id"] == a, "a leads again", DEADLINE_S)
    again = ck.elect_leaders(ElectionType.PREFERRED, [CkTopicPartition("pref", 0)]).result(60)
    [error] = again.values()
    assert error.code() == KafkaError.ELECTION_NOT_NEEDED
    assert consume(cluster.bootstrap, "pref", 20) == values


def test_unclean_election_of_a_leaderless_partition(cluster) -> None:
    a, b = cluster.others()
    create_topic(cluster, "dirty", {0: [a, b]})
    cluster.brokers[b].stop()  # the follower goes: ISR {a}
    wait_for(lambda: cluster.partition("dirty")["isr_nodes"] == [a], "ISR {a}", DEADLINE_S)
    produce(cluster.bootstrap, "dirty", 5)  # records b never gets
    cluster.brokers[a].stop()  # the last ISR member goes: no leader
    cluster.brokers[b].start()  # out of sync, not electable cleanly
    wait_for(lambda: cluster.partition("dirty")["leader_id"] == -1, "dirty-0 leaderless")
    admin = cluster.admin()
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
            cluster.partition("dirty")
        ),
        "b leads dirty-0 alone",
        DEADLINE_S,
    )
    cluster.brokers[a].start()  # a truncates to b's log and follows
    wait_for(
        lambda: sorted(cluster.partition("dirty")["isr_nodes"]) == sorted([a, b]),
        "a rejoined the ISR",
        DEADLINE_S,
    )


async def _send_to(bootstrap: str, node_id: int, api_key: ApiKey, **fields):
    async with KafkaClient(bootstrap) as client:
        await client.refresh_metadata(topics=[])
        return await client.send(api_key, request_builder(api_key, **fields), node_id=node_id)


def test_a_broker_that_is_not_the_controller_forwards(cluster) -> None:
    a, b = cluster.others()
    create_topic(cluster, "fwd", {0: [a, b]})
    timeout = datetime.timedelta(seconds=10)
    listed = asyncio.run(
        _send_to(cluster.bootstrap, a, ApiKey.LIST_PARTITION_REASSIGNMENTS, timeout=timeout)
    )
    assert (int(listed.error_code), listed.topics) == (0, ())
    altered = asyncio.run(
        _send_to(
            cluster.bootstrap,
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
            cluster.bootstrap,
            a,
            ApiKey.ELECT_LEADERS,
            election_type=0,
            topic_partitions=[{"topic": "fwd", "partitions": [0]}],
            timeout=timeout,
        )
    )
    [[partition]] = [r.partition_result for r in elected.replica_election_results]
    assert int(partition.error_code) == 84  # ELECTION_NOT_NEEDED: a leads already
