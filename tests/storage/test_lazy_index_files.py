"""A new log is its directory and an empty ``.log``; its indexes are created by their first
entry, or when a segment holding data is closed, rolled or recovered (Kafka's LazyIndex). The
loader accepts what Kafka's accepts: a missing offset index of an empty segment is an empty
index, of a segment holding data it is rebuilt; a missing time index is an empty one.

The property: a log created, written (batches of any size, rolls, index entries or none),
then closed or killed at any point, loads back to the same records, offsets, lookups by
offset and by time; after a clean close nothing is recovered. A kill is the directory as it
is at that moment (everything written is in the page cache: a process killed with -9 leaves
exactly that), copied aside and loaded as after a crash."""

from __future__ import annotations

import os
import shutil

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from tests.storage.conftest import make_batch

CONFIG = LogConfig(segment_bytes=2048, index_interval_bytes=300, segment_index_bytes=8 * 64)

# (records, value size, timestamp step) per append; None: roll; "flush": fsync (moves the
# recovery point, so a kill after it leaves a segment below it)
_steps = st.lists(
    st.one_of(
        st.tuples(st.integers(1, 4), st.integers(0, 400), st.integers(-5, 50)),
        st.just("roll"),
        st.just("flush"),
    ),
    max_size=14,
)


def _contents(log: Log) -> bytes:
    return b"".join(
        bytes(segment.log.slice(0, segment.size)) for segment in log.segments if segment.size
    )


def _check(log: Log, expected: bytes, end: int, timestamps: list[tuple[int, int]]) -> None:
    assert log.log_end_offset == end
    assert _contents(log) == expected
    for offset in range(end):
        info = log.read(offset, 1, min_one_message=True)
        first = bytes(info.records)[:8]
        assert int.from_bytes(first, "big") <= offset  # the batch holding it (or before)
    for timestamp, offset in timestamps:
        found = log.offset_for_timestamp(timestamp)
        assert found is not None and found[0] <= offset  # (offset, timestamp)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_steps, kill_at=st.integers(0, 15), clean=st.booleans())
def test_a_log_closed_or_killed_at_any_point_loads_back_the_same_records(
    tmp_path_factory, steps, kill_at, clean
):
    root = tmp_path_factory.mktemp("lazy")
    log = Log(root / "t-0", CONFIG)
    assert os.listdir(root / "t-0") == ["00000000000000000000.log"]
    expected = bytearray()
    timestamps: list[tuple[int, int]] = []
    base_ts = 1_700_000_000_000
    snapshot = None
    for i, step in enumerate(steps):
        if step == "roll":
            log.roll()
        elif step == "flush":
            log.flush()
        else:
            records, size, ts_step = step
            base_ts += ts_step
            batch = make_batch(records, size, max(base_ts, 0))
            info = log.append_as_leader(batch, 0)
            expected += batch
            timestamps.append((max(base_ts, 0), info.first_offset))
        if i + 1 == kill_at:
            snapshot = (root / "killed", bytes(expected), log.log_end_offset, list(timestamps))
            shutil.copytree(root / "t-0", root / "killed" / "t-0")
    end = log.log_end_offset
    if snapshot is None and not clean:
        snapshot = (root / "killed", bytes(expected), end, list(timestamps))
        shutil.copytree(root / "t-0", root / "killed" / "t-0")
    log.close()
    reloaded = Log(root / "t-0", CONFIG, had_clean_shutdown=True, recovery_point=end)
    assert reloaded.recovered_segments == 0
    _check(reloaded, bytes(expected), end, timestamps)
    reloaded.close()
    if snapshot is not None:
        path, data, killed_end, killed_timestamps = snapshot
        crashed = Log(path / "t-0", CONFIG, had_clean_shutdown=False)
        assert crashed.truncated_bytes_on_load == 0
        _check(crashed, data, killed_end, killed_timestamps)
        crashed.close()
        again = Log(path / "t-0", CONFIG, had_clean_shutdown=True, recovery_point=killed_end)
        assert again.recovered_segments == 0
        _check(again, data, killed_end, killed_timestamps)
        again.close()


def test_a_new_log_creates_one_file_and_a_written_one_keeps_its_indexes(tmp_path):
    log = Log(tmp_path / "t-0", CONFIG)
    assert os.listdir(tmp_path / "t-0") == ["00000000000000000000.log"]
    log.close()
    assert os.listdir(tmp_path / "t-0") == ["00000000000000000000.log"]
    log = Log(tmp_path / "t-0", CONFIG, had_clean_shutdown=True)
    log.append_as_leader(make_batch(1), 0)  # no index entry: less than index.interval.bytes
    log.close()
    assert sorted(os.listdir(tmp_path / "t-0")) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
    ]
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.index") == 0
    assert os.path.getsize(tmp_path / "t-0" / "00000000000000000000.timeindex") == 12
    log = Log(tmp_path / "t-0", CONFIG, had_clean_shutdown=True, recovery_point=1)
    assert log.recovered_segments == 0 and log.log_end_offset == 1
    log.close()


def test_a_missing_offset_index_of_a_segment_holding_data_is_rebuilt(tmp_path):
    """Kafka's LogLoader: no offset index for a segment with data -> recover the segment."""
    log = Log(tmp_path / "t-0", CONFIG)
    for _ in range(6):
        log.append_as_leader(make_batch(2, 200), 0)
    log.close()
    os.unlink(tmp_path / "t-0" / "00000000000000000000.index")
    log = Log(tmp_path / "t-0", CONFIG, had_clean_shutdown=True, recovery_point=12)
    assert log.recovered_segments == 1 and log.log_end_offset == 12
    assert log.active_segment.offset_index.entries > 0
    log.close()
    assert os.path.exists(tmp_path / "t-0" / "00000000000000000000.index")


def test_a_missing_time_index_is_an_empty_one(tmp_path):
    """Kafka's LogSegment.sanityCheck: a missing time index is made empty, nothing is
    rebuilt; here a segment whose batches carry no timestamp needs no entry at all."""
    log = Log(tmp_path / "t-0", CONFIG)
    log.append_as_leader(make_batch(1, timestamp=-1), 0)
    log.close()
    names = os.listdir(tmp_path / "t-0")
    assert "00000000000000000000.timeindex" not in names
    log = Log(tmp_path / "t-0", CONFIG, had_clean_shutdown=True, recovery_point=1)
    assert log.recovered_segments == 0 and log.log_end_offset == 1
    log.close()


def test_a_clean_load_reads_no_closed_segment(tmp_path, monkeypatch):
    """After a clean shutdown a segment's max timestamp is its time index's last entry (as
    Kafka's): no batches of a closed segment are read; lookups by time still find them."""
    from kafkalite.storage.file_records import FileRecords

    log = Log(tmp_path / "t-0", CONFIG)
    for i in range(12):
        log.append_as_leader(make_batch(2, 300, 1_700_000_000_000 + i), 0)
    assert log.number_of_segments > 2
    log.close()

    def no_scan(self, position):
        raise AssertionError(f"{self.file} read at load")

    monkeypatch.setattr(FileRecords, "largest_timestamp_after", no_scan)
    log = Log(tmp_path / "t-0", CONFIG, had_clean_shutdown=True, recovery_point=24)
    assert log.recovered_segments == 0 and log.log_end_offset == 24
    last_batch = log.segments[1].base_offset // 2 - 1  # of the first segment; 2 records each
    assert log.segments[0].largest_timestamp == 1_700_000_000_000 + last_batch + 1
    assert log.offset_for_timestamp(1_700_000_000_000 + 5)[0] == 9  # batch 4, record 1
    log.close()
