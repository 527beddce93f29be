"""The admin API of a two-broker cluster on ZooKeeper: every broker answers alike, offsets of
partitions led by the other broker are asked of it, and groups and log dirs are read over the
Kafka protocol from whichever broker has them, so either broker's API answers for all."""

from __future__ import annotations

import os
import signal

import pytest

from kafkalite.testing import Broker, ZooKeeperServer, free_port
from tests.admin.conftest import AdminClient, produce

try:
    from confluent_kafka import Consumer, TopicPartition
except ImportError as e:  # pragma: no cover - the test extras are required
    raise RuntimeError("confluent-kafka is required: pip install -e '.[test]'") from e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("admin-cluster")
    with ZooKeeperServer(root / "zk") as zk:
        brokers = []
        try:
            for broker_id in (0, 1):
                port = free_port()
                b = Broker(
                    data_dir=root / f"broker{broker_id}",
                    broker_id=broker_id,
                    config={
                        "zookeeper.connect": zk.connect_string("/admin-test"),
                        "admin.listener": f"http://127.0.0.1:{port}",
                        "offsets.topic.num.partitions": "4",
                        # a paused follower leaves the ISR quickly (test_isr_metrics)
                        "replica.lag.time.max.ms": "1500",
                        # the last broker to stop leads what nobody else can take: Kafka's
                        # three attempts 5 s apart would only add 10 s to the teardown
                        "controlled.shutdown.max.retries": "1",
                    },
                    subprocess=True,
                )
                b.start()
                brokers.append((b, AdminClient(f"http://127.0.0.1:{port}")))
            for _, api in brokers:
                api.wait_for(
                    lambda api=api: len(api.get("/brokers").body) == 2, "both brokers registered"
                )
            yield brokers
        finally:
            for b, _ in brokers:
                if b.running:
                    try:
                        b.stop()
                    except TimeoutError:
                        b.kill()


def test_every_broker_describes_the_same_cluster(cluster) -> None:
    (_, a), (_, b) = cluster
    seen_a, seen_b = a.get("/cluster").body, b.get("/cluster").body
    assert seen_a["cluster_id"] == seen_b["cluster_id"]
    assert seen_a["controller"] == seen_b["controller"]
    assert [x["id"] for x in seen_a["brokers"]] == [0, 1]
    assert (seen_a["this_broker"], seen_b["this_broker"]) == (0, 1)
    assert sum(x["is_controller"] for x in seen_a["brokers"]) == 1


@pytest.fixture(scope="module")
def spread(cluster) -> str:
    """Topic `spread`: one partition on each broker; 7 records in partition 0, 11 in 1."""
    (broker_a, a), _ = cluster
    assert (
        a.post("/topics", {"name": "spread", "partitions": 2, "replication_factor": 1}).status
        == 201
    )
    produce(broker_a.bootstrap, "spread", 7, partition=0)
    produce(broker_a.bootstrap, "spread", 11, partition=1)
    return "spread"


def test_offsets_of_partitions_led_elsewhere(cluster, spread) -> None:
    (_, a), (_, b) = cluster
    for api, me in ((a, 0), (b, 1)):
        topic = api.get("/topics/spread").body
        assert sorted(p["leader"] for p in topic["partitions"]) == [0, 1]
        assert [p["high_watermark"] for p in topic["partitions"]] == [7, 11]
        assert [p["log_start_offset"] for p in topic["partitions"]] == [0, 0]
        for p in topic["partitions"]:
            if p["leader"] == me:
                assert p["log_end_offset"] == p["high_watermark"] and p["size_bytes"] > 0
            else:
                assert p["log_end_offset"] is None and p["size_bytes"] is None


def test_replicated_topic_shows_both_replicas_in_sync(cluster) -> None:
    (_, a), (_, b) = cluster
    assert (
        a.post("/topics", {"name": "mirrored", "partitions": 1, "replication_factor": 2}).status
        == 201
    )

    def in_sync():
        [p] = b.get("/topics/mirrored").body["partitions"]
        return sorted(p["isr"]) == [0, 1] and p

    partition = a.wait_for(in_sync, "both replicas in the ISR")
    assert sorted(partition["replicas"]) == [0, 1]


def test_group_lag_across_brokers_and_the_coordinator_is_named(cluster, spread) -> None:
    (broker_a, a), (_, b) = cluster
    consumer = Consumer({"bootstrap.servers": broker_a.bootstrap, "group.id": "spread-group"})
    try:
        consumer.commit(
            offsets=[TopicPartition("spread", 0, 2), TopicPartition("spread", 1, 3)],
            asynchronous=False,
        )
    finally:
        consumer.close()
    answers = {0: a.get("/groups/spread-group"), 1: b.get("/groups/spread-group")}
    # either broker answers, the one coordinating the group and the one asking it over the
    # Kafka protocol (FindCoordinator, DescribeGroups, OffsetFetch), and they answer alike
    assert answers[0].status == answers[1].status == 200, answers
    assert answers[0].body == answers[1].body
    group = answers[0].body
    assert group["coordinator"] in (0, 1)
    assert [
        (o["partition"], o["committed_offset"], o["high_watermark"], o["lag"])
        for o in group["offsets"]
    ] == [
        (0, 2, 7, 5),
        (1, 3, 11, 8),
    ]
    assert group["total_lag"] == 13
    # and the list of every broker has it, with its lag
    for api in (a, b):
        [listed] = [g for g in api.get("/groups").body if g["group_id"] == "spread-group"]
        assert listed["coordinator"] == group["coordinator"]
        assert (listed["total_lag"], listed["topics"], listed["members"]) == (13, ["spread"], 0)


def test_every_broker_lists_groups_coordinated_by_either(cluster, spread) -> None:
    """Enough groups that both brokers coordinate some (4 offsets partitions on 2 brokers):
    every broker's list has all of them, and describes each one."""
    (broker_a, a), (_, b) = cluster
    names = [f"either-{i}" for i in range(8)]
    for name in names:
        consumer = Consumer({"bootstrap.servers": broker_a.bootstrap, "group.id": name})
        try:
            consumer.commit(offsets=[TopicPartition("spread", 0, 1)], asynchronous=False)
        finally:
            consumer.close()
    coordinators = set()
    for api in (a, b):
        listed = {g["group_id"]: g for g in api.get("/groups").body}
        assert set(names) <= set(listed)
        for name in names:
            assert listed[name]["total_lag"] == 6, name
            coordinators.add(listed[name]["coordinator"])
            assert api.get(f"/groups/{name}").status == 200
    assert coordinators == {0, 1}  # the test covers both a local and a remote coordinator


def test_an_assigned_partition_never_committed_is_in_the_lag(cluster, spread) -> None:
    """A live consumer that has its assignment but committed nothing: both partitions are in
    its lag, counted from the log start offset."""
    (broker_a, a), (_, b) = cluster
    consumer = Consumer(
        {
            "bootstrap.servers": broker_a.bootstrap,
            "group.id": "never-committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "latest",
        }
    )
    try:
        consumer.subscribe(["spread"])

        def assigned():
            consumer.poll(0.2)
            answer = a.get("/groups/never-committed")
            return answer.status == 200 and len(answer.body["offsets"]) == 2 and answer.body

        group = a.wait_for(assigned, "the assignment to show in the lag")
        assert b.get("/groups/never-committed").body["offsets"] == group["offsets"]
    finally:
        consumer.close()
    [member] = group["members"]
    assert [
        (o["partition"], o["committed_offset"], o["log_start_offset"], o["lag"], o["member_id"])
        for o in group["offsets"]
    ] == [
        (0, None, 0, 7, member["member_id"]),
        (1, None, 0, 11, member["member_id"]),
    ]
    assert group["total_lag"] == 18


def test_log_dirs_of_the_other_broker(cluster, spread) -> None:
    """Each broker's storage is answered by every broker (DescribeLogDirs to the other)."""
    (_, a), (_, b) = cluster
    for broker_id in (0, 1):
        mine = (a if broker_id == 0 else b).get(f"/brokers/{broker_id}/storage").body
        other = (b if broker_id == 0 else a).get(f"/brokers/{broker_id}/storage")
        assert other.status == 200, other.body
        assert [d["path"] for d in other.body["log_dirs"]] == [d["path"] for d in mine["log_dirs"]]
        assert [d["offline"] for d in other.body["log_dirs"]] == [False]
        assert other.body["log_dirs"][0]["partitions"] >= 1
        assert other.body["configs"]["broker.id"] == str(broker_id)


def produce_acks_1(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1})
    for i in range(count):
        producer.produce(topic, value=f"v{i}".encode(), partition=0)
    assert producer.flush(30) == 0


def metric(api: AdminClient, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(api.get("/metrics").body):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return sample.value
    raise AssertionError(f"{name} not exported")


def test_isr_metrics_when_a_follower_stalls(cluster) -> None:
    """A paused follower that falls behind is dropped from the ISR by the leader (ISR shrink,
    partition under-replicated) and taken back once it catches up again (ISR expand)."""
    brokers = dict(enumerate(cluster))
    (_, a), _ = cluster
    assert (
        a.post("/topics", {"name": "stalled", "partitions": 1, "replication_factor": 2}).status
        == 201
    )

    def partition():
        [p] = a.get("/topics/stalled").body["partitions"]
        return p if sorted(p["isr"]) == [0, 1] else None

    leader = a.wait_for(partition, "both replicas in the ISR")["leader"]
    follower_process, _ = brokers[1 - leader]
    _, leader_api = brokers[leader]
    shrinks, expands = (
        metric(leader_api, "kafkalite_isr_shrinks_total"),
        metric(leader_api, "kafkalite_isr_expands_total"),
    )
    leader_process, _ = brokers[leader]
    os.kill(follower_process.proc.pid, signal.SIGSTOP)
    try:
        # an idle follower counts as caught up (its end offset equals the leader's, as in
        # Kafka): records it does not fetch make it fall behind
        produce_acks_1(leader_process.bootstrap, "stalled", 5)
        leader_api.wait_for(
            lambda: metric(leader_api, "kafkalite_isr_shrinks_total") > shrinks,
            "an ISR shrink on the leader",
        )
        assert metric(leader_api, "kafkalite_under_replicated_partitions") >= 1
        [p] = leader_api.get("/topics/stalled").body["partitions"]
        assert p["isr"] == [leader]
    finally:
        os.kill(follower_process.proc.pid, signal.SIGCONT)
    leader_api.wait_for(
        lambda: metric(leader_api, "kafkalite_isr_expands_total") > expands,
        "an ISR expand on the leader",
    )
    leader_api.wait_for(
        lambda: metric(leader_api, "kafkalite_under_replicated_partitions") == 0,
        "no under-replicated partition",
    )


def test_reassignment_and_preferred_election_through_the_api(cluster, spread) -> None:
    """Partition 0 of `spread` (one replica) gets a second replica on the other broker, listed
    first; the preferred election then moves leadership there; its records stay readable."""
    (_, a), (_, b) = cluster
    [p0, _] = a.get("/topics/spread").body["partitions"]
    old = p0["leader"]
    new = 1 - old
    moved = a.post(
        "/partitions/reassign",
        {"partitions": [{"topic": "spread", "partition": 0, "replicas": [new, old]}]},
    )
    assert moved.status == 202, moved.body

    def reassigned():
        [p, _] = b.get("/topics/spread").body["partitions"]
        done = (
            p["replicas"] == [new, old]
            and sorted(p["isr"]) == [0, 1]
            and b.get("/partitions/reassign").body == {"pending": [], "ongoing": []}
        )
        return p if done else None

    a.wait_for(reassigned, "the reassignment to complete", timeout=30)

    elected = b.post(
        "/partitions/elect-leaders",
        {"election_type": "preferred", "partitions": [{"topic": "spread", "partition": 0}]},
    )
    assert elected.status == 202, elected.body

    def led_by_new():
        # The new leader's high watermark is unknown (None) until it has moved past the start
        # of its epoch, as a Kafka leader answers ListOffsets OFFSET_NOT_AVAILABLE meanwhile
        # (KIP-207): seen under load right after the election.
        [p, _] = a.get("/topics/spread").body["partitions"]
        return p if p["leader"] == new and p["high_watermark"] is not None else None

    p = a.wait_for(led_by_new, "the preferred replica to lead", timeout=30)
    assert p["high_watermark"] == 7
    consumer = Consumer({"bootstrap.servers": cluster[0][0].bootstrap, "group.id": "after-move"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition("spread", 0), timeout=10)
    finally:
        consumer.close()
    assert (low, high) == (0, 7)


def test_another_brokers_dynamic_configs_are_read_and_set_at_that_broker(cluster) -> None:
    # broker 0's API asks broker 1 itself (Kafka refuses another broker's id): its level is set,
    # broker 0's is not
    (_, a), (broker_b, _) = cluster
    path = "/brokers/1/configs"
    answer = a.call("PATCH", path, {"configs": {"log.cleaner.backoff.ms": "25000"}})
    assert answer.status == 200, answer.body
    try:

        def source(api_path: str) -> str:
            configs = a.get(api_path).body["configs"]
            return next(c["source"] for c in configs if c["name"] == "log.cleaner.backoff.ms")

        a.wait_for(lambda: source(path) == "DYNAMIC_BROKER_CONFIG", "broker 1's own level")
        assert source("/brokers/0/configs") == "DEFAULT_CONFIG"
        from confluent_kafka.admin import AdminClient as KafkaAdmin
        from confluent_kafka.admin import ConfigResource, ResourceType

        resource = ConfigResource(ResourceType.BROKER, "1")
        kafka = KafkaAdmin({"bootstrap.servers": broker_b.bootstrap})
        seen = kafka.describe_configs([resource])[resource].result(30)
        assert seen["log.cleaner.backoff.ms"].value == "25000"
    finally:
        a.call("PATCH", path, {"configs": {"log.cleaner.backoff.ms": None}})
