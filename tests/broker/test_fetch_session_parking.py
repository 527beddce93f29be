"""A follower's fetch session on the leader reads only the partitions with news (the others are
parked until their LEO, HW, log start or leadership moves): whatever happens, it answers what
reading every partition would answer, and leaves the ISR decisions where they would be.

Two identical leaders get the same appends, HW moves, log start moves, re-elections, clock
moves, ISR checks, session changes and changes of the follower's liveness in their metadata
(only a live broker's replica may join an ISR); one parks, one reads everything; their answers
and their replica state must agree at every step."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kafkalite.broker.fetch_session import FetchSessionCache, IncrementalFetchContext
from kafkalite.broker.metadata_cache import MetadataBroker, MetadataCache
from kafkalite.broker.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.broker.types import FetchInfo, FetchParams
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager

from .conftest import MockTime, batch, leader_state, wait_until

TPS = [TopicPartition("t", p) for p in range(3)]
FOLLOWER = 2
LAG_MS = 10_000

step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("fetch"), st.integers(0, 2), st.integers(0, 2)),
    st.tuples(st.just("delete"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("elect"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("clock"), st.integers(0, 2), st.integers(1, 2 * LAG_MS)),
    st.tuples(st.just("shrink"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("resize"), st.integers(0, 2), st.integers(1, 3)),
    st.tuples(st.just("forget"), st.integers(0, 2), st.just(0)),
    st.tuples(st.just("live"), st.just(0), st.integers(0, 1)),
)


def set_follower_alive(cache: MetadataCache, alive: bool) -> None:
    """The leaders' metadata: the follower's broker alive in it or not (only a live broker's
    replica may join an ISR)."""
    brokers = [MetadataBroker(1, {}), MetadataBroker(FOLLOWER, {})]
    cache.set_alive_brokers(brokers if alive else brokers[:1])


class Leader:
    """One leader of the three partitions (replicas 1 and 2), with its session cache and the
    follower's view of the session (what it would send and what it knows)."""

    def __init__(
        self, root: Path, time: MockTime, park: bool, metadata: MetadataCache | None = None
    ) -> None:
        self.lm = LogManager([str(root)], LogConfig())
        self.lm.startup()
        self.rm = ReplicaManager(
            1,
            self.lm,
            ReplicaManagerConfig(replica_lag_time_max_ms=LAG_MS),
            time,
            metadata_cache=metadata,
        )
        self.cache = FetchSessionCache(
            10,
            time=time,
            park=self.rm.park_idle_partition if park else None,
            forget_parked=self.rm.forget_parked_partition if park else None,
        )
        self.epochs = dict.fromkeys(TPS, 0)
        self.session_id = 0
        self.session_epoch = 0
        self.offsets = dict.fromkeys(TPS, 0)  # the follower's fetch offsets
        self.max_bytes = dict.fromkeys(TPS, 1 << 20)
        self.pending: dict[TopicPartition, FetchInfo] = {tp: self.info(tp) for tp in TPS}
        self.forget: list[TopicPartition] = []
        self.followed = set(TPS)

    def info(self, tp: TopicPartition) -> FetchInfo:
        return FetchInfo(self.offsets[tp], self.max_bytes[tp], 0)

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

    def fetch(self) -> dict:
        """One round: the request the follower's handler would send, the leader's answer (as
        apis/fetch.py serves it, without waiting), the follower's offsets moved by it."""
        context = self.cache.new_context(
            self.session_id,
            self.session_epoch,
            self.pending,
            self.forget,
            is_follower=True,
            replica_id=FOLLOWER,
        )
        assert context.error_code is ErrorCode.NONE
        params = FetchParams(replica_id=FOLLOWER, max_wait_ms=0)
        results = self.rm.fetch_messages_now_or_later(params, context.fetch_infos)
        assert isinstance(results, dict)
        answer, session_id = context.update_and_generate_response(results)
        if not isinstance(context, IncrementalFetchContext):
            self.session_id = session_id
            self.session_epoch = 1
        else:
            self.session_epoch += 1
        self.pending, self.forget = {}, []
        seen = {}
        for tp, data in answer:
            end = self.offsets[tp]
            if data.records:
                for _, header in iter_batch_headers(data.records.view()):
                    end = header.base_offset + header.last_offset_delta + 1
            seen[tp] = (data.error_code, data.high_watermark, data.log_start_offset, end)
            if end != self.offsets[tp]:
                self.offsets[tp] = end
                self.pending[tp] = self.info(tp)
        return seen

    def state(self, now: int) -> dict:
        out = {}
        for tp in TPS:
            partition = self.rm.partitions[tp]
            log = partition.log
            out[tp] = (
                log.log_end_offset,
                log.high_watermark,
                log.log_start_offset,
                partition.isr,
                partition.leader_epoch,
                # ISR decisions now and at later times, on what each leader knows
                tuple(
                    frozenset(partition.out_of_sync_replica_ids(now + d))
                    for d in (0, LAG_MS // 2, LAG_MS + 1)
                ),
            )
        return out

    def close(self) -> None:
        self.lm.shutdown()


async def run(steps) -> None:
    time = MockTime()
    metadata = MetadataCache(1)
    set_follower_alive(metadata, True)
    with tempfile.TemporaryDirectory() as root:
        leaders = [
            Leader(Path(root) / "parked", time, True, metadata),
            Leader(Path(root) / "all", time, False, metadata),
        ]
        try:
            for leader in leaders:
                for tp in TPS:
                    await leader.elect(tp)
            for kind, p, n in steps:
                tp = TPS[p]
                answers = []
                for leader in leaders:
                    partition = leader.rm.partitions[tp]
                    if kind == "append":
                        result = await leader.rm.append_records(1000, 1, {tp: batch(n)})
                        assert result[tp].error_code is ErrorCode.NONE
                    elif kind == "fetch":
                        for _ in range(n + 1):
                            answers.append(leader.fetch())
                    elif kind == "delete":
                        target = (
                            partition.log.high_watermark
                            if n
                            else partition.log.log_start_offset + 1
                        )
                        if target <= partition.log.high_watermark:
                            partition.delete_records_on_leader(target)
                    elif kind == "elect":
                        leader.epochs[tp] += 1
                        await leader.elect(tp)
                    elif kind == "shrink":
                        proposal = partition.maybe_shrink_isr(time.milliseconds())
                        if proposal is not None:
                            leader.rm._submit_isr_update(partition, proposal)
                    elif kind == "resize":
                        leader.max_bytes[tp] = n << 20
                        if tp in leader.followed:
                            leader.pending[tp] = leader.info(tp)
                    elif kind == "forget":
                        if tp in leader.followed and len(leader.followed) > 1:
                            leader.followed.discard(tp)
                            leader.forget.append(tp)
                            leader.pending.pop(tp, None)
                        elif tp not in leader.followed:
                            leader.followed.add(tp)
                            if tp in leader.forget:  # forgotten and back in one request
                                leader.forget.remove(tp)
                            leader.pending[tp] = leader.info(tp)
                if kind == "clock":
                    time.advance(n)
                elif kind == "live":
                    set_follower_alive(metadata, bool(n))
                if answers:
                    half = len(answers) // 2
                    assert answers[:half] == answers[half:], (kind, answers)
                now = time.milliseconds()
                assert leaders[0].state(now) == leaders[1].state(now), (kind, p, n)
                assert leaders[0].offsets == leaders[1].offsets
            # Everything delivered: once the follower has fetched until nothing is new, both
            # agree, and the parked session reads only the partitions it is told an error about
            # (the model follower does not act on errors) and those whose ISR it is not in (it
            # may not join while its broker is not alive).
            for _ in range(3):
                last = leaders[0].fetch()
                assert last == leaders[1].fetch()
            session = leaders[0].cache.get(leaders[0].session_id)
            for tp in leaders[0].followed - session.parked:
                assert (
                    FOLLOWER not in leaders[0].rm.partitions[tp].isr
                    or last[tp][0] is not ErrorCode.NONE
                )
            assert set(session.active) == leaders[0].followed - session.parked
        finally:
            for leader in leaders:
                await leader.rm.shutdown()
                leader.close()


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, max_size=25))
# Parked past replica.lag.time.max.ms, then a record: the follower was fetching all along.
@example(steps=[("fetch", 0, 2), ("clock", 0, 15_000), ("fetch", 0, 0), ("append", 1, 1)])
# Forgotten while parked, then a record: the follower fetched it until it forgot it.
@example(
    steps=[("fetch", 0, 0), ("clock", 0, 5001), ("fetch", 0, 0), ("forget", 0, 0)]
    + [("fetch", 0, 0), ("append", 0, 1)]
)
# The log start moves under a parked partition (DeleteRecords).
@example(steps=[("append", 0, 2), ("fetch", 0, 2), ("delete", 0, 1), ("fetch", 0, 1)])
# Out of the ISR and at the LEO while its broker is not alive in the leader's metadata, then
# alive again: it joins at its next fetch, although nothing moved on the partition (a broker
# restarted at once after its controlled shutdown: the leaders heard of it after its first
# fetches).
@example(
    steps=[("live", 0, 0), ("clock", 0, 15_000), ("shrink", 0, 0), ("fetch", 0, 2)]
    + [("live", 0, 1), ("fetch", 0, 0)]
)
# The same follower still not alive at the end: it stays out of the ISR, read at every fetch.
@example(steps=[("live", 0, 0), ("clock", 0, 15_000), ("shrink", 0, 0), ("fetch", 0, 2)])
def test_a_parked_session_answers_what_reading_every_partition_answers(steps):
    asyncio.run(run(steps))


async def test_a_waiting_follower_fetch_wakes_on_news(tmp_path):
    """A follower's fetch with every partition parked waits (no answer, no purgatory watch on
    each partition) and is answered as soon as one of them gets a record."""
    time = MockTime()
    leader = Leader(tmp_path, time, True)
    try:
        for tp in TPS:
            await leader.elect(tp)
        await leader.rm.append_records(1000, 1, {TPS[1]: batch(2)})
        for _ in range(3):
            leader.fetch()  # records, then the HW, then nothing: all parked
        session = leader.cache.get(leader.session_id)
        assert session.parked == set(TPS) and not session.active
        context = leader.cache.new_context(
            leader.session_id, leader.session_epoch, {}, is_follower=True, replica_id=FOLLOWER
        )
        assert context.waits_for_news
        waiting = asyncio.ensure_future(leader.rm.wait_for_session_news(session, 600_000))
        await wait_until(lambda: session.waiter is not None)  # the wait is registered
        assert not waiting.done()
        await leader.rm.append_records(1000, 1, {TPS[2]: batch(1)})
        await wait_until(waiting.done)
        assert list(context.fetch_infos) == [TPS[2]]
    finally:
        await leader.rm.shutdown()
        leader.close()


async def test_a_waiting_fetch_with_active_partitions_wakes_on_a_parked_ones_news(tmp_path):
    """A round that reads a partition with nothing new waits in purgatory watching that
    partition only; a record on one of the session's parked partitions answers it at once."""
    time = MockTime()
    leader = Leader(tmp_path, time, True)
    try:
        for tp in TPS:
            await leader.elect(tp)
        for _ in range(3):
            leader.fetch()
        session = leader.cache.get(leader.session_id)
        assert session.parked == set(TPS)
        changed = {TPS[0]: FetchInfo(0, 1 << 10, 0)}  # new parameters: read, nothing new
        context = leader.cache.new_context(
            leader.session_id, leader.session_epoch, changed, is_follower=True, replica_id=FOLLOWER
        )
        assert list(context.fetch_infos) == [TPS[0]]
        params = FetchParams(replica_id=FOLLOWER, max_wait_ms=600_000)
        pending = leader.rm.fetch_messages_now_or_later(params, context.fetch_infos, session)
        assert not isinstance(pending, dict)
        waiting = asyncio.ensure_future(pending)
        await wait_until(lambda: session.waiter is not None)  # the wait is registered
        assert not waiting.done()
        await leader.rm.append_records(1000, 1, {TPS[2]: batch(1)})
        await wait_until(waiting.done)
        assert TPS[2] in context.fetch_infos  # read from the next round on
    finally:
        await leader.rm.shutdown()
        leader.close()
