"""Reading the topics of a ConsumerProtocolSubscription (any version) and refusing garbage."""

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.consumer_protocol import (
    assigned_partitions,
    encode_subscription,
    subscribed_topics,
)


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


def encode_assignment(assigned: list[tuple[str, list[int]]], user_data: bytes = b"") -> bytes:
    out = bytearray(struct.pack(">hi", 0, len(assigned)))
    for topic, partitions in assigned:
        name = topic.encode("utf-8")
        out += struct.pack(">h", len(name)) + name
        out += struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)
    return bytes(out + struct.pack(">i", len(user_data)) + user_data)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(max_size=10), st.lists(st.integers(0, 1000), max_size=5)), max_size=4
    )
)
def test_assignment_round_trip(assigned):
    assert assigned_partitions(encode_assignment(assigned)) == [(t, sorted(p)) for t, p in assigned]


def test_a_hostile_assignment_costs_no_more_than_its_size():
    """A negative topic length used to move the reader backwards, so a 2**31 count looped
    2**31 times (the admin API's group view ran the broker out of memory)."""
    assert assigned_partitions(bytes.fromhex("80007ffffffafff8")) is None
    assert assigned_partitions(struct.pack(">hi", 0, 2**31 - 1) + b"\x00" * 12) is None
    assert assigned_partitions(struct.pack(">hihi", 0, 1, 1, 2**30)) is None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40))
def test_arbitrary_assignments_never_raise(raw):
    result = assigned_partitions(raw)
    assert result is None or isinstance(result, list)
