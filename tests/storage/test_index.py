"""OffsetIndex and TimeIndex against a bisect oracle, plus on-disk format and life-cycle checks."""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.storage.errors import CorruptIndexError, InvalidOffsetError
from kafkalite.storage.index import (
    NO_TIMESTAMP,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)

HYPOTHESIS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def offset_entries():
    """Strictly increasing offsets and positions, as a segment appends them."""
    return st.lists(
        st.tuples(st.integers(1, 5000), st.integers(1, 50_000)), min_size=0, max_size=1500
    )


@HYPOTHESIS
@given(
    base=st.integers(0, 10**12),
    steps=offset_entries(),
    probes=st.lists(st.integers(-10, 10**7), max_size=50),
)
def test_offset_index_lookup_matches_bisect(tmp_path_factory, base, steps, probes):
    path = tmp_path_factory.mktemp("idx") / "00000000000000000000.index"
    index = OffsetIndex(path, base, max_index_size=8 * (len(steps) + 1))
    offsets, positions = [], []
    offset, position = base, 0
    for d_offset, d_position in steps:
        index.append(offset, position)
        offsets.append(offset)
        positions.append(position)
        offset += d_offset
        position += d_position
    assert index.entries == len(steps)
    for probe in probes + offsets + [o - 1 for o in offsets] + [o + 1 for o in offsets]:
        target = base + probe if probe < 10**7 else probe
        i = bisect.bisect_right(offsets, target) - 1
        expected = OffsetPosition(base, 0) if i < 0 else OffsetPosition(offsets[i], positions[i])
        assert index.lookup(target) == expected
        assert index.largest_lower_bound_slot_for(target) == i
        j = bisect.bisect_left(offsets, target)
        assert index.smallest_upper_bound_slot_for(target) == (j if j < len(offsets) else -1)
    index.close()


@HYPOTHESIS
@given(
    steps=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 100)), max_size=800),
    probes=st.lists(st.integers(-5, 10**5), max_size=40),
)
def test_time_index_lookup_matches_bisect(tmp_path_factory, steps, probes):
    path = tmp_path_factory.mktemp("tidx") / "00000000000000000100.timeindex"
    base = 100
    index = TimeIndex(path, base, max_index_size=12 * (len(steps) + 2))
    timestamps, offsets = [], []
    ts, offset = 0, base
    for d_ts, d_offset in steps:
        before = index.entries
        index.maybe_append(ts, offset)
        if ts > (timestamps[-1] if timestamps else NO_TIMESTAMP):
            timestamps.append(ts)
            offsets.append(offset)
            assert index.entries == before + 1
        else:
            assert index.entries == before  # equal timestamps are not re-indexed
        ts += d_ts
        offset += d_offset
    for probe in probes + timestamps:
        i = bisect.bisect_right(timestamps, probe) - 1
        expected = (
            TimestampOffset(NO_TIMESTAMP, base)
            if i < 0
            else TimestampOffset(timestamps[i], offsets[i])
        )
        assert index.lookup(probe) == expected
    index.close()


@HYPOTHESIS
@given(n=st.integers(0, 300), cut=st.integers(0, 10**4))
def test_offset_index_truncate_to_removes_entries_at_or_after(tmp_path_factory, n, cut):
    path = tmp_path_factory.mktemp("trunc") / "00000000000000000000.index"
    index = OffsetIndex(path, 0, max_index_size=4096)
    offsets = [i * 10 for i in range(min(n, 512))]
    for i, off in enumerate(offsets):
        index.append(off, i * 100)
    index.truncate_to(cut)
    kept = [o for o in offsets if o < cut]
    assert index.entries == len(kept)
    assert index.last_offset == (kept[-1] if kept else 0)
    if len(kept) < index.max_entries:
        index.append(cut, 10**6)  # appending at the cut point is legal again
        assert index.lookup(cut) == OffsetPosition(cut, 10**6)
    index.close()


def test_offset_index_file_format_and_trim(tmp_path):
    path = tmp_path / "00000000000000001000.index"
    index = OffsetIndex(path, 1000, max_index_size=1000)
    assert path.stat().st_size == 1000  # preallocated, rounded down to whole entries (1000 = 125*8)
    index.append(1000, 0)
    index.append(1005, 4096)
    index.append(1017, 9000)
    index.close()
    raw = path.read_bytes()
    assert len(raw) == 24  # trimmed to the valid entries on close
    assert list(struct.iter_unpack(">ii", raw)) == [(0, 0), (5, 4096), (17, 9000)]
    reopened = OffsetIndex(path, 1000, max_index_size=1000)
    assert reopened.entries == 3 and reopened.is_full()
    reopened.resize(1000)
    assert reopened.max_entries == 125 and not reopened.is_full()
    assert reopened.lookup(1010) == OffsetPosition(1005, 4096)
    reopened.sanity_check(log_size=10_000)
    reopened.close()


def test_time_index_file_format(tmp_path):
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, max_index_size=120)
    index.maybe_append(1_700_000_000_000, 50)
    index.maybe_append(1_700_000_000_000, 51)  # same timestamp: skipped
    index.maybe_append(1_700_000_000_500, 60)
    index.close()
    assert list(struct.iter_unpack(">qi", path.read_bytes())) == [
        (1_700_000_000_000, 0),
        (1_700_000_000_500, 10),
    ]


def test_offset_index_rejects_non_increasing_offsets(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=80)
    index.append(5, 0)
    with pytest.raises(InvalidOffsetError):
        index.append(5, 100)
    with pytest.raises(InvalidOffsetError):
        index.append(3, 100)


def test_full_index_refuses_appends(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=16)
    index.append(1, 0)
    index.append(2, 10)
    assert index.is_full()
    with pytest.raises(ValueError):
        index.append(3, 20)
    tindex = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, max_index_size=36)
    tindex.maybe_append(1, 0)
    tindex.maybe_append(2, 1)
    assert tindex.is_full()  # one slot kept for the roll
    tindex.maybe_append(3, 2, skip_full_check=True)
    assert tindex.entries == 3


def test_sanity_check_detects_zeroed_and_torn_files(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes(80))  # zero-filled
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 4096).sanity_check()
    path.write_bytes(struct.pack(">ii", 0, 0) + b"\x00\x01\x02")  # torn entry
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 4096).sanity_check()
    path.write_bytes(struct.pack(">iiii", 0, 0, 3, 5000))  # position beyond the log
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 4096).sanity_check(log_size=4000)
    tpath = tmp_path / "00000000000000000000.timeindex"
    tpath.write_bytes(bytes(120))
    with pytest.raises(CorruptIndexError):
        TimeIndex(tpath, 0, 4096).sanity_check()


def test_reset_empties_and_regrows(tmp_path):
    index = OffsetIndex(tmp_path / "00000000000000000000.index", 0, max_index_size=800)
    for i in range(10):
        index.append(i, i * 10)
    index.trim_to_valid_size()
    assert index.length == 80
    index.reset()
    assert index.entries == 0 and index.length == 800
    assert index.lookup(7) == OffsetPosition(0, 0)


@HYPOTHESIS
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["append", "lookup", "truncate", "release", "reopen"]),
            st.integers(0, 60),
        ),
        max_size=200,
    )
)
def test_offset_index_interleaved_append_lookup_truncate(tmp_path_factory, ops):
    """The in-memory copy used for lookups stays in step with appends and truncations, and
    with the index unmapped (release) or closed and reopened from its file at any point."""
    index = OffsetIndex(tmp_path_factory.mktemp("mix") / "00000000000000000500.index", 500, 8 * 64)
    offsets: list[int] = []
    for op, arg in ops:
        if op == "append" and len(offsets) < 64:
            offset = (offsets[-1] if offsets else 500) + arg + 1
            index.append(offset, len(offsets) * 100)
            offsets.append(offset)
        elif op == "truncate":
            target = 500 + arg * 20
            index.truncate_to(target)
            offsets = [o for o in offsets if o < target]
        elif op == "release":
            index.release()
            assert not index.is_mapped
        elif op == "reopen":
            index.close()  # trimmed to its entries, as on roll or shutdown
            index = OffsetIndex(index.file, 500, 8 * 64)
            assert not index.is_mapped and index.entries == len(offsets)
            index.resize(8 * 64)  # as the active segment's index is re-grown on load
        target = 500 + arg * 20
        i = bisect.bisect_right(offsets, target) - 1
        assert index.lookup(target) == (
            OffsetPosition(500, 0) if i < 0 else OffsetPosition(offsets[i], i * 100)
        )
        assert index.entries == len(offsets)
    index.close()


def test_index_is_not_mapped_until_first_use(tmp_path):
    """Kafka's LazyIndex (KAFKA-7283): opening an index, new or existing, maps nothing (no
    descriptor, no resident page); the first lookup or append maps it, release unmaps it."""
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, 100, 8 * 16)
    assert not index.is_mapped and path.stat().st_size == 8 * 16  # preallocated
    index.append(105, 0)
    index.append(110, 4096)
    assert index.is_mapped
    index.close()
    reopened = OffsetIndex(path, 100, 8 * 16)
    assert not reopened.is_mapped
    assert reopened.entries == 2 and reopened.last_offset == 110  # read without a map
    reopened.sanity_check(log_size=8192)
    assert not reopened.is_mapped
    assert reopened.lookup(111) == OffsetPosition(110, 4096)
    assert reopened.is_mapped
    reopened.release()
    assert not reopened.is_mapped
    assert reopened.lookup(107) == OffsetPosition(105, 0)

    times = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 12 * 16)
    times.maybe_append(1_000, 105)
    times.close()
    lazy_times = TimeIndex(tmp_path / "00000000000000000100.timeindex", 100, 12 * 16)
    assert lazy_times.last_entry == TimestampOffset(1_000, 105) and not lazy_times.is_mapped
    assert lazy_times.lookup(2_000) == TimestampOffset(1_000, 105)
    assert lazy_times.is_mapped


def test_a_direct_entry_is_written_without_a_map_and_reads_back(tmp_path, monkeypatch):
    """The final time-index entry of a closing or rolling segment is written with one pwrite
    when the index is not mapped (mapping and faulting a page in costs milliseconds on a busy
    filesystem): no map is made, the entry is there after the trim and on reload."""
    import mmap as mmap_module

    path = tmp_path / "00000000000000000100.timeindex"
    index = TimeIndex(path, 100, 12 * 16)

    def no_map(*args, **kwargs):
        raise AssertionError("the index was mapped")

    monkeypatch.setattr(mmap_module, "mmap", no_map)
    index.maybe_append(5_000, 107, skip_full_check=True, direct=True)
    assert index.entries == 1 and index.last_entry == TimestampOffset(5_000, 107)
    index.close()
    monkeypatch.undo()
    assert path.stat().st_size == 12
    reopened = TimeIndex(path, 100, 12 * 16)
    assert reopened.entries == 1 and reopened.last_entry == TimestampOffset(5_000, 107)
    assert reopened.lookup(6_000) == TimestampOffset(5_000, 107)
    reopened.close()
