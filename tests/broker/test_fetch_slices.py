"""A fetch of many partitions is read, its follower state updated, its waiting reads made and
its session bookkeeping done in slices that yield to the loop (decision 0057).

The property test drives two identical leaders through the real Fetch handler with the same
appends, follower and consumer fetches (full and incremental sessions, forgotten partitions,
small byte budgets), re-elections, DeleteRecords and clock moves; one answers every fetch in
slices of a partition or two, the other in one go. Their encoded answers and their replica
state must agree at every step. The other tests check what only slicing can change: other
work runs between the slices, a waiting fetch's checks do not read, and a waiting fetch that
is cancelled, loses a leadership or meets a shutdown is handled as before."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import inspect
import random
import sys
import tempfile
import types
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkalite.apis import fetch as fetch_handler
from kafkalite.apis.base import BrokerServices, RequestContext
from kafkalite.broker import replica_manager as replica_manager_module
from kafkalite.broker.fetch_session import FetchSessionCache, FetchSessionHandler
from kafkalite.broker.replica_manager import (
    DelayedSlicedFetch,
    ReplicaManager,
    ReplicaManagerConfig,
)
from kafkalite.broker.types import FetchInfo, FetchParams
from kafkalite.config import BrokerConfig
from kafkalite.protocol import frames
from kafkalite.protocol.api import ApiKey, request_class
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager
from tests.loop_turns import LoopTurns, next_turn

from .conftest import MockTime, batch, leader_state, wait_until

N = 7
TPS = [TopicPartition("t", p) for p in range(N)]
FOLLOWER = 2
LAG_MS = 10_000
VERSION = 12


@contextlib.contextmanager
def tiny_slices(chunk: int = 1):
    """Slices of ``chunk`` partitions, a yield after each (the defaults yield after 5 ms)."""
    with (
        mock.patch.object(replica_manager_module, "FETCH_SLICE_CHUNK", chunk),
        mock.patch.object(replica_manager_module, "SLICE_ITEMS", 1),
        mock.patch.object(fetch_handler, "FETCH_SLICE_CHUNK", chunk),
        mock.patch.object(fetch_handler, "SLICE_ITEMS", 1),
    ):
        yield


def fetch_request(
    infos: dict[TopicPartition, FetchInfo],
    *,
    replica_id: int,
    session_id: int = 0,
    epoch: int = -1,
    forgotten: list[TopicPartition] = (),  # type: ignore[assignment]
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    version: int = VERSION,
):
    cls = request_class(ApiKey.FETCH, version)
    module = sys.modules[cls.__module__]

    def make(entity, **fields):  # type: ignore[no-untyped-def]
        return entity(**{k: v for k, v in fields.items() if k in entity.__dataclass_fields__})

    by_topic: dict[str, list] = {}
    for tp, info in infos.items():
        by_topic.setdefault(tp.topic, []).append(
            make(
                module.FetchPartition,
                partition=tp.partition,
                current_leader_epoch=info.current_leader_epoch,
                fetch_offset=info.fetch_offset,
                last_fetched_epoch=-1,
                log_start_offset=info.log_start_offset,
                partition_max_bytes=info.max_bytes,
            )
        )
    forgotten_by_topic: dict[str, list[int]] = {}
    for tp in forgotten:
        forgotten_by_topic.setdefault(tp.topic, []).append(tp.partition)
    return make(
        cls,
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=tuple(
            make(module.FetchTopic, topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
        forgotten_topics_data=tuple(
            make(module.ForgottenTopic, topic=t, partitions=tuple(ps))
            for t, ps in forgotten_by_topic.items()
        )
        if version >= 7
        else (),
        rack_id="",
    )


def materialised(parts) -> bytes:
    """An encoded response's bytes (log slices read through their views)."""
    out = bytearray()
    for part in parts:
        view = getattr(part, "view", None)
        out += bytes(view()) if view is not None and not isinstance(part, memoryview) else part
    return bytes(out)


class Leader:
    """A leader of the partitions (replicas 1 and 2) behind the real Fetch handler, with a
    session cache that parks (as a broker's does)."""

    def __init__(self, root: Path, time: MockTime, sliced: bool, partitions=TPS) -> None:
        self.tps = list(partitions)
        self.lm = LogManager([str(root)], LogConfig())
        self.lm.startup()
        self.rm = ReplicaManager(
            1, self.lm, ReplicaManagerConfig(replica_lag_time_max_ms=LAG_MS), time
        )
        self.rm.fetch_slice_partitions = 0 if sliced else 1 << 30
        self.cache = FetchSessionCache(
            10,
            time=time,
            rng=random.Random(7),
            park=self.rm.park_idle_partition,
            forget_parked=self.rm.forget_parked_partition,
        )
        self.services = BrokerServices(
            config=BrokerConfig.load(environ={}),
            broker_id=1,
            replica_manager=self.rm,
            fetch_sessions=self.cache,
            log_manager=self.lm,
        )
        self.epochs = dict.fromkeys(self.tps, 0)

    async def elect(self, tp: TopicPartition) -> None:
        state = leader_state(
            tp.topic,
            tp.partition,
            leader=1,
            leader_epoch=self.epochs[tp],
            isr=(1, 2),
            replicas=(1, 2),
        )
        await self.rm.become_leader_or_follower_async(0, 1, [state])

    async def answer(self, request, version: int = VERSION) -> bytes:
        header = types.SimpleNamespace(api_version=version, correlation_id=1, client_id="t")
        ctx = RequestContext(header, None, self.services, None)  # type: ignore[arg-type]
        result = fetch_handler.handle_fetch(ctx, request)
        if inspect.isawaitable(result):
            result = await result
        return materialised(result)

    def state(self, now: int) -> dict:
        out = {}
        for tp in self.tps:
            partition = self.rm.partitions[tp]
            log = partition.log
            remote = partition.remote_replicas.get(FOLLOWER)
            out[tp] = (
                log.log_end_offset,
                log.high_watermark,
                log.log_start_offset,
                partition.isr,
                partition.leader_epoch,
                (remote.log_end_offset, remote.log_start_offset) if remote else None,
                tuple(
                    frozenset(partition.out_of_sync_replica_ids(now + d))
                    for d in (0, LAG_MS // 2, LAG_MS + 1)
                ),
            )
        return out

    async def close(self) -> None:
        await self.rm.shutdown()
        self.lm.shutdown()


class Follower:
    """The follower's side: its fetch offsets and its session handler (a replica fetcher's)."""

    def __init__(self) -> None:
        self.offsets = dict.fromkeys(TPS, 0)
        self.max_bytes = dict.fromkeys(TPS, 1 << 20)
        self.followed = set(TPS)
        self.handler = FetchSessionHandler()

    def wanted(self) -> dict[TopicPartition, FetchInfo]:
        return {
            tp: FetchInfo(self.offsets[tp], self.max_bytes[tp], 0)
            for tp in TPS
            if tp in self.followed
        }

    def answered(self, request, raw: bytes) -> None:
        _, response = frames.decode_response(ApiKey.FETCH, VERSION, raw[4:])
        returned = []
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, p.partition_index)
                returned.append(tp)
                if p.records:
                    for _, header in iter_batch_headers(memoryview(p.records)):
                        self.offsets[tp] = header.base_offset + header.last_offset_delta + 1
        self.handler.handle_response(request, response.error_code, response.session_id, returned)


step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, N - 1), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.integers(0, N - 1), st.sampled_from([1 << 20, 200, 1])),
    st.tuples(st.just("consume"), st.integers(0, N - 1), st.sampled_from([1 << 20, 200, 1])),
    st.tuples(st.just("delete"), st.integers(0, N - 1), st.just(0)),
    st.tuples(st.just("elect"), st.integers(0, N - 1), st.just(0)),
    st.tuples(st.just("clock"), st.integers(0, N - 1), st.integers(1, 2 * LAG_MS)),
    st.tuples(st.just("resize"), st.integers(0, N - 1), st.sampled_from([1 << 20, 100])),
    st.tuples(st.just("forget"), st.integers(0, N - 1), st.just(0)),
    st.tuples(st.just("reset"), st.just(0), st.just(0)),
)


async def run(steps, chunk: int) -> None:
    time = MockTime()
    follower = Follower()
    with tempfile.TemporaryDirectory() as root, tiny_slices(chunk):
        leaders = [
            Leader(Path(root) / "sliced", time, True),
            Leader(Path(root) / "whole", time, False),
        ]
        try:
            for leader in leaders:
                for tp in TPS:
                    await leader.elect(tp)
            for kind, p, n in steps:
                tp = TPS[p]
                if kind == "fetch":
                    request = follower.handler.build(follower.wanted())
                    wire = fetch_request(
                        request.to_send,
                        replica_id=FOLLOWER,
                        session_id=request.session_id,
                        epoch=request.epoch,
                        forgotten=request.to_forget,
                        max_bytes=n,
                    )
                    answers = [await leader.answer(wire) for leader in leaders]
                    assert answers[0] == answers[1], kind
                    follower.answered(request, answers[0])
                elif kind == "consume":  # sessionless; v4 has no sessions at all
                    version = VERSION if p % 2 else 4
                    infos = {t: FetchInfo(p % 3, 1 << 20, 0) for t in TPS}
                    wire = fetch_request(infos, replica_id=-1, max_bytes=n, version=version)
                    answers = [await leader.answer(wire, version) for leader in leaders]
                    assert answers[0] == answers[1], kind
                elif kind == "resize":
                    follower.max_bytes[tp] = n
                elif kind == "forget":
                    if tp in follower.followed and len(follower.followed) > 1:
                        follower.followed.discard(tp)
                    else:
                        follower.followed.add(tp)
                elif kind == "reset":
                    follower.handler.reset()
                elif kind == "clock":
                    time.advance(n)
                for leader in leaders:
                    partition = leader.rm.partitions[tp]
                    if kind == "append":
                        result = await leader.rm.append_records(1000, 1, {tp: batch(n)})
                        assert result[tp].error_code is ErrorCode.NONE
                    elif kind == "delete":
                        partition.delete_records_on_leader(partition.log.high_watermark)
                    elif kind == "elect":
                        leader.epochs[tp] += 1
                        await leader.elect(tp)
                now = time.milliseconds()
                assert leaders[0].state(now) == leaders[1].state(now), (kind, p, n)
        finally:
            for leader in leaders:
                await leader.close()


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, max_size=20), chunk=st.integers(1, 3))
# The byte budget carries over from slice to slice.
@example(steps=[("append", 0, 2), ("append", 1, 2), ("fetch", 0, 1)], chunk=1)
@example(steps=[("append", 0, 2), ("append", 1, 2), ("consume", 1, 200)], chunk=2)
# A v4 fetch: no session, the answer still encoded in steps.
@example(steps=[("append", 0, 2), ("append", 3, 1), ("consume", 0, 1 << 20)], chunk=2)
# An incremental round after a full one, records moved to the back, then parked.
@example(
    steps=[("append", 2, 1), ("fetch", 0, 1 << 20), ("append", 5, 1), ("fetch", 0, 1 << 20)]
    + [("fetch", 0, 1 << 20)] * 3,
    chunk=1,
)
def test_a_sliced_fetch_answers_what_one_read_answers(steps, chunk):
    asyncio.run(run(steps, chunk))


async def test_other_work_runs_between_the_slices_of_a_large_fetch(tmp_path, mock_time):
    """A follower's first fetch of a session over 7 partitions, read one partition a slice:
    the loop turns in between, and a record appended meanwhile to a partition not yet read is
    in the answer (each partition is read as it is when its slice comes). The follower's fetch
    state and the HW move on every partition, as in one read."""
    leader = Leader(tmp_path, mock_time, True)
    try:
        for tp in TPS:
            await leader.elect(tp)
            await leader.rm.append_records(1000, 1, {tp: batch(1)})
        # The follower already has the record of every partition: fetching at offset 1 moves
        # the HW to 1 everywhere.
        infos = {tp: FetchInfo(1, 1 << 20, 0) for tp in TPS}
        wire = fetch_request(infos, replica_id=FOLLOWER, epoch=0)
        last = TPS[-1]

        def produce() -> None:
            asyncio.ensure_future(leader.rm.append_records(1000, 1, {last: batch(2)}))

        with tiny_slices(), LoopTurns(at_turn=2, action=produce) as turns:
            raw = await leader.answer(wire)
        assert turns.turns >= N - 1
        _, response = frames.decode_response(ApiKey.FETCH, VERSION, raw[4:])
        parts = {p.partition_index: p for t in response.responses for p in t.partitions}
        assert len(parts) == N and response.session_id != 0
        offsets = [h.base_offset for _, h in iter_batch_headers(memoryview(parts[N - 1].records))]
        assert offsets == [1], "read after the append made between the slices"
        for tp in TPS:
            partition = leader.rm.partitions[tp]
            assert partition.remote_replicas[FOLLOWER].log_end_offset == 1
            assert partition.log.high_watermark == 1
        # Each partition was read before its follower state moved its HW, as in Kafka: the
        # answer has the HW of 0, so no partition is parked (the next round tells the HW).
        assert all(parts[p].high_watermark == 0 for p in range(N))
        assert not leader.cache.get(response.session_id).parked
    finally:
        await leader.close()


async def waiting_fetch(leader: Leader, max_wait_ms: int = 600_000, min_bytes: int = 1):
    """A caught-up follower's fetch of every partition that waits (in slices, it is large)."""
    for tp in leader.tps:
        await leader.elect(tp)
    infos = {tp: FetchInfo(0, 1 << 20, 0) for tp in leader.tps}
    params = FetchParams(replica_id=FOLLOWER, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
    task = asyncio.ensure_future(leader.rm.fetch_messages(params, infos))
    await wait_until(lambda: leader.rm.fetch_purgatory.delayed == 1)
    (operation,) = {
        op for tp in leader.tps for op in leader.rm.fetch_purgatory._watchers[tp].values()
    }
    assert isinstance(operation, DelayedSlicedFetch)
    return task, operation


async def test_a_waiting_large_fetch_is_read_by_its_own_task_not_by_the_append(tmp_path, mock_time):
    """The append that gives a waiting large fetch its news does not read the fetch's
    partitions (the check is the cheap one); the fetch's task reads them, in slices, and
    answers with the record."""
    leader = Leader(tmp_path, mock_time, True)
    try:
        with tiny_slices():
            task, operation = await waiting_fetch(leader)
            with mock.patch.object(
                leader.rm, "read_from_local_log", side_effect=AssertionError("read inline")
            ):
                await leader.rm.append_records(1000, 1, {TPS[3]: batch(2)})
                assert operation.news and operation.reads == 0 and not task.done()
                # Further news while the read is due costs no walk and no read.
                await leader.rm.append_records(1000, 1, {TPS[5]: batch(1)})
                assert operation.reads == 0
            result = await asyncio.wait_for(task, 10)
        assert operation.reads == 1 and operation.is_completed
        assert len(result[TPS[3]].records) > 0 and len(result[TPS[5]].records) > 0
        assert leader.rm.fetch_purgatory.delayed == 0
        assert all(leader.rm.fetch_purgatory.watched(tp) == 0 for tp in TPS)
    finally:
        await leader.close()


async def test_a_read_that_does_not_satisfy_min_bytes_waits_again_then_times_out(
    tmp_path, mock_time
):
    """News that does not bring ``min_bytes``: the task reads, waits again (still watching),
    and answers with what there is when the wait runs out."""
    leader = Leader(tmp_path, mock_time, True)
    try:
        with tiny_slices():
            task, operation = await waiting_fetch(leader, max_wait_ms=5_000, min_bytes=1 << 20)
            await leader.rm.append_records(1000, 1, {TPS[1]: batch(1)})
            # read once and waiting again (re-armed): `reads` counts a read from its start, and a
            # timer that fired while that read was under way would be answered by that read
            await wait_until(
                lambda: operation.reads == 1 and not operation.news and not operation.wake.done()
            )
            assert not task.done() and leader.rm.fetch_purgatory.watched(TPS[1]) == 1
            mock_time.advance(5_000)
            result = await asyncio.wait_for(task, 10)
        assert operation.reads == 2
        assert len(result[TPS[1]].records) > 0
        assert leader.rm.fetch_purgatory.delayed == 0
    finally:
        await leader.close()


async def test_a_waiting_large_fetch_whose_connection_closes_stops_watching(tmp_path, mock_time):
    leader = Leader(tmp_path, mock_time, True)
    try:
        with tiny_slices():
            task, operation = await waiting_fetch(leader)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert operation.is_completed
        assert leader.rm.fetch_purgatory.delayed == 0
        assert all(leader.rm.fetch_purgatory.watched(tp) == 0 for tp in TPS)
        assert mock_time.pending_timers == 0
    finally:
        await leader.close()


async def test_a_waiting_large_fetch_is_cancelled_between_slices_of_its_read(tmp_path, mock_time):
    """Cancelled while its task reads (between two slices): it stops watching too."""
    leader = Leader(tmp_path, mock_time, True)
    try:
        with tiny_slices():
            task, operation = await waiting_fetch(leader)
            await leader.rm.append_records(1000, 1, {TPS[0]: batch(1)})
            while operation.reads == 0:
                await next_turn()  # until its read has begun (and paused after a partition)
            assert not task.done()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        assert task.cancelled() and operation.is_completed
        assert leader.rm.fetch_purgatory.delayed == 0
    finally:
        await leader.close()


async def test_a_waiting_large_fetch_answers_a_lost_leadership(tmp_path, mock_time):
    """A partition of the waiting fetch becomes a follower here: answered with
    NOT_LEADER_OR_FOLLOWER for it, as a fetch read in one go is."""
    leader = Leader(tmp_path, mock_time, True)
    try:
        with tiny_slices():
            task, _ = await waiting_fetch(leader)
            tp = TPS[4]
            state = leader_state(
                tp.topic, tp.partition, leader=2, leader_epoch=1, isr=(1, 2), replicas=(1, 2)
            )
            await leader.rm.become_leader_or_follower_async(0, 1, [state])
            result = await asyncio.wait_for(task, 10)
        assert result[tp].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert all(result[t].error_code is ErrorCode.NONE for t in TPS if t != tp)
    finally:
        await leader.close()


async def test_a_shutdown_answers_a_waiting_large_fetch(tmp_path, mock_time):
    """The replica manager's shutdown completes the waiting fetch, read before it returns."""
    leader = Leader(tmp_path, mock_time, True)
    try:
        with tiny_slices():
            task, operation = await waiting_fetch(leader)
            await leader.rm.shutdown()
            result = await asyncio.wait_for(task, 10)
        assert operation.reads == 0 and set(result) == set(TPS)
        assert all(data.error_code is ErrorCode.NONE for data in result.values())
    finally:
        leader.lm.shutdown()


async def test_small_fetches_keep_their_path(tmp_path, mock_time):
    """Up to ``fetch_slice_partitions`` partitions: answered at once, without a coroutine."""
    leader = Leader(tmp_path, mock_time, False)
    leader.rm.fetch_slice_partitions = N
    try:
        for tp in TPS:
            await leader.elect(tp)
        infos = {tp: FetchInfo(0, 1 << 20, 0) for tp in TPS}
        result = leader.rm.fetch_messages_now_or_later(FetchParams(replica_id=FOLLOWER), infos)
        assert isinstance(result, dict)
        leader.rm.fetch_slice_partitions = N - 1
        pending = leader.rm.fetch_messages_now_or_later(FetchParams(replica_id=FOLLOWER), infos)
        assert inspect.iscoroutine(pending)
        assert await pending == result
    finally:
        await leader.close()
