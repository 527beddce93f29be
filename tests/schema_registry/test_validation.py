"""The produce validator's walk over the records (validation.record_prefixes) against the full
record codec, and its fast path (validation.fast_prefixes: compiled patterns) against the walk,
with hypothesis: every key and value prefix found, nulls and headers included, compressed
batches too, and arbitrary damage to the records (the fast path either declines or finds
exactly what the walk finds; the validator's answer is the same with and without it, and with
the C walk, which tests/schema_registry/test_native_walk.py checks against the Python walk)."""

from __future__ import annotations

import asyncio
import struct
from types import SimpleNamespace

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.errors import RecordError
from kafkalite.protocol.records import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    RECORDS_COUNT_OFFSET,
    RECORDS_OFFSET,
    Header,
    Record,
    build_batch,
    iter_batches,
)
from kafkalite.schema_registry import validation
from kafkalite.schema_registry.validation import (
    SchemaValidator,
    UnreadableRecords,
    fast_prefixes,
    mixed_pattern,
    record_prefixes,
)
from kafkalite.testing.waiting import wait_for

# the produce path compiles these on a thread and walks meanwhile; here they are waited for
mixed_pattern("key")
mixed_pattern("value")

payload = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(
    st.builds(
        Record,
        timestamp_delta=st.integers(0, 2**40),
        key=payload,
        value=payload,
        headers=st.lists(st.builds(Header, st.text(max_size=5), payload), max_size=2).map(tuple),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(records, min_size=1, max_size=3), st.sampled_from([0, 1, 2, 3, 4]))
def test_prefixes_match_the_codec(batches, compression):
    buf = b"".join(build_batch(rs, compression=compression) for rs in batches)
    decoded = [r for _, rs in iter_batches(buf) for r in rs]
    assert record_prefixes(buf, "key") == [None if r.key is None else r.key[:5] for r in decoded]
    assert record_prefixes(buf, "value") == [
        None if r.value is None else r.value[:5] for r in decoded
    ]


# -- the fast path against the walk, on arbitrary batches

GOOD, OTHER = b"\0\0\0\0\1", b"\0\0\0\0\2"
framed = st.one_of(
    st.binary(max_size=300).map(lambda tail: GOOD + tail),
    st.binary(max_size=300).map(lambda tail: GOOD + tail),
    st.binary(max_size=300).map(lambda tail: GOOD + tail),
    st.none(),
    st.binary(max_size=8).map(lambda tail: OTHER + tail),
    st.binary(max_size=12),  # unframed, or framed by chance
)
mostly_framed_records = st.lists(
    st.builds(
        Record,
        offset_delta=st.just(0),
        timestamp_delta=st.one_of(st.integers(0, 100), st.integers(0, 2**40)),
        key=framed,
        value=framed,
        headers=st.one_of(
            st.just(()),
            st.lists(st.builds(Header, st.text(max_size=5), payload), max_size=2).map(tuple),
        ),
    ),
    min_size=1,
    max_size=24,
)
damage = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3)


def batch_of(rs, compression, count_delta, hits):
    """A batch of `rs` (offset deltas in order), its declared count moved by `count_delta`
    and the bytes at `hits` (positions modulo the records' size) overwritten, CRC recomputed:
    intact as a batch, whatever its records have become."""
    rs = [r._replace(offset_delta=i) for i, r in enumerate(rs)]
    buf = bytearray(build_batch(rs, compression=compression))
    count = struct.unpack_from(">i", buf, RECORDS_COUNT_OFFSET)[0]
    struct.pack_into(">i", buf, RECORDS_COUNT_OFFSET, max(0, count + count_delta))
    for at, byte in hits:
        buf[RECORDS_OFFSET + at % (len(buf) - RECORDS_OFFSET)] = byte
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


def walked(buf, part):
    try:
        return record_prefixes(buf, part)
    except UnreadableRecords:
        return "unreadable"


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(mostly_framed_records, st.integers(-2, 2), damage), min_size=1, max_size=3),
    st.sampled_from([0, 0, 0, 1, 4]),
    st.sampled_from([None, "key", "value"]),
)
def test_the_fast_path_agrees_with_the_walk(batches, compression, only):
    """fast_prefixes either declines (None) or finds exactly the walk's distinct prefixes, and
    never takes a batch the walk cannot read, whatever the records hold (nulls, short parts,
    other ids, headers, sizes of 1 and 2 byte varints, a wrong count, bytes overwritten)."""
    buf = b"".join(batch_of(rs, compression, delta, hits) for rs, delta, hits in batches)
    try:
        fast = fast_prefixes(buf, only)
    except Exception:
        fast = None  # the validator then walks
    if fast is None:
        return
    for part in ("key", "value"):
        if only in (None, part):
            walk = walked(buf, part)
            assert walk != "unreadable"
            assert fast[part] == set(walk)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.just(None), st.integers(0, 12), st.integers(60, 1100)),
            st.one_of(st.integers(0, 12), st.integers(5, 400)),
            st.lists(st.sampled_from([b"\0\0\0\0\1", b"\0\0\0\0\2", b"\1\0\0\0\1"]), max_size=2),
            st.integers(0, 70),
            st.integers(0, 2**34),
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([0, 1, 4]),
    st.sampled_from([None, "key", "value"]),
    st.booleans(),
)
def test_the_fast_path_agrees_with_the_walk_on_near_uniform_batches(
    batches, compression, only, vary
):
    """Batches that are mostly of one layout (the uniform pattern's case) or of varying sizes
    (`vary`: the mixed pattern's) with a few records that differ: another prefix, a null,
    another size, a header."""
    buf = b""
    for key_size, value_size, odd, count, spread in batches:
        prefix = b"\0\0\0\0\1"
        rs = []
        for i in range(16 + count):
            size = value_size + (i * 37 % 300 if vary else 0)
            key = None if key_size is None else (prefix + b"k" * 2000)[:key_size]
            value = (prefix + b"v" * 2000)[:size]
            rs.append(
                Record(offset_delta=i, timestamp_delta=spread * i // 30, key=key, value=value)
            )
        for n, other in enumerate(odd):
            at = (n * 7 + 3) % len(rs)
            r = rs[at]
            changes = [
                r._replace(value=other + r.value[5:]),
                r._replace(key=other + (r.key or b"")[5:]),
                r._replace(value=None),
                r._replace(value=r.value + b"x"),
                r._replace(headers=(Header("h", b""),)),
            ]
            rs[at] = changes[(count + n) % len(changes)]
        buf += build_batch(rs, compression=compression)
    fast = fast_prefixes(buf, only)
    if fast is None:
        return
    for part in ("key", "value"):
        if only in (None, part):
            assert fast[part] == set(record_prefixes(buf, part))


def test_the_fast_path_takes_a_uniform_batch():
    rs = [Record(offset_delta=i, value=b"\0\0\0\0\7" + b"x" * 8) for i in range(100)]
    assert fast_prefixes(build_batch(rs), "value") == {"key": set(), "value": {b"\0\0\0\0\7"}}
    rs[50] = rs[50]._replace(value=b"\0\0\0\0\6" + b"x" * 8)
    assert fast_prefixes(build_batch(rs), "value") is None


def mixed_batch(n=300, key_every=3, header_every=10):
    rs = []
    for i in range(n):
        value = GOOD + b"\x02" + b"n" * (i * 53 % 500)
        key = None if i % key_every == 0 else b"key-" + b"k" * (i % 40)
        headers = (Header("trace", b"t" * 16),) if i % header_every == 0 else ()
        rs.append(Record(offset_delta=i, timestamp_delta=i, key=key, value=value, headers=headers))
    return rs


def test_the_fast_path_takes_a_mixed_batch_and_refuses_one_bad_record():
    """Values of 6-505 bytes (1 and 2 byte lengths), keys on two records in three, headers:
    one pattern match, no walk. One record with another id, a short value or an unframed
    one anywhere makes it decline (the walk then names the record)."""
    rs = mixed_batch()
    for compression in (0, 1, 4):
        assert fast_prefixes(build_batch(rs, compression=compression), "value") == {
            "key": set(),
            "value": {GOOD},
        }
    with_null = list(rs)
    with_null[7] = with_null[7]._replace(value=None)
    assert fast_prefixes(build_batch(with_null), "value")["value"] == {GOOD, None}
    for bad in (OTHER + b"x" * 100, b"\0\0\0\0", b"plain text of some length"):
        for at in (0, 150, 299):
            changed = list(rs)
            changed[at] = changed[at]._replace(value=bad)
            assert fast_prefixes(build_batch(changed), "value") is None
    keyed = [r._replace(key=GOOD + (r.key or b"")) for r in rs]
    assert fast_prefixes(build_batch(keyed), "key") == {"key": {GOOD}, "value": set()}
    assert fast_prefixes(build_batch(keyed), None) == {"key": {GOOD}, "value": {GOOD}}


def test_records_too_large_for_the_patterns_are_walked():
    rs = mixed_batch(20)
    rs[5] = rs[5]._replace(value=GOOD + b"x" * 9000)  # a 3-byte length
    assert fast_prefixes(build_batch(rs), "value") is None
    assert set(record_prefixes(build_batch(rs), "value")) == {GOOD}
    rs = mixed_batch(20)
    rs[5] = rs[5]._replace(key=b"k" * 1100)  # past the keys value mode skips
    assert fast_prefixes(build_batch(rs), "value") is None


# -- the validator's answer, with and without the C walk and the fast path


def stub_validator():
    view = SimpleNamespace(
        schemas={1: object(), 2: object()},
        subjects={
            "t-value": {1: SimpleNamespace(id=1, deleted=False)},
            "t-key": {1: SimpleNamespace(id=1, deleted=False)},
            "u-value": {1: SimpleNamespace(id=2, deleted=False)},
        },
        next_offset=0,
    )

    async def started():
        return None

    async def synced():
        return view

    registry = SimpleNamespace(store=SimpleNamespace(view=view, start=started), view=synced)
    strategy = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    config = SimpleNamespace(
        confluent_value_schema_validation=True,
        confluent_key_schema_validation=True,
        confluent_key_subject_name_strategy=strategy,
        confluent_value_subject_name_strategy=strategy,
    )
    return SchemaValidator(registry, lambda topic: config)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(mostly_framed_records, st.integers(-2, 2), damage), min_size=1, max_size=2),
    st.sampled_from([0, 0, 1]),
)
def test_the_validator_answers_the_same_with_the_c_walk_the_patterns_or_the_walk(
    batches, compression
):
    """The same refusals (indexes and messages; for an unreadable record the same index, the
    reason in each walk's words) by the C walk, by the patterns then the Python walk, and by
    the Python walk alone."""
    buf = memoryview(
        b"".join(batch_of(rs, compression, delta, hits) for rs, delta, hits in batches)
    )
    assert validation._walk is not None
    answers = [asyncio.run(stub_validator().validate("t", buf))]
    original_walk, original_fast = validation._walk, validation.fast_prefixes
    validation._walk = None
    try:
        answers.append(asyncio.run(stub_validator().validate("t", buf)))
        validation.fast_prefixes = lambda buf, only=None: None  # type: ignore[assignment]
        answers.append(asyncio.run(stub_validator().validate("t", buf)))
    finally:
        validation._walk, validation.fast_prefixes = original_walk, original_fast

    def said(errors):
        return [(e.batch_index, e.message.split(": ", 1)[0]) for e in errors]

    assert said(answers[0]) == said(answers[1]) == said(answers[2])
    assert answers[1] == answers[2]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(mostly_framed_records, st.integers(-2, 2), damage), min_size=1, max_size=3),
    st.sampled_from([0, 0, 1, 3]),
)
def test_known_to_pass_is_validate_passing_from_its_cache(batches, compression):
    """The produce path's synchronous check (`known_to_pass`, no await) says yes exactly when
    `validate` has just passed the same data from its cached verdicts (readable records, every
    prefix's verdict a pass), and no until `validate` has seen them; then again no when the
    view moves, until `validate` renews the verdicts."""
    buf = memoryview(
        b"".join(batch_of(rs, compression, delta, hits) for rs, delta, hits in batches)
    )
    validator = stub_validator()
    # without the C walk (KAFKALITE_NO_NATIVE=1) the check always leaves it to validate
    passes = validation._walk is not None and validation.native_prefixes(buf) is not None
    assert validator.known_to_pass("t", buf) is False
    answer = asyncio.run(validator.validate("t", buf))
    known = validator.known_to_pass("t", buf)
    assert known == (answer == [] and passes)
    assert asyncio.run(validator.validate("t", buf)) == answer  # the cache changes nothing
    validator.registry.store.view.next_offset += 1  # a record applied: verdicts may be stale
    assert validator.known_to_pass("t", buf) is False
    assert asyncio.run(validator.validate("t", buf)) == answer
    assert validator.known_to_pass("t", buf) == known


def test_known_to_pass_per_topic_part_and_prefix(walker):
    """Verdicts are per topic, part and strategy: a prefix passed for one topic's values is
    not known for another's or for keys; a refused prefix is never known to pass; without
    the C walk the check always leaves the answer to `validate`."""
    validator = stub_validator()
    good = memoryview(build_batch([Record(key=GOOD, value=GOOD + b"x")] * 40, compression=0))
    nulls = memoryview(build_batch([Record(key=None, value=None)]))
    lz4 = memoryview(build_batch([Record(key=GOOD, value=GOOD)] * 40, compression=3))
    other = memoryview(build_batch([Record(key=GOOD, value=OTHER)]))
    assert not validator.known_to_pass("t", good)
    assert asyncio.run(validator.validate("t", good)) == []
    native = walker == "native"
    assert validator.known_to_pass("t", good) is native
    assert validator.known_to_pass("t", lz4) is native  # compressed: decompressed and walked
    assert validator.known_to_pass("t", nulls) is native  # null parts pass
    assert not validator.known_to_pass("u", good)  # another topic: its subject's verdicts
    errors = asyncio.run(validator.validate("t", other))
    assert [e.batch_index for e in errors] == [0]
    assert not validator.known_to_pass("t", other)
    assert not validator.known_to_pass("t", memoryview(bytes(good)[:-1]))  # a record cut
    assert validator.known_to_pass("t", good) is native
    validator.config_of("t").confluent_value_subject_name_strategy = "RecordNameStrategy"
    assert not validator.known_to_pass("t", good)  # another strategy, another subject


def test_records_a_consumer_cannot_read_refuse_an_intact_batch(walker):
    """A record whose length runs past the batch's records: every record after it is beyond
    a consumer's reach and unchecked, so the batch is refused (INVALID_RECORD) rather than
    written. A batch that is damaged as a batch (its CRC) is left to the append."""
    rs = [r._replace(key=GOOD) for r in mixed_batch(10)]
    buf = bytearray(build_batch(rs))
    buf[RECORDS_OFFSET] = 0x7E  # the first record's length: 63, past the second's start
    buf[RECORDS_OFFSET + 1] = 0x7F  # ... and a second length varint byte
    buf[RECORDS_OFFSET : RECORDS_OFFSET + 2] = b"\xfe\x7f"  # 8,191 bytes: past the end
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    errors = asyncio.run(stub_validator().validate("t", memoryview(buf)))
    assert len(errors) == 1 and isinstance(errors[0], RecordError)
    assert errors[0].batch_index == 0 and "cannot be read" in errors[0].message
    buf[-1] ^= 0xFF  # now the CRC is wrong too: the append answers CORRUPT_MESSAGE
    assert asyncio.run(stub_validator().validate("t", memoryview(buf))) == []


@pytest.mark.parametrize("part", ["key", "value"])
def test_the_pattern_compiles_on_a_thread_for_the_produce_path(part, monkeypatch):
    """Until it is compiled, fast_prefixes declines (the walk answers) instead of stalling."""
    monkeypatch.setattr(validation, "_mixed", {})
    monkeypatch.setattr(validation, "_compiling", set())
    rs = mixed_batch(30)
    buf = build_batch([r._replace(key=GOOD + (r.key or b"")) for r in rs])
    assert fast_prefixes(buf, part) is None
    wait_for(lambda: part in validation._mixed, timeout=60, what=f"the {part} pattern")
    assert fast_prefixes(buf, part) == {
        "key": {GOOD} if part == "key" else set(),
        "value": {GOOD} if part == "value" else set(),
    }


@pytest.mark.timeout(60)
def test_a_negative_batch_length_is_left_to_the_append(walker):
    """A batch length below the header's size (here negative: the next batch would start
    where this one does) stops the walk and the fast path instead of looping; the append
    refuses the data (CORRUPT_MESSAGE), so the validator has nothing to say."""
    buf = bytearray(build_batch(mixed_batch(3)))
    struct.pack_into(">i", buf, 8, -12)
    assert fast_prefixes(buf, "value") is None
    with pytest.raises(UnreadableRecords):
        record_prefixes(buf, "value")
    assert asyncio.run(stub_validator().validate("t", memoryview(buf))) == []
