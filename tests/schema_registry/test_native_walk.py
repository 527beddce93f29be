"""The validator's C walk (the optional extension `kafkalite.schema_registry._walk`, through
`native_record_prefixes` and `native_prefixes`) against the Python walk (`record_prefixes`),
with hypothesis: on batches of random records (keys, values and headers of any size, null
parts, compressed or not) and on arbitrary, truncated and mutated records areas, both give the
same prefixes, or both refuse at the same record. The whole-request entry (`_walk.request`,
which also reads the batch headers) against `record_prefixes` (over `_records_areas`) on
arbitrary produce data: several batches, control and compressed ones, damaged headers and
areas, cut anywhere. The C walk must be built in the test
environment (`pip install -e .` builds it); KAFKALITE_NO_NATIVE=1 turns it off."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.config import BrokerConfig
from kafkalite.protocol.compression import compress
from kafkalite.protocol.records import (
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    Header,
    Record,
    build_batch,
    parse_batch_header,
)
from kafkalite.protocol.varint import encode_varint
from kafkalite.schema_registry import validation
from kafkalite.schema_registry.validation import (
    UnreadableRecords,
    _native_distinct,
    native_prefixes,
    native_record_prefixes,
    record_prefixes,
)

walk = validation._walk
assert walk is not None, "the C walk is not built: `pip install -e .` with gcc and Python.h"

GOOD = b"\0\0\0\0\1"
payload = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.binary(max_size=12).map(lambda tail: GOOD + tail),
    st.binary(min_size=60, max_size=400),
)
records = st.lists(
    st.builds(
        Record,
        timestamp_delta=st.one_of(st.integers(0, 100), st.integers(0, 2**40)),
        offset_delta=st.integers(0, 10_000),
        key=payload,
        value=payload,
        headers=st.lists(st.builds(Header, st.text(max_size=5), payload), max_size=2).map(tuple),
    ),
    min_size=0,
    max_size=20,
)


def outcome(walker, buf, part):
    try:
        return walker(buf, part)
    except UnreadableRecords as e:
        return ("unreadable", e.index)


def assert_agree(buf):
    """Per part: the same list, or the same unreadable record; the distinct prefixes of one
    part or both: the Python walk's, or None when it refuses."""
    python = {}
    for part in ("key", "value"):
        python[part] = outcome(record_prefixes, buf, part)
        assert outcome(native_record_prefixes, buf, part) == python[part]
    for only in (None, "key", "value"):
        parts = ("key", "value") if only is None else (only,)
        native = native_prefixes(buf, only)
        if any(isinstance(python[part], tuple) for part in parts):
            assert native is None
        else:
            assert native == {
                part: set(python[part]) if part in parts else set() for part in ("key", "value")
            }


def batch_around(area: bytes, compression: int = 0) -> bytes:
    """A batch whose records area is `area` (compressed with `compression`), whatever it
    holds; its length right, its CRC not (neither walk reads it)."""
    header = bytearray(build_batch([Record()], compression=compression)[:RECORDS_OFFSET])
    body = compress(compression, area) if compression else area
    struct.pack_into(">i", header, LENGTH_OFFSET, RECORDS_OFFSET - LOG_OVERHEAD + len(body))
    return bytes(header) + body


@settings(max_examples=300, deadline=None)
@given(st.lists(records, min_size=1, max_size=3), st.sampled_from([0, 0, 1, 2, 3, 4]))
def test_the_c_walk_agrees_on_batches_of_random_records(batches, compression):
    buf = b"".join(
        build_batch([r._replace(offset_delta=i) for i, r in enumerate(rs)], compression=c)
        for rs, c in zip(batches, [compression, 0, compression], strict=False)
    )
    assert_agree(buf)
    assert_agree(memoryview(buf))
    # one batch's records in one call: one bytes object per distinct prefix, shared
    keys, values, count, reason = walk.prefixes(
        bytearray(build_batch(batches[0])[RECORDS_OFFSET:]), 3, False
    )
    assert reason is None and count == len(keys) == len(values) == len(batches[0])
    for column in (keys, values):
        assert len({id(p) for p in column}) == len(set(column))


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.sampled_from([0, 0, 0, 1]))
def test_the_c_walk_agrees_on_arbitrary_records_areas(area, compression):
    assert_agree(batch_around(area, compression))


@settings(max_examples=500, deadline=None)
@given(
    records.filter(bool),
    st.integers(0, 10_000),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    st.lists(st.tuples(st.integers(0, 10_000), st.binary(min_size=1, max_size=6)), max_size=2),
)
def test_the_c_walk_agrees_on_truncated_and_mutated_records(rs, cut, hits, inserts):
    """A valid records area cut short, bytes overwritten (lengths, varints, prefixes, with
    0x80/0xff the likeliest to make varints long), bytes inserted; then a valid batch after it
    (which a refusal must not reach)."""
    rs = [r._replace(offset_delta=i) for i, r in enumerate(rs)]
    area = bytearray(build_batch(rs)[RECORDS_OFFSET:])
    for at, data in inserts:
        at %= len(area) + 1
        area[at:at] = data
    for at, byte in hits:
        area[at % len(area)] = byte
    area = area[: len(area) - cut % (len(area) + 1)]
    assert_agree(batch_around(bytes(area)) + build_batch(rs))


@pytest.mark.parametrize(
    "area, index",
    [
        (b"\xff\xff\xff\xff\xff\x01", 0),  # an over-long length varint
        (b"\x80", 0),  # a truncated one
        (b"\x01", 0),  # a negative length
        (b"\x02\x00\x00", 0),  # a record's head running into the end
        (b"\x0c\x00\x00\x00\x0a" + GOOD, None),  # one record, key of 5 bytes, value ...
        (b"\x0c\x00\x00\x00\x01\x01", None),  # null key and value: read
    ],
)
def test_the_c_walk_on_small_areas(area, index):
    buf = batch_around(area)
    assert_agree(buf)
    if index is not None:
        with pytest.raises(UnreadableRecords) as e:
            native_record_prefixes(buf, "key")
        assert e.value.index == index


def test_a_five_byte_length_drops_the_bits_beyond_32_as_kafka_does():
    """Kafka's readVarint keeps 32 bits of a 5-byte varint; so do both walks."""
    record = b"\x00\x00\x00\x01\x01"  # attributes, deltas, null key, null value
    five_byte_length = bytes([0x80 | len(record) << 1, 0x80, 0x80, 0x80, 0x70])
    buf = batch_around(five_byte_length + record)
    assert record_prefixes(buf, "value") == [None]
    assert_agree(buf)


def test_many_distinct_prefixes():
    """The C walk's table of distinct prefixes grows past its first 16 slots."""
    rs = [
        Record(offset_delta=i, key=i.to_bytes(5, "big"), value=b"v" * (i % 7)) for i in range(5000)
    ]
    buf = build_batch(rs)
    assert_agree(buf)
    assert len(native_prefixes(buf)["key"]) == 5000
    assert native_prefixes(buf)["value"] == {b"v" * n for n in range(5)} | {b"vvvvv"}


def test_the_c_walk_refuses_a_bad_part_argument():
    with pytest.raises(ValueError):
        walk.prefixes(b"", 0, True)
    with pytest.raises(TypeError):
        walk.prefixes("text", 1, True)


@pytest.mark.parametrize("value, native", [("1", False), ("yes", False), ("0", True), ("", True)])
def test_kafkalite_no_native_turns_the_c_walk_off(value, native, monkeypatch):
    """What the module chooses at import (`_walk = _native_walker()`)."""
    monkeypatch.setenv("KAFKALITE_NO_NATIVE", value)
    assert (validation._native_walker() is walk) is native
    assert (validation._native_walker() is None) is not native


def test_kafkalite_no_native_is_not_taken_for_a_config_key():
    """KAFKALITE_<PROPERTY> variables are config keys, an unknown one stops start-up; this one
    is not a property."""
    config = BrokerConfig.load(environ={"KAFKALITE_NO_NATIVE": "1"})
    assert config == BrokerConfig.load(environ={})


# -- the whole-request entry: one call over a partition's produce data


def python_distinct(buf, parts):
    """What `_walk.request` (with the compressed areas walked) must give: the Python walk's
    distinct prefixes per part asked for (empty for the other), None when it refuses."""
    found = []
    for bit, part in ((1, "key"), (2, "value")):
        if parts & bit:
            try:
                found.append(set(record_prefixes(buf, part)))
            except UnreadableRecords:
                return None
        else:
            found.append(set())
    return tuple(found)


def python_areas(buf):
    """(codec, start, end) of the compressed non-control batches' areas, read as
    `_records_areas` reads the headers; None when it would raise on one."""
    out = []
    mv = memoryview(buf)
    pos = 0
    try:
        while len(mv) - pos >= LOG_OVERHEAD:
            header = parse_batch_header(mv, pos)
            if header.size < RECORDS_OFFSET:
                return None
            if not header.is_control and header.compression:
                end = min(pos + header.size, len(mv))
                out.append((header.compression, pos + RECORDS_OFFSET, end))
            pos += header.size
    except Exception:
        return None
    return out


def assert_request_agrees(buf):
    for parts in (1, 2, 3):
        expected = python_distinct(buf, parts)
        assert _native_distinct(buf, parts) == expected
        assert _native_distinct(memoryview(bytearray(buf)), parts) == expected
        answer = walk.request(buf, parts)
        areas = python_areas(buf)
        if answer is not None:
            keys, values, compressed = answer
            assert (keys is None) == (not parts & 1) and (values is None) == (not parts & 2)
            # the compressed areas are the ones _records_areas decompresses
            assert areas is not None and (compressed or []) == areas
        elif expected is not None:
            # the entry refused: a header _records_areas cannot read either, or a record in
            # an uncompressed batch the walk refuses (then so must the whole)
            pytest.fail(f"request refused what the Python walk reads: {expected}")


batch_specs = st.lists(
    st.tuples(records, st.sampled_from([0, 0, 0, 1, 2, 3, 4]), st.booleans()),
    min_size=1,
    max_size=4,
)


def request_of(specs):
    return b"".join(
        build_batch(
            [r._replace(offset_delta=i) for i, r in enumerate(rs)],
            compression=codec,
            is_control=control and not codec,
        )
        for rs, codec, control in specs
    )


@settings(max_examples=300, deadline=None)
@given(batch_specs)
def test_the_request_entry_agrees_on_several_batches(specs):
    """Several batches, some compressed (each codec), some control (skipped unread)."""
    assert_request_agrees(request_of(specs))


@settings(max_examples=500, deadline=None)
@given(
    batch_specs,
    st.integers(0, 100_000),
    st.lists(st.tuples(st.integers(0, 100_000), st.integers(0, 255)), max_size=4),
    st.lists(
        st.tuples(st.sampled_from([8, 9, 10, 11, 21, 22]), st.integers(0, 3), st.integers(0, 255)),
        max_size=3,
    ),
    st.binary(max_size=70),
)
def test_the_request_entry_agrees_on_damaged_requests(specs, cut, hits, header_hits, tail):
    """Produce data cut anywhere (a truncated header, a batch running past the end), bytes
    overwritten anywhere and in the batch headers' length and attributes (a length below the
    header's, negative or past the end; the control flag and codec bits flipped), junk after
    the last batch (under 12 bytes: ignored; 12-60: a truncated header)."""
    buf = bytearray(request_of(specs))
    starts = []
    pos = 0
    while pos < len(buf):
        starts.append(pos)
        pos += int.from_bytes(buf[pos + 8 : pos + 12], "big") + LOG_OVERHEAD
    for offset, which, byte in header_hits:
        buf[starts[which % len(starts)] + offset] = byte
    for at, byte in hits:
        buf[at % len(buf)] = byte
    buf = buf[: len(buf) - cut % (len(buf) + 1)] + tail
    assert_request_agrees(bytes(buf))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.builds(
            Record,
            timestamp_delta=st.sampled_from([0, 63, 64, 8191, 8192, 2**20, 2**27, 2**34, 2**48]),
            key=st.one_of(st.none(), st.binary(max_size=8), st.binary(min_size=60, max_size=70)),
            value=st.one_of(
                st.none(), st.binary(max_size=8), st.binary(min_size=60, max_size=8200)
            ),
            headers=st.lists(st.builds(Header, st.just("h"), payload), max_size=1).map(tuple),
        ),
        min_size=1,
        max_size=12,
    ),
    st.integers(0, 200),
)
def test_the_c_walk_agrees_at_every_varint_width(rs, offset_base):
    """Timestamp deltas of 1 to 7 varint bytes, offset deltas of 1-3 (the C walk reads a
    record's head in one word when its deltas end within 8 bytes, else byte by byte), keys and
    values with 1-, 2- and 3-byte lengths, records near the area's end; then the same records
    cut at every position of the last 40 bytes."""
    rs = [r._replace(offset_delta=offset_base * 60 + i) for i, r in enumerate(rs)]
    batch = build_batch(rs, keep_offset_deltas=True)
    assert_agree(batch)
    assert_request_agrees(batch)
    area = batch[RECORDS_OFFSET:]
    for cut in range(1, min(40, len(area)) + 1):
        assert_agree(batch_around(area[:-cut]))


def test_the_request_entry_skips_control_batches_and_reports_compressed_ones():
    good = build_batch([Record(value=GOOD + b"x")])
    control = build_batch([Record(key=b"\0\0\0\0", value=b"\0\0\0\0")], is_control=True)
    gzip = build_batch([Record(key=b"k" * 9, value=None)], compression=1)
    buf = good + control + gzip
    keys, values, compressed = walk.request(buf, 3)
    assert keys == {None} and values == {GOOD}
    start = len(good) + len(control) + RECORDS_OFFSET
    assert compressed == [(1, start, len(buf))]
    assert _native_distinct(buf, 3) == ({None, b"kkkkk"}, {GOOD, None})
    assert walk.request(good + good[:11], 2) == (None, {GOOD}, None)  # under 12 bytes: ignored
    assert walk.request(good + good[:12], 2) is None  # a truncated header
    with pytest.raises(ValueError):
        walk.request(buf, 0)


hand_records = st.lists(
    st.tuples(
        st.binary(min_size=1, max_size=3),  # the deltas' bytes (continuation bits set below)
        st.integers(-300, 300),  # the key's declared length, whatever follows
        st.binary(max_size=70),
        st.integers(-300, 300),  # the value's declared length
        st.binary(max_size=70),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=400, deadline=None)
@given(hand_records)
def test_the_c_walk_agrees_on_declared_lengths_that_lie(rs):
    """Records built by hand whose keys' and values' declared lengths (negative ones other
    than -1 among them, 1 and 2 varint bytes) disagree with the bytes that follow, each record
    still found by its own length: both walks read every part where its lengths put it."""
    area = b""
    for deltas, key_size, key, value_size, value in rs:
        # a timestamp delta of len(deltas) bytes, an offset delta of one
        ts = bytes(b | 0x80 for b in deltas[:-1]) + bytes([deltas[-1] & 0x7F])
        body = b"\0" + ts + b"\2" + encode_varint(key_size) + key
        body += encode_varint(value_size) + value + b"\0"
        area += encode_varint(len(body)) + body
    assert_agree(batch_around(area))
    assert_request_agrees(batch_around(area))
