"""ProducerStateManager against a model: dedupe, sequence and epoch rules, snapshots, rebuild."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkalite.broker.producer_state import (
    INT32_MAX,
    AppendOrigin,
    ProducerStateManager,
    increment_sequence,
)
from kafkalite.protocol.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from kafkalite.protocol.records import RecordBatchHeader


def header(pid, epoch, base_seq, count, base_offset=0, ts=1000):
    return RecordBatchHeader(
        base_offset, 49 + count, 0, 2, 0, 0, count - 1, ts, ts, pid, epoch, base_seq, count
    )


def append(psm, h, offset, origin=AppendOrigin.CLIENT):
    infos, duplicate = psm.prepare([h], offset, origin)
    if duplicate is None:
        psm.apply(infos.values(), offset + h.last_offset_delta + 1)
    return duplicate


def test_sequence_helpers_wrap():
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    h = header(1, 0, INT32_MAX - 1, 4)
    assert h.last_sequence == 1 == increment_sequence(INT32_MAX - 1, 3)


def test_duplicate_returns_original_offsets():
    psm = ProducerStateManager("t-0", None)
    assert append(psm, header(7, 0, 0, 3), 100) is None
    assert append(psm, header(7, 0, 3, 2), 103) is None
    dup = append(psm, header(7, 0, 0, 3), 105)
    assert (dup.first_offset, dup.last_offset) == (100, 102)
    # Same first sequence but a different range is not a duplicate: out of order.
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(psm, header(7, 0, 0, 2), 105)


def test_only_last_five_batches_are_deduplicated():
    psm = ProducerStateManager("t-0", None)
    for i in range(6):
        append(psm, header(7, 0, i, 1), i)
    assert append(psm, header(7, 0, 1, 1), 6).first_offset == 1
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(psm, header(7, 0, 0, 1), 6)


def test_epoch_rules():
    psm = ProducerStateManager("t-0", None)
    append(psm, header(7, 3, 0, 1), 0)
    with pytest.raises(InvalidProducerEpochError):
        append(psm, header(7, 2, 1, 1), 1)
    with pytest.raises(OutOfOrderSequenceNumberError):
        append(psm, header(7, 4, 5, 1), 1)  # a new epoch starts at 0
    assert append(psm, header(7, 4, 0, 1), 1) is None
    # Replication trusts the leader: an old epoch is taken as is.
    infos, dup = psm.prepare([header(7, 1, 9, 1)], 2, AppendOrigin.REPLICATION)
    assert dup is None and infos


def test_unknown_producer_accepted_at_any_sequence():
    psm = ProducerStateManager("t-0", None)
    assert append(psm, header(9, 0, 42, 2), 0) is None
    assert psm.last_entry(9).last_seq == 43


def test_failed_batch_in_request_leaves_state_untouched():
    psm = ProducerStateManager("t-0", None)
    append(psm, header(7, 0, 0, 1), 0)
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.prepare([header(7, 0, 1, 1), header(7, 0, 5, 1)], 1, AppendOrigin.CLIENT)
    assert psm.last_entry(7).last_seq == 0 and psm.map_end_offset == 1


def test_expiration_and_snapshot_round_trip():
    with tempfile.TemporaryDirectory() as d:
        psm = ProducerStateManager("t-0", d, producer_id_expiration_ms=1000)
        append(psm, header(1, 0, 0, 2, ts=5_000), 0)
        append(psm, header(2, 1, 7, 1, ts=9_000), 2)
        assert psm.take_snapshot() == 3
        assert psm.take_snapshot() is None  # once per offset
        entries = {
            e.producer_id: e for e in ProducerStateManager.read_snapshot(psm.snapshot_path(3))
        }
        assert (entries[1].producer_epoch, entries[1].last_seq, entries[1].last_data_offset) == (
            0,
            1,
            1,
        )
        assert (entries[2].producer_epoch, entries[2].last_seq, entries[2].last_data_offset) == (
            1,
            7,
            2,
        )
        assert psm.remove_expired_producers(9_500) == [1]
        # Rebuild: snapshot at 3, then batch headers from 3 to the log end (5).
        later = [header(1, 0, 2, 2, base_offset=3)]
        fresh = ProducerStateManager("t-0", d)
        fresh.truncate_and_reload(
            0, 5, lambda offset: iter(h for h in later if h.last_offset >= offset)
        )
        assert fresh.map_end_offset == 5
        assert fresh.last_entry(1).last_seq == 3 and fresh.last_entry(2).last_seq == 7
        # A truncated log (end 2) drops the snapshot at 3 and rescans from the start.
        scanned = []
        fresh.truncate_and_reload(
            0, 2, lambda offset: scanned.append(offset) or iter([header(1, 0, 0, 2)])
        )
        assert scanned == [0] and fresh.list_snapshot_offsets() == []
        assert fresh.last_entry(1).last_seq == 1 and fresh.last_entry(2) is None
        # A corrupt snapshot is deleted and ignored.
        psm.take_snapshot()
        path = psm.snapshot_path(psm.map_end_offset)
        with open(path, "r+b") as f:
            f.seek(10)
            f.write(b"\xff\xff")
        other = ProducerStateManager("t-0", d)
        other.truncate_and_reload(0, 3, lambda offset: iter([]))
        assert other.list_snapshot_offsets() == [] and other.producers == {}


class ProducerModel(RuleBasedStateMachine):
    """Random appends, retries, gaps and epoch changes checked against a model; the state
    rebuilt from all appended headers always equals the live state."""

    def __init__(self):
        super().__init__()
        self.psm = ProducerStateManager("t-0", None)
        self.next_offset = 0
        self.model: dict[int, dict] = {}
        self.log: list[RecordBatchHeader] = []

    def _append_ok(self, pid, epoch, first_seq, count):
        h = header(pid, epoch, first_seq, count)
        assert append(self.psm, h, self.next_offset) is None
        entry = self.model.setdefault(pid, {"epoch": epoch, "batches": []})
        if entry["epoch"] != epoch:
            entry["epoch"], entry["batches"] = epoch, []
        entry["batches"].append(
            (first_seq, h.last_sequence, self.next_offset, self.next_offset + count - 1)
        )
        entry["batches"] = entry["batches"][-5:]
        self.log.append(header(pid, epoch, first_seq, count, base_offset=self.next_offset))
        self.next_offset += count

    @rule(
        pid=st.integers(1, 3),
        count=st.integers(1, 4),
        start=st.sampled_from([0, 17, INT32_MAX - 2]),
    )
    def append_next(self, pid, count, start):
        entry = self.model.get(pid)
        if entry is None:
            self._append_ok(pid, 0, start, count)
        else:
            self._append_ok(
                pid, entry["epoch"], increment_sequence(entry["batches"][-1][1], 1), count
            )

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def retry(self, data):
        pid = data.draw(st.sampled_from(sorted(self.model)))
        entry = self.model[pid]
        first, last, first_off, last_off = data.draw(st.sampled_from(entry["batches"]))
        count = last_off - first_off + 1
        dup = append(self.psm, header(pid, entry["epoch"], first, count), self.next_offset)
        assert dup is not None and (dup.first_offset, dup.last_offset) == (first_off, last_off)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), gap=st.integers(2, 50))
    def gap(self, data, gap):
        pid = data.draw(st.sampled_from(sorted(self.model)))
        entry = self.model[pid]
        seq = increment_sequence(entry["batches"][-1][1], gap)
        with pytest.raises(OutOfOrderSequenceNumberError):
            append(self.psm, header(pid, entry["epoch"], seq, 1), self.next_offset)

    @precondition(lambda self: any(e["epoch"] > 0 for e in self.model.values()))
    @rule(data=st.data())
    def old_epoch(self, data):
        pid = data.draw(st.sampled_from(sorted(p for p, e in self.model.items() if e["epoch"] > 0)))
        with pytest.raises(InvalidProducerEpochError):
            append(self.psm, header(pid, self.model[pid]["epoch"] - 1, 0, 1), self.next_offset)

    @precondition(lambda self: self.model)
    @rule(data=st.data(), first_seq=st.sampled_from([0, 0, 3]))
    def bump_epoch(self, data, first_seq):
        pid = data.draw(st.sampled_from(sorted(self.model)))
        epoch = self.model[pid]["epoch"] + 1
        if first_seq == 0:
            self._append_ok(pid, epoch, 0, 1)
        else:
            with pytest.raises(OutOfOrderSequenceNumberError):
                append(self.psm, header(pid, epoch, first_seq, 1), self.next_offset)

    @invariant()
    def matches_model(self):
        assert set(self.psm.producers) == set(self.model)
        for pid, entry in self.model.items():
            live = self.psm.last_entry(pid)
            assert live.producer_epoch == entry["epoch"]
            assert [
                (b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in live.batches
            ] == entry["batches"]
        assert self.psm.map_end_offset == self.next_offset

    @invariant()
    def rebuild_from_log_equals_live_state(self):
        rebuilt = ProducerStateManager("t-0", None)
        rebuilt.truncate_and_reload(0, self.next_offset, lambda offset: iter(self.log))
        for pid, entry in self.psm.producers.items():
            other = rebuilt.last_entry(pid)
            assert other.producer_epoch == entry.producer_epoch
            assert list(other.batches) == list(entry.batches)


TestProducerModel = ProducerModel.TestCase
TestProducerModel.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)


def test_no_snapshot_of_a_log_with_nothing_appended(tmp_path):
    """An idle partition (nothing appended since offset 0) writes no snapshot file, so a
    broker with thousands of them does not fsync one each at shutdown."""
    psm = ProducerStateManager("t-0", str(tmp_path))
    assert psm.take_snapshot() is None
    assert psm.list_snapshot_offsets() == [] and list(tmp_path.iterdir()) == []
    append(psm, header(1, 0, 0, 1), 0)
    assert psm.take_snapshot() == 1
