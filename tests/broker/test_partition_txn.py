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
    iter_batches,
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


def test_cleaner_removes_aborted_data_then_markers():
    """Compaction with transactions (Kafka's CleanedTransactionMetadata): aborted records go
    and never supersede anything, a committed transaction's keys supersede older ones, an open
    transaction stays as it is; the ABORT marker stays (and indexed) while its records were
    just removed, then gets a delete horizon, then goes (an empty header stays: it is its
    producer's last batch); the COMMIT marker stays while its records do."""
    from kafkalite.storage.cleaner import Cleaner, log_to_clean

    def keyed(pid: int | None, pairs, seq: int = 0) -> bytearray:
        extra = (
            {}
            if pid is None
            else dict(producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True)
        )
        return bytearray(
            build_batch(
                [Record(offset_delta=i, key=k, value=v) for i, (k, v) in enumerate(pairs)],
                **extra,
            )
        )

    def marker(pid: int, commit: bool) -> bytearray:
        return bytearray(
            build_end_txn_marker_batch(
                producer_id=pid, producer_epoch=0, commit=commit, coordinator_epoch=0
            )
        )

    with tempfile.TemporaryDirectory() as root:
        log = Log(
            os.path.join(root, "t-0"),
            LogConfig(cleanup_policy="compact", segment_bytes=1 << 20, delete_retention_ms=100),
        )
        partition = Partition(TP, 1, MockTime())
        partition.make_leader(leader_state(isr=(1,), replicas=(1,)), log)
        client, coordinator = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR
        partition.append_records_to_leader(keyed(None, [(b"k0", b"a")]), client, 1)  # 0
        partition.append_records_to_leader(keyed(100, [(b"k0", b"b"), (b"k1", b"b")]), client, 1)
        partition.append_records_to_leader(marker(100, False), coordinator, 1)  # 3
        partition.append_records_to_leader(keyed(101, [(b"k0", b"c")]), client, 1)  # 4
        partition.append_records_to_leader(marker(101, True), coordinator, 1)  # 5
        partition.append_records_to_leader(keyed(102, [(b"k1", b"open")]), client, 1)  # 6
        partition.append_records_to_leader(keyed(None, [(b"k2", b"z")]), client, 1)  # 7
        log.roll()
        partition.append_records_to_leader(keyed(None, [(b"k3", b"tail")]), client, 1)  # 8

        def records():
            out = []
            for segment in log.segments:
                data = bytes(segment.log.slice(0, segment.size))
                for header, recs in iter_batches(data):
                    out.append(
                        (header.base_offset, header.is_control, [(r.key, r.value) for r in recs])
                    )
            return out

        def clean(now: int) -> None:
            Cleaner(1000, lambda: now).clean_now(log_to_clean(log, None, now))

        now = 2_000_000_000_000
        clean(now)
        kept = records()
        data = [kv for _, control, kvs in kept if not control for kv in kvs]
        assert data == [(b"k0", b"c"), (b"k1", b"open"), (b"k2", b"z"), (b"k3", b"tail")]
        assert [o for o, control, _ in kept if control] == [3, 5]
        assert partition.last_stable_offset == 6
        read = partition.read_records(0, -1, 1 << 20, FetchIsolation.TXN_COMMITTED, True, True)
        assert read.aborted_transactions == [(100, 1)]  # the kept marker is still indexed

        clean(now + 1)  # nothing left of the aborted transaction: its marker gets a horizon
        horizons = {
            h.base_offset: h.delete_horizon_ms
            for s in log.segments
            for h, _ in iter_batches(bytes(s.log.slice(0, s.size)))
        }
        assert horizons[3] == now + 1 + 100
        assert [o for o, control, _ in records() if control] == [3, 5]

        clean(now + 1000)  # past the horizon: the marker's record goes, an empty header stays
        controls = {o: kvs for o, control, kvs in records() if control}
        assert controls[3] == [] and len(controls[5]) == 1
        data = [kv for _, control, kvs in records() if not control for kv in kvs]
        assert data == [(b"k0", b"c"), (b"k1", b"open"), (b"k2", b"z"), (b"k3", b"tail")]
        log.close()

        # a restart reads the cleaned log back: the open transaction still holds the LSO
        partition, log = open_partition(root)
        assert partition.last_stable_offset == 6
        log.close()


def test_a_marker_from_an_older_coordinator_epoch_is_fenced():
    from kafkalite.protocol.errors import TransactionCoordinatorFencedError

    with tempfile.TemporaryDirectory() as root:
        partition, log = open_partition(root)

        def end(epoch: int, commit: bool = True) -> None:
            partition.append_records_to_leader(
                bytearray(
                    build_end_txn_marker_batch(
                        producer_id=100, producer_epoch=0, commit=commit, coordinator_epoch=epoch
                    )
                ),
                AppendOrigin.COORDINATOR,
                1,
            )

        apply(partition, log, Oracle(), ("data", 0, 1))
        end(5)
        assert partition.producer_state.last_entry(100).coordinator_epoch == 5
        before = log.log_end_offset
        try:
            end(3, commit=False)
        except TransactionCoordinatorFencedError:
            pass
        else:  # pragma: no cover
            raise AssertionError("a zombie coordinator's marker was accepted")
        assert log.log_end_offset == before
        end(6)  # a newer coordinator is accepted
        assert partition.producer_state.last_entry(100).coordinator_epoch == 6
        log.close()
