"""The ``__share_group_state`` record codecs: round trips (property-based), the partition of a
key (Kafka's hash), and refusal of damaged input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.share.coordinator import merge_batches
from kafkalite.share.partition import StateBatch
from kafkalite.share.records import (
    SNAPSHOT_KEY,
    UPDATE_KEY,
    ShareSnapshot,
    ShareStateKey,
    ShareUpdate,
    StateRecordError,
    decode_key,
    decode_snapshot,
    decode_update,
    encode_key,
    encode_snapshot,
    encode_update,
    partition_for,
)

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
batches = st.lists(
    st.builds(
        StateBatch,
        i64,
        i64,
        st.sampled_from([0, 2, 4]),
        st.integers(0, 2**15 - 1),
    ),
    max_size=20,
).map(tuple)


@given(
    st.sampled_from([SNAPSHOT_KEY, UPDATE_KEY]),
    st.text(max_size=50),
    st.uuids(),
    st.integers(0, 2**31 - 1),
)
def test_key_round_trip(record_type, group, topic_id, partition):
    key = ShareStateKey(record_type, group, topic_id, partition)
    assert decode_key(encode_key(key)) == key


@given(i32, i32, i32, i64, i64, i64, batches)
def test_snapshot_round_trip(snapshot_epoch, state_epoch, leader_epoch, start, created, written, b):
    value = ShareSnapshot(snapshot_epoch, state_epoch, leader_epoch, start, created, written, b)
    assert decode_snapshot(encode_snapshot(value)) == value


@given(i32, i32, i64, batches)
def test_update_round_trip(snapshot_epoch, leader_epoch, start, b):
    value = ShareUpdate(snapshot_epoch, leader_epoch, start, b)
    assert decode_update(encode_update(value)) == value


@given(st.binary(max_size=60))
def test_damaged_input_is_refused_not_crashing(data):
    for decode in (decode_key, decode_snapshot, decode_update):
        try:
            decode(data)
        except StateRecordError:
            pass


def test_truncated_snapshot_is_refused():
    value = ShareSnapshot(1, 2, 3, 4, 5, 6, (StateBatch(4, 9, 0, 1),))
    with pytest.raises(StateRecordError):
        decode_snapshot(encode_snapshot(value)[:-5])


def test_partition_for_uses_the_java_hash_of_group_topic_partition():
    topic_id = uuid.UUID("00000000-0000-0000-0000-000000000001")
    # "g:00000000-0000-0000-0000-000000000001:0".hashCode() is 1386035626 (java, by hand)
    assert partition_for("g", topic_id, 0, 50) == 1386035626 % 50


def test_an_update_overlays_the_snapshot_and_drops_what_is_below_the_start():
    base = (StateBatch(10, 19, 0, 1),)
    update = (StateBatch(12, 13, 2, 1),)
    assert merge_batches(base, update, 11) == (
        StateBatch(11, 11, 0, 1),
        StateBatch(12, 13, 2, 1),
        StateBatch(14, 19, 0, 1),
    )
