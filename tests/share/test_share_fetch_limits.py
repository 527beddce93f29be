"""ShareFetch's MaxBytes at batch granularity, as Kafka's log read: whole batches while their
total stays within MaxBytes, the first batch that would pass it ends the answer, and the answer's
first batch is returned whatever its size; only the records of returned batches are acquired.

One in-process broker (``share.auto.offset.reset=earliest``), raw ShareFetch requests through
kafkalite's client; three 1,000-byte records, each in its own batch."""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.testing import Broker

pytestmark = pytest.mark.integration

TOPIC = "limits"
VALUE = b"v" * 1000


@pytest.fixture(scope="module")
def broker():
    with Broker(
        {
            "share.auto.offset.reset": "earliest",
            "offsets.topic.num.partitions": 1,
            "share.coordinator.state.topic.num.partitions": 1,
        }
    ) as b:
        b.create_topic(TOPIC)
        for _ in range(3):
            b.produce(TOPIC, [VALUE])
        yield b


async def _fetch_all(
    bootstrap: str, group: str, max_bytes: int, topic: str = TOPIC, records: int = 3
) -> list[tuple[list[tuple[int, int, int]], int]]:
    """Each ShareFetch answer's acquired ranges (one member, epochs 0, 1, ...) until
    ``records`` records are acquired, and the records' size of each answer."""
    client = KafkaClient(bootstrap, client_id="limits-test")
    await client.start()
    try:
        topic_id, partition_count, member = await _join(client, group, topic)
        answers: list[tuple[list[tuple[int, int]], int]] = []
        epoch, got = 0, 0
        deadline = time.monotonic() + 30
        partitions = [{"partition_index": i} for i in range(partition_count)]
        while got < records:
            assert time.monotonic() < deadline, answers
            response = await client.send(
                ApiKey.SHARE_FETCH,
                request_builder(
                    ApiKey.SHARE_FETCH,
                    group_id=group,
                    member_id=member,
                    share_session_epoch=epoch,
                    max_wait=datetime.timedelta(milliseconds=100),
                    min_bytes=1,
                    max_bytes=max_bytes,
                    max_records=500,
                    batch_size=500,
                    topics=[{"topic_id": topic_id, "partitions": partitions}] if epoch == 0 else [],
                ),
            )
            assert response.error_code == ErrorCode.NONE
            epoch += 1
            ranges = [
                (p.partition_index, a.first_offset, a.last_offset)
                for t in response.responses
                for p in t.partitions
                for a in p.acquired_records
            ]
            size = sum(len(p.records or b"") for t in response.responses for p in t.partitions)
            if ranges:
                answers.append((ranges, size))
                got += sum(last - first + 1 for _, first, last in ranges)
        return answers
    finally:
        await client.close()


def test_max_bytes_below_one_batch_gives_one_batch_per_answer(broker):
    answers = asyncio.run(_fetch_all(broker.bootstrap_servers, "g-small", 1500))
    assert [r for r, _ in answers] == [[(0, 0, 0)], [(0, 1, 1)], [(0, 2, 2)]]
    assert all(1000 < size <= 1500 for _, size in answers)


def test_the_first_batch_comes_whatever_its_size(broker):
    answers = asyncio.run(_fetch_all(broker.bootstrap_servers, "g-tiny", 10))
    assert [r for r, _ in answers] == [[(0, 0, 0)], [(0, 1, 1)], [(0, 2, 2)]]


def test_batches_while_they_fit(broker):
    answers = asyncio.run(_fetch_all(broker.bootstrap_servers, "g-two", 2500))
    assert [r for r, _ in answers] == [[(0, 0, 1)], [(0, 2, 2)]]
    assert all(size <= 2500 for _, size in answers)


def test_a_fetch_serves_the_share_partitions_ready_and_initialises_the_others(broker):
    """Kafka initialises share-partitions asynchronously and its delayed share fetch completes
    as soon as one is acquirable: a new member's first answer holds the share-partition
    initialised first, the next answers the others (what librdkafka's 0179 expects: one
    partition's records per poll)."""
    broker.create_topic("two-parts", partitions=2)
    broker.produce("two-parts", [b"a"] * 5, partition=0)
    broker.produce("two-parts", [b"b"] * 5, partition=1)
    answers = asyncio.run(
        _fetch_all(broker.bootstrap_servers, "g-two-parts", 1 << 20, "two-parts", 10)
    )
    assert len(answers[0][0]) == 1, answers
    assert len(answers) == 2, answers


def test_max_bytes_zero_gives_no_records(broker):
    """A ShareFetch with MaxBytes 0 acquires nothing (what Kafka answers, and librdkafka's
    0180 pins): a later fetch with room gets every record, first delivery."""

    async def run() -> tuple[list, list]:
        zero = await _fetch_once(broker.bootstrap_servers, "g-zero", 0)
        after = await _fetch_all(broker.bootstrap_servers, "g-zero", 1 << 20)
        return zero, after

    zero, after = asyncio.run(run())
    assert zero == []
    assert [r for r, _ in after] == [[(0, 0, 2)]]


async def _fetch_once(bootstrap: str, group: str, max_bytes: int) -> list:
    """The acquired ranges of a few ShareFetches of one new member with ``max_bytes`` (closing
    its share session after them, so nothing stays acquired)."""
    client = KafkaClient(bootstrap, client_id="limits-test")
    await client.start()
    try:
        topic_id, _, member = await _join(client, group, TOPIC)
        got = []
        for epoch in range(3):
            response = await client.send(
                ApiKey.SHARE_FETCH,
                request_builder(
                    ApiKey.SHARE_FETCH,
                    group_id=group,
                    member_id=member,
                    share_session_epoch=epoch,
                    max_wait=datetime.timedelta(milliseconds=200),
                    min_bytes=1,
                    max_bytes=max_bytes,
                    max_records=500,
                    batch_size=500,
                    topics=[{"topic_id": topic_id, "partitions": [{"partition_index": 0}]}]
                    if epoch == 0
                    else [],
                ),
            )
            assert response.error_code == ErrorCode.NONE
            got += [
                (a.first_offset, a.last_offset)
                for t in response.responses
                for p in t.partitions
                for a in p.acquired_records
            ]
        return got
    finally:
        await client.close()


async def _join(client: KafkaClient, group: str, topic: str) -> tuple[uuid.UUID, int, str]:
    """(topic id, partition count, member id) of a new member of share group ``group``."""
    meta = await client.send(
        ApiKey.METADATA,
        request_builder(ApiKey.METADATA, topics=[{"name": topic}]),
        version=12,
    )
    member = str(uuid.uuid4())
    deadline = time.monotonic() + 30
    while True:  # FindCoordinator creates the offsets topic on first use
        await client.send(
            ApiKey.FIND_COORDINATOR,
            request_builder(ApiKey.FIND_COORDINATOR, key=group, key_type=0),
            version=3,
        )
        hb = await client.send(
            ApiKey.SHARE_GROUP_HEARTBEAT,
            request_builder(
                ApiKey.SHARE_GROUP_HEARTBEAT,
                group_id=group,
                member_id=member,
                member_epoch=0,
                subscribed_topic_names=[topic],
            ),
        )
        if hb.error_code == ErrorCode.NONE:
            break
        assert hb.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE, hb
        assert time.monotonic() < deadline, hb
        await asyncio.sleep(0.1)  # a retry back-off, as a client's (the loop has a deadline)
    return meta.topics[0].topic_id, len(meta.topics[0].partitions), member
