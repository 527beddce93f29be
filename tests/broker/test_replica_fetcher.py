"""Replication between two in-process brokers: follower fetch, ISR expansion, acks=all with a
real follower, KIP-101 truncation after a leader change, out-of-range resets, and the remote
endpoint's request/response mapping."""

from __future__ import annotations

import asyncio
import weakref
from types import SimpleNamespace

import pytest

from kafkalite.broker import replica_fetcher as replica_fetcher_module
from kafkalite.broker.partition import Partition
from kafkalite.broker.replica_fetcher import (
    FetchState,
    LocalLeaderEndPoint,
    RemoteLeaderEndPoint,
    ReplicaFetcher,
    ReplicaFetcherConfig,
    ReplicaFetcherManager,
    fetcher_id,
)
from kafkalite.broker.replica_manager import ReplicaManager, ReplicaManagerConfig
from kafkalite.broker.types import EARLIEST_TIMESTAMP, FetchInfo, FetchParams
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.frames import decode_request, encode_request, parse_request_header
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log_manager import LogManager
from tests.collector import collector_off

from .conftest import batch, leader_state, wait_until

TP = TopicPartition("t", 0)
DEADLINE = 5.0


class ReplicaRig:
    """Brokers 1 and 2 in one process; each follower reaches leaders through their
    ReplicaManager directly (LocalLeaderEndPoint)."""

    def __init__(self, tmp_path, mock_time, min_isr=1, num_fetchers=1):
        self.time = mock_time
        self.log_managers = {}
        self.brokers: dict[int, ReplicaManager] = {}
        for broker_id in (1, 2):
            lm = LogManager(
                [str(tmp_path / f"b{broker_id}")], LogConfig(min_insync_replicas=min_isr)
            )
            lm.startup()
            self.log_managers[broker_id] = lm
            rm = ReplicaManager(
                broker_id, lm, ReplicaManagerConfig(replica_lag_time_max_ms=10_000), mock_time
            )
            rm.replica_fetcher_manager = ReplicaFetcherManager(
                rm,
                lambda leader_id, me=broker_id: LocalLeaderEndPoint(self.brokers[leader_id], me),
                mock_time,
                ReplicaFetcherConfig(
                    replica_fetch_wait_max_ms=60_000,
                    replica_fetch_backoff_ms=100,
                    num_replica_fetchers=num_fetchers,
                ),
            )
            self.brokers[broker_id] = rm

    async def leader_and_isr(self, leader, epoch, isr, controller_epoch=1):
        for rm in self.brokers.values():
            await rm.become_leader_or_follower_async(
                0,
                controller_epoch,
                [leader_state(leader=leader, leader_epoch=epoch, isr=isr, replicas=(1, 2))],
            )

    def log(self, broker_id):
        return self.log_managers[broker_id].get_log("t", 0)

    def batches(self, broker_id):
        info = self.log(broker_id).read(self.log(broker_id).log_start_offset, 1 << 30)
        return [
            (h.base_offset, h.partition_leader_epoch, h.crc)
            for _, h in iter_batch_headers(info.records.view())
        ]

    async def close(self):
        for rm in self.brokers.values():
            await rm.replica_fetcher_manager.shutdown()
            await rm.shutdown()
        for lm in self.log_managers.values():
            lm.shutdown()


@pytest.fixture
async def cluster(tmp_path, mock_time):
    c = ReplicaRig(tmp_path, mock_time)
    yield c
    await c.close()


async def produce(rm, data, acks=1):
    return (await rm.append_records(30_000, acks, {TP: data}))[TP]


async def test_follower_replicates_and_joins_isr(cluster):
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    await cluster.leader_and_isr(leader=1, epoch=0, isr=(1,))
    for _ in range(3):
        assert (await produce(leader, batch(2))).error_code is ErrorCode.NONE
    await wait_until(lambda: cluster.log(2).log_end_offset == 6)
    await wait_until(lambda: leader.partitions[TP].isr == {1, 2})
    assert cluster.batches(2) == cluster.batches(1)
    # The follower's HW follows the leader's on its next fetch.
    await produce(leader, batch(1))
    await wait_until(lambda: cluster.log(1).high_watermark == 7)  # the follower fetched 7
    # As in Kafka, a HW move does not complete the follower's waiting fetch: it learns the HW
    # when that fetch returns (here at replica.fetch.wait.max.ms on the manual clock).
    await wait_until(lambda: leader.fetch_purgatory.watched(TP) == 1)
    cluster.time.advance(60_000)
    await wait_until(lambda: cluster.log(2).high_watermark == 7)
    assert cluster.log(2).high_watermark <= cluster.log(2).log_end_offset
    # The follower refuses client writes and consumer reads.
    assert (await produce(follower, batch())).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_acks_all_completes_through_the_real_follower(cluster):
    leader = cluster.brokers[1]
    await cluster.leader_and_isr(leader=1, epoch=0, isr=(1, 2))
    result = await asyncio.wait_for(produce(leader, batch(5), acks=-1), DEADLINE)
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert cluster.log(1).high_watermark == 5
    assert cluster.log(2).log_end_offset == 5


async def test_leader_change_truncates_divergent_tail(cluster):
    """Broker 1 leads epoch 0 and writes 3 records both replicas get, then 2 more (acks=1)
    that never reach broker 2. Broker 2 becomes leader (epoch 1) and writes 1 record. When
    broker 1 follows, it truncates its epoch-0 tail at offset 3 (not at its HW) and copies
    the leader's log: both logs end identical."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await cluster.leader_and_isr(leader=1, epoch=0, isr=(1, 2))
    await asyncio.wait_for(produce(b1, batch(3), acks=-1), DEADLINE)
    await wait_until(lambda: cluster.log(2).log_end_offset == 3)
    b2.replica_fetcher_manager.remove_fetcher_for_partitions([TP])  # broker 2 stops fetching
    await produce(b1, batch(2))
    assert cluster.log(1).log_end_offset == 5 and cluster.log(2).log_end_offset == 3

    await b2.become_leader_or_follower_async(
        0, 2, [leader_state(leader=2, leader_epoch=1, isr=(2,), replicas=(1, 2))]
    )
    await produce(b2, batch(1))
    await b1.become_leader_or_follower_async(
        0, 2, [leader_state(leader=2, leader_epoch=1, isr=(2,), replicas=(1, 2))]
    )
    await wait_until(lambda: cluster.batches(1) == cluster.batches(2))
    assert cluster.log(1).log_end_offset == 4
    assert [epoch for _, epoch, _ in cluster.batches(1)] == [0, 1]
    assert cluster.log(1).leader_epoch_cache.latest_epoch == 1
    await wait_until(lambda: b2.partitions[TP].isr == {1, 2})


async def test_a_follower_that_led_an_epoch_the_leader_missed_truncates_it(cluster):
    """KIP-279: broker 2 leads epoch 1 briefly (broker 1 cut off) and writes records that never
    reach broker 1; broker 1 then leads epoch 2. As follower, broker 2 asks about epoch 1, the
    leader answers with epoch 0 and its end: broker 2 must drop its epoch-1 records (its own
    epoch 0 ended earlier than the leader's) before fetching, or it keeps different records at
    the same offsets and joins the ISR with them."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await cluster.leader_and_isr(leader=1, epoch=0, isr=(1, 2))
    await asyncio.wait_for(produce(b1, batch(3, value=b"common"), acks=-1), DEADLINE)
    await wait_until(lambda: cluster.log(2).log_end_offset == 3)
    b2.replica_fetcher_manager.remove_fetcher_for_partitions([TP])
    await produce(b1, batch(2, value=b"only-on-1"))
    await b2.become_leader_or_follower_async(
        0, 2, [leader_state(leader=2, leader_epoch=1, isr=(2,), replicas=(1, 2))]
    )
    assert (await produce(b2, batch(2, value=b"only-on-2"))).error_code is ErrorCode.NONE
    new_epoch = [leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))]
    await b1.become_leader_or_follower_async(0, 3, new_epoch)
    await produce(b1, batch(1, value=b"epoch-2"))
    await b2.become_leader_or_follower_async(0, 3, new_epoch)
    await wait_until(lambda: cluster.log(2).log_end_offset == cluster.log(1).log_end_offset)
    await wait_until(lambda: b1.partitions[TP].isr == {1, 2})
    assert cluster.batches(2) == cluster.batches(1)


class HeldListOffsets:
    """A leader endpoint whose ListOffsets(earliest) answer, computed at once, is delivered only
    when ``release`` is set (a slow network)."""

    def __init__(self, inner):
        self.inner = inner
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.delivered = asyncio.Event()

    async def fetch(self, params, infos):
        return await self.inner.fetch(params, infos)

    async def fetch_epoch_end_offsets(self, partitions):
        return await self.inner.fetch_epoch_end_offsets(partitions)

    async def fetch_offset(self, tp, epoch, timestamp):
        answer = await self.inner.fetch_offset(tp, epoch, timestamp)
        if timestamp == EARLIEST_TIMESTAMP:
            self.held.set()
            await self.release.wait()
            self.delivered.set()
        return answer

    async def close(self):
        pass


async def test_an_out_of_range_reset_never_touches_a_log_this_broker_now_leads(cluster):
    """Broker 2's fetch is out of range (the leader deleted records); while it asks the leader
    for its log start, the controller makes broker 2 leader and clients write to it. The late
    answer must not restart broker 2's log at the old leader's start (acknowledged records
    were wiped)."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    endpoints = {}

    def held_endpoint(leader_id):
        endpoints[leader_id] = HeldListOffsets(LocalLeaderEndPoint(cluster.brokers[leader_id], 2))
        return endpoints[leader_id]

    b2.replica_fetcher_manager.endpoint_for_leader = held_endpoint
    epoch0 = [leader_state(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2))]
    await b1.become_leader_or_follower_async(0, 1, epoch0)
    await produce(b1, batch(10))
    await b1.delete_records(1000, {TP: 10})
    await b2.become_leader_or_follower_async(0, 1, epoch0)
    await asyncio.wait_for(endpoints[1].held.wait(), DEADLINE)
    await b2.become_leader_or_follower_async(
        0, 2, [leader_state(leader=2, leader_epoch=1, isr=(2,), replicas=(1, 2))]
    )
    assert (await produce(b2, batch(3, value=b"acked"))).error_code is ErrorCode.NONE
    endpoints[1].release.set()
    await asyncio.wait_for(endpoints[1].delivered.wait(), DEADLINE)
    await wait_until(
        lambda: all(not f.partitions for f in b2.replica_fetcher_manager.fetchers.values())
    )
    assert b2.partitions[TP].is_leader
    assert (cluster.log(2).log_start_offset, cluster.log(2).log_end_offset) == (0, 3)


async def test_fenced_follower_stops_until_next_leader_and_isr(cluster):
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await b1.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=3, isr=(1,), replicas=(1, 2))]
    )
    await b2.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))]
    )
    fetcher = b2.replica_fetcher_manager.fetchers[(1, 0)]
    await wait_until(lambda: TP not in fetcher.partitions)  # FENCED_LEADER_EPOCH
    await b2.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=3, isr=(1,), replicas=(1, 2))]
    )
    await produce(b1, batch(2))
    await wait_until(lambda: cluster.log(2).log_end_offset == 2)


async def test_many_fenced_partitions_are_logged_in_one_line(cluster):
    """A leader that moved on answers every partition fenced at once: one log line counts them
    (a line each held the follower's loop 0.1-0.2 s at thousands of partitions)."""
    from structlog.testing import capture_logs

    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    n = 12
    await b1.become_leader_or_follower_async(
        0,
        1,
        [
            leader_state(partition=p, leader=1, leader_epoch=3, isr=(1,), replicas=(1, 2))
            for p in range(n)
        ],
    )
    with capture_logs() as logs:
        await b2.become_leader_or_follower_async(
            0,
            1,
            [
                leader_state(partition=p, leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))
                for p in range(n)
            ],
        )
        await wait_until(
            lambda: not any(f.partitions for f in b2.replica_fetcher_manager.fetchers.values())
        )
    fenced = [entry for entry in logs if entry["event"] == "follower_fenced"]
    assert sum(entry["partitions"] for entry in fenced) == n
    assert len(fenced) < n  # per answer, not per partition
    assert all(len(entry["first"]) <= 5 for entry in fenced)


async def test_an_unexpected_error_fails_the_rounds_partitions_not_the_fetcher(
    cluster, monkeypatch
):
    """A bug while handling an answer stops the round's partitions until the next
    LeaderAndIsr (Kafka marks them failed); the fetcher lives on and follows them again."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    states = [leader_state(leader=1, leader_epoch=1, isr=(1, 2), replicas=(1, 2))]
    await b1.become_leader_or_follower_async(0, 1, states)
    await produce(b1, batch(2))
    original = ReplicaFetcher._process_partition_data
    failures = []

    def failing_once(self, tp, state, data):
        if not failures:
            failures.append(tp)
            raise RuntimeError("a bug")
        return original(self, tp, state, data)

    monkeypatch.setattr(ReplicaFetcher, "_process_partition_data", failing_once)
    await b2.become_leader_or_follower_async(0, 1, states)
    fetcher = b2.replica_fetcher_manager.fetchers[(1, 0)]
    await wait_until(lambda: failures and TP not in fetcher.partitions)
    assert not fetcher._task.done()
    assert cluster.log(2).log_end_offset == 0
    # The controller's next LeaderAndIsr (a new leader epoch) adds it again.
    again = [leader_state(leader=1, leader_epoch=2, isr=(1, 2), replicas=(1, 2))]
    await b1.become_leader_or_follower_async(0, 2, again)
    await b2.become_leader_or_follower_async(0, 2, again)
    await wait_until(lambda: cluster.log(2).log_end_offset == 2)
    assert failures == [TP]


MANY = 20
MANY_TPS = [TopicPartition("t", p) for p in range(MANY)]


def many_states(epoch):
    """Broker 1 leads the MANY partitions, broker 2 follows them."""
    return [
        leader_state(partition=p, leader=1, leader_epoch=epoch, isr=(1, 2), replicas=(1, 2))
        for p in range(MANY)
    ]


def follower_end(cluster, tp):
    return cluster.log_managers[2].get_log(tp.topic, tp.partition).log_end_offset


def on_first_item(cluster, done: list, seen: list, removed: list):
    """For a sliced pass: called with each item it handles, schedules at the first a callback
    that notes how many items were done when the loop ran it (``seen``) and removes one
    partition not handled yet from broker 2's fetcher (``removed``; the pass's order is the
    fetcher's, not the partitions')."""

    def between_slices() -> None:
        seen.append(len(done))
        left = [tp for tp in MANY_TPS if tp not in done]
        if left:
            removed.append(left[-1])
            cluster.brokers[2].replica_fetcher_manager.remove_fetcher_for_partitions(removed)

    def item(tp) -> None:
        if not done:
            asyncio.get_running_loop().call_soon(between_slices)
        done.append(tp)

    return item


async def test_an_answer_for_many_partitions_is_handled_in_slices(cluster, monkeypatch):
    """A follower's answer carrying many partitions is appended in slices: the loop runs other
    callbacks between them, and a partition removed from the fetcher during a pause is not
    appended from the answer that was in flight."""
    monkeypatch.setattr(replica_fetcher_module, "ANSWER_SLICE_ITEMS", 4)
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await b1.become_leader_or_follower_async(0, 1, many_states(1))
    await b1.append_records(30_000, 1, {tp: batch(1) for tp in MANY_TPS})
    handled: list[TopicPartition] = []
    seen: list[int] = []
    removed: list[TopicPartition] = []
    item = on_first_item(cluster, handled, seen, removed)
    original = ReplicaFetcher._process_partition_data

    def recording(self, tp, state, data):
        item(tp)
        return original(self, tp, state, data)

    monkeypatch.setattr(ReplicaFetcher, "_process_partition_data", recording)
    await b2.become_leader_or_follower_async(0, 1, many_states(1))
    await wait_until(
        lambda: (
            removed and all(follower_end(cluster, tp) == 1 for tp in MANY_TPS if tp not in removed)
        )
    )
    # the callback ran while the answer was being handled, not after it
    assert seen and 0 < seen[0] < MANY - 1
    assert removed[0] not in handled
    assert follower_end(cluster, removed[0]) == 0


async def test_a_truncation_of_many_partitions_is_done_in_slices(cluster, monkeypatch):
    """A new leader epoch puts every moved partition in truncation: the leader's epoch end
    offsets are applied in slices, with other callbacks running between them, and a partition
    removed from the fetcher during a pause is not truncated."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await b1.become_leader_or_follower_async(0, 1, many_states(1))
    await b1.append_records(30_000, 1, {tp: batch(1) for tp in MANY_TPS})
    await b2.become_leader_or_follower_async(0, 1, many_states(1))
    await wait_until(lambda: all(follower_end(cluster, tp) == 1 for tp in MANY_TPS))

    monkeypatch.setattr(replica_fetcher_module, "ANSWER_SLICE_ITEMS", 4)
    truncated: list[TopicPartition] = []
    seen: list[int] = []
    removed: list[TopicPartition] = []
    item = on_first_item(cluster, truncated, seen, removed)
    original = Partition.truncate_to_leader_epoch

    def recording(self, leader_epoch_end):
        item(self.topic_partition)
        return original(self, leader_epoch_end)

    monkeypatch.setattr(Partition, "truncate_to_leader_epoch", recording)
    await b1.become_leader_or_follower_async(0, 1, many_states(2))
    await b2.become_leader_or_follower_async(0, 1, many_states(2))
    await wait_until(lambda: len(truncated) >= MANY - 1 and seen)
    # the callback ran while the answers were being applied, not after them
    assert 0 < seen[0] < MANY - 1
    assert removed and set(truncated) == set(MANY_TPS) - set(removed)


async def test_unknown_leader_epoch_backs_off_on_the_clock(cluster, mock_time):
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await b1.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=1, isr=(1,), replicas=(1, 2))]
    )
    await b2.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))]
    )
    fetcher = b2.replica_fetcher_manager.fetchers[(1, 0)]
    await wait_until(lambda: fetcher.partitions[TP].delayed_until_ms > mock_time.milliseconds())
    # The leader learns epoch 2; the follower retries after its back-off.
    await b1.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))]
    )
    await produce(b1, batch(1))
    mock_time.advance(100)
    await wait_until(lambda: cluster.log(2).log_end_offset == 1)


async def test_offset_out_of_range_follows_leader_log_start(cluster):
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await b1.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2))]
    )
    for _ in range(4):
        await produce(b1, batch(2))
    assert (await b1.delete_records(1000, {TP: 6}))[TP].error_code is ErrorCode.NONE
    await b2.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=0, isr=(1,), replicas=(1, 2))]
    )
    await wait_until(lambda: cluster.log(2).log_end_offset == 8)
    assert cluster.log(2).log_start_offset == 6
    state = b2.replica_fetcher_manager.fetchers[(1, 0)].partitions[TP]
    assert state.state is FetchState.FETCHING and state.fetch_offset == 8


async def test_remote_endpoint_maps_requests_and_responses():
    sent = []

    class FakeClient:
        async def send(self, api_key, builder, version, node_id):
            message = builder(version)
            sent.append((int(api_key), version, node_id, message))
            if int(api_key) == 1:
                part = SimpleNamespace(
                    partition_index=0,
                    error_code=0,
                    high_watermark=7,
                    last_stable_offset=7,
                    log_start_offset=2,
                    records=bytes(batch(1)),
                    diverging_epoch=None,
                )
                return SimpleNamespace(
                    error_code=0, responses=[SimpleNamespace(topic="t", partitions=[part])]
                )
            if int(api_key) == 23:
                part = SimpleNamespace(partition=0, error_code=0, leader_epoch=4, end_offset=9)
                return SimpleNamespace(topics=[SimpleNamespace(topic="t", partitions=[part])])
            part = SimpleNamespace(partition_index=0, error_code=74, offset=-1)
            return SimpleNamespace(topics=[SimpleNamespace(name="t", partitions=[part])])

    endpoint = RemoteLeaderEndPoint(FakeClient(), leader_id=1, replica_id=2)
    data = await endpoint.fetch(
        FetchParams(replica_id=2, max_wait_ms=500), {TP: FetchInfo(5, 1024, 0, 4)}
    )
    assert (data[TP].error_code, data[TP].high_watermark, data[TP].log_start_offset) == (
        ErrorCode.NONE,
        7,
        2,
    )
    assert bytes(data[TP].records) == bytes(batch(1))
    api_key, version, node, request = sent[0]
    assert (api_key, version, node, request.replica_id) == (1, 12, 1, 2)
    # its topics are written as bytes already: read as the leader reads them
    frame = encode_request(api_key, version, 7, "follower", request)[4:]
    header, offset = parse_request_header(frame)
    p = decode_request(header, frame, offset).topics[0].partitions[0]
    assert (p.fetch_offset, p.current_leader_epoch, p.partition_max_bytes) == (5, 4, 1024)
    answers = await endpoint.fetch_epoch_end_offsets({TP: (4, 3)})
    assert (answers[TP].leader_epoch, answers[TP].end_offset) == (4, 9)
    assert sent[1][3].topics[0].partitions[0].leader_epoch == 3
    with pytest.raises(Exception) as info:
        await endpoint.fetch_offset(TP, 4, -1)
    assert info.value.error_code is ErrorCode.FENCED_LEADER_EPOCH


async def test_follower_of_a_leaderless_partition_starts_no_fetcher(cluster):
    """LeaderAndIsr with leader -1 (an offline partition): the replica follows, but there is
    no leader to fetch from until a newer LeaderAndIsr names one."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await b2.become_leader_or_follower_async(
        0, 1, [leader_state(leader=-1, leader_epoch=1, isr=(1,), replicas=(1, 2))]
    )
    assert TP in b2.partitions and b2.replica_fetcher_manager.fetcher_for(TP) is None
    assert all(key.broker_id != -1 for key in b2.replica_fetcher_manager.fetchers)
    await b1.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))]
    )
    await b2.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, leader_epoch=2, isr=(1,), replicas=(1, 2))]
    )
    await produce(b1, batch(2))
    await wait_until(lambda: cluster.log(2).log_end_offset == 2)


class _AnswersDespiteCancel:
    """A leader endpoint whose fetch answers although it was cancelled, as the client's
    asyncio.wait_for does on Python 3.11 when the answer and the cancellation coincide."""

    def __init__(self, inner):
        self.inner = inner
        self.fetching = asyncio.Event()
        self.swallowed = 0

    async def fetch(self, params, infos):
        self.fetching.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.swallowed += 1
            return {}

    async def fetch_epoch_end_offsets(self, partitions):
        return await self.inner.fetch_epoch_end_offsets(partitions)

    async def fetch_offset(self, tp, current_leader_epoch, timestamp):
        return await self.inner.fetch_offset(tp, current_leader_epoch, timestamp)

    async def close(self):
        await self.inner.close()


async def test_shutdown_ends_a_fetcher_whose_cancellation_was_swallowed(cluster):
    """Found by tests/system: a broker's SIGTERM hung in ReplicaFetcher.shutdown."""
    b2 = cluster.brokers[2]
    await cluster.leader_and_isr(leader=1, epoch=0, isr=(1, 2))
    fetcher = b2.replica_fetcher_manager.fetchers[(1, 0)]
    endpoint = fetcher.endpoint = _AnswersDespiteCancel(fetcher.endpoint)
    await asyncio.wait_for(endpoint.fetching.wait(), DEADLINE)
    await asyncio.wait_for(b2.replica_fetcher_manager.shutdown(), DEADLINE)
    assert endpoint.swallowed >= 1
    assert not b2.replica_fetcher_manager.fetchers


# (topic, partition, num.replica.fetchers, fetcher id) computed by Java with Kafka's
# getFetcherId: Utils.abs(31 * topic.hashCode() + partition) % numFetchersPerBroker.
KAFKA_FETCHER_IDS = [
    ("t", 0, 3, 2),
    ("t", 1, 4, 1),
    ("t", 7, 4, 3),
    ("t", 2147483647, 3, 1),
    ("orders", 0, 4, 1),
    ("orders", 7, 3, 1),
    ("orders", 2147483647, 4, 2),
    ("__consumer_offsets", 0, 4, 3),
    ("__consumer_offsets", 2147483647, 3, 2),
    ("grüße-日本", 1, 3, 2),
    ("grüße-日本", 7, 4, 2),
    ("zzzzzzzzzzzzzzzzzzzzzzzzzzzz", 1, 4, 3),
    ("zzzzzzzzzzzzzzzzzzzzzzzzzzzz", 2147483647, 4, 3),
]


@pytest.mark.parametrize(("topic", "partition", "fetchers", "expected"), KAFKA_FETCHER_IDS)
def test_fetcher_id_is_kafkas(topic, partition, fetchers, expected):
    assert fetcher_id(TopicPartition(topic, partition), fetchers) == expected
    assert fetcher_id(TopicPartition(topic, partition), 1) == 0


async def test_partitions_spread_over_num_replica_fetchers(tmp_path, mock_time):
    cluster = ReplicaRig(tmp_path, mock_time, num_fetchers=3)
    try:
        leader, follower = cluster.brokers[1], cluster.brokers[2]
        tps = [TopicPartition("t", p) for p in range(6)]
        for rm in cluster.brokers.values():
            await rm.become_leader_or_follower_async(
                0,
                1,
                [
                    leader_state(partition=tp.partition, leader=1, isr=(1,), replicas=(1, 2))
                    for tp in tps
                ],
            )
        fetchers = follower.replica_fetcher_manager.fetchers
        assert {key: set(f.partitions) for key, f in fetchers.items()} == {
            (1, fid): {tp for tp in tps if fetcher_id(tp, 3) == fid}
            for fid in {fetcher_id(tp, 3) for tp in tps}
        }
        assert len(fetchers) > 1  # six partitions of "t" do not all hash to one fetcher
        for tp in tps:
            result = (await leader.append_records(30_000, 1, {tp: batch(tp.partition + 1)}))[tp]
            assert result.error_code is ErrorCode.NONE
        for tp in tps:
            log = cluster.log_managers[2].get_log(tp.topic, tp.partition)
            await wait_until(lambda log=log, n=tp.partition + 1: log.log_end_offset == n)
        await wait_until(lambda: all(leader.partitions[tp].isr == {1, 2} for tp in tps))
    finally:
        await cluster.close()


async def test_an_idle_fetcher_shut_down_is_freed_by_reference_counting(cluster):
    """A fetcher whose leader no longer leads anything it follows is shut down and freed at
    once, with the cyclic collector off: a broker process freezes what survives its full
    collections (kafkalite/observability/gc_freeze.py), and a fetcher in a reference cycle
    would keep its session and a FetchInfo per partition it followed for the process's life."""
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    await cluster.leader_and_isr(leader=1, epoch=0, isr=(1, 2))
    await produce(b1, batch(2))
    await wait_until(lambda: cluster.log(2).log_end_offset == 2)
    held = weakref.ref(b2.replica_fetcher_manager.fetchers[(1, 0)])
    with collector_off():
        await cluster.leader_and_isr(leader=2, epoch=1, isr=(1, 2))
        await b2.replica_fetcher_manager.shutdown_idle_fetchers()
        assert (1, 0) not in b2.replica_fetcher_manager.fetchers
        assert held() is None
