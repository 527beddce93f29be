"""Follower fetching (KIP-392) with a real client: three brokers in racks r1, r2, r3 with
Kafka's RackAwareReplicaSelector, topics at RF 3.

- Raw Fetch v11 (the project's client): the leader answers a consumer in a follower's rack
  with that follower as preferred read replica and no records; a consumer in the leader's rack,
  without a rack, or in an unknown rack reads from the leader. The follower serves a v11
  consumer up to its high watermark, fences a stale leader epoch, refuses a v10 consumer
  (no client metadata) and ListOffsets (leader-only) with NOT_LEADER_OR_FOLLOWER.
- confluent-kafka: a consumer with `client.rack` = a follower's rack reads every record, and the
  follower's replica manager shows it served them (a spy on its local reads); the follower is
  then killed while the consumer polls, more records are produced, and the consumer reads on
  (from the leader) with nothing lost or duplicated. The leader, seeing the follower out of the
  ISR, names no preferred replica for that rack any more.

Every wait is a condition with a deadline, never a sleep.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from typing import Any

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.config import RACK_AWARE_REPLICA_SELECTOR
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.testing import Cluster
from tests.integration.common import wait_for

try:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as CkTopicPartition
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("confluent-kafka is required: pip install -e '.[test]'") from e

DEADLINE_S = 60.0
INT32_MAX = 2**31 - 1


def rack(broker_id: int) -> str:
    return f"r{broker_id}"


@pytest.fixture(scope="module")
def cluster():
    with Cluster(
        brokers=3,
        broker_configs={b: {"broker.rack": rack(b)} for b in (1, 2, 3)},
        config={
            "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR,
            "controlled.shutdown.enable": "false",
        },
    ) as c:
        yield c


def _bootstrap(cluster: Cluster) -> str:
    return cluster.bootstrap_of(*cluster.running_brokers)


def _caught_up(cluster: Cluster, topic: str, end: int) -> None:
    """Every replica holds ``end`` records and knows they are committed (its HW)."""

    def done() -> bool:
        for broker_id in cluster.running_brokers:
            partition = cluster.servers[broker_id].replica_manager.online_partition(
                TopicPartition(topic, 0)
            )
            if partition is None or partition.log is None or partition.log.high_watermark < end:
                return False
        return True

    wait_for(done, f"every replica of {topic} at HW {end}")


def _fetch(
    cluster: Cluster,
    node_id: int,
    topic: str,
    *,
    version: int = 11,
    rack_id: str = "",
    offset: int = 0,
    current_leader_epoch: int = -1,
    max_wait_ms: int = 0,
) -> Any:
    """One sessionless consumer Fetch of partition 0 to ``node_id``; its partition answer."""

    async def go() -> Any:
        client = KafkaClient(_bootstrap(cluster), client_id="ff-raw", request_timeout=DEADLINE_S)
        await client.start()
        try:
            response = await client.send(
                ApiKey.FETCH,
                request_builder(
                    ApiKey.FETCH,
                    replica_id=-1,
                    max_wait=datetime.timedelta(milliseconds=max_wait_ms),
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=0,
                    session_id=0,
                    session_epoch=-1,
                    topics=[
                        {
                            "topic": topic,
                            "partitions": [
                                {
                                    "partition": 0,
                                    "current_leader_epoch": current_leader_epoch,
                                    "fetch_offset": offset,
                                    "log_start_offset": -1,
                                    "partition_max_bytes": 1 << 20,
                                }
                            ],
                        }
                    ],
                    forgotten_topics_data=[],
                    rack_id=rack_id,
                ),
                version=version,
                node_id=node_id,
            )
        finally:
            await client.close()
        return response.responses[0].partitions[0]

    return asyncio.run(go())


def _list_offsets(cluster: Cluster, node_id: int, topic: str) -> ErrorCode:
    async def go() -> ErrorCode:
        client = KafkaClient(_bootstrap(cluster), client_id="ff-raw")
        await client.start()
        try:
            response = await client.send(
                ApiKey.LIST_OFFSETS,
                request_builder(
                    ApiKey.LIST_OFFSETS,
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "current_leader_epoch": -1,
                                    "timestamp": -1,
                                }
                            ],
                        }
                    ],
                ),
                node_id=node_id,
            )
        finally:
            await client.close()
        return ErrorCode.of(int(response.topics[0].partitions[0].error_code))

    return asyncio.run(go())


def _records_in(answer: Any) -> int:
    records = answer.records
    return 0 if records is None else len(records)


def test_leader_names_the_follower_in_the_client_rack(cluster):
    topic = cluster.create_topic("ff-raw", replication_factor=3)
    cluster.produce(topic, [f"v{i}" for i in range(10)])
    state = cluster.wait_for_leaders(topic, full_isr=True)[TopicPartition(topic, 0)]
    _caught_up(cluster, topic, 10)
    leader = state.leader
    follower = min(b for b in state.replicas if b != leader)

    to_leader = _fetch(cluster, leader, topic, rack_id=rack(follower))
    assert ErrorCode.of(int(to_leader.error_code)) is ErrorCode.NONE
    assert to_leader.preferred_read_replica == follower
    assert _records_in(to_leader) == 0
    assert to_leader.high_watermark == 10

    for other_rack in (rack(leader), "", "nowhere"):
        answer = _fetch(cluster, leader, topic, rack_id=other_rack)
        assert answer.preferred_read_replica == -1, other_rack
        assert _records_in(answer) > 0, other_rack

    from_follower = _fetch(cluster, follower, topic, rack_id=rack(follower))
    assert ErrorCode.of(int(from_follower.error_code)) is ErrorCode.NONE
    assert from_follower.preferred_read_replica == -1
    assert from_follower.high_watermark == 10
    assert _records_in(from_follower) > 0

    # A consumer waiting at the follower's HW is answered when replication moves that HW: its
    # max_wait (24 days) cannot answer it, the request times out after DEADLINE_S.
    answers: list[Any] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            _fetch(
                cluster, follower, topic, rack_id=rack(follower), offset=10, max_wait_ms=INT32_MAX
            )
        )
    )
    waiting.start()
    purgatory = cluster.servers[follower].replica_manager.fetch_purgatory
    wait_for(lambda: purgatory.delayed >= 1, "the consumer fetch waiting at the follower")
    cluster.produce(topic, ["v10"])
    waiting.join(DEADLINE_S + 5)
    assert answers, "the waiting fetch was not answered"
    assert ErrorCode.of(int(answers[0].error_code)) is ErrorCode.NONE
    assert answers[0].high_watermark == 11
    assert _records_in(answers[0]) > 0


def test_follower_checks_what_kafka_checks(cluster):
    topic = cluster.create_topic("ff-checks", replication_factor=3)
    cluster.produce(topic, ["a", "b"])
    state = cluster.wait_for_leaders(topic, full_isr=True)[TopicPartition(topic, 0)]
    _caught_up(cluster, topic, 2)
    follower = min(b for b in state.replicas if b != state.leader)
    epoch = (
        cluster.servers[follower]
        .replica_manager.online_partition(TopicPartition(topic, 0))
        .leader_epoch
    )

    ok = _fetch(cluster, follower, topic, current_leader_epoch=epoch)
    assert ErrorCode.of(int(ok.error_code)) is ErrorCode.NONE
    assert _records_in(ok) > 0
    # (FENCED_LEADER_EPOCH for an older epoch is the same check, proven in the unit tests: a
    # new topic's epoch 0 has no older one.)
    newer = _fetch(cluster, follower, topic, current_leader_epoch=epoch + 1)
    assert ErrorCode.of(int(newer.error_code)) is ErrorCode.UNKNOWN_LEADER_EPOCH
    # Past the follower's log end: out of range (the client asks the leader), as Kafka.
    ahead = _fetch(cluster, follower, topic, offset=5, current_leader_epoch=epoch)
    assert ErrorCode.of(int(ahead.error_code)) is ErrorCode.OFFSET_OUT_OF_RANGE
    # Without client metadata (v10) a consumer reads from leaders only; so does ListOffsets.
    old = _fetch(cluster, follower, topic, version=10)
    assert ErrorCode.of(int(old.error_code)) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _list_offsets(cluster, follower, topic) is ErrorCode.NOT_LEADER_OR_FOLLOWER


class _ReadSpy:
    """Counts the records' bytes one broker's replica manager reads for consumers of a topic."""

    def __init__(self, server: Any, topic: str) -> None:
        self.bytes = 0
        self._lock = threading.Lock()
        rm = server.replica_manager
        original = rm.read_from_local_log

        def spy(params, fetch_infos):
            result = original(params, fetch_infos)
            if params.replica_id == -1:
                size = sum(d.records_size for tp, d in result.items() if tp.topic == topic)
                with self._lock:
                    self.bytes += size
            return result

        rm.read_from_local_log = spy


def _consume(consumer: Consumer, want: int, seen: list[str]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while len(seen) < want:
        assert time.monotonic() < deadline, f"read {len(seen)} of {want} records"
        message = consumer.poll(0.2)
        if message is None:
            continue
        assert message.error() is None, message.error()
        seen.append(message.value().decode())


def test_consumer_reads_from_its_rack_and_survives_the_follower(cluster):
    topic = cluster.create_topic("ff-consume", replication_factor=3)
    state = cluster.wait_for_leaders(topic, full_isr=True)[TopicPartition(topic, 0)]
    leader = state.leader
    follower = min(b for b in state.replicas if b != leader)
    spy = _ReadSpy(cluster.servers[follower], topic)
    leader_spy = _ReadSpy(cluster.servers[leader], topic)

    producer = Producer({"bootstrap.servers": _bootstrap(cluster), "acks": "all"})
    first = [f"m{i}" for i in range(500)]
    for value in first:
        producer.produce(topic, value.encode(), partition=0)
    assert producer.flush(DEADLINE_S) == 0
    _caught_up(cluster, topic, len(first))

    consumer = Consumer(
        {
            "bootstrap.servers": _bootstrap(cluster),
            "group.id": "ff-group",
            "enable.auto.commit": False,
            "client.rack": rack(follower),
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        consumer.assign([CkTopicPartition(topic, 0, 0)])
        seen: list[str] = []
        _consume(consumer, len(first), seen)
        assert seen == first
        assert spy.bytes > 0, "the follower in the client's rack served nothing"
        assert leader_spy.bytes == 0, "the leader served records to a consumer in another rack"

        cluster.kill(follower)
        cluster.wait_for_leaders(topic, not_on=[follower])
        # The leader stops recommending the dead follower once it leaves the ISR.
        wait_for(
            lambda: follower not in cluster.partitions(topic)[0].isr,
            "the killed follower out of the ISR",
        )
        live_leader = cluster.partitions(topic)[0].leader
        answer = _fetch(cluster, live_leader, topic, rack_id=rack(follower))
        assert answer.preferred_read_replica == -1

        second = [f"m{i}" for i in range(len(first), len(first) + 500)]
        for value in second:
            producer.produce(topic, value.encode(), partition=0)
        assert producer.flush(DEADLINE_S) == 0
        _consume(consumer, len(first) + len(second), seen)
        assert seen == first + second
        assert leader_spy.bytes > 0, "the consumer did not come back to the leader"
    finally:
        consumer.close()
