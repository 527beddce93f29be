"""Malformed and unexpected requests: Kafka's answer, and the broker keeps serving others.

Each case runs on its own socket while a second, healthy connection is kept open; after the bad
input the healthy one must still get ApiVersions answered.
"""

import asyncio
import datetime
import random
import socket
import struct

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.testing import Broker, api_versions_ok


def header(api_key, version, correlation_id=7, client=b"bad"):
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client


def frame(payload):
    return struct.pack(">i", len(payload)) + payload


def read_frame(s):
    head = b""
    while len(head) < 4:
        chunk = s.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = b""
    while len(body) < size:
        chunk = s.recv(size - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def closed_by_broker(s, timeout=10.0):
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One subprocess broker for the module (tests use distinct topics)."""
    with Broker(subprocess=True, data_dir=tmp_path_factory.mktemp("broker")) as broker:
        yield broker


@pytest.fixture
def healthy(shared_broker):
    s = socket.create_connection((shared_broker.host, shared_broker.port))
    yield s
    s.sendall(frame(header(18, 0, 42)))
    body = read_frame(s)
    assert body is not None and struct.unpack_from(">ih", body) == (42, 0)
    s.close()
    assert api_versions_ok(shared_broker.host, shared_broker.port)


@pytest.mark.parametrize(
    "data",
    [
        # a complete frame of random bytes (a random size prefix below the request size limit
        # would leave the broker rightly waiting for the rest); seeded, so every run sends it
        pytest.param(struct.pack(">i", 60) + random.Random(7).randbytes(60), id="random-bytes"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024) + b"x" * 100, id="oversized-frame"),
        pytest.param(struct.pack(">i", -1), id="negative-size"),
        pytest.param(frame(header(1234, 0)), id="unknown-api-key"),
        pytest.param(frame(header(3, 99) + b"\x00"), id="unsupported-metadata-version"),
        pytest.param(frame(header(0, 9) + b"\x00\x01"), id="truncated-produce-body"),
        pytest.param(frame(b"\x00"), id="truncated-header"),
        pytest.param(frame(header(3, 1) + struct.pack(">i", 0x7FFFFFFF)), id="huge-array-length"),
        pytest.param(
            frame(header(0, 7) + b"\xff\xff\x00\x01\x00\x00\x01\x00" + b"\x7f\xff\xff\xff"),
            id="produce-huge-topic-count",
        ),
    ],
)
def test_bad_input_closes_only_that_connection(shared_broker, healthy, data):
    s = socket.create_connection((shared_broker.host, shared_broker.port))
    s.sendall(data)
    assert closed_by_broker(s)
    s.close()


def test_truncated_frame_then_hangup(shared_broker, healthy):
    s = socket.create_connection((shared_broker.host, shared_broker.port))
    s.sendall(struct.pack(">i", 100) + b"\x00\x12\x00\x00")
    s.close()  # the broker must simply drop the partial frame


def test_api_versions_above_ours_is_answered_with_our_versions(shared_broker, healthy):
    s = socket.create_connection((shared_broker.host, shared_broker.port))
    s.sendall(frame(header(18, 77, 9) + b"\x00future"))
    body = read_frame(s)
    correlation_id, error, count = struct.unpack_from(">ihi", body)
    assert (correlation_id, error) == (9, 35)  # UNSUPPORTED_VERSION
    keys = {struct.unpack_from(">hhh", body, 10 + 6 * i)[0] for i in range(count)}
    assert {0, 1, 2, 3, 18} <= keys
    s.sendall(frame(header(18, 0, 10)))  # the connection stays usable
    assert struct.unpack_from(">ih", read_frame(s)) == (10, 0)
    s.close()


async def unknown_topic_answers(bootstrap):
    async with KafkaClient(bootstrap) as client:
        response = await client.metadata(["no-such-topic"])  # allow_auto_topic_creation=False
        (topic,) = response.topics
        assert int(topic.error_code) == 3
        tp = TopicPartition("no-such-topic", 0)
        conn_node = next(iter(client.brokers))
        produce = await client.send(
            ApiKey.PRODUCE,
            request_builder(
                ApiKey.PRODUCE,
                transactional_id=None,
                acks=1,
                timeout=datetime.timedelta(seconds=5),
                topic_data=[
                    {
                        "name": tp.topic,
                        "partition_data": [
                            {"index": 0, "records": build_batch([Record(0, 0, b"k", b"v")])}
                        ],
                    }
                ],
            ),
            node_id=conn_node,
        )
        assert int(produce.responses[0].partition_responses[0].error_code) == 3
        fetch = await client.send(
            ApiKey.FETCH,
            request_builder(
                ApiKey.FETCH,
                replica_id=-1,
                max_wait=datetime.timedelta(milliseconds=10),
                min_bytes=1,
                max_bytes=1 << 20,
                isolation_level=0,
                session_id=0,
                session_epoch=-1,
                topics=[
                    {
                        "topic": tp.topic,
                        "partitions": [
                            {
                                "partition": 0,
                                "current_leader_epoch": -1,
                                "fetch_offset": 0,
                                "log_start_offset": -1,
                                "partition_max_bytes": 1 << 20,
                            }
                        ],
                    }
                ],
                forgotten_topics_data=[],
                rack_id="",
            ),
            node_id=conn_node,
        )
        assert int(fetch.responses[0].partitions[0].error_code) == 3
        offsets = await client.send(
            ApiKey.LIST_OFFSETS,
            request_builder(
                ApiKey.LIST_OFFSETS,
                replica_id=-1,
                isolation_level=0,
                topics=[
                    {
                        "name": tp.topic,
                        "partitions": [
                            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}
                        ],
                    }
                ],
            ),
            node_id=conn_node,
        )
        assert int(offsets.topics[0].partitions[0].error_code) == 3


def test_unknown_topics_get_unknown_topic_or_partition(shared_broker, healthy):
    asyncio.run(unknown_topic_answers(shared_broker.bootstrap_servers))
