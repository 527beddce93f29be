"""ApiDispatcher: version negotiation and Kafka's answers to requests it cannot serve."""

import asyncio
import inspect
import struct
import threading

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsV3

from kafkalite.apis.dispatcher import advertised_versions
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import InvalidRequestError, KafkaError, UnsupportedVersionError


async def test_api_versions_lists_registered_handlers_only(call):
    response = await call(
        ApiKey.API_VERSIONS,
        3,
        ApiVersionsV3(client_software_name="t", client_software_version="1"),
    )
    assert response.error_code.value == 0
    table = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert table == advertised_versions()
    assert table[ApiKey.PRODUCE][0] <= 3 and table[ApiKey.FETCH] == (4, 12)
    assert ApiKey.DESCRIBE_DELEGATION_TOKEN not in table  # no handler, not advertised
    # the partition admin APIs, at a Kafka 3.x ZooKeeper-mode broker's versions
    assert table[ApiKey.DESCRIBE_LOG_DIRS] == (1, 4)
    assert table[ApiKey.ELECT_LEADERS] == (0, 2)
    assert table[ApiKey.ALTER_PARTITION_REASSIGNMENTS] == (0, 0)
    assert table[ApiKey.LIST_PARTITION_REASSIGNMENTS] == (0, 0)


def test_only_registered_handlers_are_advertised(services):
    from kafkalite.apis.base import HANDLERS
    from kafkalite.apis.dispatcher import ApiDispatcher

    subset = {k: HANDLERS[k] for k in (ApiKey.API_VERSIONS, ApiKey.METADATA)}
    dispatcher = ApiDispatcher(services, subset)
    assert set(dispatcher.versions) == {ApiKey.API_VERSIONS, ApiKey.METADATA}
    with pytest.raises(UnsupportedVersionError):
        dispatcher.ready.set()
        dispatcher.dispatch(bytearray(header(ApiKey.PRODUCE, 9) + b"\x00"), None)


def header(api_key, version, correlation_id=5, client=b"x"):
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client


async def test_api_versions_above_ours_gets_v0_unsupported_version_with_our_table(call):
    frame = bytearray(header(ApiKey.API_VERSIONS, 99) + b"\x00garbage-body-of-a-future-version")
    data = call.dispatcher.dispatch(frame, call.connection)
    size, correlation_id, error, count = struct.unpack_from(">iihi", data)
    assert (size, correlation_id, error) == (len(data) - 4, 5, 35)
    entries = [struct.unpack_from(">hhh", data, 14 + 6 * i) for i in range(count)]
    assert {k: (lo, hi) for k, lo, hi in entries} == advertised_versions()


@pytest.mark.parametrize(
    "frame, error",
    [
        (header(999, 0), UnsupportedVersionError),  # unknown API key
        (header(ApiKey.DESCRIBE_DELEGATION_TOKEN, 1), UnsupportedVersionError),  # no handler
        (header(ApiKey.PRODUCE, 2), UnsupportedVersionError),  # below our range
        (header(ApiKey.METADATA, 13) + b"\x00", UnsupportedVersionError),  # above our range
        (b"\x00\x03", InvalidRequestError),  # truncated header
        (header(ApiKey.METADATA, 1) + b"\x00\x00", InvalidRequestError),  # truncated body
    ],
)
def test_requests_we_cannot_serve_close_the_connection(call, frame, error):
    with pytest.raises(KafkaError) as info:
        call.dispatcher.dispatch(bytearray(frame), call.connection)
    assert isinstance(info.value, error)


async def test_client_requests_wait_until_the_broker_is_ready(call, services):
    from kafkalite.broker.metadata_cache import MetadataCache
    from kafkalite.protocol.api import request_class

    services.metadata_cache = MetadataCache(0)
    call.dispatcher.ready.clear()
    metadata = request_class(ApiKey.METADATA, 12)(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    task = asyncio.ensure_future(call(ApiKey.METADATA, 12, metadata))
    versions = await call(  # what the controller's channel needs is served meanwhile
        ApiKey.API_VERSIONS, 3, ApiVersionsV3(client_software_name="t", client_software_version="1")
    )
    assert versions.error_code.value == 0
    assert not task.done()
    call.dispatcher.ready.set()
    response = await task
    assert response.topics == ()


async def test_bytes_after_the_body_are_ignored_like_kafka(call, services):
    """librdkafka 2.16's Metadata v12 for all topics, captured: 3 bytes follow the body."""
    from kafkalite.broker.metadata_cache import MetadataCache

    services.metadata_cache = MetadataCache(0)
    frame = bytearray.fromhex("0003000c00000005000772646b61666b610000000000010000")
    response = await call.dispatcher.dispatch(frame, call.connection)
    assert struct.unpack_from(">ii", response) == (len(response) - 4, 5)


async def test_api_versions_v3_with_an_invalid_software_name_is_invalid_request(call):
    """Kafka's ApiVersionsRequest.isValid: name and version match
    [a-zA-Z0-9](?:[a-zA-Z0-9-.]*[a-zA-Z0-9])?; otherwise INVALID_REQUEST and no table."""
    for name, version in (("bad name", "1"), ("librdkafka", "2.3.0-"), ("", "1")):
        answer = await call(
            ApiKey.API_VERSIONS,
            3,
            ApiVersionsV3(client_software_name=name, client_software_version=version),
        )
        assert (answer.error_code.value, answer.api_keys) == (42, ()), (name, version)
    ok = await call(
        ApiKey.API_VERSIONS,
        3,
        ApiVersionsV3(
            client_software_name="confluent-kafka-python",
            client_software_version="2.13.0-rdkafka-2.13.0",
        ),
    )
    assert ok.error_code.value == 0 and ok.api_keys


def _update_metadata_frame(partitions: int) -> bytearray:
    """An UpdateMetadata v7 of ``partitions`` one-partition topics, as the controller sends it."""
    from kafkalite.controller.broker_request_batch import (
        UpdateMetadataPartitionState,
        UpdateMetadataRequestData,
    )
    from kafkalite.controller.channel_manager import to_message
    from kafkalite.protocol import frames
    from kafkalite.zk.data import new_topic_id
    from kafkalite.zk.types import Broker, EndPoint

    names = [f"t{i}" for i in range(partitions)]
    request = UpdateMetadataRequestData(
        broker_id=0,
        controller_id=0,
        controller_epoch=1,
        broker_epoch=-1,
        partition_states=tuple(
            UpdateMetadataPartitionState(t, 0, 1, 0, 2, (0,), 3, (0,)) for t in names
        ),
        live_brokers=(Broker(0, (EndPoint("127.0.0.1", 9092, "PLAINTEXT", "PLAINTEXT"),)),),
        topic_ids={t: new_topic_id() for t in names},
    )
    message = to_message(request, 7, encoded=True)
    return bytearray(
        frames.encode_request(ApiKey.UPDATE_METADATA, 7, 11, "controller", message)[4:]
    )


async def _answer(result):
    from kafkalite.network.connection import Exclusive

    exclusive = isinstance(result, Exclusive)
    if inspect.isawaitable(result):
        result = await result
    return exclusive, bytes(result)


async def test_a_large_controller_request_is_decoded_while_the_loop_runs(
    call, services, monkeypatch
):
    """A controller request of at least off_loop_decode_bytes is decoded in a worker thread and
    taken alone by the connection (Exclusive); its answer is the one decoded on the loop. The
    decode waits for a callback of the loop: decoded on the loop, it would wait in vain."""
    from kafkalite.broker.metadata_cache import MetadataCache
    from kafkalite.protocol import frames

    decode = frames.decode_request
    loop = asyncio.get_running_loop()
    threads = []

    def decode_watching_the_loop(header, frame, offset):
        threads.append(threading.current_thread())
        if threading.current_thread() is not threading.main_thread():
            ran = threading.Event()
            loop.call_soon_threadsafe(ran.set)
            assert ran.wait(10), "the loop ran nothing while the request was decoded"
        return decode(header, frame, offset)

    monkeypatch.setattr(frames, "decode_request", decode_watching_the_loop)
    frame = _update_metadata_frame(50)
    services.metadata_cache = MetadataCache(0)
    on_loop = await _answer(call.dispatcher.dispatch(bytearray(frame), call.connection))
    assert threads == [threading.main_thread()] and not on_loop[0]

    services.metadata_cache = MetadataCache(0)
    call.dispatcher.off_loop_decode_bytes = len(frame)
    off_loop = await _answer(call.dispatcher.dispatch(bytearray(frame), call.connection))
    assert threads[1] is not threading.main_thread() and off_loop[0]
    assert off_loop[1] == on_loop[1]
    assert struct.unpack_from(">iibh", off_loop[1]) == (len(off_loop[1]) - 4, 11, 0, 0)
    assert len(services.metadata_cache.get_all_topics()) == 50


async def test_a_large_controller_request_found_malformed_off_the_loop_closes_the_connection(
    call, services
):
    """Truncated: the awaitable raises the decode's InvalidRequestError (the connection closes
    on it, as on one raised by dispatch) and the cache is untouched."""
    from kafkalite.broker.metadata_cache import MetadataCache

    services.metadata_cache = MetadataCache(0)
    frame = _update_metadata_frame(50)
    call.dispatcher.off_loop_decode_bytes = 1
    with pytest.raises(InvalidRequestError):
        await _answer(call.dispatcher.dispatch(frame[:-40], call.connection))
    assert services.metadata_cache.get_all_topics() == set()


async def test_a_large_controller_request_refused_off_the_loop_is_answered(
    call, services, monkeypatch
):
    """A body that decodes but breaks its schema (request_checks) is answered with
    INVALID_REQUEST off the loop as on it, and nothing of it is applied."""
    from kafkalite.broker.metadata_cache import MetadataCache
    from kafkalite.protocol import frames
    from kafkalite.protocol.request_checks import InvalidRequestFieldError

    decode = frames.decode_request

    def refusing(header, frame, offset):
        raise InvalidRequestFieldError("a forbidden null", decode(header, frame, offset))

    monkeypatch.setattr(frames, "decode_request", refusing)
    frame = _update_metadata_frame(50)
    answers = []
    for threshold in (len(frame) + 1, len(frame)):
        services.metadata_cache = MetadataCache(0)
        call.dispatcher.off_loop_decode_bytes = threshold
        answers.append(await _answer(call.dispatcher.dispatch(bytearray(frame), call.connection)))
        assert services.metadata_cache.get_all_topics() == set()
    assert [exclusive for exclusive, _ in answers] == [False, True]
    assert answers[0][1] == answers[1][1]
    assert struct.unpack_from(">iibh", answers[1][1]) == (len(answers[1][1]) - 4, 11, 0, 42)
