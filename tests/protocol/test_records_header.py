"""RecordBatch v2 header: parsing, validation, corruption detection, in-place patches.

Batches here are assembled with plain ``struct`` and ``crc32c`` (not with records.py), so the
header code is checked against an independent reading of Kafka's layout.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    RecordTooLargeError,
)
from kafkalite.protocol.records import (
    BATCH_HEADER_SIZE,
    RecordBatchHeader,
    assign_offsets,
    iter_batch_headers,
    parse_batch_header,
    scan_valid_prefix,
    set_base_offset,
    set_max_timestamp_and_type,
    set_partition_leader_epoch,
    validate_batches,
)


def raw_batch(
    *,
    base_offset: int = 0,
    epoch: int = -1,
    magic: int = 2,
    attributes: int = 0,
    record_count: int = 1,
    last_offset_delta: int | None = None,
    base_timestamp: int = 1_700_000_000_000,
    max_timestamp: int = 1_700_000_000_005,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    payload: bytes = b"\x0c\x00\x00\x00\x01\x02x\x02y\x00",
) -> bytes:
    """A v2 batch laid out by hand: header fields after the CRC, then the CRC over them."""
    if last_offset_delta is None:
        last_offset_delta = max(record_count - 1, 0)
    covered = (
        struct.pack(
            ">hiqqqhii",
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            record_count,
        )
        + payload
    )
    batch_length = 4 + 1 + 4 + len(covered)
    return struct.pack(">qiibI", base_offset, batch_length, epoch, magic, crc32c(covered)) + covered


def test_header_size_and_fields_match_struct_reading():
    b = raw_batch(
        base_offset=42,
        epoch=7,
        attributes=0x10 | 0x08 | 3,
        record_count=5,
        producer_id=1234,
        producer_epoch=3,
        base_sequence=99,
    )
    h = parse_batch_header(b)
    assert BATCH_HEADER_SIZE == 61
    fields = struct.unpack(">qiibIhiqqqhii", b[:61])
    assert (
        h.base_offset,
        h.batch_length,
        h.partition_leader_epoch,
        h.magic,
        h.crc,
        h.attributes,
        h.last_offset_delta,
        h.base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        h.record_count,
    ) == fields
    assert h.size == len(b)
    assert h.last_offset == 46 and h.next_offset == 47
    assert h.compression == 3
    assert h.timestamp_type == 1
    assert h.is_transactional and not h.is_control
    assert h.last_sequence == 103
    assert h.crc == crc32c(b[21:])


def test_parse_short_header_raises():
    b = raw_batch()
    with pytest.raises(CorruptRecordError):
        parse_batch_header(b[:60])
    with pytest.raises(CorruptRecordError):
        parse_batch_header(b[:61], pos=1)


def test_iter_and_validate_several_batches():
    batches = [raw_batch(base_offset=i * 10, record_count=i + 1) for i in range(4)]
    buf = b"".join(batches)
    positions = [p for p, _ in iter_batch_headers(buf)]
    expected, pos = [], 0
    for b in batches:
        expected.append(pos)
        pos += len(b)
    assert positions == expected
    headers = validate_batches(memoryview(buf))
    assert [h.base_offset for h in headers] == [0, 10, 20, 30]
    assert [h.record_count for h in headers] == [1, 2, 3, 4]
    assert validate_batches(b"") == []
    assert scan_valid_prefix(buf) == (len(buf), headers)


def test_every_single_byte_flip_in_crc_range_is_detected():
    b = bytearray(raw_batch(record_count=3, producer_id=5, base_sequence=0))
    for i in range(17, len(b)):  # the stored CRC itself and everything it covers
        for mask in (0x01, 0x80):
            damaged = bytearray(b)
            damaged[i] ^= mask
            with pytest.raises((CorruptRecordError, InvalidRecordError)):
                validate_batches(damaged)
            assert scan_valid_prefix(damaged) == (0, [])


def test_crc_mismatch_is_corrupt_message():
    b = bytearray(raw_batch())
    b[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="crc"):
        validate_batches(b)


def test_wrong_magic():
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batches(raw_batch(magic=3))
    with pytest.raises(InvalidRecordError, match="magic"):
        validate_batches(raw_batch(magic=1))
    with pytest.raises(CorruptRecordError):
        list(iter_batch_headers(raw_batch(magic=1)))
    assert scan_valid_prefix(raw_batch(magic=0)) == (0, [])


def test_truncated_and_length_mismatch():
    good = raw_batch()
    for cut in (1, 11, 12, 60, len(good) - 1):
        with pytest.raises(CorruptRecordError):
            validate_batches(good[:cut])
        with pytest.raises(CorruptRecordError):
            list(iter_batch_headers(good[:cut]))
    # batchLength larger than the buffer
    b = bytearray(good)
    struct.pack_into(">i", b, 8, len(good))
    with pytest.raises(CorruptRecordError):
        validate_batches(b)
    # batchLength smaller than the header
    struct.pack_into(">i", b, 8, 48)
    with pytest.raises(CorruptRecordError, match="batchLength"):
        validate_batches(b)
    # batchLength shorter than the real batch: the leftover bytes are not a batch
    b = bytearray(good + good)
    struct.pack_into(">i", b, 8, len(good) - 12 - 1)
    with pytest.raises(CorruptRecordError):
        validate_batches(b)


def test_trailing_partial_batch():
    a, b = raw_batch(base_offset=0), raw_batch(base_offset=1)
    buf = a + b + b[:30]
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)
    valid, headers = scan_valid_prefix(buf)
    assert valid == len(a) + len(b)
    assert [h.base_offset for h in headers] == [0, 1]
    # garbage after good batches
    valid, headers = scan_valid_prefix(a + b"\x00" * 100)
    assert valid == len(a) and len(headers) == 1


def test_header_checks():
    with pytest.raises(InvalidRecordError, match="count"):
        validate_batches(raw_batch(record_count=-1))
    with pytest.raises(InvalidRecordError, match="compression"):
        validate_batches(raw_batch(attributes=5))
    with pytest.raises(InvalidRecordError, match="producer id"):
        validate_batches(raw_batch(attributes=0x10))
    # Empty batches and offset gaps exist after compaction: fine from a replica ...
    assert validate_batches(raw_batch(record_count=0))[0].record_count == 0
    assert validate_batches(raw_batch(record_count=2, last_offset_delta=5))[0].last_offset == 5
    # ... but not from a client.
    with pytest.raises(InvalidRecordError):
        validate_batches(raw_batch(record_count=0), origin_client=True)
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        validate_batches(raw_batch(record_count=2, last_offset_delta=5), origin_client=True)
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(raw_batch(attributes=0x20), origin_client=True)
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate_batches(raw_batch(producer_id=7, base_sequence=-1), origin_client=True)
    ok = raw_batch(producer_id=7, producer_epoch=0, base_sequence=0, record_count=3)
    assert validate_batches(ok, origin_client=True)[0].producer_id == 7


def test_max_batch_size():
    b = raw_batch()
    assert validate_batches(b, max_batch_size=len(b))
    with pytest.raises(RecordTooLargeError):
        validate_batches(b, max_batch_size=len(b) - 1)


def test_patches_keep_crc_valid():
    buf = bytearray(raw_batch() + raw_batch(record_count=4))
    second = len(raw_batch())
    set_base_offset(buf, second, 1 << 40)
    set_partition_leader_epoch(buf, second, 12)
    headers = validate_batches(buf)
    assert headers[1].base_offset == 1 << 40
    assert headers[1].partition_leader_epoch == 12
    assert struct.unpack_from(">q", buf, second)[0] == 1 << 40


def test_assign_offsets():
    buf = bytearray(
        raw_batch(record_count=3) + raw_batch(record_count=1) + raw_batch(record_count=2)
    )
    assert assign_offsets(memoryview(buf), 100, 4) == 106
    headers = validate_batches(buf)
    assert [(h.base_offset, h.last_offset) for h in headers] == [(100, 102), (103, 103), (104, 105)]
    assert {h.partition_leader_epoch for h in headers} == {4}


def test_set_max_timestamp_and_type():
    buf = bytearray(raw_batch(attributes=2))
    before = bytes(buf)
    set_max_timestamp_and_type(buf, 0, 0, 1_700_000_000_005)  # already so: no change
    assert bytes(buf) == before
    set_max_timestamp_and_type(buf, 0, 1, 1_800_000_000_000)
    (h,) = validate_batches(buf)
    assert h.timestamp_type == 1 and h.max_timestamp == 1_800_000_000_000
    assert h.compression == 2  # other attribute bits preserved
    set_max_timestamp_and_type(buf, 0, 0, 5)
    (h,) = validate_batches(buf)
    assert h.timestamp_type == 0 and h.max_timestamp == 5
    with pytest.raises(ValueError):
        set_max_timestamp_and_type(buf, 0, 2, 5)


def test_header_is_frozen():
    h = parse_batch_header(raw_batch())
    assert isinstance(h, RecordBatchHeader)
    with pytest.raises(AttributeError):
        h.base_offset = 3  # type: ignore[misc]


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    counts=st.lists(st.integers(1, 50), min_size=1, max_size=5),
)
def test_scan_valid_prefix_stops_at_damage(data, counts):
    batches = [raw_batch(base_offset=i, record_count=c) for i, c in enumerate(counts)]
    buf = bytearray(b"".join(batches))
    cut = data.draw(st.integers(0, len(buf)))
    valid, headers = scan_valid_prefix(buf[:cut])
    bounds, pos = [0], 0
    for b in batches:
        pos += len(b)
        bounds.append(pos)
    expected = max(x for x in bounds if x <= cut)
    assert valid == expected
    assert len(headers) == bounds.index(expected)
    # a byte flip in the CRC-covered part of batch k leaves exactly batches 0..k-1
    k = data.draw(st.integers(0, len(batches) - 1))
    i = data.draw(st.integers(bounds[k] + 17, bounds[k + 1] - 1))
    damaged = bytearray(buf)
    damaged[i] ^= data.draw(st.integers(1, 255))
    assert scan_valid_prefix(damaged)[0] == bounds[k]
