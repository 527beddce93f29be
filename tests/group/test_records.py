"""__consumer_offsets record codec: Kafka's byte layouts, round trips, and Java's String.hashCode."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_record,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    java_string_hash_code,
    kafka_abs,
    partition_for,
)

# (string, Java's "s".hashCode(), Utils.abs(hashCode) % 50), computed with OpenJDK 17
JAVA_HASHES = [
    ("", 0, 0),
    ("a", 97, 47),
    ("hello", 99162322, 22),
    ("test-group", 627841412, 12),
    ("my-group", -1906497762, 12),
    ("polygenelubricants", -2147483648, 0),
    ("console-consumer-12345", 158455506, 6),
    ("Aa", 2112, 12),
    ("BB", 2112, 12),
    ("grüße-日本", 346453725, 25),
    ("group-\U0001f600", 508083057, 7),
    ("kafkalite", 617096404, 4),
]


@pytest.mark.parametrize(("s", "java_hash", "partition"), JAVA_HASHES)
def test_hash_code_and_partition_agree_with_java(s, java_hash, partition):
    assert java_string_hash_code(s) == java_hash
    assert partition_for(s, 50) == partition


def test_kafka_abs_of_min_int_is_zero():
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 7) == 0


def test_partition_for_rejects_no_partitions():
    with pytest.raises(ValueError):
        partition_for("g", 0)


def test_offset_commit_key_bytes_match_kafka_layout():
    key = encode_offset_commit_key("g", "t", 3)
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(
        ">i", 3
    )
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    # version 0 keys (old brokers) have the same layout
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetCommitKey("g", "t", 3)


def test_group_metadata_key_bytes():
    key = encode_group_metadata_key("grp")
    assert key == b"\x00\x02\x00\x03grp"
    assert decode_key(key) == GroupMetadataKey("grp")


def test_unknown_key_version_is_rejected():
    with pytest.raises(RecordFormatError):
        decode_key(b"\x00\x05\x00\x01g")


def test_offset_value_v3_layout():
    v = OffsetCommitValue(offset=42, metadata="m", commit_timestamp=1000, leader_epoch=7)
    raw = encode_offset_commit_value(v)
    assert raw == struct.pack(">hqih", 3, 42, 7, 1) + b"m" + struct.pack(">q", 1000)
    assert decode_offset_commit_value(raw) == v


def test_offset_value_with_expire_timestamp_is_v1():
    v = OffsetCommitValue(offset=1, metadata="", commit_timestamp=5, expire_timestamp=9)
    raw = encode_offset_commit_value(v)
    assert raw[:2] == b"\x00\x01"
    assert decode_offset_commit_value(raw) == v


def test_offset_value_v0_and_v2_decode():
    v0 = struct.pack(">hqh", 0, 10, 2) + b"md" + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(10, "md", 77)
    v2 = struct.pack(">hqh", 2, 10, 0) + struct.pack(">q", 77)
    assert decode_offset_commit_value(v2) == OffsetCommitValue(10, "", 77)


def test_offset_value_v4_flexible_decodes():
    # offset, leader_epoch, compact string "ab" (len+1=3), commit ts, empty tagged fields
    raw = struct.pack(">hqi", 4, 5, 2) + bytes([3]) + b"ab" + struct.pack(">q", 9) + b"\x00"
    assert decode_offset_commit_value(raw) == OffsetCommitValue(5, "ab", 9, 2)


def test_tombstones_decode_to_none():
    assert decode_record(encode_offset_commit_key("g", "t", 0), None) == (
        OffsetCommitKey("g", "t", 0),
        None,
    )
    assert decode_record(encode_group_metadata_key("g"), None) == (GroupMetadataKey("g"), None)


def test_truncated_value_is_rejected():
    raw = encode_offset_commit_value(OffsetCommitValue(1, "x", 2))
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(raw[:-1])


def _member(i: int, static: bool) -> MemberMetadataValue:
    return MemberMetadataValue(
        member_id=f"m-{i}",
        client_id="c",
        client_host="/127.0.0.1",
        session_timeout=10000,
        subscription=b"sub",
        assignment=b"asg" * i,
        rebalance_timeout=30000,
        group_instance_id=f"i-{i}" if static else None,
    )


def test_group_value_v3_layout_of_empty_group():
    v = GroupMetadataValue("consumer", 4, None, None, 123, ())
    raw = encode_group_metadata_value(v)
    expected = struct.pack(">hh", 3, 8) + b"consumer" + struct.pack(">ihhqi", 4, -1, -1, 123, 0)
    assert raw == expected
    assert decode_group_metadata_value(raw) == v


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_versions_round_trip(version):
    members = (_member(1, static=version >= 3), _member(2, static=False))
    v = GroupMetadataValue("consumer", 3, "range", "m-1", 99 if version >= 2 else -1, members)
    decoded = decode_group_metadata_value(encode_group_metadata_value(v, version))
    if version < 1:
        # v0 has no rebalance timeout: Kafka reads the session timeout instead
        members = tuple(
            MemberMetadataValue(
                m.member_id,
                m.client_id,
                m.client_host,
                m.session_timeout,
                m.subscription,
                m.assignment,
                m.session_timeout,
                m.group_instance_id,
            )
            for m in members
        )
    assert decoded == GroupMetadataValue(
        "consumer", 3, "range", "m-1", v.current_state_timestamp, members
    )


text = st.text(max_size=40)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=150, deadline=None)
@given(group=text, topic=text, partition=i32)
def test_offset_key_round_trip(group, topic, partition):
    assert decode_key(encode_offset_commit_key(group, topic, partition)) == OffsetCommitKey(
        group, topic, partition
    )


@settings(max_examples=150, deadline=None)
@given(
    offset=i64,
    metadata=text,
    commit=i64,
    epoch=i32,
    expire=st.one_of(st.just(-1), st.integers(0, 2**62)),
)
def test_offset_value_round_trip(offset, metadata, commit, epoch, expire):
    v = OffsetCommitValue(offset, metadata, commit, -1 if expire >= 0 else epoch, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(v)) == v


member_st = st.builds(
    MemberMetadataValue,
    member_id=text,
    client_id=text,
    client_host=text,
    session_timeout=i32,
    subscription=st.binary(max_size=30),
    assignment=st.binary(max_size=30),
    rebalance_timeout=st.integers(0, 2**31 - 1),
    group_instance_id=st.one_of(st.none(), text),
)


@settings(max_examples=100, deadline=None)
@given(
    protocol_type=text,
    generation=i32,
    protocol=st.one_of(st.none(), text),
    leader=st.one_of(st.none(), text),
    ts=i64,
    members=st.lists(member_st, max_size=4).map(tuple),
    version=st.sampled_from([3, 4]),
)
def test_group_value_round_trip(protocol_type, generation, protocol, leader, ts, members, version):
    v = GroupMetadataValue(protocol_type, generation, protocol, leader, ts, members)
    assert decode_group_metadata_value(encode_group_metadata_value(v, version)) == v


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_hash_code_is_a_signed_int32_and_partition_in_range(s):
    h = java_string_hash_code(s)
    assert -(2**31) <= h < 2**31
    assert 0 <= partition_for(s, 50) < 50


@settings(max_examples=50, deadline=None)
@given(
    regex=st.text(max_size=20),
    topics=st.lists(st.text(min_size=1, max_size=10), max_size=5),
    version=st.integers(0, 2**63 - 1),
    ts=st.integers(0, 2**63 - 1),
)
def test_regular_expression_record_layout_and_round_trip(regex, topics, version, ts):
    from kafkalite.group.records import (
        ConsumerGroupKey,
        ConsumerGroupRegularExpressionValue,
        consumer_group_record,
    )

    value = ConsumerGroupRegularExpressionValue(tuple(topics), version, ts)
    key, raw = consumer_group_record("g", value, regex)
    # Kafka's ConsumerGroupRegularExpressionKey: version 16, GroupId, RegularExpression
    encoded = regex.encode()
    assert key == struct.pack(">hh", 16, 1) + b"g" + struct.pack(">h", len(encoded)) + encoded
    # value v0, flexible: compact array of compact strings, Version int64, Timestamp int64
    assert raw[:3] == struct.pack(">h", 0) + bytes([len(topics) + 1])
    assert raw[-17:] == struct.pack(">qq", version, ts) + b"\x00"
    assert decode_record(key, raw) == (ConsumerGroupKey(16, "g", regex), value)
    assert decode_record(key, None) == (ConsumerGroupKey(16, "g", regex), None)
