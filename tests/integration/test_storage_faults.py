"""Storage faults against a broker subprocess on a real full filesystem (a 2 MiB tmpfs).

The broker has two log directories: ``good`` (on the test's disk, which also holds the embedded
coordination store) and ``full`` (the tmpfs). A topic of two partitions puts ``t-0`` in
``good`` and ``t-1`` in ``full`` (new logs go to the directory holding fewest).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kafkalite.testing import Broker, free_port
from tests.admin.conftest import AdminClient as AdminApi
from tests.integration.common import DEADLINE_S, wait_for
from tests.storage.tmpfs import fill, mounted_tmpfs

REPO_ROOT = Path(__file__).resolve().parents[2]

try:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("confluent-kafka is missing: pip install -e '.[test]'") from e

TOPIC = "t"


@pytest.fixture
def dirs(tmp_path):
    good = tmp_path / "good"
    with mounted_tmpfs(tmp_path / "full", "2m") as full:
        yield good, full


def start_broker(tmp_path, good, full) -> Broker:
    admin_port = free_port()
    broker = Broker(
        data_dir=tmp_path / "broker",
        config={
            "log.dirs": f"{good},{full}",
            # 64 KiB indexes: preallocated for real, they must fit the 2 MiB filesystem
            "log.index.size.max.bytes": "65536",
            "admin.listener": f"http://127.0.0.1:{admin_port}",
        },
        subprocess=True,
    )
    broker.admin_api = AdminApi(f"http://127.0.0.1:{admin_port}")
    return broker.start()


def metric_samples(broker: Broker) -> dict[str, float]:
    from prometheus_client.parser import text_string_to_metric_families

    answer = broker.admin_api.get("/metrics")
    assert answer.status == 200
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(answer.body)
        for sample in family.samples
        if not sample.labels
    }


def create_topic(broker: Broker) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = client.create_topics([NewTopic(TOPIC, 2, 1)], operation_timeout=30)
    futures[TOPIC].result(timeout=30)


def log_events(broker: Broker) -> list[dict]:
    events = []
    for line in broker.log_text().splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
    return events


def produce(broker: Broker, partition: int, count: int, size: int = 1000):
    """``count`` values of ``size`` bytes, acks=all, no client retries (so the application
    sees the broker's own error code); returns ({offset: value}, [error names])."""
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "acks": "all",
            "retries": 0,
            "linger.ms": 5,
            "batch.size": 16384,
            "message.timeout.ms": 30000,
        }
    )
    acked: dict[int, bytes] = {}
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()
        else:
            errors.append(err.name())

    for i in range(count):
        producer.produce(
            TOPIC, (b"%08d" % i) * (size // 8), partition=partition, on_delivery=on_delivery
        )
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0, "deliveries still pending"
    return acked, errors


def consume(broker: Broker, partition: int, count: int) -> dict[int, bytes]:
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(TOPIC, partition, 0)])
    received: dict[int, bytes] = {}

    def done():
        for msg in consumer.consume(500, timeout=0.5):
            if msg.error() is None:
                received[msg.offset()] = msg.value()
        return len(received) >= count

    try:
        wait_for(done, f"{count} records of {TOPIC}-{partition}")
    finally:
        consumer.close()
    return received


def test_disk_full_while_producing_answers_kafka_storage_error_and_loses_no_ack(tmp_path, dirs):
    good, full = dirs
    broker = start_broker(tmp_path, good, full)
    try:
        create_topic(broker)
        wait_for(lambda: (full / f"{TOPIC}-1").is_dir(), "t-1 in the full directory")
        assert (good / f"{TOPIC}-0").is_dir()
        fill(full, leave_bytes=300 * 1024)
        acked, errors = produce(broker, 1, 1000)
        assert errors, "the filesystem filled up: some records must have been refused"
        assert set(errors) == {"KAFKA_STORAGE_ERROR"}, errors
        assert acked, "records written before the disk filled up are acknowledged"
        assert broker.running
        failures = [
            e for e in log_events(broker) if e.get("event", "").startswith("log directory failed")
        ]
        assert len(failures) == 1, failures
        assert failures[0]["log_dir"] == str(full) and failures[0]["errno"] == "ENOSPC"
        # counted in /metrics, shown in /brokers and in the console
        samples = metric_samples(broker)
        assert samples["kafkalite_offline_log_dirs"] == 1
        assert samples["kafkalite_offline_storage_partitions"] == 1
        [listed] = broker.admin_api.get("/brokers").body
        assert listed["offline_log_dirs"] == [str(full)] and listed["offline_partitions"] == 1
        assert "offline log dirs" in broker.admin_api.get("/console/app.js").body
        # the healthy directory keeps serving
        good_acked, good_errors = produce(broker, 0, 10)
        assert len(good_acked) == 10 and not good_errors
        broker.stop()

        os.unlink(full / "filler")  # the operator frees space and restarts
        broker.start()
        [listed] = broker.admin_api.get("/brokers").body
        assert listed["offline_log_dirs"] == [] and listed["offline_partitions"] == 0
        received = consume(broker, 1, len(acked))
        assert {o: received.get(o) for o in acked} == acked, "an acknowledged record is lost"
        truncations = [
            e
            for e in log_events(broker)
            if e.get("event") == "recovery truncated a torn or corrupt tail"
        ]
        assert truncations and truncations[0]["partition"] == f"{TOPIC}-1"
        assert truncations[0]["kept_up_to_offset"] == max(acked) + 1
        assert truncations[0]["bytes"] > 0
    finally:
        broker.kill()


def test_a_broker_starts_with_a_full_directory_holding_a_sparse_index(tmp_path, dirs):
    """The issue's SIGBUS: a crashed segment's preallocated index left sparse, on a full
    filesystem, killed the broker while loading (exit 135, nothing logged)."""
    good, full = dirs
    broker = start_broker(tmp_path, good, full)
    try:
        create_topic(broker)
        wait_for(lambda: (full / f"{TOPIC}-1").is_dir(), "t-1 in the full directory")
        for partition in (0, 1):
            acked, errors = produce(broker, partition, 20)
            assert len(acked) == 20 and not errors
        broker.kill()  # a crash: the active indexes stay preallocated
        index = full / f"{TOPIC}-1" / "00000000000000000000.index"
        os.truncate(index, 0)
        os.truncate(index, 256 * 1024)  # sparse, as the old preallocation left it
        fill(full)

        broker.start()
        failures = [
            e for e in log_events(broker) if e.get("event", "").startswith("log directory failed")
        ]
        assert failures and failures[0]["log_dir"] == str(full)
        assert failures[0]["errno"] == "ENOSPC"
        assert len(consume(broker, 0, 20)) == 20, "the healthy directory serves"
        acked, errors = produce(broker, 0, 5)
        assert len(acked) == 5 and not errors

        def t1_has_no_leader():
            metadata = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
                TOPIC, timeout=10
            )
            partition = metadata.topics[TOPIC].partitions[1]
            return partition.leader == -1

        wait_for(t1_has_no_leader, "t-1 offline (its only replica is in the full directory)")
    finally:
        broker.kill()


def test_a_deleted_partition_directory_moves_leadership_and_is_never_served_empty(tmp_path):
    """The issue's vanished partition: 1,500 acknowledged records, the leader's partition
    directory deleted while it runs. The leader notices, the controller elects the other
    replica (which has every record), and the old leader, restarted, does not come back with
    an empty log: its replica stays offline, with an error naming the partition."""
    from kafkalite.testing import ZooKeeperServer

    with ZooKeeperServer(tmp_path / "zk") as zk:
        brokers = {
            broker_id: Broker(
                data_dir=tmp_path / f"broker{broker_id}",
                broker_id=broker_id,
                config={
                    "zookeeper.connect": zk.connect_string("/vanished"),
                    "replica.lag.time.max.ms": "5000",
                    "unclean.leader.election.enable": "false",
                },
                subprocess=True,
                admin=False,
            )
            for broker_id in (1, 2)
        }
        try:
            for broker in brokers.values():
                broker.start()
            bootstrap = ",".join(b.bootstrap for b in brokers.values())
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 2)], operation_timeout=30)[TOPIC].result(30)

            def leader():
                # a topic just created is in ZooKeeper before UpdateMetadata reaches the
                # broker that answers: its partition may not be listed yet
                topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
                metadata = topic.partitions.get(0)
                return metadata.leader if metadata and len(metadata.isrs) == 2 else None

            first = wait_for(leader, "a leader with both replicas in sync")
            acked, errors = produce(brokers[first], 0, 1500, size=16)
            assert len(acked) == 1500 and not errors
            old = brokers[first]
            survivor = brokers[3 - first]
            partition_dir = old.log_dir / f"{TOPIC}-0"
            wait_for(partition_dir.is_dir, "the leader's partition directory")
            shutil.rmtree(partition_dir)

            def new_leader():
                metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
                return metadata.leader == survivor.broker_id

            wait_for(new_leader, "leadership moved off the vanished directory", timeout=60)
            received = consume(survivor, 0, 1500)
            assert {o: received.get(o) for o in acked} == acked
            vanished = [
                e
                for e in log_events(old)
                if e.get("event", "").startswith("partition directory vanished")
            ]
            assert vanished and vanished[0]["partition"] == f"{TOPIC}-0"

            old.stop()
            old.start()
            missing = [
                e
                for e in log_events(old)
                if e.get("event", "").startswith("partition directory missing")
            ]
            assert missing and missing[0]["partition"] == f"{TOPIC}-0"
            assert not partition_dir.exists(), "not recreated empty"
            metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
            assert metadata.leader == survivor.broker_id
            assert metadata.isrs == [survivor.broker_id]
        finally:
            for broker in brokers.values():
                broker.kill()


def test_a_consumer_never_gets_a_batch_that_fails_its_crc(tmp_path):
    """librdkafka's default check.crcs=false handed the application a corrupted value before
    it stopped for good; now the broker refuses the bad batch (CORRUPT_MESSAGE)."""
    from kafkalite.protocol.records import iter_batch_headers

    broker = Broker(
        data_dir=tmp_path / "broker",
        config={"log.segment.bytes": "100000"},
        subprocess=True,
        admin=False,
    ).start()
    try:
        create_topic(broker)
        acked, errors = produce(broker, 0, 200, size=400)
        assert len(acked) == 200 and not errors
        broker.stop()
        segment = sorted((broker.log_dir / f"{TOPIC}-0").glob("*.log"))[0]
        data = bytearray(segment.read_bytes())
        batches = list(iter_batch_headers(bytes(data)))
        assert len(batches) >= 3
        pos, bad = batches[1]
        data[pos + bad.batch_length + 12 - 5] ^= 0x55  # a byte of the last record's value
        segment.write_bytes(data)
        broker.start()

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "crc",
                "enable.auto.commit": False,
                "check.crcs": False,
            }
        )
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        received: dict[int, bytes] = {}

        def refused_after_the_good_batches():
            for msg in consumer.consume(500, timeout=0.5):
                if msg.error() is None:
                    received[msg.offset()] = msg.value()
            refusals = [
                e
                for e in log_events(broker)
                if e.get("event") == "corrupt batch refused to a fetch"
            ]
            return len(received) >= bad.base_offset and refusals

        try:
            wait_for(refused_after_the_good_batches, "the good batches, then the refusal")
        finally:
            consumer.close()
        assert all(received[o] == acked[o] for o in received), "a corrupted value was delivered"
        assert not any(bad.base_offset <= o <= bad.last_offset for o in received)
        verify = subprocess.run(
            [sys.executable, "-m", "kafkalite", "storage", "verify", str(broker.log_dir)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        assert verify.returncode == 1 and f"corrupt-batch at position {pos}" in verify.stdout
    finally:
        broker.kill()


def test_a_leader_whose_disk_fills_hands_over_and_retrying_producers_lose_nothing(tmp_path):
    """Disk full on a leader with a replica elsewhere: the producer is answered
    KAFKA_STORAGE_ERROR, the controller moves leadership, and a producer with Kafka's default
    retries goes on with the new leader: no client-side timeout, every record delivered."""
    from kafkalite.testing import ZooKeeperServer

    with (
        ZooKeeperServer(tmp_path / "zk") as zk,
        mounted_tmpfs(tmp_path / "disk1", "4m") as disk1,
        mounted_tmpfs(tmp_path / "disk2", "4m") as disk2,
    ):
        dirs = {1: disk1, 2: disk2}
        brokers = {
            broker_id: Broker(
                data_dir=tmp_path / f"broker{broker_id}",
                broker_id=broker_id,
                config={
                    "zookeeper.connect": zk.connect_string("/full-leader"),
                    "log.dirs": str(dirs[broker_id]),
                    "log.index.size.max.bytes": "65536",
                    "replica.lag.time.max.ms": "10000",
                },
                subprocess=True,
                admin=False,
            )
            for broker_id in (1, 2)
        }
        try:
            for broker in brokers.values():
                broker.start()
            bootstrap = ",".join(b.bootstrap for b in brokers.values())
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, 2)], operation_timeout=30)[TOPIC].result(30)

            def leader():
                # a topic just created is in ZooKeeper before UpdateMetadata reaches the
                # broker that answers: its partition may not be listed yet
                topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
                metadata = topic.partitions.get(0)
                return metadata.leader if metadata and len(metadata.isrs) == 2 else None

            first = wait_for(leader, "both replicas in sync")
            second = 3 - first
            fill(dirs[first], leave_bytes=300 * 1024)
            producer = Producer(
                {
                    "bootstrap.servers": bootstrap,
                    "acks": "all",
                    "linger.ms": 5,
                    "batch.size": 16384,
                    "message.timeout.ms": 120000,
                }
            )
            acked: dict[int, bytes] = {}
            errors: list[str] = []

            def on_delivery(err, msg):
                if err is None:
                    acked[msg.offset()] = msg.value()
                else:
                    errors.append(err.name())

            values = [(b"%08d" % i) * 125 for i in range(1500)]
            for value in values:
                producer.produce(TOPIC, value, partition=0, on_delivery=on_delivery)
                producer.poll(0)
            assert producer.flush(120) == 0, "deliveries still pending"
            assert not errors, errors
            assert sorted(acked.values()) == sorted(values), "every record delivered once"
            metadata = admin.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions[0]
            assert metadata.leader == second
            failures = [
                e
                for e in log_events(brokers[first])
                if e.get("event", "").startswith("log directory failed")
            ]
            assert failures and failures[0]["errno"] == "ENOSPC"
            # Without idempotence a retried batch may be in the log twice (as in Kafka): read
            # every offset up to the last acknowledged one.
            received = consume(brokers[second], 0, max(acked) + 1)
            assert {o: received.get(o) for o in acked} == acked
        finally:
            for broker in brokers.values():
                broker.kill()
