"""The message-format baseline (docs/compatibility.md, "Message formats"): record batches of
format v2 only, as Kafka 4.0 after KIP-896.

- Produce below v3 and Fetch below v4 (the versions that carry magic 0/1 message sets) are not
  advertised; a request at such a version closes its connection, as any unadvertised version does.
- A magic 0/1 message set inside a Produce v3+ is refused with INVALID_RECORD, nothing written.
- A real client pinned to the old formats (kafka-python with ``api_version=(0, 10, 1)``) fails to
  produce, and the broker keeps serving everyone else.
"""

from __future__ import annotations

import asyncio
import datetime
import socket
import struct

import pytest

from kafkalite.client.client import KafkaClient
from kafkalite.client.connection import request_builder
from kafkalite.protocol.api import ApiKey
from kafkalite.testing import Broker

try:
    from kafka import KafkaProducer
    from kafka.errors import KafkaError
    from kafka.record.legacy_records import LegacyRecordBatchBuilder
except ImportError as e:  # pragma: no cover - a missing client fails loudly
    raise ImportError("kafka-python is missing: pip install -e '.[test]'") from e

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python internals


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(data_dir=tmp_path_factory.mktemp("baseline")) as b:
        yield b


def frame(api_key: int, version: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, 5, 4) + b"test" + body
    return struct.pack(">i", len(payload)) + payload


def closed_by_broker(s: socket.socket) -> bool:
    s.settimeout(10.0)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def legacy_message_set(magic: int) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    builder.append(0, timestamp=1_700_000_000_000 if magic else None, key=b"k", value=b"v")
    return bytes(builder.build())


def test_old_produce_and_fetch_versions_are_not_advertised(broker):
    async def go():
        async with KafkaClient(broker.bootstrap_servers) as client:
            conn = await client.connection(next(iter(client.brokers)))
            return conn.api_versions

    versions = asyncio.run(go())
    assert versions[ApiKey.PRODUCE][0] == 3
    assert versions[ApiKey.FETCH][0] == 4


@pytest.mark.parametrize(("api_key", "version"), [(0, 0), (0, 2), (1, 0), (1, 3)])
def test_a_request_at_an_old_format_version_closes_only_its_connection(broker, api_key, version):
    healthy = socket.create_connection((broker.host, broker.port))
    old = socket.create_connection((broker.host, broker.port))
    old.sendall(frame(api_key, version, b"\x00" * 16))
    assert closed_by_broker(old)
    old.close()
    healthy.sendall(frame(18, 0))  # ApiVersions v0 on the other connection is still answered
    healthy.settimeout(10.0)
    size = struct.unpack(">i", healthy.recv(4))[0]
    body = b""
    while len(body) < size:
        body += healthy.recv(size - len(body))
    assert struct.unpack_from(">ih", body) == (5, 0)
    healthy.close()


@pytest.mark.parametrize("magic", [0, 1])
def test_a_legacy_message_set_in_a_current_produce_is_invalid_record(broker, magic):
    topic = f"legacy-{magic}"
    broker.create_topic(topic, partitions=1)

    async def go():
        async with KafkaClient(broker.bootstrap_servers) as client:
            await client.refresh_metadata(topics=[topic])
            response = await client.send(
                ApiKey.PRODUCE,
                request_builder(
                    ApiKey.PRODUCE,
                    transactional_id=None,
                    acks=-1,
                    timeout=datetime.timedelta(seconds=5),
                    topic_data=[
                        {
                            "name": topic,
                            "partition_data": [{"index": 0, "records": legacy_message_set(magic)}],
                        }
                    ],
                ),
                version=3,
                node_id=next(iter(client.brokers)),
            )
            return response.responses[0].partition_responses[0]

    answer = asyncio.run(go())
    assert int(answer.error_code) == 87  # INVALID_RECORD
    assert broker.consume_all(topic) == []


def test_a_client_pinned_to_the_old_formats_cannot_produce_and_others_still_can(broker):
    topic = "legacy-client"
    broker.create_topic(topic, partitions=1)
    old = KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        api_version=(0, 10, 1),  # Produce v2, message format v1
        retries=0,
        request_timeout_ms=5000,
        max_block_ms=5000,
    )
    try:
        future = old.send(topic, b"old")
        with pytest.raises(KafkaError):
            future.get(timeout=30)
    finally:
        old.close(timeout=5)
    assert broker.consume_all(topic) == []
    broker.produce(topic, [b"new"])
    assert [m.value for m in broker.consume_all(topic)] == [b"new"]
