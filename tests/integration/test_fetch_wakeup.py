"""A waiting consumer fetch is answered by the high-watermark advance, not by a timer.

Three `kafkalite serve` processes on a real ZooKeeper, one topic at RF 3 with
min.insync.replicas=2. A consumer Fetch (raw v12, sessionless) waits at the log end with
``max_wait`` = 2^31-1 ms (24 days) and min_bytes 1: no timer can answer it within the test. A
confluent-kafka producer then writes one record with acks=all. On the leader the append alone
does not let the consumer read (it reads up to the HW, and the followers have not fetched yet);
the followers' next fetches advance the HW, which must complete the waiting fetch at once.

Asserted by order of events: the fetch is unanswered before the produce; the produce is
acknowledged (so the HW passed the record); the answer then arrives and carries that record with
high watermark 1 (an answer sent before the record was there would carry none). The socket read's deadline (60 s) only guards against a hang: 24 days would
be the timer.
"""

from __future__ import annotations

import datetime
import select
import signal
import socket

import pytest

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.frames import decode_response, encode_request
from kafkalite.protocol.records import iter_batches
from kafkalite.testing import Broker, ZooKeeperServer, recv_exactly
from tests.integration.common import wait_for

try:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("confluent-kafka is required: pip install -e '.[test]'") from e

BROKER_IDS = (1, 2, 3)
DEADLINE_S = 60.0
TOPIC = "wakeup"
INT32_MAX = 2**31 - 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("fetch-wakeup")
    with ZooKeeperServer(root / "zk") as zk:
        brokers = [
            Broker(
                data_dir=root / f"broker{broker_id}",
                broker_id=broker_id,
                config={
                    "zookeeper.connect": zk.connect_string("/fetch-wakeup"),
                    "default.replication.factor": "3",
                    "min.insync.replicas": "2",
                    # the test needs no leadership moves at the end: the brokers stop at once
                    "controlled.shutdown.enable": "false",
                },
                subprocess=True,
                admin=False,
            )
            for broker_id in BROKER_IDS
        ]
        try:
            for b in brokers:  # all three start at once, then each is awaited
                b.spawn()
            for b in brokers:
                b.wait_ready(DEADLINE_S)
            yield brokers
        finally:
            for b in brokers:  # SIGTERM to all three first, then each is awaited
                if b.running:
                    b.proc.send_signal(signal.SIGTERM)
            for b in brokers:
                try:
                    b.stop()
                except TimeoutError:
                    b.kill()


def fetch_frame(max_wait_ms: int) -> bytes:
    message = build_message(
        request_class(ApiKey.FETCH, 12),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "last_fetched_epoch": -1,
                        "log_start_offset": -1,
                        "partition_max_bytes": 1 << 20,
                    }
                ],
            }
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    return encode_request(ApiKey.FETCH, 12, 7, "wakeup-test", message)


def test_waiting_fetch_is_woken_by_the_high_watermark_not_a_timer(cluster):
    bootstrap = ",".join(b.bootstrap for b in cluster)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(DEADLINE_S)

    def full_isr_leader() -> int | None:
        topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
        partition = topic.partitions.get(0)
        if topic.error is None and partition and partition.leader >= 0:
            return partition.leader if len(partition.isrs) == 3 else None
        return None

    leader_id = wait_for(full_isr_leader, "partition led with all 3 replicas in sync", DEADLINE_S)
    leader = next(b for b in cluster if b.broker_id == leader_id)

    with socket.create_connection((leader.host, leader.port), timeout=DEADLINE_S) as sock:
        sock.sendall(fetch_frame(INT32_MAX))
        # The log is empty: nothing may answer the fetch yet (an early empty answer would also
        # fail the checks of the records below).
        readable, _, _ = select.select([sock], [], [], 0)
        assert readable == [], "the fetch was answered before anything was produced"

        delivered = []
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        producer.produce(
            TOPIC, b"wake up", partition=0, on_delivery=lambda err, msg: delivered.append(err)
        )
        assert producer.flush(DEADLINE_S) == 0
        assert delivered == [None]  # acks=all: the HW is past the record now

        size = int.from_bytes(recv_exactly(sock, 4), "big")
        correlation_id, response = decode_response(ApiKey.FETCH, 12, recv_exactly(sock, size))

    assert correlation_id == 7
    [topic] = response.responses
    [partition] = topic.partitions
    assert partition.error_code.value == 0
    assert partition.high_watermark == 1
    values = [r.value for _, batch in iter_batches(bytes(partition.records)) for r in batch]
    assert values == [b"wake up"]
