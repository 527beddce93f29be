"""Corruption in closed segments and indexes: the fetch path's CRC check (once per batch), the
background verifier, the offline `kafkalite storage verify` check."""

from __future__ import annotations

import asyncio
import os
import struct
import subprocess
import sys
from pathlib import Path
from unittest.mock import patch

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

import kafkalite.storage.segment as segment_module
from kafkalite.protocol.errors import CorruptRecordError
from kafkalite.protocol.records import complete_batches_length, iter_batch_headers
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from kafkalite.storage.throttler import Throttler
from kafkalite.storage.verifier import (
    FETCH_STATS,
    SegmentVerifier,
    VerifiedRanges,
    verify_path,
    verify_segment_files,
)
from tests.storage.conftest import make_batch

REPO_ROOT = Path(__file__).resolve().parents[2]

BATCHES_PER_SEGMENT = 5


def build_log(dir, segments=3, index_interval_bytes=0):
    """A log of ``segments`` closed-and-reopened segments of 5 batches of 10 records each,
    closed cleanly: reopened, nothing is verified yet (as after a restart)."""
    config = LogConfig(
        segment_bytes=BATCHES_PER_SEGMENT * 200, index_interval_bytes=index_interval_bytes
    )
    log = Log(dir, config)
    for i in range(segments * BATCHES_PER_SEGMENT):
        log.append_as_leader(make_batch(10, value_size=5, fill=0x61 + i % 20), 0)
    assert log.number_of_segments >= segments
    log.close()
    return config


def batch_positions(segment_file):
    data = segment_file.read_bytes()
    return [(pos, header) for pos, header in iter_batch_headers(data)]


def flip_payload_byte(segment_file, batch_number):
    pos, header = batch_positions(segment_file)[batch_number]
    data = bytearray(segment_file.read_bytes())
    data[pos + header.batch_length + 12 - 3] ^= 0xFF  # inside the last record's value
    segment_file.write_bytes(data)
    return pos, header


def first_segment(dir):
    return sorted(dir.glob("*.log"))[0]


def offsets_in(records):
    return [h.base_offset for _, h in iter_batch_headers(bytes(records))]


def test_a_fetch_stops_before_a_corrupt_batch_and_refuses_it(tmp_path):
    dir = tmp_path / "t-0"
    config = build_log(dir)
    pos, header = flip_payload_byte(first_segment(dir), 2)
    log = Log(dir, config, had_clean_shutdown=True)
    before = FETCH_STATS.corrupt_batches_refused
    with capture_logs() as logs:
        read = log.read(0, 1 << 20)
        assert offsets_in(read.records) == [0, 10], "only the batches before the bad one"
        with pytest.raises(CorruptRecordError) as refused:
            log.read(header.base_offset, 1 << 20)
        assert refused.value.error_code.name == "CORRUPT_MESSAGE"
    [error] = [e for e in logs if e["event"] == "corrupt batch refused to a fetch"]
    assert error["position"] == pos and "crc" in error["problem"]
    assert FETCH_STATS.corrupt_batches_refused > before
    # the segments after it still serve
    later = log.segments[1].base_offset
    assert offsets_in(log.read(later, 1 << 20).records)[0] == later
    log.close()


def test_each_batch_is_checked_once(tmp_path, monkeypatch):
    dir = tmp_path / "t-0"
    config = build_log(dir, segments=1)
    log = Log(dir, config, had_clean_shutdown=True)
    checked = []
    real = segment_module.check_batches

    def counting(buf, start, end, limit, *rest):
        checked.append((start, end))
        return real(buf, start, end, limit, *rest)

    monkeypatch.setattr(segment_module, "check_batches", counting)
    for _ in range(3):
        assert len(offsets_in(log.read(0, 1 << 20).records)) == BATCHES_PER_SEGMENT
    assert len(checked) == 1, "later fetches of verified bytes do not check again"
    mid = log.read(20, 1 << 20)  # inside the verified range
    assert offsets_in(mid.records)[0] == 20 and len(checked) == 1
    log.append_as_leader(make_batch(3), 0)  # checked in memory before the append
    assert offsets_in(log.read(50, 1 << 20).records) == [50] and len(checked) == 1
    log.close()


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["mark", "forget", "check"]),
            st.integers(0, 60),
            st.integers(0, 60),
        ),
        max_size=40,
    )
)
def test_verified_ranges_never_claim_an_unchecked_byte(ops):
    """Oracle: the set of bytes marked and not forgotten since. ``covered`` may say no to a
    checked range (it re-checks), never yes to an unchecked one."""
    ranges = VerifiedRanges()
    checked: set[int] = set()
    for op, a, b in ops:
        start, end = min(a, b), max(a, b)
        if op == "mark":
            begin = ranges.unverified_start(start)
            if begin > start:  # already verified up to begin
                assert all(i in checked for i in range(start, begin))
            ranges.mark(begin, end)
            checked.update(range(begin, end))
        elif op == "forget":
            ranges.forget_from(start)
            checked = {i for i in checked if i < start}
        elif ranges.covered(start, end):
            assert all(i in checked for i in range(start, end))
        # fewer runs than MAX_RUNS: exact, nothing verified is ever checked again
        first_unchecked = next(i for i in range(start, 10_000) if i not in checked)
        assert ranges.unverified_start(start) == first_unchecked
        if start < end:
            assert ranges.covered(start, end) == all(i in checked for i in range(start, end))
        if start not in checked and any(i > start and i in checked for i in range(61)):
            assert ranges.next_verified(start) == next(i for i in range(start, 61) if i in checked)


def test_verified_ranges_keep_at_most_max_runs_and_merge_into_the_prefix():
    ranges = VerifiedRanges()
    limit = VerifiedRanges.MAX_RUNS
    for i in range(limit + 5):  # disjoint runs [10i + 5, 10i + 8), the last the longest
        ranges.mark(10 * i + 5, 10 * i + (9 if i == limit + 4 else 8))
    assert len(ranges._starts) == limit
    last = 10 * (limit + 4)
    assert ranges.covered(last + 5, last + 9) and ranges.unverified_start(last + 5) == last + 9
    assert not ranges.covered(0, 1) and ranges.next_verified(0) >= 5
    ranges.mark(0, 10 * limit)  # reaches the runs below it: they join the prefix
    assert ranges.prefix == 10 * limit and all(s > ranges.prefix for s in ranges._starts)
    ranges.forget_from(last + 7)  # cuts the run it falls in
    assert ranges.covered(last + 5, last + 7) and not ranges.covered(last + 5, last + 8)


def test_verify_segment_files_finds_batch_and_index_damage(tmp_path):
    dir = tmp_path / "t-0"
    build_log(dir, segments=2)
    segment = first_segment(dir)
    assert verify_segment_files(segment, 0) == []
    assert list(verify_path(tmp_path)) == [] and list(verify_path(dir)) == []

    index = segment.with_suffix(".index")
    entries = bytearray(index.read_bytes())
    struct.pack_into(">i", entries, 0, 15)  # entry 0 names offset 15 at a batch ending at 19
    index.write_bytes(entries)
    [finding] = verify_segment_files(segment, 0)
    assert finding.kind == "bad-index-entry" and finding.offset == 15 and finding.is_index

    pos, _ = flip_payload_byte(segment, 3)
    findings = verify_segment_files(segment, 0)
    assert [f.kind for f in findings if not f.is_index] == ["corrupt-batch"]
    bad = [f for f in findings if not f.is_index][0]
    assert bad.position == pos and "crc" in bad.detail and str(segment) in bad.line()


async def test_the_background_verifier_rebuilds_a_wrong_index_and_reports_bad_batches(tmp_path):
    dir = tmp_path / "t-0"
    config = build_log(dir)
    segments = sorted(dir.glob("*.log"))
    index = segments[0].with_suffix(".index")
    entries = bytearray(index.read_bytes())
    struct.pack_into(">i", entries, 0, 15)
    index.write_bytes(entries)
    bad_pos, bad_header = flip_payload_byte(segments[1], 1)
    log = Log(dir, config, had_clean_shutdown=True)
    verifier = SegmentVerifier(lambda: [log], bytes_per_second=10 << 20, pass_interval_s=3600)
    with capture_logs() as logs:
        verified = await asyncio.wait_for(verifier.verify_once(), 30)
    assert verified == log.number_of_segments - 1, "closed segments only"
    assert verifier.stats.indexes_rebuilt == 1 and verifier.stats.corrupt_batches == 1
    assert verify_segment_files(segments[0], 0) == [], "the index was rebuilt from the log"
    kinds = {e["kind"] for e in logs if e["event"] == "segment verification found corruption"}
    assert kinds == {"bad-index-entry", "corrupt-batch"}
    assert any(e["event"] == "index rebuilt from its segment" for e in logs)
    with pytest.raises(CorruptRecordError):
        log.read(bad_header.base_offset, 1 << 20)
    assert await verifier.verify_once() == 0, "each segment is verified once"
    log.close()


def test_storage_verify_command(tmp_path):
    dir = tmp_path / "logs" / "t-0"
    build_log(dir, segments=2)

    def run(path):
        return subprocess.run(
            [sys.executable, "-m", "kafkalite", "storage", "verify", str(path)],
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
            timeout=60,
        )

    clean = run(tmp_path / "logs")
    assert clean.returncode == 0 and clean.stdout == "", clean.stderr
    segment = first_segment(dir)
    pos, _ = flip_payload_byte(segment, 2)
    found = run(tmp_path / "logs")
    assert found.returncode == 1, found.stderr
    [line] = found.stdout.splitlines()
    assert line.startswith(f"{segment}: corrupt-batch at position {pos}")
    assert run(segment).returncode == 1
    missing = run(tmp_path / "nothing-here")
    assert missing.returncode == 2 and "cannot check" in missing.stderr


async def test_stopping_the_verifier_ends_a_throttled_read(tmp_path, monkeypatch):
    """A shutdown must not wait for a throttled verification (the worker thread would hold up
    the process's exit for as long as the segment takes at the configured rate)."""
    import kafkalite.storage.verifier as verifier_module

    dir = tmp_path / "t-0"
    config = build_log(dir)
    monkeypatch.setattr(verifier_module, "READ_CHUNK", 256)
    log = Log(dir, config, had_clean_shutdown=True)
    verifier = SegmentVerifier(lambda: [log], bytes_per_second=64, pass_interval_s=3600)
    verifier.throttler = Throttler(64, check_interval_ms=0)  # 4 s per 256-byte chunk
    throttled = asyncio.Event()
    real = verifier.throttler.maybe_throttle
    loop = asyncio.get_running_loop()

    def observe(observed):
        delay = real(observed)
        if delay > 1:
            loop.call_soon_threadsafe(throttled.set)
        return delay

    verifier.throttler.maybe_throttle = observe
    task = asyncio.create_task(verifier.verify_once())
    await asyncio.wait_for(throttled.wait(), 30)
    verifier.stop()
    assert await asyncio.wait_for(task, 30) == 0
    assert verifier.stats.segments_verified == 0
    log.close()


@pytest.mark.parametrize("chunk", [64, 200, 1000])
def test_verification_does_not_depend_on_the_read_chunk(tmp_path, monkeypatch, chunk):
    """Batches larger than a chunk, and batches cut by a chunk's end, are read whole."""
    import kafkalite.storage.verifier as verifier_module

    dir = tmp_path / "t-0"
    build_log(dir, segments=1)
    segment = first_segment(dir)
    monkeypatch.setattr(verifier_module, "READ_CHUNK", chunk)
    assert verify_segment_files(segment, 0) == []
    pos, _ = flip_payload_byte(segment, 3)
    [finding] = [f for f in verify_segment_files(segment, 0) if not f.is_index]
    assert finding.kind == "corrupt-batch" and finding.position == pos


@pytest.mark.parametrize(
    ("suffix", "entry_size", "kind"),
    [(".index", 8, "bad-index-entry"), (".timeindex", 12, "bad-time-index-entry")],
)
def test_an_index_cut_mid_entry_is_a_finding(tmp_path, suffix, entry_size, kind):
    """A closed index truncated inside an entry lost that entry silently: `storage verify`
    said nothing. It is a finding (the command exits 1), and the background verifier rebuilds
    the index."""
    dir = tmp_path / "logs" / "t-0"
    build_log(dir, segments=2)
    segment = first_segment(dir)
    index = segment.with_suffix(suffix)
    data = index.read_bytes()
    assert len(data) >= entry_size and len(data) % entry_size == 0
    cut_at = len(data) - entry_size + 3  # the last entry keeps 3 of its bytes
    index.write_bytes(data[:cut_at])

    [finding] = verify_segment_files(segment, 0)
    assert finding.kind == kind and finding.is_index
    assert finding.file == str(index) and finding.position == len(data) - entry_size
    assert "not a whole number" in finding.detail
    [line] = [f.line() for f in verify_path(tmp_path / "logs")]
    assert line.startswith(f"{index}: {kind} at position {len(data) - entry_size}")
    found = subprocess.run(
        [sys.executable, "-m", "kafkalite", "storage", "verify", str(tmp_path / "logs")],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=60,
    )
    assert found.returncode == 1, (found.stdout, found.stderr)
    assert found.stdout.splitlines() == [line]


async def test_the_background_verifier_rebuilds_an_index_cut_mid_entry(tmp_path):
    dir = tmp_path / "t-0"
    config = build_log(dir, segments=2)
    segment = first_segment(dir)
    log = Log(dir, config, had_clean_shutdown=True)
    index = segment.with_suffix(".index")
    data = index.read_bytes()
    index.write_bytes(data[:-5])  # cut while the broker runs (the load checked it whole)
    verifier = SegmentVerifier(lambda: [log], bytes_per_second=10 << 20, pass_interval_s=3600)
    await asyncio.wait_for(verifier.verify_once(), 30)
    assert verifier.stats.index_findings == 1 and verifier.stats.indexes_rebuilt == 1
    assert index.stat().st_size % 8 == 0 and verify_segment_files(segment, 0) == []
    log.close()


# ----------------------------------------------------------------- closed segments (item 8)


def flip_in_place(segment_file, pos, header):
    """One byte of the batch's last record value, changed in place (the broker's descriptor
    and page cache see it, as a stray write or a tool would make it)."""
    at = pos + header.batch_length + 12 - 3
    fd = os.open(segment_file, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([os.pread(fd, 1, at)[0] ^ 0xFF]), at)
    finally:
        os.close(fd)


def test_damage_to_a_segment_closed_by_this_process_is_never_served(tmp_path):
    """Before: batches this process appended counted as verified for good, so a byte altered
    in a rolled segment was served until a restart. A closed segment's batches are checked on
    their first read after the close."""
    dir = tmp_path / "t-0"
    log = Log(dir, LogConfig(segment_bytes=BATCHES_PER_SEGMENT * 200))
    for i in range(3 * BATCHES_PER_SEGMENT):
        log.append_as_leader(make_batch(10, value_size=5, fill=0x61 + i), 0)
        if log.number_of_segments == 1:
            assert offsets_in(log.read(0, 1 << 20).records)[0] == 0, "read while active"
    assert log.number_of_segments >= 3
    segment_file = log.segments[0].log.file
    pos, bad = batch_positions(segment_file)[2]
    flip_in_place(segment_file, pos, bad)
    with capture_logs() as logs:
        assert offsets_in(log.read(0, 1 << 20).records) == [0, 10]
        with pytest.raises(CorruptRecordError):
            log.read(bad.base_offset, 1 << 20)
    assert any(e["event"] == "corrupt batch refused to a fetch" for e in logs)
    log.close()


def test_damage_after_recovery_of_a_closed_segment_is_never_served(tmp_path):
    """Recovery's check of a closed segment at load does not count either: the bytes may be
    damaged after it, while the broker runs."""
    dir = tmp_path / "t-0"
    config = build_log(dir)
    log = Log(dir, config, had_clean_shutdown=False, recovery_point=0)
    assert log.recovered_segments >= 3
    segment_file = first_segment(dir)
    pos, bad = batch_positions(segment_file)[1]
    flip_in_place(segment_file, pos, bad)
    with pytest.raises(CorruptRecordError):
        log.read(bad.base_offset, 1 << 20)
    log.close()


@pytest.mark.parametrize(
    ("slice_bytes", "slice_batches", "first_read_batches"),
    [(1000, 1000, 5), (1 << 20, 3, 3)],  # batches of 181 bytes: 5 fit in 1,000
)
def test_a_read_checks_at_most_a_slice_and_each_byte_once(
    tmp_path, monkeypatch, slice_bytes, slice_batches, first_read_batches
):
    """A first read of a large closed region is cut after VERIFY_SLICE_BYTES or
    VERIFY_SLICE_BATCHES of checks (at a whole batch); the next read goes on from there;
    nothing is checked twice."""
    monkeypatch.setattr(segment_module, "VERIFY_SLICE_BYTES", slice_bytes, raising=False)
    monkeypatch.setattr(segment_module, "VERIFY_SLICE_BATCHES", slice_batches, raising=False)
    dir = tmp_path / "t-0"
    log = Log(dir, LogConfig(segment_bytes=1 << 20))
    for i in range(40):
        log.append_as_leader(make_batch(10, value_size=5, fill=0x61 + i % 20), 0)
    log.roll()
    size = log.segments[0].size
    checked = []
    real = segment_module.check_batches

    def counting(buf, start, end, limit, *rest):
        result = real(buf, start, end, limit, *rest)
        checked.append(result[0] - start)
        return result

    monkeypatch.setattr(segment_module, "check_batches", counting)
    first = log.read(0, 1 << 20)
    got = offsets_in(first.records)
    assert size == 40 * 181
    assert len(first.records) == first_read_batches * 181, "cut at the slice, a whole batch"
    offset = 0
    while offset < log.log_end_offset:
        offsets = offsets_in(log.read(offset, 1 << 20).records)
        assert offsets and offsets[0] == offset
        offset = offsets[-1] + 10
    assert sum(checked) == size, "every byte checked once"
    assert got == list(range(0, len(got) * 10, 10))
    log.close()


@settings(max_examples=60, deadline=None)
# Three batches of 75 bytes: a read from 0 (checks [0, 75)), one from the third batch (checks
# [150, 225)), then one of the whole segment checked [75, 225) again: the verified bytes beyond
# the prefix were not skipped.
@example(
    sizes=[1, 1, 1],
    damaged=set(),
    reads=[(0, 1), (2, 1), (0, 225)],
    slice_bytes=200,
    slice_batches=3,
    read_while_active=False,
)
@given(
    sizes=st.lists(st.integers(1, 40), min_size=1, max_size=25),
    damaged=st.sets(st.integers(0, 24), max_size=4),
    reads=st.lists(st.tuples(st.integers(0, 24), st.integers(1, 4000)), min_size=1, max_size=25),
    slice_bytes=st.sampled_from([1, 200, 1000, 1 << 20]),
    slice_batches=st.sampled_from([1, 3, 1000]),
    read_while_active=st.booleans(),
)
def test_a_closed_segment_never_serves_a_damaged_batch_and_checks_each_good_byte_once(
    tmp_path_factory, sizes, damaged, reads, slice_bytes, slice_batches, read_while_active
):
    """Oracle: the batches damaged after the roll. Any read of the closed segment returns only
    undamaged whole batches from its start offset (a partial last batch only when cut by the
    read's size), or CORRUPT_MESSAGE exactly when its first batch is damaged; the good bytes
    checked add up to at most the segment (each once)."""
    dir = tmp_path_factory.mktemp("prop") / "t-0"
    log = Log(dir, LogConfig(segment_bytes=1 << 20))
    for i, records in enumerate(sizes):
        log.append_as_leader(make_batch(records, value_size=7, fill=0x41 + i % 50), 0)
    if read_while_active:
        log.read(0, 1 << 20)
    log.roll()
    segment = log.segments[0]
    layout = batch_positions(segment.log.file)
    damaged = {i for i in damaged if i < len(layout)}
    for i in damaged:
        flip_in_place(segment.log.file, *layout[i])
    bad_offsets = {layout[i][1].base_offset for i in damaged}
    checked = []
    real = segment_module.check_batches

    def counting(buf, start, end, limit, *rest):
        result = real(buf, start, end, limit, *rest)
        checked.append(result[0] - start)
        return result

    with (
        patch.object(segment_module, "VERIFY_SLICE_BYTES", slice_bytes, create=True),
        patch.object(segment_module, "VERIFY_SLICE_BATCHES", slice_batches, create=True),
        patch.object(segment_module, "check_batches", counting),
    ):
        for batch_number, max_bytes in reads:
            if batch_number >= len(layout):
                continue
            start = layout[batch_number][1].base_offset
            if start in bad_offsets:
                with pytest.raises(CorruptRecordError):
                    log.read(start, max_bytes)
                continue
            records = bytes(log.read(start, max_bytes).records)
            assert records, "a good first batch is always served"
            whole = [h for _, h in iter_batch_headers(records[: complete_batches_length(records)])]
            assert whole[0].base_offset == start
            assert not {h.base_offset for h in whole} & bad_offsets
            used = sum(h.batch_length + 12 for h in whole)
            assert used == len(records) or len(records) == max_bytes
    assert sum(checked) <= segment.size
    log.close()


async def test_segments_the_background_verifier_found_good_cost_their_readers_no_check(
    tmp_path, monkeypatch
):
    """The background verifier checks closed segments off the loop; what it found good the
    fetch path does not check again (up to a bad batch, which reads still refuse)."""
    dir = tmp_path / "t-0"
    config = build_log(dir)
    bad_pos, bad_header = flip_payload_byte(sorted(dir.glob("*.log"))[1], 2)
    log = Log(dir, config, had_clean_shutdown=True)
    verifier = SegmentVerifier(lambda: [log], bytes_per_second=10 << 20, pass_interval_s=3600)
    await asyncio.wait_for(verifier.verify_once(), 30)
    assert verifier.stats.corrupt_batches == 1
    checked = []
    real = segment_module.check_batches

    def counting(buf, start, end, limit, *rest):
        checked.append(start)
        return real(buf, start, end, limit, *rest)

    monkeypatch.setattr(segment_module, "check_batches", counting)
    first, second = log.segments[0], log.segments[1]
    assert len(offsets_in(log.read(first.base_offset, 1 << 20).records)) == BATCHES_PER_SEGMENT
    before_bad = offsets_in(log.read(second.base_offset, 1 << 20).records)
    assert before_bad == [second.base_offset, second.base_offset + 10]
    # what the verifier found good is not checked again; the read stops before the bad batch
    # by checking it (the segment's map starts at 0: positions are the file's)
    assert checked == [bad_pos]
    with pytest.raises(CorruptRecordError):
        log.read(bad_header.base_offset, 1 << 20)
    assert checked == [bad_pos, bad_pos]
    log.close()
