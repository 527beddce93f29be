"""TransactionCoordinator with an in-memory __transaction_state and a recording marker sender."""

from __future__ import annotations

import asyncio

import pytest

from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.config import TransactionConfig
from kafkalite.txn.coordinator import TransactionCoordinator
from kafkalite.txn.metadata import TransactionState
from kafkalite.txn.records import decode_key, decode_value
from tests.broker.conftest import wait_until

S = TransactionState
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_000_000

    def milliseconds(self) -> int:
        return self.now

    def call_later(self, delay_ms, callback):  # pragma: no cover - unused
        raise NotImplementedError


class MemoryLog:
    def __init__(self) -> None:
        self.records: dict[int, list[tuple[int, bytes, bytes | None]]] = {}
        self.fail_with: ErrorCode | None = None

    async def append(self, partition, key, value):
        if self.fail_with is not None:
            return self.fail_with
        records = self.records.setdefault(partition, [])
        records.append((len(records), key, value))
        return ErrorCode.NONE

    async def read(self, partition):
        for record in list(self.records.get(partition, [])):
            yield record

    def states(self, partition):
        return [
            (decode_key(k), None if v is None else S(decode_value(v).state))
            for _, k, v in self.records.get(partition, [])
        ]


class RecordingMarkers:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, int, bool, tuple]] = []
        self.release = asyncio.Event()
        self.release.set()
        self.entered = asyncio.Event()  # a completion has started writing its markers

    async def write_markers(self, coordinator_epoch, pid, epoch, commit, partitions, still):
        self.entered.set()
        await self.release.wait()
        self.sent.append((coordinator_epoch, pid, epoch, commit, tuple(partitions)))
        return still()


def make(log=None, markers=None, time=None, **config):
    ids = iter(range(1000, 2000))

    async def next_id():
        return next(ids)

    coordinator = TransactionCoordinator(
        0,
        log or MemoryLog(),
        markers or RecordingMarkers(),
        next_id,
        TransactionConfig(transaction_state_log_num_partitions=1, **config),
        time or FakeTime(),
    )
    coordinator.is_active = True  # startup() without its periodic tasks: tests call them
    return coordinator


async def owned(coordinator, epoch=5):
    await coordinator.on_election(0, epoch)
    return coordinator


async def settle(coordinator, timeout=5.0):
    """Wait until the coordinator's background tasks (completions, loads) are all done, a task
    started by one of them included; fail after ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while running := {
        t for t in (*coordinator._tasks, *coordinator._loads.values()) if not t.done()
    }:
        remaining = deadline - loop.time()
        assert remaining > 0, f"tasks still running after {timeout}s: {running}"
        await asyncio.wait(running, timeout=remaining)


def waits_for_completion(coordinator):
    """An event set when a request of ``coordinator`` starts waiting for a running completion
    (so a test can check it is still waiting, rather than yielding a few times and hoping)."""
    waiting = asyncio.Event()
    wait = coordinator._wait_for_completion

    async def spy(*args):
        waiting.set()
        return await wait(*args)

    coordinator._wait_for_completion = spy
    return waiting


def handed_over(coordinator, transactional_id="tx"):
    """True once the next transaction's first partitions wait in the running completion."""
    completion = coordinator._completing.get(transactional_id)
    return completion is not None and completion.next_begin is not None


def run(coro):
    return asyncio.run(coro)


def test_commit_flow_writes_every_state_before_answering():
    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        assert (init.error, init.producer_id, init.producer_epoch) == (ErrorCode.NONE, 1000, 0)
        assert await c.add_partitions("tx", 1000, 0, [TP0, TP1]) is ErrorCode.NONE
        assert await c.add_partitions("tx", 1000, 0, [TP0]) is ErrorCode.NONE  # no new write
        assert await c.end_transaction("tx", 1000, 0, commit=True) is ErrorCode.NONE
        await settle(c)
        assert markers.sent == [(5, 1000, 0, True, (TP0, TP1))]
        assert log.states(0) == [
            ("tx", S.EMPTY),
            ("tx", S.ONGOING),
            ("tx", S.PREPARE_COMMIT),
            ("tx", S.COMPLETE_COMMIT),
        ]
        assert c.describe("tx").state == "CompleteCommit"
        # a retried EndTxn(commit) of a completed transaction succeeds; abort is invalid
        assert await c.end_transaction("tx", 1000, 0, commit=True) is ErrorCode.NONE
        assert await c.end_transaction("tx", 1000, 0, commit=False) is ErrorCode.INVALID_TXN_STATE

    run(scenario())


def test_requests_refused_with_kafka_errors():
    async def scenario():
        log = MemoryLog()
        c = make(log, transaction_max_timeout_ms=10_000)
        assert (await c.init_producer_id("tx", 1000)).error is ErrorCode.NOT_COORDINATOR
        await owned(c)
        assert (
            await c.init_producer_id("tx", 20_000)
        ).error is ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert (await c.init_producer_id("", 1000)).error is ErrorCode.INVALID_REQUEST
        assert await c.add_partitions("nope", 1, 0, [TP0]) is ErrorCode.INVALID_PRODUCER_ID_MAPPING
        init = await c.init_producer_id("tx", 1000)
        assert (
            await c.end_transaction("tx", init.producer_id, 0, True) is ErrorCode.INVALID_TXN_STATE
        )
        assert await c.add_partitions("tx", init.producer_id, 7, [TP0]) is ErrorCode.PRODUCER_FENCED
        log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS
        error = await c.add_partitions("tx", init.producer_id, 0, [TP0])
        assert error is ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert c.describe("tx").state == "Empty"  # a failed write changes nothing
        log.fail_with = None
        assert await c.add_partitions("tx", init.producer_id, 0, [TP0]) is ErrorCode.NONE

    run(scenario())


def test_second_instance_fences_an_open_transaction():
    async def scenario():
        markers = RecordingMarkers()
        c = await owned(make(markers=markers))
        first = await c.init_producer_id("tx", 60_000)
        assert await c.add_partitions("tx", first.producer_id, 0, [TP0]) is ErrorCode.NONE
        fence = await c.init_producer_id("tx", 60_000)
        assert fence.error is ErrorCode.CONCURRENT_TRANSACTIONS
        await settle(c)
        # the open transaction was aborted with the bumped epoch
        assert markers.sent == [(5, first.producer_id, 1, False, (TP0,))]
        second = await c.init_producer_id("tx", 60_000)
        assert (second.error, second.producer_epoch) == (ErrorCode.NONE, 2)
        # the zombie is fenced everywhere on the coordinator
        assert (
            await c.add_partitions("tx", first.producer_id, 0, [TP1]) is ErrorCode.PRODUCER_FENCED
        )
        assert (
            await c.end_transaction("tx", first.producer_id, 0, True) is ErrorCode.PRODUCER_FENCED
        )

    run(scenario())


def test_kip360_epoch_bump_with_expected_producer():
    async def scenario():
        c = await owned(make())
        first = await c.init_producer_id("tx", 60_000)
        bumped = await c.init_producer_id("tx", 60_000, first.producer_id, 0)
        assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NONE, 1)
        # the same request retried (its answer lost): the same epoch again
        again = await c.init_producer_id("tx", 60_000, first.producer_id, 0)
        assert (again.error, again.producer_epoch) == (ErrorCode.NONE, 1)
        stale = await c.init_producer_id("tx", 60_000, 424242, 0)
        assert stale.error is ErrorCode.PRODUCER_FENCED

    run(scenario())


def test_epoch_exhaustion_rotates_the_producer_id():
    async def scenario():
        c = await owned(make())
        first = await c.init_producer_id("tx", 60_000)
        meta = c.txns[0]["tx"]
        meta.producer_epoch = 2**15 - 2  # as if bumped that many times
        rotated = await c.init_producer_id("tx", 60_000)
        assert rotated.error is ErrorCode.NONE
        assert rotated.producer_id != first.producer_id and rotated.producer_epoch == 0

    run(scenario())


def test_timeout_abort_and_expiry():
    async def scenario():
        time, markers = FakeTime(), RecordingMarkers()
        c = await owned(make(markers=markers, time=time, transactional_id_expiration_ms=50_000))
        init = await c.init_producer_id("tx", 10_000)
        await c.add_partitions("tx", init.producer_id, 0, [TP0])
        time.now += 5_000
        await c.abort_timed_out_transactions()
        assert markers.sent == []
        time.now += 6_000
        await c.abort_timed_out_transactions()
        await settle(c)
        assert markers.sent == [(5, init.producer_id, 1, False, (TP0,))]
        assert c.describe("tx").state == "CompleteAbort"
        assert c.describe("tx").producer_epoch == 1
        time.now += 49_000
        await c.remove_expired_transactional_ids()
        assert c.describe("tx").error is ErrorCode.NONE
        time.now += 2_000
        await c.remove_expired_transactional_ids()
        assert c.describe("tx").error is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

    run(scenario())


def test_reload_restores_state_and_completes_prepared_transactions():
    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        await c.add_partitions("tx", init.producer_id, 0, [TP0])
        markers.release.clear()  # the markers hang: the coordinator "dies" after PrepareCommit
        assert await c.end_transaction("tx", init.producer_id, 0, True) is ErrorCode.NONE
        await asyncio.wait_for(markers.entered.wait(), 5)  # its completion is writing markers
        c.on_resignation(0, 6)
        markers.release.set()
        await settle(c)
        assert log.states(0)[-1] == ("tx", S.PREPARE_COMMIT)
        # the new coordinator (a newer epoch) loads the log and finishes the commit
        successor_markers = RecordingMarkers()
        d = await owned(make(log, successor_markers), epoch=6)
        await settle(d)
        assert successor_markers.sent == [(6, init.producer_id, 0, True, (TP0,))]
        assert log.states(0)[-1] == ("tx", S.COMPLETE_COMMIT)
        assert d.describe("tx").state == "CompleteCommit"
        error, unknown, listed = d.list_transactions(states=["CompleteCommit", "Nope"])
        assert error is ErrorCode.NONE and unknown == ["Nope"]
        assert [t.transactional_id for t in listed] == ["tx"]

    run(scenario())


def test_load_in_progress_and_concurrent_requests():
    async def scenario():
        log = MemoryLog()
        c = make(log)
        election = c.on_election(0, 1)
        assert (await c.init_producer_id("tx", 1000)).error in (
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
            ErrorCode.NONE,
        )
        await election
        init = await c.init_producer_id("tx2", 1000)
        pending = asyncio.ensure_future(c.add_partitions("tx2", init.producer_id, 0, [TP0]))
        await wait_until(lambda: pending.done() or c.txns[0]["tx2"].pending_state is not None)
        c.txns[0]["tx2"].pending_state = c.txns[0]["tx2"].pending_state or S.ONGOING
        assert await c.end_transaction("tx2", init.producer_id, 0, True) in (
            ErrorCode.CONCURRENT_TRANSACTIONS,
            ErrorCode.INVALID_TXN_STATE,
        )
        await pending

    run(scenario())


@pytest.mark.parametrize("state", ["Ongoing", "Empty"])
def test_abort_command(state):
    async def scenario():
        c = await owned(make())
        init = await c.init_producer_id("tx", 60_000)
        if state == "Ongoing":
            await c.add_partitions("tx", init.producer_id, 0, [TP0])
            assert await c.abort_transaction("tx") is ErrorCode.NONE
            await settle(c)
            assert c.describe("tx").state == "CompleteAbort"
        else:
            assert await c.abort_transaction("tx") is ErrorCode.INVALID_TXN_STATE
        assert await c.abort_transaction("other") is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND

    run(scenario())


def test_a_request_during_completion_waits_for_it_instead_of_concurrent_transactions():
    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        pid = init.producer_id
        assert await c.add_partitions("tx", pid, 0, [TP0]) is ErrorCode.NONE
        markers.release.clear()  # the markers are being written
        assert await c.end_transaction("tx", pid, 0, commit=True) is ErrorCode.NONE
        # the next transaction's first AddPartitionsToTxn arrives meanwhile
        add = asyncio.ensure_future(c.add_partitions("tx", pid, 0, [TP1]))
        await wait_until(lambda: handed_over(c) or add.done())  # it reached the completion
        assert not add.done()
        assert log.states(0)[-1] == ("tx", S.PREPARE_COMMIT)
        markers.release.set()
        assert await add is ErrorCode.NONE
        # it was written once every marker was, and its Ongoing record completes the
        # previous transaction: no Complete record between them
        assert markers.sent == [(5, pid, 0, True, (TP0,))]
        assert log.states(0)[-2:] == [("tx", S.PREPARE_COMMIT), ("tx", S.ONGOING)]
        await settle(c)
        assert log.states(0)[-1] == ("tx", S.ONGOING)
        assert c.describe("tx").partitions == (TP1,)
        assert c.describe("tx").state == "Ongoing"
        # a new coordinator loading this log finds the new transaction, nothing to complete
        reloaded_markers = RecordingMarkers()
        d = await owned(make(log, reloaded_markers), epoch=6)
        await settle(d)
        assert reloaded_markers.sent == []
        assert d.describe("tx").partitions == (TP1,)
        assert await d.end_transaction("tx", pid, 0, commit=False) is ErrorCode.NONE
        await settle(d)
        assert reloaded_markers.sent == [(6, pid, 0, False, (TP1,))]

    run(scenario())


def test_init_producer_id_during_completion_waits_for_it():
    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        assert await c.add_partitions("tx", init.producer_id, 0, [TP0]) is ErrorCode.NONE
        markers.release.clear()
        assert await c.end_transaction("tx", init.producer_id, 0, commit=False) is ErrorCode.NONE
        waiting = waits_for_completion(c)
        again = asyncio.ensure_future(c.init_producer_id("tx", 60_000))
        await wait_until(lambda: waiting.is_set() or again.done())
        assert not again.done()
        markers.release.set()
        result = await again
        assert (result.error, result.producer_epoch) == (ErrorCode.NONE, 1)
        assert log.states(0)[-2:] == [("tx", S.COMPLETE_ABORT), ("tx", S.EMPTY)]

    run(scenario())


def test_markers_that_stay_unwritten_still_answer_concurrent_transactions(monkeypatch):
    monkeypatch.setattr("kafkalite.txn.coordinator.COMPLETION_WAIT_S", 0.01)

    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        pid = init.producer_id
        assert await c.add_partitions("tx", pid, 0, [TP0]) is ErrorCode.NONE
        markers.release.clear()  # a partition leader is down: the markers hang
        assert await c.end_transaction("tx", pid, 0, commit=True) is ErrorCode.NONE
        assert await c.add_partitions("tx", pid, 0, [TP1]) is ErrorCode.CONCURRENT_TRANSACTIONS
        assert (await c.init_producer_id("tx", 60_000)).error is ErrorCode.CONCURRENT_TRANSACTIONS
        assert log.states(0)[-1] == ("tx", S.PREPARE_COMMIT)
        markers.release.set()
        await settle(c)
        assert await c.add_partitions("tx", pid, 0, [TP1]) is ErrorCode.NONE

    run(scenario())


def test_a_failed_write_of_the_next_transaction_leaves_the_completion_to_finish():
    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        pid = init.producer_id
        assert await c.add_partitions("tx", pid, 0, [TP0]) is ErrorCode.NONE
        markers.release.clear()
        assert await c.end_transaction("tx", pid, 0, commit=True) is ErrorCode.NONE
        add = asyncio.ensure_future(c.add_partitions("tx", pid, 0, [TP1]))
        await wait_until(lambda: handed_over(c) or add.done())
        log.fail_with = ErrorCode.NOT_ENOUGH_REPLICAS  # its Ongoing write fails
        markers.release.set()
        assert await add is ErrorCode.COORDINATOR_NOT_AVAILABLE
        # back in PrepareCommit in memory, so the completion writes CompleteCommit itself
        assert c.txns[0]["tx"].state is S.PREPARE_COMMIT
        assert c.txns[0]["tx"].partitions == {TP0}
        log.fail_with = None
        await settle(c)
        assert log.states(0)[-2:] == [("tx", S.PREPARE_COMMIT), ("tx", S.COMPLETE_COMMIT)]
        assert await c.add_partitions("tx", pid, 0, [TP1]) is ErrorCode.NONE

    run(scenario())


def test_end_txn_behind_a_handed_over_add_partitions_waits_for_it():
    """A client pipelining its requests (kafkalite handles a connection's requests
    concurrently) may abort the next transaction while that transaction's first
    AddPartitionsToTxn still waits for the previous markers: the EndTxn waits too."""

    async def scenario():
        log, markers = MemoryLog(), RecordingMarkers()
        c = await owned(make(log, markers))
        init = await c.init_producer_id("tx", 60_000)
        pid = init.producer_id
        assert await c.add_partitions("tx", pid, 0, [TP0]) is ErrorCode.NONE
        markers.release.clear()
        assert await c.end_transaction("tx", pid, 0, commit=True) is ErrorCode.NONE
        add = asyncio.ensure_future(c.add_partitions("tx", pid, 0, [TP1]))
        await wait_until(lambda: handed_over(c) or add.done())
        waiting = waits_for_completion(c)
        abort = asyncio.ensure_future(c.end_transaction("tx", pid, 0, commit=False))
        await wait_until(lambda: waiting.is_set() or abort.done())
        assert not add.done() and not abort.done()
        markers.release.set()
        assert await add is ErrorCode.NONE
        assert await abort is ErrorCode.NONE
        await settle(c)
        assert markers.sent == [(5, pid, 0, True, (TP0,)), (5, pid, 0, False, (TP1,))]
        assert log.states(0)[-4:] == [
            ("tx", S.PREPARE_COMMIT),
            ("tx", S.ONGOING),
            ("tx", S.PREPARE_ABORT),
            ("tx", S.COMPLETE_ABORT),
        ]

    run(scenario())
