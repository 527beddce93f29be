"""The produce validator's walk over the records (validation.record_prefixes) against the full
record codec, with hypothesis: every key and value prefix found, nulls and headers included,
compressed batches too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.records import Header, Record, build_batch, iter_batches
from kafkalite.schema_registry.validation import record_prefixes, uniform_prefixes

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


uniform = st.integers(0, 300).flatmap(
    lambda size: st.lists(st.one_of(st.none(), st.binary(min_size=size, max_size=size)))
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.just(None), st.integers(0, 12)),
            st.integers(0, 12),
            st.lists(st.sampled_from([b"\0\0\0\0\1", b"\0\0\0\0\2", b"\1\0\0\0\1"]), max_size=2),
            st.integers(0, 70),
            st.integers(0, 2**34),
        ),
        min_size=1,
        max_size=3,
    ),
    st.sampled_from([0, 1, 4]),
    st.sampled_from([None, "key", "value"]),
)
def test_the_fast_path_agrees_with_the_walk(batches, compression, only):
    """uniform_prefixes either declines (None) or finds exactly the walk's distinct prefixes,
    over batches that are mostly uniform (one key size, one value size) with a few records
    that differ: another prefix, a null, another size, a header."""
    buf = b""
    for key_size, value_size, odd, count, spread in batches:
        prefix = b"\0\0\0\0\1"
        rs = []
        for i in range(16 + count):
            key = None if key_size is None else (prefix + b"k" * 20)[:key_size]
            value = (prefix + b"v" * 20)[:value_size]
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
    fast = uniform_prefixes(buf, only)
    if fast is None:
        return
    for part in ("key", "value"):
        if only in (None, part):
            assert fast[part] == set(record_prefixes(buf, part))


def test_the_fast_path_takes_a_uniform_batch():
    rs = [Record(offset_delta=i, value=b"\0\0\0\0\7" + b"x" * 8) for i in range(100)]
    assert uniform_prefixes(build_batch(rs), "value") == {"key": {None}, "value": {b"\0\0\0\0\7"}}
    rs[50] = rs[50]._replace(value=b"\0\0\0\0\6" + b"x" * 8)
    assert uniform_prefixes(build_batch(rs), "value") is None
