"""Crash recovery: damage a log on disk (cut a segment at a random byte, append garbage, flip a
byte, delete or zero an index), reopen, and check that every batch before the damage is intact,
nothing after it survives and offsets continue. Plus a real SIGKILL of a writing process.

"After the damage" is Kafka's LogLoader rule: when recovery truncates a segment, the later
segments go; a segment cut exactly at a batch boundary needs no truncation and the later
segments stay (an offset gap, as compaction leaves)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.protocol.records import validate_batches
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from tests.storage.conftest import make_batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, segment_index_bytes=4096)
REPO = Path(__file__).resolve().parents[2]


def build_log(dir: Path, sizes: list[int]) -> list[tuple[int, int, bytes, Path, int]]:
    """Append one batch per size; returns (first offset, last offset, bytes, segment file,
    position in that file) per batch, then closes the log cleanly."""
    log = Log(dir, CONFIG)
    written = []
    for i, size in enumerate(sizes):
        batch = make_batch(1 + i % 3, size, fill=0x41 + i % 26)
        info = log.append_as_leader(batch, i // 5)
        segment = log.active_segment
        written.append(
            (
                info.first_offset,
                info.last_offset,
                bytes(batch),
                segment.log.file,
                segment.size - len(batch),
            )
        )
    log.close()
    return written


def reopen(dir: Path, clean: bool = False) -> Log:
    return Log(dir, CONFIG, recovery_point=0, had_clean_shutdown=clean)


def assert_exactly(log: Log, batches) -> None:
    """The log holds exactly ``batches`` (in order, byte for byte) and appends continue."""
    expected_end = batches[-1][1] + 1 if batches else 0
    assert log.log_end_offset == expected_end
    if batches:
        data = b""
        offset = 0
        while offset < expected_end:
            chunk = bytes(log.read(offset, 10**6).records)
            assert chunk, f"nothing readable at {offset}"
            validate_batches(chunk)
            data += chunk
            offset = validate_batches(chunk)[-1].next_offset
        assert data == b"".join(b[2] for b in batches)
    info = log.append_as_leader(make_batch(2), 99)
    assert info.first_offset == expected_end, "offsets continue after the surviving batches"


sizes_strategy = st.lists(st.integers(0, 400), min_size=1, max_size=25)
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(sizes=sizes_strategy, data=st.data())
def test_segment_cut_at_random_byte(sizes, data):
    tmp = Path(tempfile.mkdtemp())
    try:
        dir = tmp / "t-0"
        written = build_log(dir, sizes)
        segment_files = sorted({w[3] for w in written})
        victim = data.draw(st.sampled_from(segment_files))
        size = victim.stat().st_size
        cut = data.draw(st.integers(0, size - 1))
        os.truncate(victim, cut)
        # Kafka's rule: only a segment that recovery must truncate (cut inside a batch) takes
        # the later segments with it; one cut at a batch boundary just ends early (a gap).
        at_boundary = any(w[3] == victim and w[4] == cut for w in written)
        survivors = [
            w
            for w in written
            if w[3] < victim
            or (w[3] == victim and w[4] + len(w[2]) <= cut)
            or (w[3] > victim and at_boundary)
        ]
        log = reopen(dir)
        assert_exactly(log, survivors)
        log.close()
    finally:
        shutil.rmtree(tmp)


@SETTINGS
@given(sizes=sizes_strategy, garbage=st.binary(min_size=1, max_size=300))
def test_garbage_appended_to_active_segment(sizes, garbage):
    tmp = Path(tempfile.mkdtemp())
    try:
        dir = tmp / "t-0"
        written = build_log(dir, sizes)
        with open(written[-1][3], "ab") as f:
            f.write(garbage)
        log = reopen(dir)
        assert_exactly(log, written)
        log.close()
    finally:
        shutil.rmtree(tmp)


@SETTINGS
@given(sizes=sizes_strategy, data=st.data())
def test_flipped_byte_truncates_from_that_batch(sizes, data):
    tmp = Path(tempfile.mkdtemp())
    try:
        dir = tmp / "t-0"
        written = build_log(dir, sizes)
        victim_batch = data.draw(st.integers(0, len(written) - 1))
        _, _, raw, file, position = written[victim_batch]
        # A byte covered by the CRC (attributes onwards) or the length/magic fields.
        at = position + data.draw(st.sampled_from([8, 16]) | st.integers(21, len(raw) - 1))
        with open(file, "r+b") as f:
            f.seek(at)
            old = f.read(1)[0]
            f.seek(at)
            f.write(bytes([old ^ 0xFF]))
        log = reopen(dir)
        assert_exactly(log, written[:victim_batch])
        log.close()
    finally:
        shutil.rmtree(tmp)


@SETTINGS
@given(
    sizes=sizes_strategy,
    data=st.data(),
    damage=st.sampled_from(["delete", "zero", "truncate-half"]),
    which=st.sampled_from([".index", ".timeindex"]),
    clean=st.booleans(),
)
def test_damaged_index_is_rebuilt(sizes, data, damage, which, clean):
    tmp = Path(tempfile.mkdtemp())
    try:
        dir = tmp / "t-0"
        written = build_log(dir, sizes)
        segment_files = sorted({w[3] for w in written})
        victim = data.draw(st.sampled_from(segment_files)).with_suffix(which)
        if damage == "delete":
            victim.unlink()
        elif damage == "zero":
            victim.write_bytes(bytes(victim.stat().st_size))
        else:
            os.truncate(victim, victim.stat().st_size // 2 + 3)
        log = reopen(dir, clean=clean)
        if damage == "delete" or (damage == "truncate-half" and victim.stat().st_size % 4):
            assert log.recovered_segments >= 1
        assert_exactly(log, written)
        # Every lookup through the rebuilt indexes lands on the right batch.
        for first, last, raw, _, _ in written:
            for offset in (first, last):
                assert bytes(log.read(offset, 1).records) == raw
        log.close()
    finally:
        shutil.rmtree(tmp)


def test_torn_tail_in_earlier_segment_drops_later_segments(tmp_path):
    dir = tmp_path / "t-0"
    written = build_log(dir, [300] * 20)
    segment_files = sorted({w[3] for w in written})
    assert len(segment_files) >= 3
    os.truncate(segment_files[1], segment_files[1].stat().st_size - 7)
    log = reopen(dir)
    survivors = [w for w in written if w[3] == segment_files[0] or (w[3] == segment_files[1])][:-1]
    assert_exactly(log, survivors)
    assert not segment_files[2].exists()
    log.close()


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from kafkalite.protocol.records import Record, build_batch
    from kafkalite.storage.config import LogConfig
    from kafkalite.storage.log import Log

    log = Log({dir!r}, LogConfig(segment_bytes=4 * 1024 * 1024))
    i = 0
    while True:
        batch = bytearray(build_batch([Record(value=bytes([i % 251]) * 200_000)], base_timestamp=i))
        info = log.append_as_leader(batch, 0)
        sys.stdout.write(f"{{info.last_offset}}\\n")
        sys.stdout.flush()
        i += 1
    """
)


def test_sigkill_mid_write_keeps_every_complete_batch(tmp_path):
    dir = tmp_path / "t-0"
    script = tmp_path / "writer.py"
    script.write_text(CHILD.format(repo=str(REPO), dir=str(dir)))
    child = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        acked = -1
        deadline = time.monotonic() + 60
        while acked < 40:
            line = child.stdout.readline()
            assert line, f"writer died early (exit code {child.poll()})"
            acked = int(line)
            assert time.monotonic() < deadline, "writer too slow"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
    log = Log(
        dir, LogConfig(segment_bytes=4 * 1024 * 1024), recovery_point=0, had_clean_shutdown=False
    )
    assert log.log_end_offset >= acked + 1, "an acknowledged batch was lost"
    offset = 0
    while offset < log.log_end_offset:
        chunk = bytes(log.read(offset, 1).records)
        (header,) = validate_batches(chunk)
        assert header.base_offset == offset
        assert (
            chunk[-2] == offset % 251
        )  # last value byte (before the header count) of batch `offset`
        offset = header.next_offset
    assert log.append_as_leader(make_batch(1), 0).first_offset == offset
    log.close()
