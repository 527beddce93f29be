import asyncio
import datetime
import weakref

import pytest

from kafkalite.client.connection import KafkaConnection, request_builder
from kafkalite.client.errors import KafkaConnectionError, KafkaTimeoutError
from kafkalite.client.messages import build_message
from kafkalite.protocol.api import CODEC_VERSIONS, ApiKey, request_class, response_class
from kafkalite.protocol.errors import ErrorCode, KafkaError, UnsupportedVersionError
from kafkalite.protocol.frames import encode_response
from tests.collector import collector_off
from tests.loop_turns import next_turn

from .fake_broker import FakeBroker

pytestmark = pytest.mark.timeout(30)


async def _until(predicate, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)  # polling interval of the condition above


def list_offsets_response(header, request, offset=42):
    return build_message(
        response_class(ApiKey.LIST_OFFSETS, header.api_version),
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {"partition_index": p.partition_index, "offset": offset, "timestamp": -1}
                    for p in t.partitions
                ],
            }
            for t in request.topics
        ],
    )


LIST_OFFSETS = request_builder(
    ApiKey.LIST_OFFSETS,
    replica_id=-1,
    topics=[{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
)


@pytest.fixture
async def broker():
    b = await FakeBroker(handlers={ApiKey.LIST_OFFSETS: list_offsets_response}).start()
    yield b
    await b.stop()


async def test_connect_negotiates_versions(broker):
    async with KafkaConnection("127.0.0.1", broker.port, client_id="t") as conn:
        assert conn.api_versions[ApiKey.FETCH] == broker.versions[ApiKey.FETCH]
        assert conn.pick_version(ApiKey.FETCH) == broker.versions[ApiKey.FETCH][1]
        assert conn.pick_version(ApiKey.METADATA, 4) == 4
        with pytest.raises(UnsupportedVersionError):
            conn.pick_version(ApiKey.JOIN_GROUP)
        with pytest.raises(UnsupportedVersionError):
            conn.pick_version(ApiKey.FETCH, 3)
    header, _ = broker.requests[0]
    assert header.api_key == ApiKey.API_VERSIONS
    assert header.api_version == CODEC_VERSIONS[ApiKey.API_VERSIONS][1]
    assert header.client_id == "t"


async def test_api_versions_fallback_retries_at_brokers_version():
    versions = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 5)}
    broker = await FakeBroker(versions=versions).start()
    try:
        async with KafkaConnection("127.0.0.1", broker.port) as conn:
            assert conn.api_versions == {18: (0, 2), 3: (0, 5)}
            response = await conn.send(ApiKey.METADATA, {"topics": []})
            assert type(response).__version__ == 5
        sent = [h.api_version for h, _ in broker.requests_of(ApiKey.API_VERSIONS)]
        assert sent == [CODEC_VERSIONS[ApiKey.API_VERSIONS][1], 2]
    finally:
        await broker.stop()


async def test_request_forms(broker):
    async with KafkaConnection("127.0.0.1", broker.port) as conn:
        by_builder = await conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
        by_dict = await conn.send(
            ApiKey.LIST_OFFSETS,
            {"topics": [{"name": "t", "partitions": [{"partition_index": 1}]}]},
            version=3,
        )
        message = build_message(
            request_class(ApiKey.LIST_OFFSETS, 5),
            topics=[{"name": "t", "partitions": [{"partition_index": 2}]}],
        )
        by_message = await conn.send(ApiKey.LIST_OFFSETS, message)
    assert by_builder.topics[0].partitions[0].offset == 42
    assert type(by_dict).__version__ == 3
    assert type(by_message).__version__ == 5
    assert by_message.topics[0].partitions[0].partition_index == 2


async def test_pipelined_requests_matched_by_correlation_id():
    held = []

    def reverse_batch(header, request):
        held.append(
            encode_response(header, list_offsets_response(header, request, header.correlation_id))
        )
        if len(held) < 20:
            return None
        return b"".join(reversed(held))  # answer all twenty, newest first

    broker = await FakeBroker(handlers={ApiKey.LIST_OFFSETS: reverse_batch}).start()
    try:
        async with KafkaConnection("127.0.0.1", broker.port) as conn:
            responses = await asyncio.gather(
                *(conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS) for _ in range(20))
            )
            assert conn.in_flight == 0
        ids = [h.correlation_id for h, _ in broker.requests_of(ApiKey.LIST_OFFSETS)]
        assert [r.topics[0].partitions[0].offset for r in responses] == ids
        assert len(set(ids)) == 20
    finally:
        await broker.stop()


async def test_a_request_timeout_disconnects():
    """Kafka's NetworkClient disconnects on a request timeout (the peer may be hung or the link
    half-open): the connection is no longer used, and a new one works."""
    answered = []

    def first_unanswered(header, request):
        if not answered:
            answered.append(None)
            return None
        return encode_response(header, list_offsets_response(header, request, 2))

    broker = await FakeBroker(handlers={ApiKey.LIST_OFFSETS: first_unanswered}).start()
    try:
        conn = KafkaConnection("127.0.0.1", broker.port, request_timeout=0.2)
        await conn.connect()
        with pytest.raises(KafkaTimeoutError) as info:
            await conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
        assert isinstance(info.value, TimeoutError) and info.value.retriable
        assert not conn.connected
        with pytest.raises(KafkaConnectionError):
            await conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
        await conn.close()
        again = KafkaConnection("127.0.0.1", broker.port, request_timeout=5)
        await again.connect()
        response = await again.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
        assert response.topics[0].partitions[0].offset == 2
        await again.close()
    finally:
        await broker.stop()


async def test_connection_loss_fails_pending_and_later_sends(broker):
    broker.handlers[ApiKey.LIST_OFFSETS] = lambda h, r: None  # never answers
    conn = KafkaConnection("127.0.0.1", broker.port)
    await conn.connect()
    pending = asyncio.ensure_future(conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS))
    await _until(lambda: broker.requests_of(ApiKey.LIST_OFFSETS))
    broker.drop_connections()
    with pytest.raises(KafkaConnectionError) as info:
        await pending
    assert isinstance(info.value, ConnectionError)
    assert not conn.connected
    with pytest.raises(KafkaConnectionError):
        await conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
    await conn.close()


async def test_close_fails_pending(broker):
    broker.handlers[ApiKey.LIST_OFFSETS] = lambda h, r: None
    conn = KafkaConnection("127.0.0.1", broker.port)
    await conn.connect()
    pending = asyncio.ensure_future(conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS))
    await _until(lambda: conn.in_flight == 1)
    await conn.close()
    with pytest.raises(KafkaConnectionError):
        await pending
    await conn.close()  # idempotent


async def test_close_aborts_a_connection_that_cannot_close_gracefully(broker, monkeypatch):
    """A peer that stopped reading leaves unsent bytes, and a graceful close then waits for
    ever (a broker's SIGTERM hung on it): close() gives up after CLOSE_TIMEOUT_S and aborts."""
    import kafkalite.client.connection as connection

    monkeypatch.setattr(connection, "CLOSE_TIMEOUT_S", 0.05)
    conn = KafkaConnection("127.0.0.1", broker.port)
    await conn.connect()
    transport = conn._writer.transport
    never = asyncio.get_running_loop().create_future()
    monkeypatch.setattr(conn._writer, "wait_closed", lambda: never)
    aborted = []
    monkeypatch.setattr(transport, "abort", lambda: aborted.append(True))
    await asyncio.wait_for(conn.close(), 5)
    assert aborted == [True]


async def test_cancelling_a_close_in_progress_propagates(broker):
    """A fetcher or controller channel stopped while it closes a connection must end: close()
    waits for its read task without taking the caller's cancellation for the read task's."""
    conn = KafkaConnection("127.0.0.1", broker.port)
    await conn.connect()
    real_read_task = conn._read_task
    started, stopping, cleaned_up = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def slow_to_stop():
        started.set()
        try:
            await asyncio.Event().wait()  # a read loop: runs until cancelled
        except asyncio.CancelledError:
            stopping.set()
            await cleaned_up.wait()  # cleanup that takes until the test ends it, then returns

    conn._read_task = asyncio.ensure_future(slow_to_stop())
    await asyncio.wait_for(started.wait(), 5)
    closing = asyncio.ensure_future(conn.close())
    await asyncio.wait_for(stopping.wait(), 5)  # close() cancelled the read task, waits for it
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(closing, 5)
    cleaned_up.set()
    real_read_task.cancel()
    await asyncio.wait([real_read_task])


async def test_connect_refused_is_typed():
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    with pytest.raises(KafkaConnectionError):
        await KafkaConnection("127.0.0.1", port, connect_timeout=2).connect()


async def test_garbage_response_closes_connection(broker):
    broker.handlers[ApiKey.LIST_OFFSETS] = lambda h, r: (
        b"\x00\x00\x00\x08" + h.correlation_id.to_bytes(4, "big") + b"\xff\xff\xff\xff"
    )
    async with KafkaConnection("127.0.0.1", broker.port) as conn:
        with pytest.raises(KafkaConnectionError):
            await conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
        assert not conn.connected


async def test_produce_acks_zero_returns_none(broker):
    async with KafkaConnection("127.0.0.1", broker.port) as conn:
        result = await conn.send(
            ApiKey.PRODUCE,
            request_builder(
                ApiKey.PRODUCE,
                acks=0,
                timeout=datetime.timedelta(seconds=1),
                topic_data=[{"name": "t", "partition_data": [{"index": 0, "records": b"x"}]}],
            ),
        )
        assert result is None
        assert conn.in_flight == 0
        await _until(lambda: broker.requests_of(ApiKey.PRODUCE))
    ((header, request),) = broker.requests_of(ApiKey.PRODUCE)
    assert request.topic_data[0].partition_data[0].records == b"x"


async def test_api_versions_error_is_raised(broker):
    broker.api_versions_error = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with pytest.raises(KafkaError) as info:
        await KafkaConnection("127.0.0.1", broker.port).connect()
    assert info.value.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


async def test_a_response_the_codec_rejects_ends_the_connection_loudly():
    """A value outside the codec's bounds (a log_append_time of -5 ms) raised an error the read
    loop did not catch: the loop died, the request waited for its timeout and the connection
    still counted as connected, so every later request timed out too."""
    import datetime
    import struct

    from kafkalite.client.messages import build_message
    from kafkalite.protocol.api import response_class

    append_time_ms = 1_700_000_000_123

    def produce(header, request):
        response = build_message(
            response_class(ApiKey.PRODUCE, header.api_version),
            responses=[
                {
                    "name": "t",
                    "partition_responses": [
                        {
                            "index": 0,
                            "error_code": 0,
                            "base_offset": 0,
                            "log_append_time": datetime.datetime.fromtimestamp(
                                append_time_ms / 1000, datetime.UTC
                            ),
                            "log_start_offset": 0,
                        }
                    ],
                }
            ],
        )
        raw = encode_response(header, response)
        return raw.replace(struct.pack(">q", append_time_ms), struct.pack(">q", -5))

    broker = await FakeBroker(handlers={ApiKey.PRODUCE: produce}).start()
    try:
        conn = KafkaConnection("127.0.0.1", broker.port, request_timeout=60)
        await conn.connect()
        request = {
            "transactional_id": None,
            "acks": -1,
            "timeout": datetime.timedelta(seconds=1),
            "topic_data": [],
        }
        with pytest.raises(KafkaConnectionError, match="undecodable"):
            await asyncio.wait_for(conn.send(ApiKey.PRODUCE, request), 10)
        assert not conn.connected
        await conn.close()
    finally:
        await broker.stop()


async def test_a_request_timeout_leaves_no_unretrieved_exception():
    """The timed-out request's future is dropped, not failed and forgotten: asyncio reported
    'Future exception was never retrieved' for it (in the broker, for a controller or fetcher
    request that timed out)."""
    import gc

    loop = asyncio.get_running_loop()
    reported = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    broker = await FakeBroker(handlers={ApiKey.LIST_OFFSETS: lambda header, request: None}).start()
    try:
        conn = KafkaConnection("127.0.0.1", broker.port, request_timeout=0.2)
        await conn.connect()
        with pytest.raises(KafkaTimeoutError):
            await conn.send(ApiKey.LIST_OFFSETS, LIST_OFFSETS)
        await conn.close()
        del conn
        for _ in range(3):
            gc.collect()
            await next_turn()  # callbacks dropping the last references run at the next turn
        assert [c.get("message") for c in reported] == []
    finally:
        loop.set_exception_handler(previous)
        await broker.stop()


class _Payload:
    """Stands for what a bulk request carries (a controller's thousands of partition states):
    weakly referenced, to tell whether anything still holds it."""


@pytest.mark.parametrize("fail", ["connection lost", "timeout"])
async def test_a_failed_request_is_freed_without_the_cyclic_collector(broker, fail):
    """A request that fails (the connection lost, or timed out) leaves no reference cycle
    holding it: the error kept by the connection and the one raised to the caller carry no
    traceback through the frames that hold the request. A broker process freezes what survives
    its full collections (kafkalite/observability/gc_freeze.py), and frozen cyclic garbage is
    never freed: a controller's request to a dead broker would keep its partition states."""
    broker.handlers[ApiKey.LIST_OFFSETS] = lambda h, r: None  # never answers
    with collector_off():
        payload = _Payload()
        held = weakref.ref(payload)

        def build(version, payload=payload):
            return LIST_OFFSETS(version)

        conn = KafkaConnection("127.0.0.1", broker.port, request_timeout=0.5)
        await conn.connect()
        pending = asyncio.ensure_future(conn.send(ApiKey.LIST_OFFSETS, build))
        del build, payload
        await _until(lambda: conn.in_flight == 1)
        if fail == "connection lost":
            broker.drop_connections()
        with pytest.raises((KafkaConnectionError, KafkaTimeoutError)):
            await pending
        del pending
        await next_turn()  # the finished task's done callbacks run, and let it go
        assert held() is None  # the connection, which keeps its error, still open here
        await conn.close()


async def test_a_connection_reset_by_its_peer_is_freed_once_closed(broker):
    """A peer killed mid-connection resets it, and closing then raises the reset from the
    stream's close waiter, which keeps it: the error's traceback must not stay with it (a
    cycle through the closing frames back to the connection, kept for the process's life once
    frozen; decision 0072). With the cyclic collector off, the closed connection is freed."""
    conn = KafkaConnection("127.0.0.1", broker.port)
    await conn.connect()
    held = weakref.ref(conn)
    with collector_off():
        broker.reset_connections()
        await _until(lambda c=conn: not c.connected)
        await conn.close()
        del conn
        await next_turn()  # the read task's and the transport's last callbacks
        assert held() is None
