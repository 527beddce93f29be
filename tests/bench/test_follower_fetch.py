"""bench/follower_fetch.py --request-only: a follower's full Fetch request, built and sized."""

from __future__ import annotations

import datetime

from follower_fetch import request_only

from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.frames import encode_request


def _generic_size(topics: dict[str, int]) -> int:
    message = build_message(
        request_class(ApiKey.FETCH, 12),
        replica_id=2,
        max_wait=datetime.timedelta(milliseconds=500),
        min_bytes=1,
        max_bytes=10 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=0,
        rack_id="",
        forgotten_topics_data=[],
        topics=[
            {
                "topic": name,
                "partitions": [
                    {
                        "partition": p,
                        "current_leader_epoch": 5,
                        "fetch_offset": 100 * p,
                        "last_fetched_epoch": 4,
                        "log_start_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }
                    for p in range(count)
                ],
            }
            for name, count in topics.items()
        ],
    )
    return len(encode_request(1, 12, 7, "follower", message))


def test_request_only_sizes_both_shapes_as_the_generic_builder_writes_them():
    figures = request_only(150, 1)
    assert set(figures) == {"one_topic", "topics_of_one"}
    assert figures["one_topic"]["bytes"] == _generic_size({"scale-00000": 150})
    assert figures["topics_of_one"]["bytes"] == _generic_size(
        {f"scale-{t:05d}": 1 for t in range(150)}
    )
    assert all(f["cpu_ms"] >= 0 for f in figures.values())
