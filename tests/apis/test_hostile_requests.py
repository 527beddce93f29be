"""Hostile requests: nulls where the schema has none, negative sizes,
out-of-range enums, for every API and version the broker advertises, through the dispatcher.

Whatever the request, nothing escapes the dispatcher: the answer decodes as that API's response
(an acks=0 Produce, which has none, may close its connection instead), and a request with a
forbidden null is answered with INVALID_REQUEST wherever the response carries an error. A flood
of failing requests is logged once per kind of failure (rate limiting).
"""

import asyncio
import dataclasses
import datetime
import inspect

import pytest
import structlog
from hypothesis import HealthCheck, given, settings

from kafkalite.apis.dispatcher import ApiDispatcher, RateLimitedErrorLog
from kafkalite.broker.metadata_cache import MetadataCache
from kafkalite.network.connection import NO_RESPONSE, CloseConnection, ConnectionInfo
from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.error_response import error_codes_in
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.request_checks import null_field
from tests.apis.support import ADVERTISED, hostile

HOSTILE_SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ANSWER_DEADLINE_S = 60.0  # a hang guard, not a speed check


@pytest.fixture
def dispatcher(services):
    services.metadata_cache = MetadataCache(0)
    d = ApiDispatcher(services)
    d.ready.set()
    return d


async def answer(dispatcher, key, version, request):
    """Dispatch one request as the network layer does; (response or NO_RESPONSE or
    'closed')."""
    frame = bytearray(frames.encode_request(key, version, 7, "hostile", request)[4:])
    result = dispatcher.dispatch(frame, ConnectionInfo("127.0.0.1", 4444, "PLAINTEXT"))
    if inspect.isawaitable(result):
        try:
            result = await asyncio.wait_for(result, ANSWER_DEADLINE_S)
        except CloseConnection:
            return "closed"
    if result is NO_RESPONSE:
        return NO_RESPONSE
    data = b"".join(bytes(b) for b in result) if isinstance(result, list) else bytes(result)
    correlation_id, response = frames.decode_response(key, version, data[4:], strict=True)
    assert correlation_id == 7
    return response


@pytest.mark.parametrize("key,version", ADVERTISED, ids=lambda v: getattr(v, "name", str(v)))
def test_hostile_requests_are_answered(dispatcher, key, version):
    loop = asyncio.new_event_loop()
    cls = request_class(key, version)
    try:

        @HOSTILE_SETTINGS
        @given(hostile(cls))
        def check(request):
            response = loop.run_until_complete(answer(dispatcher, key, version, request))
            acks_zero = key == ApiKey.PRODUCE and request.acks == 0
            if response in (NO_RESPONSE, "closed"):
                assert acks_zero  # only a Produce that asked for no answer goes without one
                return
            assert type(response).__name__.endswith("Response")
            if null_field(request) is not None:
                assert set(error_codes_in(response)) <= {ErrorCode.INVALID_REQUEST}

        with structlog.testing.capture_logs():  # the rate-limited log has its own test
            check()
    finally:
        loop.close()


def test_fetch_nulls_and_ranges_are_refused_with_invalid_request(dispatcher):
    cls = request_class(ApiKey.FETCH, 12)
    m = inspect.getmodule(cls)
    good_partition = m.FetchPartition(
        partition=0,
        current_leader_epoch=-1,
        fetch_offset=0,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=1024,
    )
    base = cls(
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(m.FetchTopic(topic="orders", partitions=(good_partition,)),),
        forgotten_topics_data=(),
        rack_id="",
    )
    bad_partition = dataclasses.replace(good_partition, partition_max_bytes=-1)
    cases = {
        "topics null": dataclasses.replace(base, topics=None),
        "partitions null": dataclasses.replace(
            base, topics=(m.FetchTopic(topic="orders", partitions=None),)
        ),
        "forgotten null": dataclasses.replace(base, forgotten_topics_data=None),
        "isolation 7": dataclasses.replace(base, isolation_level=7),
        "max_bytes -1": dataclasses.replace(base, max_bytes=-1),
        "partition_max_bytes -1": dataclasses.replace(
            base, topics=(m.FetchTopic(topic="orders", partitions=(bad_partition,)),)
        ),
    }

    async def run():
        for what, request in cases.items():
            response = await answer(dispatcher, ApiKey.FETCH, 12, request)
            assert response.error_code == ErrorCode.INVALID_REQUEST, what
            # every partition the request named answers the error too (getErrorResponse)
            named = [
                (t.topic, p.partition) for t in request.topics or () for p in t.partitions or ()
            ]
            got = [(t.topic, p.partition_index) for t in response.responses for p in t.partitions]
            assert got == named, what
            assert {p.error_code for t in response.responses for p in t.partitions} <= {
                ErrorCode.INVALID_REQUEST
            }
        good = await answer(dispatcher, ApiKey.FETCH, 12, base)
        assert good.error_code == ErrorCode.NONE

    asyncio.run(run())


class Boom(RuntimeError):
    pass


def test_handler_exception_becomes_unknown_server_error_logged_once(services):
    """A handler that raises is answered with UNKNOWN_SERVER_ERROR for every partition, and a
    flood of them logs one line per interval (with how many were suppressed)."""
    now = [0.0]

    async def failing_handler(ctx, request):
        raise Boom("kaput")

    def failing_sync_handler(ctx, request):
        raise Boom("kaput")

    from kafkalite.apis.base import HANDLERS

    handlers = dict(HANDLERS)
    handlers[ApiKey.LIST_OFFSETS] = failing_handler
    handlers[ApiKey.OFFSET_FOR_LEADER_EPOCH] = failing_sync_handler
    d = ApiDispatcher(services, handlers)
    d.error_log = RateLimitedErrorLog(interval_s=60.0, clock=lambda: now[0])
    d.ready.set()
    cls = request_class(ApiKey.LIST_OFFSETS, 7)
    m = inspect.getmodule(cls)
    request = cls(
        replica_id=-1,
        isolation_level=0,
        topics=(
            m.ListOffsetsTopic(
                name="orders",
                partitions=(
                    m.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    ),
                    m.ListOffsetsPartition(
                        partition_index=1, current_leader_epoch=-1, timestamp=-1
                    ),
                ),
            ),
        ),
    )
    epoch_cls = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4)
    e = inspect.getmodule(epoch_cls)
    epoch_request = epoch_cls(
        replica_id=-1,
        topics=(
            e.OffsetForLeaderTopic(
                topic="orders",
                partitions=(
                    e.OffsetForLeaderPartition(
                        partition=3, current_leader_epoch=-1, leader_epoch=0
                    ),
                ),
            ),
        ),
    )

    async def run():
        with structlog.testing.capture_logs() as logs:
            for _ in range(500):
                response = await answer(d, ApiKey.LIST_OFFSETS, 7, request)
                partitions = [
                    (p.partition_index, p.error_code) for p in response.topics[0].partitions
                ]
                assert partitions == [
                    (0, ErrorCode.UNKNOWN_SERVER_ERROR),
                    (1, ErrorCode.UNKNOWN_SERVER_ERROR),
                ]
                answered = await answer(d, ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, epoch_request)
                assert [(p.partition, p.error_code) for p in answered.topics[0].partitions] == [
                    (3, ErrorCode.UNKNOWN_SERVER_ERROR)
                ]
            now[0] = 61.0
            await answer(d, ApiKey.LIST_OFFSETS, 7, request)
        failures = [entry for entry in logs if entry["log_level"] == "error"]
        assert [(f["api_key"], f["suppressed_since_last"]) for f in failures] == [
            ("LIST_OFFSETS", 0),
            ("OFFSET_FOR_LEADER_EPOCH", 0),
            ("LIST_OFFSETS", 499),
        ]
        assert all(isinstance(f["exc_info"], Boom) for f in failures)

    asyncio.run(run())


def test_create_topics_with_null_configs_names_the_field(dispatcher):
    cls = request_class(ApiKey.CREATE_TOPICS, 7)
    m = inspect.getmodule(cls)
    request = cls(
        topics=(
            m.CreatableTopic(
                name="t1", num_partitions=1, replication_factor=1, assignments=(), configs=None
            ),
        ),
        timeout=datetime.timedelta(seconds=1),
        validate_only=False,
    )
    response = asyncio.run(answer(dispatcher, ApiKey.CREATE_TOPICS, 7, request))
    (topic,) = response.topics
    assert (topic.name, topic.error_code) == ("t1", ErrorCode.INVALID_REQUEST)
    assert topic.error_message == (
        "malformed CREATE_TOPICS request: CreatableTopic.configs is null, "
        "which its schema does not allow"
    )
