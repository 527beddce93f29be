"""Full record codec: varints, compression framings, build_batch/decode_batch round trips."""

from __future__ import annotations

import gzip
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol import compression
from kafkalite.protocol.errors import CorruptRecordError
from kafkalite.protocol.records import (
    CompressionType,
    ControlRecordType,
    Header,
    Record,
    TimestampType,
    build_batch,
    build_end_txn_marker_batch,
    decode_batch,
    iter_batches,
    parse_batch_header,
    parse_control_record_type,
    parse_end_txn_marker,
    record_offset,
    record_timestamp,
    scan_valid_prefix,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
    validate_batches,
)

ALL_CODECS = list(CompressionType)

# ---------------------------------------------------------------------------------------------
# compression framings


def test_snappy_is_xerial_framed_with_32k_blocks():
    data = bytes(range(256)) * 300  # 76800 bytes -> 3 blocks
    out = compression.compress(compression.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks = 16, []
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        blocks.append(bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n])))
        pos += 4 + n
    assert [len(b) for b in blocks] == [32768, 32768, 11264]
    assert b"".join(blocks) == data
    assert compression.decompress(compression.SNAPPY, out) == data


def test_snappy_reads_raw_blocks_as_librdkafka_writes():
    data = b"librdkafka writes one raw snappy block " * 50
    assert (
        compression.decompress(compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    )


def test_gzip_is_a_gzip_stream_and_multi_member_reads():
    data = b"x" * 1000 + b"y" * 1000
    assert gzip.decompress(compression.compress(compression.GZIP, data)) == data
    two_members = gzip.compress(data[:700]) + gzip.compress(data[700:])
    assert compression.decompress(compression.GZIP, two_members) == data


def test_lz4_frame_has_independent_blocks_and_no_content_checksum():
    out = compression.compress(compression.LZ4, b"abc" * 10000)
    assert out[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic (little-endian 0x184D2204)
    flg = out[4]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence
    assert not flg & 0x04  # no content checksum


def test_zstd_frame():
    out = compression.compress(compression.ZSTD, b"z" * 5000)
    assert out[:4] == b"\x28\xb5\x2f\xfd"
    assert compression.decompress(compression.ZSTD, out) == b"z" * 5000


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c])
def test_damaged_compressed_data_is_corrupt(codec):
    with pytest.raises(CorruptRecordError):
        compression.decompress(codec, b"\x00\x01not compressed data at all\xff" * 3)


def test_unknown_codec():
    with pytest.raises(ValueError):
        compression.compress(5, b"")
    with pytest.raises(CorruptRecordError):
        compression.decompress(6, b"")


# ---------------------------------------------------------------------------------------------
# build/decode round trips

header_st = st.builds(
    Header,
    key=st.text(max_size=10),
    value=st.none() | st.binary(max_size=20),
)
record_st = st.builds(
    Record,
    timestamp_delta=st.integers(-(2**40), 2**40),
    key=st.none() | st.binary(max_size=40),
    value=st.none() | st.binary(max_size=300),
    headers=st.lists(header_st, max_size=3).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(record_st, max_size=20),
    codec=st.sampled_from(ALL_CODECS),
    base_offset=st.integers(0, 2**62),
    base_timestamp=st.integers(0, 2**41),
    producer=st.one_of(
        st.just((-1, -1, -1)),
        st.tuples(st.integers(0, 2**62), st.integers(0, 2**15 - 1), st.integers(0, 2**31 - 1)),
    ),
    epoch=st.integers(-1, 2**31 - 1),
)
def test_build_validate_decode_round_trip(
    records, codec, base_offset, base_timestamp, producer, epoch
):
    producer_id, producer_epoch, base_sequence = producer
    batch = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=epoch,
        base_timestamp=base_timestamp,
    )
    (header,) = validate_batches(batch, origin_client=bool(records))
    assert header.size == len(batch)
    assert header.compression == codec
    assert header.record_count == len(records)
    assert header.last_offset_delta == max(len(records) - 1, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert header.partition_leader_epoch == epoch
    assert header.base_timestamp == base_timestamp
    expected_max = base_timestamp + max((r.timestamp_delta for r in records), default=0)
    assert header.max_timestamp == expected_max
    decoded_header, decoded = decode_batch(batch)
    assert decoded_header == header
    assert decoded == [
        Record(i, r.timestamp_delta, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]
    assert [record_offset(header, r) for r in decoded] == [
        base_offset + i for i in range(len(records))
    ]
    # Offsets and epoch patched in place leave the batch valid and decodable.
    buf = bytearray(batch)
    set_base_offset(buf, 0, 7)
    set_partition_leader_epoch(buf, 0, 3)
    h2, again = decode_batch(buf)
    assert (h2.base_offset, h2.partition_leader_epoch) == (7, 3)
    assert again == decoded


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(
        st.tuples(st.lists(record_st, min_size=1, max_size=5), st.sampled_from(ALL_CODECS)),
        min_size=1,
        max_size=4,
    ),
    cut=st.integers(1, 60),
)
def test_iter_batches_ignores_trailing_partial_batch(batches, cut):
    encoded = [build_batch(rs, compression=c, base_timestamp=0) for rs, c in batches]
    buf = b"".join(encoded) + encoded[0][:cut]
    out = list(iter_batches(buf))
    assert [len(records) for _, records in out] == [len(rs) for rs, _ in batches]
    assert scan_valid_prefix(buf)[0] == len(buf) - cut


def test_keep_offset_deltas_for_compacted_batches():
    records = [Record(offset_delta=0, value=b"a"), Record(offset_delta=4, value=b"b")]
    batch = build_batch(records, keep_offset_deltas=True, base_offset=10, base_timestamp=0)
    (header,) = validate_batches(batch)
    assert header.record_count == 2 and header.last_offset == 14
    assert [r.offset_delta for r in decode_batch(batch)[1]] == [0, 4]
    with pytest.raises(ValueError):
        build_batch([Record(offset_delta=2), Record(offset_delta=2)], keep_offset_deltas=True)


def test_log_append_time():
    batch = build_batch(
        [Record(timestamp_delta=5, value=b"v")],
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        base_timestamp=1000,
    )
    header, records = decode_batch(batch)
    assert header.timestamp_type == 1 and header.max_timestamp == 1000
    assert record_timestamp(header, records[0]) == 1000
    buf = bytearray(build_batch([Record(timestamp_delta=5, value=b"v")], base_timestamp=1000))
    header, records = decode_batch(buf)
    assert record_timestamp(header, records[0]) == 1005
    set_max_timestamp_and_type(buf, 0, TimestampType.LOG_APPEND_TIME, 2000)
    header, records = decode_batch(buf)
    assert record_timestamp(header, records[0]) == 2000


def test_default_timestamp_is_now():
    import time

    before = time.time_ns() // 1_000_000
    header = parse_batch_header(build_batch([Record(value=b"x")]))
    after = time.time_ns() // 1_000_000
    assert before <= header.base_timestamp <= after


def test_record_bytes_match_kafka_layout():
    # One record, hand-encoded per DefaultRecord: length, attributes, timestampDelta,
    # offsetDelta, keyLength, key, valueLength, value, header count, header key/value.
    batch = build_batch(
        [Record(timestamp_delta=1, key=b"k", value=b"vv", headers=(Header("h", None),))],
        base_timestamp=0,
    )
    body = bytes([0, 2, 0, 2]) + b"k" + bytes([4]) + b"vv" + bytes([2, 2]) + b"h" + bytes([1])
    assert batch[61:] == bytes([len(body) * 2]) + body


def test_control_batch_end_txn_marker():
    batch = build_end_txn_marker_batch(
        producer_id=42, producer_epoch=3, commit=False, coordinator_epoch=9, timestamp=5
    )
    (header,) = validate_batches(batch)
    assert header.is_control and header.is_transactional
    assert header.producer_id == 42 and header.producer_epoch == 3
    _, (record,) = decode_batch(batch)
    assert record.key == b"\x00\x00\x00\x00"
    assert record.value == b"\x00\x00\x00\x00\x00\x09"
    assert parse_control_record_type(record) == ControlRecordType.ABORT
    assert parse_end_txn_marker(record) == (ControlRecordType.ABORT, 9)
    commit = decode_batch(
        build_end_txn_marker_batch(
            producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0
        )
    )[1][0]
    assert parse_end_txn_marker(commit)[0] == ControlRecordType.COMMIT
    with pytest.raises(CorruptRecordError):
        parse_control_record_type(Record(key=b"\x00"))
    with pytest.raises(CorruptRecordError, match="version"):
        parse_control_record_type(Record(key=b"\xff\xff\x00\x01"))


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_decode_detects_every_flip_in_crc_range(codec):
    batch = build_batch(
        [Record(key=b"key", value=b"value" * 10), Record(value=b"second")],
        compression=codec,
        base_timestamp=0,
    )
    for i in range(17, len(batch)):
        damaged = bytearray(batch)
        damaged[i] ^= 0x10
        with pytest.raises(CorruptRecordError):
            decode_batch(damaged)


def test_decode_rejects_records_that_do_not_add_up():
    from crc32c import crc32c

    good = bytearray(build_batch([Record(value=b"a"), Record(value=b"b")], base_timestamp=0))

    def recrc(buf):
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
        return buf

    fewer = bytearray(good)
    struct.pack_into(">i", fewer, 57, 1)  # count 1, but two records' bytes
    with pytest.raises(CorruptRecordError, match="left over"):
        decode_batch(recrc(fewer))
    more = bytearray(good)
    struct.pack_into(">i", more, 57, 3)
    with pytest.raises(CorruptRecordError):
        decode_batch(recrc(more))
    bad_len = bytearray(good)
    bad_len[61] = 0x7E  # record length 63: runs past the end
    with pytest.raises(CorruptRecordError):
        decode_batch(recrc(bad_len))
    with pytest.raises(CorruptRecordError):
        decode_batch(good[:-1])


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(min_size=0, max_size=200), codec=st.sampled_from(ALL_CODECS))
def test_garbage_records_section_raises_nothing_but_corrupt(garbage, codec):
    from crc32c import crc32c

    buf = bytearray(build_batch([], compression=0, base_timestamp=0)) + garbage
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">h", buf, 21, codec)
    struct.pack_into(">i", buf, 57, 3)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    try:
        _, records = decode_batch(buf)
    except CorruptRecordError:
        return
    assert len(records) == 3  # garbage that happens to be three well-formed records


def test_flags_and_delete_horizon():
    batch = build_batch(
        [Record(value=b"v")],
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        base_timestamp=50,
    )
    (header,) = validate_batches(batch, origin_client=True)
    assert header.is_transactional and not header.is_control and header.has_producer_id
    assert header.delete_horizon_ms == -1 and not header.has_delete_horizon
    compacted = build_batch(
        [Record(offset_delta=3, timestamp_delta=-10, key=b"k", value=None)],
        keep_offset_deltas=True,
        delete_horizon_ms=1_000,
        base_offset=20,
    )
    header, (record,) = decode_batch(compacted)
    assert header.has_delete_horizon and header.delete_horizon_ms == 1_000
    assert header.attributes & 0x40
    assert record_timestamp(header, record) == 990
    assert header.last_offset == 23 and header.record_count == 1
    with pytest.raises(ValueError):
        build_batch([Record()], compression=7)


def test_compaction_rebuild_keeps_last_offset_delta_and_max_timestamp():
    from kafkalite.protocol.records import (
        Record,
        TimestampType,
        build_batch,
        decode_batch,
        validate_batches,
    )

    records = [Record(offset_delta=1, key=b"a", value=b"x"), Record(offset_delta=3, key=b"b")]
    batch = build_batch(
        records,
        base_offset=100,
        compression=2,
        keep_offset_deltas=True,
        last_offset_delta=7,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        base_timestamp=1_000,
        max_timestamp=5_000,
        producer_id=9,
        producer_epoch=1,
        base_sequence=40,
    )
    (header,) = validate_batches(bytearray(batch))
    assert (header.last_offset, header.max_timestamp, header.last_sequence) == (107, 5_000, 47)
    assert [r.offset_delta for r in decode_batch(batch)[1]] == [1, 3]
    with pytest.raises(ValueError):
        build_batch(records, keep_offset_deltas=True, last_offset_delta=2)
    empty = build_batch([], base_offset=5, last_offset_delta=4, producer_id=9, base_timestamp=7)
    (header,) = validate_batches(bytearray(empty), origin_client=False)
    assert (header.record_count, header.last_offset, header.max_timestamp) == (0, 9, 7)


def test_has_record_without_key_decodes_only_data_batches():
    from kafkalite.protocol.records import (
        Record,
        build_batch,
        build_end_txn_marker_batch,
        has_record_without_key,
        validate_batches,
    )

    keyed = build_batch([Record(key=b"k", value=b"v")], compression=4)
    keyless = build_batch([Record(key=b"k"), Record(value=b"v")], compression=1)
    marker = build_end_txn_marker_batch(
        producer_id=1, producer_epoch=0, commit=True, coordinator_epoch=0
    )
    buf = bytearray(keyed + marker)
    assert not has_record_without_key(buf, validate_batches(buf, origin_client=False))
    buf = bytearray(keyed + keyless)
    assert has_record_without_key(buf, validate_batches(buf))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.booleans(), min_size=1, max_size=6), min_size=1, max_size=3),
    st.sampled_from([0, 1, 4]),
)
def test_records_without_key_names_each_keyless_record(batches, compression):
    """Oracle: the indexes, counted over the partition's records, of the keys left out."""
    from kafkalite.protocol.records import (
        Record,
        build_batch,
        records_without_key,
        validate_batches,
    )

    buf = bytearray()
    for keyed in batches:
        buf += build_batch(
            [Record(i, 0, b"k" if k else None, b"v") for i, k in enumerate(keyed)],
            compression=compression,
        )
    expected = [i for i, k in enumerate(k for keyed in batches for k in keyed) if not k]
    assert records_without_key(buf, validate_batches(buf)) == expected
