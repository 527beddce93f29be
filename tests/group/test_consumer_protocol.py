"""Reading the topics of a ConsumerProtocolSubscription (any version) and refusing garbage."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.group.consumer_protocol import encode_subscription, subscribed_topics


def test_v0_subscription():
    assert subscribed_topics(encode_subscription(["a", "b"], b"ud")) == {"a", "b"}


def test_v1_subscription_with_owned_partitions_reads_topics():
    raw = encode_subscription(["orders"], None, version=1) + struct.pack(">ihhii", 1, 6, 0, 1, 2)
    assert subscribed_topics(raw) == {"orders"}


def test_garbage_is_unknown_not_an_error():
    assert subscribed_topics(b"") is None
    assert subscribed_topics(b"\x00\x00\x00\x00\x00\x05\x00\x09ab") is None
    assert subscribed_topics(b"\x00\x00\xff\xff\xff\xff") is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(max_size=20), max_size=5), st.one_of(st.none(), st.binary(max_size=10)))
def test_round_trip(topics, user_data):
    assert subscribed_topics(encode_subscription(topics, user_data)) == set(topics)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_arbitrary_bytes_never_raise(raw):
    result = subscribed_topics(raw)
    assert result is None or isinstance(result, set)
