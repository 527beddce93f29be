"""The produce validator's walk over the records (validation.record_prefixes) against the full
record codec, with hypothesis: every key and value prefix found, nulls and headers included,
compressed batches too."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.protocol.records import Header, Record, build_batch, iter_batches
from kafkalite.schema_registry.validation import record_prefixes

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
