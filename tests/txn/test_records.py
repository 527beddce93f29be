"""The __transaction_state record formats: byte-exact against Kafka's schema, round trips."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.records import (
    TransactionLogValue,
    TxnRecordFormatError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)


def test_key_bytes():
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_bytes():
    value = TransactionLogValue(
        producer_id=7,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=1,
        partitions=(TopicPartition("t", 0), TopicPartition("t", 2)),
        last_update_timestamp_ms=1000,
        start_timestamp_ms=900,
    )
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 2, 0, 2)
        + struct.pack(">qq", 1000, 900)
    )
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_value_v1_flexible_with_tagged_fields():
    # version 1: compact strings/arrays (length + 1), tagged fields after each struct
    body = struct.pack(">hqhib", 1, 9, 0, 1000, 4)
    body += bytes([2])  # one topic
    body += bytes([2]) + b"x" + bytes([2]) + struct.pack(">i", 5) + bytes([0])
    body += struct.pack(">qq", 5, 4)
    body += bytes([1, 0, 8]) + struct.pack(">q", 8)  # tag 0: previous producer id
    value = decode_value(body)
    assert value.state == 4
    assert value.partitions == (TopicPartition("x", 5),)
    assert value.previous_producer_id == 8
    assert value.next_producer_id == -1


def test_tombstone_and_errors():
    assert decode_value(None) is None
    with pytest.raises(TxnRecordFormatError):
        decode_value(b"\x00\x05")
    with pytest.raises(TxnRecordFormatError):
        decode_value(encode_value(TransactionLogValue(1, 1, 1, 1))[:-3])
    with pytest.raises(TxnRecordFormatError):
        decode_key(b"\x00\x01\x00\x01a")


def test_partition_for_matches_kafka():
    # Utils.abs(String.hashCode) % 50, as Kafka's TransactionStateManager.partitionFor
    assert partition_for("", 50) == 0
    assert partition_for("my-txn", 50) == abs(_java_hash("my-txn")) % 50


def _java_hash(s: str) -> int:
    h = 0
    for c in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(c)) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)


@given(
    st.integers(-1, 2**63 - 1),
    st.integers(-1, 2**15 - 1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 7),
    st.lists(st.tuples(names, st.integers(0, 2**31 - 1)), unique=True, max_size=8),
    st.integers(-1, 2**62),
    st.integers(-1, 2**62),
)
def test_value_round_trip(pid, epoch, timeout, state, parts, update, start):
    partitions = tuple(TopicPartition(t, p) for t, p in sorted(parts))
    value = TransactionLogValue(pid, epoch, timeout, state, partitions, update, start)
    decoded = decode_value(encode_value(value))
    assert decoded is not None
    assert sorted(decoded.partitions) == sorted(partitions)
    assert decoded == TransactionLogValue(
        pid, epoch, timeout, state, decoded.partitions, update, start
    )


@given(names)
def test_key_round_trip(txn_id):
    assert decode_key(encode_key(txn_id)) == txn_id
