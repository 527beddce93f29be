"""A streaming query reading from a 3-broker kafkalite cluster on a real ZooKeeper recovers when
the leader of a partition it reads is killed (kill -9): every acknowledged record, written
before and after the kill, is read exactly once, and the query never fails."""

from __future__ import annotations

import pytest

from kafkalite.testing import Broker, ZooKeeperServer
from tests.spark.conftest import Kafka, wait_for

FAILOVER_DEADLINE_S = 90.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark-cluster")
    with ZooKeeperServer(base / "zk") as zk:
        brokers = {
            broker_id: Broker(
                data_dir=base / f"broker-{broker_id}",
                broker_id=broker_id,
                config={
                    "zookeeper.connect": zk.connect_string("/kafkalite"),
                    "zookeeper.session.timeout.ms": "6000",
                    "replica.lag.time.max.ms": "2000",
                    "replica.fetch.wait.max.ms": "200",
                    "default.replication.factor": "3",
                    "min.insync.replicas": "2",
                },
                subprocess=True,
                admin=False,
            )
            for broker_id in (1, 2, 3)
        }
        try:
            for b in brokers.values():
                b.spawn()
            for b in brokers.values():
                b.wait_ready(60)
            yield brokers
        finally:
            for b in brokers.values():
                b.kill()


def test_a_query_recovers_when_a_leader_is_killed(kspark, cluster):
    kafka = Kafka(",".join(b.bootstrap for b in cluster.values()))
    topic = kafka.create("killed-leader", 2, replication_factor=3)
    kafka.produce(topic, [{"value": f"a{i}", "partition": i % 2} for i in range(200)])
    query = (
        kspark.readStream.format("kafkalite")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format("memory")
        .queryName("killed_leader")
        .trigger(processingTime="300 milliseconds")
        .start()
    )

    def read_so_far() -> int:
        assert query.exception() is None, query.exception()
        return kspark.sql("SELECT count(*) AS n FROM killed_leader").first().n

    try:
        wait_for(lambda: read_so_far() == 200, "the records written before the kill")
        metadata = kafka.admin.list_topics(topic, timeout=10).topics[topic]
        leader = metadata.partitions[0].leader
        cluster[leader].kill()
        # the producer waits for the new leader; acks=all with 2 replicas left in the ISR
        kafka.produce(topic, [{"value": f"b{i}", "partition": i % 2} for i in range(200)])
        wait_for(lambda: read_so_far() >= 400, "the records written after the kill",
                 FAILOVER_DEADLINE_S)  # fmt: skip
        values = [r.value for r in kspark.sql("SELECT value FROM killed_leader").collect()]
    finally:
        query.stop()
    expected = {f"a{i}" for i in range(200)} | {f"b{i}" for i in range(200)}
    assert len(values) == len(expected) and set(values) == expected
