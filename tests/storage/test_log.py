"""Log against an in-memory model (a list of batches) under hypothesis-generated sequences of
append, read, roll, truncate, retention, delete-records and close/reopen; plus focused tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkalite.protocol.errors import (
    CorruptRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
)
from kafkalite.protocol.records import Record, build_batch, iter_batch_headers
from kafkalite.storage.config import LogConfig
from kafkalite.storage.errors import UnexpectedAppendOffsetError
from kafkalite.storage.log import MAX_TIMESTAMP, Log
from tests.storage.conftest import FakeClock, make_batch


@dataclass
class ModelBatch:
    base_offset: int
    last_offset: int
    data: bytes
    timestamp: int  # of the first record; record i has timestamp + i
    epoch: int


class LogMachine(RuleBasedStateMachine):
    """The model: the list of batches the log must hold, with their exact bytes."""

    @initialize(
        segment_bytes=st.sampled_from([1000, 2000, 10_000]),
        index_bytes=st.sampled_from([48, 96, 4096]),
        interval=st.sampled_from([0, 100, 1000]),
    )
    def setup(self, segment_bytes, index_bytes, interval):
        self.tmp = Path(tempfile.mkdtemp(prefix="logsm-"))
        self.clock = FakeClock()
        self.config = LogConfig(
            segment_bytes=segment_bytes,
            segment_index_bytes=index_bytes,
            index_interval_bytes=interval,
            retention_ms=-1,
        )
        self.log = Log(self.tmp / "topic-0", self.config, time_ms=self.clock)
        self.batches: list[ModelBatch] = []
        self.start = 0
        self.end = 0
        self.epoch = 0
        self.timestamp = 1_000

    def teardown(self):
        if hasattr(self, "log"):
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ------------------------------------------------------------------ helpers

    def index_of(self, offset: int) -> int:
        for i, batch in enumerate(self.batches):
            if batch.last_offset >= offset:
                return i
        raise AssertionError(f"no batch holds {offset}")

    # ------------------------------------------------------------------ rules

    @rule(records=st.integers(1, 5), value_size=st.integers(0, 150), bump_epoch=st.booleans())
    def append(self, records, value_size, bump_epoch):
        if bump_epoch:
            self.epoch += 1
        self.timestamp += 7
        batch = make_batch(records, value_size, self.timestamp)
        info = self.log.append_as_leader(batch, self.epoch)
        assert (info.first_offset, info.last_offset) == (self.end, self.end + records - 1)
        assert info.record_count == records and info.batch_count == 1
        self.batches.append(
            ModelBatch(self.end, self.end + records - 1, bytes(batch), self.timestamp, self.epoch)
        )
        self.end += records
        self.log.high_watermark = self.end

    @rule(data=st.data(), max_bytes=st.integers(0, 3000), min_one=st.booleans())
    def read(self, data, max_bytes, min_one):
        offset = data.draw(st.integers(self.start, self.end))
        info = self.log.read(offset, max_bytes, min_one_message=min_one)
        got = bytes(info.records)
        assert info.records.view().tobytes() == got
        if offset == self.end:
            assert got == b""
            return
        i = self.index_of(offset)
        tail = b"".join(b.data for b in self.batches[i:])
        assert got == tail[: len(got)], "a read must start at the batch holding the offset"
        first = len(self.batches[i].data)
        limit = max(max_bytes, first) if min_one else max_bytes
        assert len(got) <= limit
        if min_one:
            assert len(got) >= first
        if len(got) < min(limit, len(tail)):
            # Short only at the end of a segment.
            boundaries = {s.base_offset for s in self.log.segments}
            consumed, j = 0, i
            while consumed < len(got):
                consumed += len(self.batches[j].data)
                j += 1
            assert consumed == len(got) and (
                j == len(self.batches) or self.batches[j].base_offset in boundaries
            )

    @rule(data=st.data())
    def read_below_high_watermark(self, data):
        offset = data.draw(st.integers(self.start, self.end))
        hw = data.draw(st.integers(self.start, self.end))
        self.log.high_watermark = hw
        got = bytes(self.log.read(offset, 10**6, max_offset=hw).records)
        self.log.high_watermark = self.end
        for _, header in iter_batch_headers(got[: len(got)]):
            assert header.base_offset < hw

    @rule(data=st.data())
    def read_out_of_range(self, data):
        offset = data.draw(
            st.one_of(st.integers(self.end + 1, self.end + 100), st.integers(-100, self.start - 1))
        )
        with pytest.raises(OffsetOutOfRangeError):
            self.log.read(offset, 100)

    @rule()
    def roll(self):
        self.log.roll()
        assert self.log.active_segment.base_offset == self.end

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(self.start, self.end))
        self.log.truncate_to(target)
        keep = [b for b in self.batches if b.last_offset < target]
        self.batches = keep
        self.end = keep[-1].last_offset + 1 if keep else min(self.start, target)
        if not keep and self.log.log_end_offset != self.end:
            # The batch straddling the target was the first one: the log restarts at its base.
            self.end = self.log.log_end_offset
        self.start = min(self.start, self.end)
        self.log.high_watermark = self.end
        # Epochs starting at or after the new end are gone.
        for epoch_entry in self.log.leader_epoch_cache.epoch_entries:
            assert (
                epoch_entry.start_offset < max(self.end, 1)
                or epoch_entry.start_offset == self.start
            )

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data):
        target = data.draw(st.integers(self.start, self.end))
        assert self.log.delete_records_before(target) == max(target, self.start)
        self.start = max(target, self.start)
        self.batches = [b for b in self.batches if b.last_offset >= self.start]
        assert self.log.segments[0].base_offset <= self.start

    @rule(retention=st.integers(0, 5000))
    def retention_by_size(self, retention):
        self.log.update_config(_with(self.config, retention_bytes=retention))
        before = self.log.size_bytes
        segments_before = self.log.segments
        deleted = self.log.delete_old_segments()
        self.log.update_config(self.config)
        if deleted < len(segments_before):
            assert self.log.segments == segments_before[deleted:]
        else:  # all of it, the active segment too: a new empty one at the log end
            assert self.log.high_watermark == self.log.log_end_offset
            [active] = self.log.segments
            assert active.size == 0 and active.base_offset == self.log.log_end_offset
        after = self.log.size_bytes
        assert after == before - sum(s.size for s in segments_before[:deleted])
        remaining = self.log.segments
        if after > retention and len(remaining) > 1:
            # Deleting the next segment too would have gone below retention.bytes.
            assert after - remaining[0].size < retention
        self.start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b.last_offset >= self.start]

    @rule(advance=st.integers(0, 10_000))
    def retention_by_time(self, advance):
        self.clock.advance(advance)
        config = _with(self.config, retention_ms=500)
        self.log.update_config(config)
        segments_before = self.log.segments
        deleted = self.log.delete_old_segments()
        self.log.update_config(self.config)
        for segment in segments_before[:deleted]:
            assert self.clock.now - segment.largest_timestamp > 500
        self.start = self.log.log_start_offset
        self.batches = [b for b in self.batches if b.last_offset >= self.start]

    @rule(clean=st.booleans())
    def reopen(self, clean):
        recovery_point = self.log.recovery_point if clean else 0
        start = self.log.log_start_offset
        if clean:
            self.log.flush()
            recovery_point = self.log.recovery_point
        self.log.close()
        self.log = Log(
            self.tmp / "topic-0",
            self.config,
            log_start_offset=start,
            recovery_point=recovery_point,
            had_clean_shutdown=clean,
            time_ms=self.clock,
        )
        if clean:
            assert self.log.recovered_segments == 0, "nothing is re-read after a clean shutdown"
        assert self.log.truncated_bytes_on_load == 0
        self.log.high_watermark = self.end

    @rule(data=st.data())
    def offset_for_timestamp(self, data):
        if not self.batches:
            return
        target = data.draw(st.integers(self.batches[0].timestamp - 3, self.timestamp + 10))
        expected = None
        for batch in self.batches:
            for i in range(batch.last_offset - batch.base_offset + 1):
                offset, ts = batch.base_offset + i, batch.timestamp + i
                if ts >= target and offset >= self.start:
                    expected = (offset, ts)
                    break
            if expected:
                break
        assert self.log.offset_for_timestamp(target) == expected

    # ------------------------------------------------------------------ invariants

    @invariant()
    def offsets_match(self):
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.end
        assert self.log.log_start_offset == self.start
        assert self.log.log_start_offset <= self.log.high_watermark <= self.log.log_end_offset
        bases = [s.base_offset for s in self.log.segments]
        assert bases == sorted(bases) and len(set(bases)) == len(bases)
        assert self.log.size_bytes == sum(s.size for s in self.log.segments)


def _with(config: LogConfig, **changes) -> LogConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)


LogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogAgainstModel = LogMachine.TestCase


# ---------------------------------------------------------------------- focused tests


def test_append_patches_offsets_and_epoch_in_place(tmp_path):
    log = Log(tmp_path / "t-3", LogConfig())
    assert (log.topic, log.partition) == ("t", 3)
    first = make_batch(3)
    second = make_batch(2)
    log.append_as_leader(first, 5)
    info = log.append_as_leader(second, 7)
    assert (info.first_offset, info.last_offset) == (3, 4)
    headers = [h for _, h in iter_batch_headers(bytes(log.read(0, 10_000).records))]
    assert [(h.base_offset, h.partition_leader_epoch) for h in headers] == [(0, 5), (3, 7)]
    assert first[:8] == (0).to_bytes(8, "big") and second[:8] == (3).to_bytes(8, "big")
    assert log.leader_epoch_cache.epoch_entries == [(5, 0), (7, 3)]
    assert log.end_offset_for_epoch(5) == (5, 3)
    assert log.end_offset_for_epoch(7) == (7, 5)
    log.close()


def test_bad_batches_append_nothing(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(max_message_bytes=500, segment_bytes=2000))
    corrupt = make_batch(2)
    corrupt[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(corrupt, 0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(1, 600), 0)
    with pytest.raises(RecordBatchTooLargeError):
        log.append_as_leader(make_batch(1, 400) * 6, 0)
    assert log.log_end_offset == 0 and log.size_bytes == 0
    log.close()


def test_follower_append_keeps_offsets_and_drops_partial_tail(tmp_path):
    leader = Log(tmp_path / "t-0", LogConfig())
    for epoch in (1, 1, 2):
        leader.append_as_leader(make_batch(2), epoch)
    fetched = bytes(leader.read(0, 10_000).records)
    follower = Log(tmp_path / "follower" / "t-0", LogConfig())
    info = follower.append_as_follower(fetched[:-5])  # last batch cut by the fetch size
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 3, 4)
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_as_follower(fetched)
    follower.append_as_follower(bytes(leader.read(4, 10_000).records))
    assert bytes(follower.read(0, 10_000).records) == fetched
    assert follower.leader_epoch_cache.epoch_entries == leader.leader_epoch_cache.epoch_entries
    leader.close()
    follower.close()


def test_roll_on_segment_ms_and_retention_of_an_idle_partition(tmp_path):
    """Retention takes the active segment too once it is replicated (Kafka's
    deletableSegments): an idle partition's data does not outlive retention.ms until the next
    roll; a new empty segment at the log end takes its place. Not above the high watermark."""
    clock = FakeClock()
    log = Log(tmp_path / "t-0", LogConfig(segment_ms=1000, retention_ms=5000), time_ms=clock)
    log.append_as_leader(make_batch(1, timestamp=clock.now), 0)
    log.append_as_leader(make_batch(1, timestamp=clock.now + 500), 0)
    assert log.number_of_segments == 1
    log.append_as_leader(make_batch(1, timestamp=clock.now + 1500), 0)
    assert log.number_of_segments == 2
    log.high_watermark = 2  # the active segment's record is not replicated yet
    clock.advance(100_000)
    assert log.delete_old_segments() == 1
    assert log.number_of_segments == 1 and log.log_start_offset == 2
    assert bytes(log.read(2, 1000).records)
    log.high_watermark = log.log_end_offset
    assert log.delete_old_segments() == 1
    assert (log.number_of_segments, log.log_start_offset, log.log_end_offset) == (1, 3, 3)
    assert log.active_segment.base_offset == 3 and log.active_segment.size == 0
    assert log.delete_old_segments() == 0  # an empty active segment stays
    assert log.append_as_leader(make_batch(1, timestamp=clock.now), 0).first_offset == 3
    log.close()


def test_offset_for_max_timestamp(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(make_batch(3, timestamp=5_000), 0)
    log.append_as_leader(make_batch(2, timestamp=9_000), 0)
    log.append_as_leader(make_batch(2, timestamp=1_000), 0)
    assert log.offset_for_timestamp(MAX_TIMESTAMP) == (4, 9_001)
    assert log.offset_for_timestamp(5_001) == (1, 5_001)
    assert log.offset_for_timestamp(9_002) is None
    log.close()


def test_log_append_time_restamps(tmp_path):
    clock = FakeClock(42_000)
    log = Log(tmp_path / "t-0", LogConfig(message_timestamp_type="LogAppendTime"), time_ms=clock)
    info = log.append_as_leader(make_batch(2, timestamp=1), 0)
    assert info.log_append_time == 42_000 and info.max_timestamp == 42_000
    ((_, header),) = iter_batch_headers(bytes(log.read(0, 1000).records))
    assert header.max_timestamp == 42_000 and header.timestamp_type == 1
    log.close()


def test_delete_records_cannot_pass_high_watermark(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig())
    log.append_as_leader(make_batch(5), 0)
    log.high_watermark = 3
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records_before(4)
    assert log.delete_records_before(3) == 3
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    assert bytes(log.read(3, 1000).records)  # the batch holding offset 3 is still served
    log.close()


def test_flush_messages_moves_recovery_point(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(flush_messages=3))
    log.append_as_leader(make_batch(2), 0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(1), 0)
    assert log.recovery_point == 3
    log.close()


def test_truncate_fully_and_start_at(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for _ in range(10):
        log.append_as_leader(make_batch(1, 100), 1)
    log.truncate_fully_and_start_at(500)
    assert (log.log_start_offset, log.log_end_offset, log.number_of_segments) == (500, 500, 1)
    assert sorted(p.name for p in log.dir.glob("*.log")) == ["00000000000000000500.log"]
    assert log.leader_epoch_cache.epoch_entries == []
    assert log.append_as_leader(make_batch(1), 2).first_offset == 500
    log.close()


def test_malformed_leader_epoch_checkpoint_is_rebuilt_from_batches(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=400))
    for epoch in (1, 1, 2, 2, 5):
        log.append_as_leader(make_batch(2, 50), epoch)
    entries = log.leader_epoch_cache.epoch_entries
    log.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n7\ngarbage\n")
    reopened = Log(tmp_path / "t-0", LogConfig(segment_bytes=400), had_clean_shutdown=True)
    assert reopened.leader_epoch_cache.epoch_entries == entries == [(1, 0), (2, 4), (5, 8)]
    assert reopened.log_end_offset == 10
    reopened.close()


def test_read_slices_outlive_segment_deletion(tmp_path):
    """A fetch's zero-copy slice stays valid (view and fd) after retention deletes its segment."""
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300, retention_bytes=0))
    batches = [make_batch(1, 150, fill=0x41 + i) for i in range(4)]
    for batch in batches:
        log.append_as_leader(batch, 0)
    log.high_watermark = log.log_end_offset
    first = log.read(0, 1000).records
    second = log.read(1, 1000).records
    assert first.view().tobytes() == bytes(batches[0])  # mapped while the segment is open
    assert log.delete_old_segments() >= 2
    assert not first.file.exists() and not second.file.exists()
    assert first.view().tobytes() == bytes(batches[0])
    assert second.view().tobytes() == bytes(batches[1])  # first mapped after deletion
    assert os.pread(second.fd, second.size, second.position) == bytes(batches[1])
    log.close()


def test_roll_flush_completed_after_truncation_is_ignored(tmp_path):
    log = Log(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for _ in range(6):
        log.append_as_leader(make_batch(1, 150), 0)
    pending = log.pending_roll_flush()
    assert pending is not None
    target, fds, truncations = pending
    assert target == log.active_segment.base_offset and fds
    for fd in fds:
        os.fsync(fd)
        os.close(fd)
    log.truncate_to(1)  # the log changed while the fsync was in flight
    log.complete_roll_flush(target, truncations)
    assert log.recovery_point <= 1
    for _ in range(4):
        log.append_as_leader(make_batch(1, 150), 0)
    target, fds, truncations = log.pending_roll_flush()
    for fd in fds:
        os.close(fd)
    log.complete_roll_flush(target, truncations)
    assert log.recovery_point == target == log.active_segment.base_offset
    log.close()


def test_a_no_op_truncation_still_drops_an_epoch_entry_at_the_log_end(tmp_path):
    """This broker became leader at epoch 5 (an entry at its log end) and was demoted before
    appending; the new leader's records there carry epoch 4. Kafka's truncateTo trims the
    epoch cache even when no record goes."""
    clock = FakeClock()
    log = Log(tmp_path / "t-0", LogConfig(retention_ms=-1), time_ms=clock)
    log.append_as_follower(make_batch(10, timestamp=clock.now, partition_leader_epoch=4))
    log.leader_epoch_cache.assign(5, log.log_end_offset)
    assert log.truncate_to(10) is False
    log.append_as_follower(
        make_batch(5, timestamp=clock.now, base_offset=10, partition_leader_epoch=4)
    )
    assert log.leader_epoch_cache.epoch_for_offset(12) == 4
    assert log.end_offset_for_epoch(4) == (4, 15)
    log.close()


def test_a_log_start_beyond_what_survived_a_crash_starts_the_log_there(tmp_path):
    """DeleteRecords moved the start to 8, then a crash lost the unflushed records: the log
    restarts at 8 instead of handing out offsets 0-7 again (Kafka's
    deleteSegmentsIfLogStartGreaterThanLogEnd)."""
    clock = FakeClock()
    log = Log(tmp_path / "t-0", LogConfig(retention_ms=-1), time_ms=clock)
    for _ in range(5):
        log.append_as_leader(make_batch(2, timestamp=clock.now), 0)
    log.high_watermark = log.log_end_offset
    assert log.delete_records_before(8) == 8
    log._close_quietly()
    os.truncate(tmp_path / "t-0" / "00000000000000000000.log", 0)  # nothing was fsynced
    log = Log(
        tmp_path / "t-0",
        LogConfig(retention_ms=-1),
        log_start_offset=8,
        recovery_point=0,
        had_clean_shutdown=False,
        time_ms=clock,
    )
    assert (log.log_start_offset, log.log_end_offset) == (8, 8)
    assert log.append_as_leader(make_batch(1, timestamp=clock.now), 0).first_offset == 8
    log.close()


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    steps=st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.lists(st.integers(0, 1000), min_size=1, max_size=4)),
            st.tuples(st.just("truncate"), st.floats(0, 1)),
            st.tuples(st.just("delete_records"), st.floats(0, 1)),
            st.tuples(st.just("reopen"), st.booleans()),
        ),
        min_size=1,
        max_size=30,
    ),
    segment_bytes=st.sampled_from([300, 600, 5000]),
    index_interval=st.sampled_from([0, 100]),
    targets=st.lists(st.integers(0, 1100), min_size=1, max_size=5),
)
def test_offset_for_timestamp_matches_an_oracle(steps, segment_bytes, index_interval, targets):
    """Records with timestamps out of order inside batches, truncation, DeleteRecords and
    reopening: the answer is the first record at or after the log start whose timestamp is
    >= the target (a batch whose matching records were all below the log start made the
    search skip the rest of its segment)."""
    t0 = 1_700_000_000_000
    tmp = Path(tempfile.mkdtemp())
    try:
        config = LogConfig(
            retention_ms=-1, segment_bytes=segment_bytes, index_interval_bytes=index_interval
        )
        log = Log(tmp / "t-0", config, time_ms=lambda: t0)
        model: list[tuple[int, int]] = []  # (offset, timestamp)
        for kind, arg in steps:
            if kind == "append":
                batch = bytearray(
                    build_batch(
                        [Record(timestamp_delta=d, value=b"v") for d in arg], base_timestamp=t0
                    )
                )
                info = log.append_as_leader(batch, 0)
                model += [(info.first_offset + i, t0 + d) for i, d in enumerate(arg)]
            elif kind == "truncate":
                log.truncate_to(int(arg * log.log_end_offset))
                model = [m for m in model if m[0] < log.log_end_offset]
            elif kind == "delete_records" and log.log_end_offset > log.log_start_offset:
                log.high_watermark = log.log_end_offset
                span = log.log_end_offset - log.log_start_offset
                log.delete_records_before(log.log_start_offset + int(arg * span))
            elif kind == "reopen":
                start, recovery = log.log_start_offset, log.recovery_point
                log.close()
                log = Log(
                    tmp / "t-0",
                    config,
                    log_start_offset=start,
                    recovery_point=recovery,
                    had_clean_shutdown=arg,
                    time_ms=lambda: t0,
                )
            live = [m for m in model if m[0] >= log.log_start_offset]
            for target in targets:
                expected = next(((o, ts) for o, ts in live if ts >= t0 + target), None)
                assert log.offset_for_timestamp(t0 + target) == expected, (kind, target)
        log.close()
    finally:
        shutil.rmtree(tmp)


def test_an_append_that_fills_the_index_keeps_the_log_consistent(tmp_path):
    """A follower append of more batches than the index has slots for: the indexes stop
    taking entries, every record is appended and readable, the next append rolls (the index
    error after the write left the log end behind the bytes and two segments at offset 0)."""
    clock = FakeClock()
    config = LogConfig(segment_index_bytes=48, index_interval_bytes=0, retention_ms=-1)
    log = Log(tmp_path / "t-0", config, time_ms=clock)
    batches = bytearray()
    for i in range(10):
        batches += make_batch(1, timestamp=clock.now + i, base_offset=i, partition_leader_epoch=0)
    log.append_as_follower(batches)
    assert log.log_end_offset == 10
    assert log.append_as_leader(make_batch(1, timestamp=clock.now), 0).first_offset == 10
    assert [s.base_offset for s in log.segments] == [0, 10]
    offsets = [h.base_offset for _, h in iter_batch_headers(log.read(0, 1 << 20).records.view())]
    assert offsets == list(range(10))
    assert log.offset_for_timestamp(clock.now + 7) == (7, clock.now + 7)
    log.close()
    log = Log(tmp_path / "t-0", config, recovery_point=0, time_ms=clock)
    assert log.log_end_offset == 11
    log.close()


def test_leader_epoch_checkpoint_is_written_when_the_recovery_point_moves_not_per_assign(
    tmp_path,
):
    """Kafka 3.7 (KAFKA-15046): becoming leader of thousands of partitions must not fsync a
    checkpoint per partition. The epochs are written by flush (before the recovery point
    moves past them) and close; a crash before that loses nothing recovery cannot rebuild."""
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    log = Log(tmp_path / "t-0", LogConfig())
    log.leader_epoch_cache.assign(3, 0)
    assert not checkpoint.exists(), "assign wrote the checkpoint"
    log.append_as_leader(make_batch(2), 3)
    log.append_as_leader(make_batch(2), 4)
    assert not checkpoint.exists()
    log.flush()
    assert checkpoint.read_text() == "0\n2\n3 0\n4 2\n"
    log.append_as_leader(make_batch(1), 6)
    # a crash now (no close): the epoch 6 entry is not on disk, recovery finds it in the batch
    reopened = Log(tmp_path / "t-0", LogConfig(), recovery_point=log.recovery_point)
    assert reopened.leader_epoch_cache.epoch_entries == [(3, 0), (4, 2), (6, 4)]
    reopened.leader_epoch_cache.assign(7, 5)  # at the log end: the next load drops it anyway
    reopened.close()
    assert checkpoint.read_text() == "0\n3\n3 0\n4 2\n6 4\n"


def test_closing_an_idle_log_whose_epoch_moved_writes_nothing(tmp_path):
    """A restart makes every idle partition leader in a new epoch, starting at its (empty)
    end: loading would drop that entry, so closing the log writes no checkpoint for it (ten
    thousand idle partitions cost no file write at a clean stop)."""
    Log(tmp_path / "t-0", LogConfig()).close()
    checkpoint = tmp_path / "t-0" / "leader-epoch-checkpoint"
    assert not checkpoint.exists()
    for epoch in (1, 2):
        log = Log(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
        log.leader_epoch_cache.assign(epoch, 0)
        log.close()
        assert not checkpoint.exists()
    log = Log(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    log.leader_epoch_cache.assign(3, 0)
    log.append_as_leader(make_batch(1), 3)
    log.close()
    assert checkpoint.read_text() == "0\n1\n3 0\n"


def test_idle_active_segment_indexes_are_grown_on_first_append_not_on_load(tmp_path):
    """A new or reloaded empty log has no index files (they are made by their first entry,
    as Kafka's LazyIndex); the first append grows them and indexes as usual."""
    config = LogConfig(segment_index_bytes=8 * 100, index_interval_bytes=0)
    log = Log(tmp_path / "t-0", config)
    index = tmp_path / "t-0" / "00000000000000000000.index"
    assert sorted(os.listdir(tmp_path / "t-0")) == ["00000000000000000000.log"]
    log.close()
    assert sorted(os.listdir(tmp_path / "t-0")) == ["00000000000000000000.log"]
    log = Log(tmp_path / "t-0", config, had_clean_shutdown=True)
    assert not index.exists() and log.recovered_segments == 0
    for _ in range(5):
        log.append_as_leader(make_batch(1), 0)
    assert index.stat().st_size == 8 * 100
    assert log.active_segment.offset_index.entries == 4  # the first batch sits at position 0
    assert bytes(log.read(3, 10_000).records)[:8] == (3).to_bytes(8, "big")
    log.close()
    assert index.stat().st_size == 8 * 4
    log = Log(tmp_path / "t-0", config, had_clean_shutdown=True)
    assert log.recovered_segments == 0 and log.log_end_offset == 5
    log.close()


def test_closing_a_log_writes_its_final_time_index_entry_without_mapping(tmp_path, monkeypatch):
    """A segment with a batch but no time-index entry yet (less than index.interval.bytes)
    gets its final entry on close without mapping its index (one pwrite), and reloads
    complete: no recovery needed, lookups by time find the batch."""
    import mmap as mmap_module

    log = Log(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    log.append_as_leader(make_batch(2), 0)
    assert log.active_segment.time_index.entries == 0

    def no_map(*args, **kwargs):
        raise AssertionError("an index was mapped on close")

    monkeypatch.setattr(mmap_module, "mmap", no_map)
    log.close()
    monkeypatch.undo()
    reopened = Log(tmp_path / "t-0", LogConfig(), had_clean_shutdown=True)
    segment = reopened.active_segment
    assert segment.time_index.entries == 1 and segment.time_index_is_complete()
    assert segment.time_index.last_entry.offset == 1  # the later record of the two
    reopened.close()


def test_a_log_given_a_str_directory_names_it_as_a_path_and_follows_a_rename(tmp_path):
    # a loading broker hands each log its directory as a str (the Path is made when first
    # asked for): dir and dir_str agree before and after a rename, and the files follow
    path = str(tmp_path / "orders-3")
    log = Log(path, LogConfig())
    log.append_as_leader(make_batch(2), 0)
    log.close()
    loaded = Log(path, LogConfig(), existing=True, topic_partition=("orders", 3))
    assert (loaded.topic, loaded.partition) == ("orders", 3)
    assert loaded.dir_str == path
    assert loaded.dir == Path(path)
    assert loaded.log_end_offset == 2
    loaded.rename_dir("orders-3.abc-delete")
    assert loaded.dir == tmp_path / "orders-3.abc-delete"
    assert loaded.dir_str == str(tmp_path / "orders-3.abc-delete")
    assert not os.path.exists(path)
    loaded.append_as_leader(make_batch(1), 0)
    assert loaded.log_end_offset == 3
    assert os.path.getsize(os.path.join(loaded.dir_str, "00000000000000000000.log")) > 0
    loaded.close()
