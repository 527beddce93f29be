"""Fetch handler: request -> FetchParams/FetchInfo, response encoding, sessionless sessions."""

import dataclasses

from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition
from tests.apis.support import fetch_request


async def test_fetch_returns_records_and_partition_errors(call, services):
    data = build_batch([Record(0, 0, b"k", b"v")], base_offset=5)
    services.replica_manager.logs[TopicPartition("t", 1)] = memoryview(data)
    for version in (4, 7, 11, 12):
        response = await call(
            ApiKey.FETCH, version, fetch_request(version, [("t", [0, 1]), ("unknown", [0])])
        )
        parts = {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}
        assert bytes(parts[("t", 1)].records) == data
        assert parts[("t", 0)].records == b"" and parts[("t", 0)].high_watermark == 10
        assert parts[("unknown", 0)].error_code.value == 3
    params, infos = services.replica_manager.fetches[-1]
    assert params.max_wait_ms == 100 and params.min_bytes == 1 and params.replica_id == -1
    assert infos[TopicPartition("t", 0)].fetch_offset == 5
    assert infos[TopicPartition("t", 0)].max_bytes == 1000


async def test_without_a_session_cache_sessions_are_not_created(call):
    response = await call(ApiKey.FETCH, 12, fetch_request(12, [("t", [0])], 0, 0))
    assert response.session_id == 0 and response.error_code.value == 0
    response = await call(ApiKey.FETCH, 12, fetch_request(12, [("t", [0])], 1234, 3))
    assert response.error_code.value == 70  # FETCH_SESSION_ID_NOT_FOUND
    assert response.responses == ()


async def test_max_bytes_is_capped_by_fetch_max_bytes(call, services):
    await call(ApiKey.FETCH, 11, fetch_request(11, [("t", [0])], max_bytes=2**31 - 1))
    params, _ = services.replica_manager.fetches[-1]
    assert params.max_bytes == services.config.fetch_max_bytes


async def test_followers_are_capped_too_and_min_bytes_never_exceeds_the_cap(call, services):
    request = fetch_request(11, [("t", [0])], max_bytes=2**31 - 1)
    follower = dataclasses.replace(request, replica_id=2, min_bytes=2**31 - 1)
    await call(ApiKey.FETCH, 11, follower)
    params, _ = services.replica_manager.fetches[-1]
    cap = services.config.fetch_max_bytes
    assert (params.replica_id, params.max_bytes, params.min_bytes) == (2, cap, cap)
