"""bench/follower_fetch.py --request-only: a follower's full Fetch request, built and sized."""

from __future__ import annotations

from follower_fetch import REQUEST_VALUES, full_fetch_topics, request_only

from kafkalite.broker.replica_fetcher import _partition_dict
from kafkalite.client.messages import build_message
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.frames import encode_request


def _generic_size(topics: dict) -> int:
    """The frame's size with the generic builder's message of the same partitions."""
    message = build_message(
        request_class(ApiKey.FETCH, 12),
        **REQUEST_VALUES,
        forgotten_topics_data=[],
        topics=[
            {"topic": t, "partitions": [_partition_dict(tp, i) for tp, i in ps]}
            for t, ps in topics.items()
        ],
    )
    return len(encode_request(1, 12, 7, "follower", message))


def test_request_only_sizes_both_shapes_as_the_generic_builder_writes_them():
    figures = request_only(150, 1)
    assert set(figures) == {"one_topic", "topics_of_one"}
    assert figures["one_topic"]["bytes"] == _generic_size(full_fetch_topics(1, 150))
    assert figures["topics_of_one"]["bytes"] == _generic_size(full_fetch_topics(150, 1))
    assert all(f["cpu_ms"] >= 0 for f in figures.values())
