"""Transactions in a partition: the LSO and the aborted-transaction index against an oracle.

Hypothesis drives a leader partition (single replica, so HW = LEO) with transactional writes
of three producers, their COMMIT/ABORT markers and plain writes. After every step the LSO is
the first offset of the oldest open transaction (else the HW); a read_committed read from any
offset stops at the LSO and names exactly the aborted transactions overlapping what it returns.
Then the partition is "restarted" (a new Log and Partition on the same directory, with and
without a producer snapshot) and must give the same LSO and the same aborted transactions, from
the ``.txnindex`` files and the producer state on disk.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.broker.partition import Partition, records_bytes
from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.broker.types import FetchIsolation
from kafkalite.protocol.records import (
    Record,
    build_batch,
    build_end_txn_marker_batch,
    iter_batch_headers,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log

from .conftest import MockTime, leader_state

TP = TopicPartition("t", 0)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(0, 2), st.integers(1, 3)),
        st.tuples(st.sampled_from(["commit", "abort"]), st.integers(0, 2), st.just(0)),
        st.tuples(st.just("plain"), st.just(-1), st.integers(1, 2)),
        st.tuples(st.just("roll"), st.just(-1), st.just(0)),
    ),
    max_size=25,
)


def open_partition(root: str, segment_bytes: int = 1 << 20) -> tuple[Partition, Log]:
    log = Log(os.path.join(root, "t-0"), LogConfig(segment_bytes=segment_bytes))
    partition = Partition(TP, 1, MockTime())
    partition.make_leader(leader_state(isr=(1,), replicas=(1,)), log)
    return partition, log


class Oracle:
    def __init__(self) -> None:
        self.open: dict[int, int] = {}  # pid -> first offset
        self.aborted: list[tuple[int, int, int]] = []  # (pid, first, marker offset)
        self.seq: dict[int, int] = {}

    def lso(self, leo: int) -> int:
        return min(self.open.values(), default=leo)


def apply(partition: Partition, log: Log, oracle: Oracle, step) -> None:
    kind, pid, n = step
    offset = log.log_end_offset
    if kind == "roll":
        log.roll()
        return
    if kind == "plain":
        batch = build_batch([Record(offset_delta=i, value=b"p") for i in range(n)])
    elif kind == "data":
        seq = oracle.seq.get(pid, 0)
        batch = build_batch(
            [Record(offset_delta=i, value=b"t") for i in range(n)],
            producer_id=100 + pid,
            producer_epoch=0,
            base_sequence=seq,
            is_transactional=True,
        )
        oracle.seq[pid] = seq + n
        oracle.open.setdefault(pid, offset)
    else:
        if pid not in oracle.open:
            return  # the coordinator only sends markers for partitions in a transaction
        batch = build_end_txn_marker_batch(
            producer_id=100 + pid, producer_epoch=0, commit=kind == "commit", coordinator_epoch=0
        )
        first = oracle.open.pop(pid)
        if kind == "abort":
            oracle.aborted.append((100 + pid, first, offset))
    origin = AppendOrigin.COORDINATOR if kind in ("commit", "abort") else AppendOrigin.CLIENT
    partition.append_records_to_leader(bytearray(batch), origin, 1)


def check(partition: Partition, log: Log, oracle: Oracle) -> None:
    leo = log.log_end_offset
    assert partition.last_stable_offset == oracle.lso(leo)
    for start in range(leo + 1):
        read = partition.read_records(start, -1, 1 << 20, FetchIsolation.TXN_COMMITTED, True, True)
        assert read.last_stable_offset == oracle.lso(leo)
        headers = [h for _, h in iter_batch_headers(records_bytes(read.records))]
        if not headers:
            assert read.aborted_transactions == []
            continue
        assert headers[-1].next_offset <= max(oracle.lso(leo), headers[0].next_offset)
        upper = headers[-1].next_offset
        expected = [
            (pid, first)
            for pid, first, marker in oracle.aborted
            if marker >= start and first < upper
        ]
        assert sorted(read.aborted_transactions) == sorted(expected)


@settings(max_examples=60, deadline=None)
@given(steps, st.booleans())
def test_lso_and_aborted_index_survive_a_restart(steps, snapshot):
    with tempfile.TemporaryDirectory() as root:
        partition, log = open_partition(root, segment_bytes=400)
        oracle = Oracle()
        for step in steps:
            apply(partition, log, oracle, step)
            check(partition, log, oracle)
        if snapshot:
            partition.producer_state.take_snapshot()
        log.close()
        partition, log = open_partition(root, segment_bytes=400)
        check(partition, log, oracle)
        log.close()


def test_read_uncommitted_passes_the_lso():
    with tempfile.TemporaryDirectory() as root:
        partition, log = open_partition(root)
        oracle = Oracle()
        apply(partition, log, oracle, ("data", 0, 2))
        apply(partition, log, oracle, ("plain", -1, 1))
        assert partition.last_stable_offset == 0
        committed = partition.read_records(0, -1, 1 << 20, FetchIsolation.TXN_COMMITTED, True, True)
        assert len(committed.records) == 0
        uncommitted = partition.read_records(
            0, -1, 1 << 20, FetchIsolation.HIGH_WATERMARK, True, True
        )
        assert len(uncommitted.records) > 0 and uncommitted.aborted_transactions is None
        apply(partition, log, oracle, ("abort", 0, 0))
        assert partition.last_stable_offset == log.log_end_offset == 4
        assert [p.name for p in (log.dir).glob("*.txnindex")] == ["00000000000000000000.txnindex"]
        log.close()
