"""ReplicaManager: produce (acks 0/1/all), long-poll fetch, offsets, LeaderAndIsr/StopReplica.

Waiting operations are driven by events (appends, follower fetches) and by the manual clock
(timeouts); a test never sleeps, it awaits a future with a deadline.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest

from kafkalite.broker.types import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    FetchInfo,
    FetchParams,
    StopReplicaPartitionState,
)
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import iter_batch_headers
from kafkalite.protocol.types import TopicPartition
from tests.loop_turns import LoopTurns

from .conftest import batch, leader_state, wait_until

TP = TopicPartition("t", 0)
DEADLINE = 5.0


def offsets_of(records) -> list[int]:
    data = records.view() if hasattr(records, "view") else records
    return [h.base_offset for _, h in iter_batch_headers(data)]


async def produce(rm, data, acks=1, tp=TP, timeout_ms=30_000):
    return (await rm.append_records(timeout_ms, acks, {tp: data}))[tp]


async def test_produce_to_unknown_partition(make_rm):
    rm = make_rm()
    result = await produce(rm, batch())
    assert result.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert result.base_offset == -1


async def test_produce_assigns_offsets_and_moves_hw_on_single_replica(make_rm, log_manager):
    rm = make_rm()
    assert (await rm.become_leader_or_follower_async(0, 1, [leader_state()])).partition_errors == {
        TP: ErrorCode.NONE
    }
    first = await produce(rm, batch(3))
    second = await produce(rm, batch(2))
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)
    assert (second.error_code, second.base_offset) == (ErrorCode.NONE, 3)
    log = log_manager.get_log("t", 0)
    assert log.log_end_offset == 5
    assert log.high_watermark == 5


async def test_invalid_required_acks(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    result = await produce(rm, batch(), acks=2)
    assert result.error_code is ErrorCode.INVALID_REQUIRED_ACKS


async def test_internal_topic_rejected_from_clients(make_rm):
    rm = make_rm()
    tp = TopicPartition("__consumer_offsets", 0)
    await rm.become_leader_or_follower_async(0, 1, [leader_state("__consumer_offsets")])
    assert (await produce(rm, batch(), tp=tp)).error_code is ErrorCode.INVALID_TOPIC_EXCEPTION
    ok = await rm.append_records(1000, 1, {tp: batch()}, internal_topics_allowed=True)
    assert ok[tp].error_code is ErrorCode.NONE


async def test_corrupt_and_too_large_batches(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    corrupt = batch(2)
    corrupt[-1] ^= 0xFF
    assert (await produce(rm, corrupt)).error_code is ErrorCode.CORRUPT_MESSAGE
    torn = batch(2)[:-3]
    assert (await produce(rm, torn)).error_code is ErrorCode.CORRUPT_MESSAGE
    big = batch(1, value=b"x" * (2 * 1024 * 1024))
    assert (await produce(rm, big)).error_code is ErrorCode.MESSAGE_TOO_LARGE


async def test_produce_to_follower_is_not_leader(make_rm):
    rm = make_rm(broker_id=2)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader=1, isr=(1, 2))])
    assert (await produce(rm, batch())).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_acks_all_completes_when_follower_fetch_moves_hw(make_rm, log_manager):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    task = asyncio.create_task(produce(rm, batch(4), acks=-1))
    await wait_until(lambda: rm.produce_purgatory.delayed == 1)  # appended, parked
    assert not task.done()
    # The follower fetches from 0 (nothing replicated yet): HW stays, produce keeps waiting.
    follower = FetchParams(replica_id=2, max_wait_ms=0)
    await rm.fetch_messages(follower, {TP: FetchInfo(0, 1 << 20, 0)})
    assert not task.done()
    # Then at offset 4: it has everything, so HW = 4 and the produce completes.
    await rm.fetch_messages(follower, {TP: FetchInfo(4, 1 << 20, 0)})
    result = await asyncio.wait_for(task, DEADLINE)
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert log_manager.get_log("t", 0).high_watermark == 4
    assert rm.produce_purgatory.delayed == 0


async def test_acks_all_times_out(make_rm, mock_time):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    task = asyncio.create_task(produce(rm, batch(), acks=-1, timeout_ms=1_000))
    await wait_until(lambda: rm.produce_purgatory.delayed == 1)
    mock_time.advance(999)
    assert rm.produce_purgatory.delayed == 1  # still waiting
    mock_time.advance(1)
    result = await asyncio.wait_for(task, DEADLINE)
    assert result.error_code is ErrorCode.REQUEST_TIMED_OUT


async def test_acks_all_not_enough_replicas_before_append(make_rm, log_manager):
    rm = make_rm(min_isr=2)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1,), replicas=(1, 2))])
    result = await produce(rm, batch(), acks=-1)
    assert result.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert log_manager.get_log("t", 0).log_end_offset == 0
    # acks=1 ignores min.insync.replicas
    assert (await produce(rm, batch(), acks=1)).error_code is ErrorCode.NONE


async def test_acks_all_not_enough_replicas_after_append(make_rm, mock_time):
    rm = make_rm(min_isr=2, lag_ms=10_000)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    task = asyncio.create_task(produce(rm, batch(), acks=-1, timeout_ms=60_000))
    await wait_until(lambda: rm.produce_purgatory.delayed == 1)
    mock_time.advance(10_001)  # the follower never fetched: out of the ISR
    assert rm.maybe_shrink_isr() == 1
    result = await asyncio.wait_for(task, DEADLINE)
    assert rm.partitions[TP].isr == {1}
    assert result.error_code is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


async def test_waiting_fetch_completes_on_append_not_at_max_wait(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    params = FetchParams(max_wait_ms=500, min_bytes=1)
    fetch = asyncio.create_task(rm.fetch_messages(params, {TP: FetchInfo(0, 1 << 20)}))
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    assert not fetch.done()
    # The clock does not move: only the append can complete the fetch.
    assert (await produce(rm, batch(3))).error_code is ErrorCode.NONE
    data = (await asyncio.wait_for(fetch, DEADLINE))[TP]
    assert data.error_code is ErrorCode.NONE
    assert offsets_of(data.records) == [0]
    assert data.high_watermark == 3
    assert rm.fetch_purgatory.delayed == 0


async def test_waiting_fetch_respects_min_bytes(make_rm, mock_time):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    one = len(batch(1))
    params = FetchParams(max_wait_ms=500, min_bytes=2 * one + 1)
    fetch = asyncio.create_task(rm.fetch_messages(params, {TP: FetchInfo(0, 1 << 20)}))
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    await produce(rm, batch(1))
    await produce(rm, batch(1))
    assert rm.fetch_purgatory.delayed == 1  # two batches are below min_bytes
    await produce(rm, batch(1))
    data = (await asyncio.wait_for(fetch, DEADLINE))[TP]
    assert offsets_of(data.records) == [0, 1, 2]


async def test_waiting_fetch_times_out_empty(make_rm, mock_time):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    params = FetchParams(max_wait_ms=500, min_bytes=1)
    fetch = asyncio.create_task(rm.fetch_messages(params, {TP: FetchInfo(0, 1 << 20)}))
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    mock_time.advance(500)
    data = (await asyncio.wait_for(fetch, DEADLINE))[TP]
    assert data.error_code is ErrorCode.NONE
    assert data.records_size == 0
    assert data.high_watermark == 0


async def test_cancelled_fetch_leaves_purgatory(make_rm, mock_time):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    fetch = asyncio.create_task(
        rm.fetch_messages(FetchParams(max_wait_ms=500), {TP: FetchInfo(0, 1 << 20)})
    )
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    fetch.cancel()
    await asyncio.gather(fetch, return_exceptions=True)
    assert rm.fetch_purgatory.delayed == 0
    assert mock_time.pending_timers == 0


async def test_fetch_whole_batches_and_byte_limits(make_rm):
    rm = make_rm()
    other = TopicPartition("t", 1)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(), leader_state(partition=1)])
    for _ in range(3):
        await produce(rm, batch(2, value=b"a" * 100))
        await produce(rm, batch(2, value=b"a" * 100), tp=other)
    size = len(batch(2, value=b"a" * 100))
    # A partition limit smaller than one batch still returns that batch (KIP-74).
    res = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(0, 10), other: FetchInfo(0, 10)})
    assert offsets_of(res[TP].records) == [0]
    # ... but only for the first partition with data; the request limit is then used up.
    assert res[other].records_size == 0
    # Partition limit of two batches and a bit: two whole batches, never a partial one.
    res = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(2, 2 * size + 5)})
    assert offsets_of(res[TP].records) == [2, 4]
    # Request limit shared between partitions.
    res = await rm.fetch_messages(
        FetchParams(max_bytes=size + 1), {TP: FetchInfo(0, 1 << 20), other: FetchInfo(0, 1 << 20)}
    )
    assert offsets_of(res[TP].records) == [0]
    assert res[other].records_size == 0
    # Fetching from the middle of a batch returns that whole batch.
    res = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(3, 1 << 20)})
    assert offsets_of(res[TP].records) == [2, 4]
    assert res[TP].log_start_offset == 0
    assert res[TP].last_stable_offset == res[TP].high_watermark == 6
    assert res[TP].preferred_read_replica == -1


async def test_fetch_out_of_range_and_unknown(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    await produce(rm, batch(2))
    res = await rm.fetch_messages(
        FetchParams(max_wait_ms=1000),
        {TP: FetchInfo(3, 1 << 20), TopicPartition("nope", 0): FetchInfo(0, 1 << 20)},
    )
    assert res[TP].error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    assert res[TP].high_watermark == -1
    assert res[TopicPartition("nope", 0)].error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_consumer_reads_to_hw_follower_to_leo(make_rm, log_manager):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    await produce(rm, batch(2))
    assert log_manager.get_log("t", 0).high_watermark == 0
    consumer = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(0, 1 << 20)})
    assert consumer[TP].records_size == 0 and consumer[TP].high_watermark == 0
    follower = await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(0, 1 << 20, 0)})
    assert offsets_of(follower[TP].records) == [0]


async def test_consumer_fetch_waits_for_hw_not_leo(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    fetch = asyncio.create_task(
        rm.fetch_messages(FetchParams(max_wait_ms=1000), {TP: FetchInfo(0, 1 << 20)})
    )
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    await produce(rm, batch(2))
    assert rm.fetch_purgatory.delayed == 1  # appended but not replicated: HW still 0
    await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(2, 1 << 20, 0)})
    data = (await asyncio.wait_for(fetch, DEADLINE))[TP]
    assert offsets_of(data.records) == [0]
    assert data.high_watermark == 2


async def test_leader_epoch_fencing(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=5)])
    await produce(rm, batch())
    res = await rm.fetch_messages(
        FetchParams(), {TP: FetchInfo(0, 1 << 20, current_leader_epoch=4)}
    )
    assert res[TP].error_code is ErrorCode.FENCED_LEADER_EPOCH
    res = await rm.fetch_messages(
        FetchParams(), {TP: FetchInfo(0, 1 << 20, current_leader_epoch=6)}
    )
    assert res[TP].error_code is ErrorCode.UNKNOWN_LEADER_EPOCH
    res = await rm.fetch_messages(
        FetchParams(), {TP: FetchInfo(0, 1 << 20, current_leader_epoch=5)}
    )
    assert res[TP].error_code is ErrorCode.NONE
    assert (
        rm.list_offset(TP, -1, current_leader_epoch=4).error_code is ErrorCode.FENCED_LEADER_EPOCH
    )


async def test_diverging_epoch_for_last_fetched_epoch(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=1)])
    await produce(rm, batch(3))
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=3)])
    await produce(rm, batch(2))
    # A fetcher that saw epoch 2 up to offset 4 diverged: epoch 1 ends at 3 on the leader.
    res = await rm.fetch_messages(
        FetchParams(max_wait_ms=1000), {TP: FetchInfo(4, 1 << 20, last_fetched_epoch=2)}
    )
    assert res[TP].diverging_epoch is not None
    assert (res[TP].diverging_epoch.leader_epoch, res[TP].diverging_epoch.end_offset) == (1, 3)
    res = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(3, 1 << 20, last_fetched_epoch=1)})
    assert res[TP].diverging_epoch is None
    assert offsets_of(res[TP].records) == [3]
    # An epoch newer than any the leader knows is out of range, answered at once (Kafka's
    # readRecords; an empty success without a diverging epoch made the client loop).
    res = await rm.fetch_messages(
        FetchParams(max_wait_ms=60_000), {TP: FetchInfo(5, 1 << 20, last_fetched_epoch=9)}
    )
    assert (res[TP].error_code, res[TP].diverging_epoch) == (ErrorCode.OFFSET_OUT_OF_RANGE, None)


async def test_list_offsets(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=2)])
    await produce(rm, batch(2, timestamp=1_000))
    await produce(rm, batch(2, timestamp=5_000))
    await produce(rm, batch(1, timestamp=3_000))
    earliest = rm.list_offset(TP, EARLIEST_TIMESTAMP)
    latest = rm.list_offset(TP, LATEST_TIMESTAMP)
    assert (earliest.error_code, earliest.offset, earliest.leader_epoch) == (ErrorCode.NONE, 0, 2)
    assert (latest.offset, latest.timestamp, latest.leader_epoch) == (5, -1, 2)
    by_time = rm.list_offset(TP, 4_000)
    assert (by_time.offset, by_time.timestamp) == (2, 5_000)  # record level
    assert rm.list_offset(TP, 10_000).offset == -1
    max_ts = rm.list_offset(TP, MAX_TIMESTAMP)
    assert (max_ts.offset, max_ts.timestamp) == (3, 5_001)
    # v8/v9 specs (KIP-405, KIP-1005) without tiered storage: the local start is the start,
    # nothing is tiered (-1), never a lookup by timestamp.
    local = rm.list_offset(TP, -4)
    assert (local.offset, local.timestamp, local.leader_epoch) == (0, -1, 2)
    tiered = rm.list_offset(TP, -5)
    assert (tiered.offset, tiered.timestamp, tiered.leader_epoch) == (-1, -1, -1)
    assert (
        rm.list_offset(TopicPartition("x", 0), -1).error_code
        is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )


async def test_last_offset_for_leader_epoch(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=0)])
    await produce(rm, batch(3))
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=2)])
    await produce(rm, batch(2))
    assert rm.last_offset_for_leader_epoch(TP, -1, 0).end_offset == 3
    assert rm.last_offset_for_leader_epoch(TP, -1, 1).leader_epoch == 0
    latest = rm.last_offset_for_leader_epoch(TP, -1, 2)
    assert (latest.leader_epoch, latest.end_offset) == (2, 5)
    assert rm.last_offset_for_leader_epoch(TP, 1, 2).error_code is ErrorCode.FENCED_LEADER_EPOCH


async def test_delete_records(make_rm, log_manager):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    for _ in range(3):
        await produce(rm, batch(2))
    res = await rm.delete_records(1000, {TP: 2})
    assert (res[TP].error_code, res[TP].low_watermark) == (ErrorCode.NONE, 2)
    assert log_manager.get_log("t", 0).log_start_offset == 2
    res = await rm.delete_records(1000, {TP: 7})
    assert res[TP].error_code is ErrorCode.OFFSET_OUT_OF_RANGE
    res = await rm.delete_records(1000, {TP: -1})
    assert res[TP].low_watermark == 6
    fetch = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(0, 1 << 20)})
    assert fetch[TP].error_code is ErrorCode.OFFSET_OUT_OF_RANGE


async def test_leader_and_isr_epochs_and_stop_replica(make_rm, log_manager):
    rm = make_rm()
    assert (
        await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=3)])
    ).error_code is ErrorCode.NONE
    stale = await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=3)])
    assert stale.partition_errors[TP] is ErrorCode.STALE_CONTROLLER_EPOCH
    old_controller = await rm.become_leader_or_follower_async(0, 0, [leader_state(leader_epoch=9)])
    assert old_controller.error_code is ErrorCode.STALE_CONTROLLER_EPOCH
    not_mine = await rm.become_leader_or_follower_async(
        0, 1, [leader_state(partition=1, leader=2, isr=(2, 3))]
    )
    assert not_mine.partition_errors[TopicPartition("t", 1)] is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    fenced = await rm.stop_replicas_async(0, 1, [StopReplicaPartitionState("t", 0, 2, True)])
    assert fenced.partition_errors[TP] is ErrorCode.FENCED_LEADER_EPOCH
    # the current epoch is accepted (Kafka: requestLeaderEpoch >= currentLeaderEpoch)
    kept = await rm.stop_replicas_async(0, 1, [StopReplicaPartitionState("t", 0, 3, False)])
    assert kept.partition_errors[TP] is ErrorCode.NONE
    assert log_manager.get_log("t", 0) is not None  # stopped, not deleted
    stopped = await rm.stop_replicas_async(0, 1, [StopReplicaPartitionState("t", 0, -2, True)])
    assert stopped.partition_errors[TP] is ErrorCode.NONE
    assert log_manager.get_log("t", 0) is None
    assert TP not in rm.partitions
    assert (await produce(rm, batch())).error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_leadership_change_fails_waiting_produce(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    task = asyncio.create_task(produce(rm, batch(), acks=-1))
    await wait_until(lambda: rm.produce_purgatory.delayed == 1)
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(leader=2, leader_epoch=1, isr=(1, 2))]
    )
    result = await asyncio.wait_for(task, DEADLINE)
    assert result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_isr_expansion_written_through_callback(make_rm):
    writes = []

    async def alter_isr(tp, state):
        writes.append((tp, state))
        return state.leader_and_isr.zk_version + 1

    rm = make_rm(alter_isr=alter_isr)
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(isr=(1,), replicas=(1, 2), zk_version=7)]
    )
    await produce(rm, batch(2))
    await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(2, 1 << 20, 0)})
    await rm.wait_for_isr_updates()
    assert [
        (tp, s.leader_and_isr.isr, s.leader_and_isr.zk_version, s.controller_epoch)
        for tp, s in writes
    ] == [(TP, (1, 2), 7, 1)]
    partition = rm.partitions[TP]
    assert partition.isr == {1, 2}
    assert partition.zk_version == 8


async def test_failed_isr_cas_stops_acting_as_leader(make_rm, mock_time):
    async def alter_isr(tp, state):
        return None  # someone else (the controller) wrote the node: our version is stale

    rm = make_rm(alter_isr=alter_isr, lag_ms=1_000)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    mock_time.advance(1_001)
    assert rm.maybe_shrink_isr() == 1
    await rm.wait_for_isr_updates()
    assert rm.partitions[TP].isr == {1, 2}
    assert (await produce(rm, batch())).error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # The next LeaderAndIsr restores the role.
    await rm.become_leader_or_follower_async(
        0, 2, [leader_state(leader_epoch=1, isr=(1,), replicas=(1, 2))]
    )
    assert (await produce(rm, batch())).error_code is ErrorCode.NONE


async def test_idempotent_duplicate_is_acknowledged_without_append(make_rm, log_manager):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    first = await produce(rm, batch(3, producer_id=7, producer_epoch=0, base_sequence=0))
    second = await produce(rm, batch(2, producer_id=7, producer_epoch=0, base_sequence=3))
    retry = await produce(rm, batch(3, producer_id=7, producer_epoch=0, base_sequence=0))
    assert (first.base_offset, second.base_offset) == (0, 3)
    assert (retry.error_code, retry.base_offset, retry.duplicate) == (ErrorCode.NONE, 0, True)
    assert log_manager.get_log("t", 0).log_end_offset == 5
    gap = await produce(rm, batch(1, producer_id=7, producer_epoch=0, base_sequence=9))
    assert gap.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    bumped = await produce(rm, batch(1, producer_id=7, producer_epoch=1, base_sequence=0))
    assert bumped.error_code is ErrorCode.NONE
    old = await produce(rm, batch(1, producer_id=7, producer_epoch=0, base_sequence=5))
    assert old.error_code is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log_manager.get_log("t", 0).log_end_offset == 6


async def test_producer_state_rebuilt_from_log(make_rm, log_manager, mock_time):
    from kafkalite.broker.replica_manager import ReplicaManager

    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    await produce(rm, batch(3, producer_id=7, producer_epoch=0, base_sequence=0))
    await produce(rm, batch(3, producer_id=8, producer_epoch=2, base_sequence=10))
    # A new replica manager over the same logs (a restart): state comes from batch headers.
    rm2 = ReplicaManager(1, log_manager, None, mock_time)
    await rm2.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=1)])
    retry = await produce(rm2, batch(3, producer_id=8, producer_epoch=2, base_sequence=10))
    assert (retry.base_offset, retry.duplicate) == (3, True)
    nxt = await produce(rm2, batch(1, producer_id=7, producer_epoch=0, base_sequence=4))
    assert nxt.error_code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


async def test_log_dir_failure_takes_partitions_offline(make_rm, log_manager, tmp_path):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    fetch = asyncio.create_task(
        rm.fetch_messages(FetchParams(max_wait_ms=1000), {TP: FetchInfo(0, 1 << 20)})
    )
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    assert rm.handle_log_dir_failure(str(tmp_path)) == [TP]
    data = (await asyncio.wait_for(fetch, DEADLINE))[TP]
    assert data.error_code is ErrorCode.KAFKA_STORAGE_ERROR
    assert (await produce(rm, batch())).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    again = await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=1)])
    assert again.partition_errors[TP] is ErrorCode.KAFKA_STORAGE_ERROR


async def test_delete_records_waits_for_followers_low_watermark(make_rm, mock_time):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    await produce(rm, batch(4))
    follower = FetchParams(replica_id=2)
    await rm.fetch_messages(follower, {TP: FetchInfo(4, 1 << 20, log_start_offset=0)})
    task = asyncio.create_task(rm.delete_records(30_000, {TP: 2}))
    await wait_until(
        lambda: rm.delete_records_purgatory.delayed == 1
    )  # the follower still starts at 0
    await rm.fetch_messages(follower, {TP: FetchInfo(4, 1 << 20, log_start_offset=2)})
    res = (await asyncio.wait_for(task, DEADLINE))[TP]
    assert (res.error_code, res.low_watermark) == (ErrorCode.NONE, 2)
    # And a deletion the follower never follows times out.
    task = asyncio.create_task(rm.delete_records(1_000, {TP: 3}))
    await wait_until(lambda: rm.delete_records_purgatory.delayed == 1)
    mock_time.advance(1_000)
    res = (await asyncio.wait_for(task, DEADLINE))[TP]
    assert res.error_code is ErrorCode.REQUEST_TIMED_OUT


async def test_delete_records_policy_violation_on_compacted_topic(make_rm, log_manager):
    from kafkalite.storage.config import LogConfig

    rm = make_rm()
    rm.log_config_for_topic = lambda topic: LogConfig(cleanup_policy="compact")
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    await produce(rm, batch(2))
    res = await rm.delete_records(1000, {TP: 1})
    assert res[TP].error_code is ErrorCode.POLICY_VIOLATION
    assert log_manager.get_log("t", 0).config.cleanup_policy == "compact"


async def test_acks_zero_appends_and_reports(make_rm, log_manager):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    result = await produce(rm, batch(2), acks=0)
    assert (result.error_code, result.base_offset) == (ErrorCode.NONE, 0)
    assert rm.produce_purgatory.delayed == 0
    assert log_manager.get_log("t", 0).log_end_offset == 2


async def test_hard_max_bytes_limit_never_exceeds(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    await produce(rm, batch(3, value=b"z" * 200))
    size = len(batch(3, value=b"z" * 200))
    res = await rm.fetch_messages(
        FetchParams(max_bytes=size - 1, hard_max_bytes_limit=True), {TP: FetchInfo(0, 1 << 20)}
    )
    assert res[TP].error_code is ErrorCode.NONE and res[TP].records_size == 0
    res = await rm.fetch_messages(FetchParams(max_bytes=size - 1), {TP: FetchInfo(0, 1 << 20)})
    assert offsets_of(res[TP].records) == [0]


async def test_list_offsets_not_available_while_new_leader_hw_lags(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    await produce(rm, batch(3))  # HW stays 0: follower 2 never fetched
    await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=1, isr=(1, 2))])
    assert rm.list_offset(TP, LATEST_TIMESTAMP).error_code is ErrorCode.OFFSET_NOT_AVAILABLE
    assert rm.list_offset(TP, EARLIEST_TIMESTAMP).offset == 0
    # A follower (replica id >= 0) reads to the LEO regardless.
    assert rm.list_offset(TP, LATEST_TIMESTAMP, replica_id=2).offset == 3
    await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(3, 1 << 20, 0)})
    latest = rm.list_offset(TP, LATEST_TIMESTAMP)
    assert (latest.error_code, latest.offset, latest.leader_epoch) == (ErrorCode.NONE, 3, 1)


async def test_fetch_from_unassigned_replica_is_rejected(make_rm):
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2))])
    await produce(rm, batch())
    res = await rm.fetch_messages(FetchParams(replica_id=9), {TP: FetchInfo(0, 1 << 20, 0)})
    assert res[TP].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_partition_status_and_counts(make_rm, mock_time):
    rm = make_rm(min_isr=2)
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(isr=(1, 2), replicas=(1, 2, 3), leader_epoch=4)]
    )
    await produce(rm, batch(3))
    status = rm.partition_status(TP)
    assert (status.is_leader, status.leader, status.leader_epoch) == (True, 1, 4)
    assert (status.replicas, status.isr) == ((1, 2, 3), (1, 2))
    assert (status.log_start_offset, status.log_end_offset, status.high_watermark) == (0, 3, 0)
    assert status.under_replicated and not status.under_min_isr
    assert (rm.leader_count, rm.under_replicated_partition_count) == (1, 1)
    mock_time.advance(10_001)
    rm.maybe_shrink_isr()
    assert rm.under_min_isr_partition_count == 1
    assert rm.partition_status(TopicPartition("nope", 0)) is None
    assert [(st.topic, st.partition) for st in rm.partition_statuses()] == [("t", 0)]


async def test_read_committed_gets_an_empty_aborted_list(make_rm):
    from kafkalite.broker.types import IsolationLevel

    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    await produce(rm, batch(2))
    committed = await rm.fetch_messages(
        FetchParams(isolation_level=IsolationLevel.READ_COMMITTED), {TP: FetchInfo(0, 1 << 20)}
    )
    uncommitted = await rm.fetch_messages(FetchParams(), {TP: FetchInfo(0, 1 << 20)})
    assert committed[TP].aborted_transactions == [] and committed[TP].last_stable_offset == 2
    assert uncommitted[TP].aborted_transactions is None


async def test_restart_keeps_idempotence_through_snapshots(tmp_path, mock_time):
    import os

    from kafkalite.broker.replica_manager import ReplicaManager
    from kafkalite.storage.config import LogConfig
    from kafkalite.storage.log_manager import LogManager

    root = str(tmp_path / "data")
    lm = LogManager([root], LogConfig())
    lm.startup()
    rm = ReplicaManager(1, lm, None, mock_time)
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    await produce(rm, batch(2, producer_id=4, producer_epoch=0, base_sequence=0))
    await rm.shutdown()  # snapshots the producer state at offset 2
    lm.shutdown()
    assert "00000000000000000002.snapshot" in os.listdir(os.path.join(root, "t-0"))

    lm = LogManager([root], LogConfig())
    lm.startup()
    rm = ReplicaManager(1, lm, None, mock_time)
    await rm.become_leader_or_follower_async(0, 2, [leader_state(leader_epoch=1)])
    retry = await produce(rm, batch(2, producer_id=4, producer_epoch=0, base_sequence=0))
    assert (retry.error_code, retry.base_offset, retry.duplicate) == (ErrorCode.NONE, 0, True)
    nxt = await produce(rm, batch(1, producer_id=4, producer_epoch=0, base_sequence=2))
    assert (nxt.error_code, nxt.base_offset) == (ErrorCode.NONE, 2)
    await rm.shutdown()
    lm.shutdown()


async def test_bulk_leader_and_isr_yields_to_the_loop_and_creates_every_log(make_rm, log_manager):
    """A LeaderAndIsr for thousands of new partitions is applied in slices with the files
    created in a worker thread: the loop keeps turning (a concurrent task runs many times)
    and every partition ends up led, with its log."""
    rm = make_rm()
    states = [leader_state(topic=f"bulk-{i}", leader_epoch=1) for i in range(2_000)]
    with LoopTurns() as ticker:
        result = await rm.become_leader_or_follower_async(0, 1, states, slice_size=100)
    assert result.error_code is ErrorCode.NONE
    assert set(result.partition_errors.values()) == {ErrorCode.NONE}
    # at least one turn per slice of each of the two passes, and per worker-thread hand-off
    assert ticker.turns >= 2 * len(states) // 100
    assert all(log_manager.get_log(f"bulk-{i}", 0) is not None for i in range(2_000))
    assert len(rm.leader_partitions()) == 2_000
    assert (
        await produce(rm, batch(), tp=TopicPartition("bulk-1999", 0))
    ).error_code is ErrorCode.NONE
    # the same request again is stale per partition, as with the synchronous path
    again = await rm.become_leader_or_follower_async(0, 1, states[:10], slice_size=100)
    assert set(again.partition_errors.values()) == {ErrorCode.STALE_CONTROLLER_EPOCH}


async def test_bulk_stop_replica_deletes_logs_off_the_loop(make_rm, log_manager):
    rm = make_rm()
    states = [leader_state(topic=f"gone-{i}", leader_epoch=1) for i in range(600)]
    await rm.become_leader_or_follower_async(0, 1, states, slice_size=200)
    dirs = [log_manager.get_log(f"gone-{i}", 0).dir for i in range(600)]
    stops = [StopReplicaPartitionState(f"gone-{i}", 0, -2, i % 2 == 0) for i in range(600)]
    with LoopTurns() as ticker:
        result = await rm.stop_replicas_async(0, 1, stops, slice_size=200)
    assert set(result.partition_errors.values()) == {ErrorCode.NONE}
    assert ticker.turns >= 3
    for i, dir in enumerate(dirs):
        deleted = i % 2 == 0
        assert (log_manager.get_log(f"gone-{i}", 0) is None) == deleted
        assert dir.exists() != deleted
        assert not any(p.name.startswith(f"gone-{i}.") for p in dir.parent.iterdir())
    stale = await rm.stop_replicas_async(0, 0, stops[:3])
    assert stale.error_code is ErrorCode.STALE_CONTROLLER_EPOCH


async def test_producer_snapshots_are_written_off_the_loop_once_per_offset(make_rm, log_manager):
    """The maintenance task and shutdown write producer snapshots in a worker thread: the
    state is read on the loop, the files written and fsynced elsewhere; an idle partition
    writes none."""
    rm = make_rm()
    states = [leader_state(topic=f"snap-{i}", leader_epoch=1) for i in range(30)]
    await rm.become_leader_or_follower_async(0, 1, states)
    for i in range(0, 30, 3):
        tp = TopicPartition(f"snap-{i}", 0)
        data = batch(2, producer_id=100 + i, producer_epoch=0, base_sequence=0)
        assert (await produce(rm, data, tp=tp)).error_code is ErrorCode.NONE
    with LoopTurns() as ticker:
        assert await rm.take_producer_snapshots_async(batch_size=4) == 10
    assert ticker.turns >= 3
    for i in range(30):
        files = list(log_manager.get_log(f"snap-{i}", 0).dir.glob("*.snapshot"))
        assert [f.name for f in files] == (["00000000000000000002.snapshot"] if i % 3 == 0 else [])
    assert await rm.take_producer_snapshots_async() == 0  # nothing new since


async def test_a_partition_whose_directory_vanished_is_offline_not_recreated(make_rm, log_manager):
    """A replica the controller says exists (not new) whose directory is missing answers
    KAFKA_STORAGE_ERROR, so the controller elects another replica (Kafka recreates it empty)."""
    rm = make_rm()
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    assert (await produce(rm, batch(3))).error_code is ErrorCode.NONE
    log_dir = log_manager.get_log("t", 0).dir
    shutil.rmtree(log_dir)
    assert log_manager.check_partition_dirs() == [("t", 0)]
    assert TP in rm.offline_partitions and TP not in rm.partitions
    assert (await produce(rm, batch())).error_code is ErrorCode.KAFKA_STORAGE_ERROR
    again = await rm.become_leader_or_follower_async(0, 1, [leader_state(leader_epoch=1)])
    assert again.partition_errors[TP] is ErrorCode.KAFKA_STORAGE_ERROR
    assert not log_dir.exists()
    deleted = await rm.stop_replicas_async(0, 1, [StopReplicaPartitionState("t", 0, -2, True)])
    assert deleted.partition_errors[TP] is ErrorCode.NONE
    assert TP not in rm.offline_partitions and not log_manager.is_missing("t", 0)


class RecordingFetchers:
    """A fetcher manager that notes which partitions it was asked to fetch."""

    def __init__(self) -> None:
        self.fetching: set[TopicPartition] = set()

    def add_fetcher_for_partitions(self, partitions) -> None:
        self.fetching |= set(partitions)

    def remove_fetcher_for_partitions(self, partitions) -> None:
        self.fetching -= set(partitions)


@pytest.mark.parametrize("in_controlled_shutdown", [False, True])
async def test_a_broker_in_controlled_shutdown_does_not_fetch_what_it_led(
    make_rm, in_controlled_shutdown
):
    """The controlled shutdown's election makes this broker a follower of what it led: fetching
    would put it back into the ISR the controller just took it out of, right before it stops."""
    rm = make_rm(broker_id=1)
    rm.replica_fetcher_manager = RecordingFetchers()
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(leader=1, isr=(1, 2), replicas=(1, 2))]
    )
    rm.in_controlled_shutdown = in_controlled_shutdown
    moved = leader_state(leader=2, leader_epoch=1, isr=(2,), replicas=(1, 2))
    result = await rm.become_leader_or_follower_async(0, 1, [moved])
    assert result.partition_errors[TP] is ErrorCode.NONE
    assert (TP in rm.replica_fetcher_manager.fetching) is not in_controlled_shutdown


async def test_a_follower_fetch_that_moves_no_hw_does_not_recheck_waiting_fetches(
    make_rm, monkeypatch
):
    """Follower 2 fetching N caught-up partitions re-checks nothing: follower 3's fetch waiting
    on the same N partitions is not re-evaluated once per partition (N passes over N
    partitions per fetch, the most of a 3-broker cluster's loop at 1,500 partitions). It still
    completes on an append."""
    from kafkalite.broker import replica_manager as module

    rm = make_rm()
    tps = [TopicPartition("t", p) for p in range(20)]
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(partition=tp.partition, isr=(1, 2, 3)) for tp in tps]
    )
    infos = {tp: FetchInfo(0, 1 << 20, 0) for tp in tps}
    await rm.fetch_messages(FetchParams(replica_id=2, max_wait_ms=0), infos)
    waiting = asyncio.create_task(
        rm.fetch_messages(FetchParams(replica_id=3, max_wait_ms=30_000, min_bytes=1), infos)
    )
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    checks = []
    original = module.DelayedFetch.try_complete

    def counting(self):
        checks.append(self.params.replica_id)
        return original(self)

    monkeypatch.setattr(module.DelayedFetch, "try_complete", counting)
    await rm.fetch_messages(FetchParams(replica_id=2, max_wait_ms=0), infos)
    assert checks == [], "nothing moved: no waiting fetch is re-checked"
    assert not waiting.done()
    await produce(rm, batch(2), tp=tps[7])
    data = (await asyncio.wait_for(waiting, DEADLINE))[tps[7]]
    assert offsets_of(data.records) == [0]


async def test_an_isr_expansion_that_moves_no_hw_does_not_recheck_waiting_fetches(
    make_rm, monkeypatch
):
    """Follower 2 rejoining the ISR of N partitions: each committed expansion leaves the HW
    where it was, so follower 3's fetch waiting on the same N partitions is not re-evaluated
    once per partition (N passes over N partitions while a restarted broker catches up)."""
    from kafkalite.broker import replica_manager as module

    async def alter_isr(tp, state):
        return state.leader_and_isr.zk_version + 1

    rm = make_rm(alter_isr=alter_isr)
    tps = [TopicPartition("t", p) for p in range(20)]
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(partition=tp.partition, isr=(1, 3), replicas=(1, 2, 3)) for tp in tps]
    )
    infos = {tp: FetchInfo(0, 1 << 20, 0) for tp in tps}
    waiting = asyncio.create_task(
        rm.fetch_messages(FetchParams(replica_id=3, max_wait_ms=30_000, min_bytes=1), infos)
    )
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    checks = []
    original = module.DelayedFetch.try_complete

    def counting(self):
        checks.append(self.params.replica_id)
        return original(self)

    monkeypatch.setattr(module.DelayedFetch, "try_complete", counting)
    await rm.fetch_messages(FetchParams(replica_id=2, max_wait_ms=0), infos)
    await rm.wait_for_isr_updates()
    assert all(rm.partitions[tp].isr == {1, 2, 3} for tp in tps)
    assert checks == [], "the ISR grew, the HW did not move: no waiting fetch is re-checked"
    assert not waiting.done()
    await produce(rm, batch(2), tp=tps[3])
    data = (await asyncio.wait_for(waiting, DEADLINE))[tps[3]]
    assert offsets_of(data.records) == [0]


class CountingFetchers(RecordingFetchers):
    """RecordingFetchers that also counts each time a partition is (re)started."""

    def __init__(self) -> None:
        super().__init__()
        self.starts: list[TopicPartition] = []

    def add_fetcher_for_partitions(self, partitions) -> None:
        self.starts.extend(partitions)
        super().add_fetcher_for_partitions(partitions)


async def test_an_isr_change_with_the_same_leader_epoch_keeps_the_followers_fetch(make_rm):
    """The controller takes a failed broker out of an ISR with the leader epoch kept and the
    partition epoch (zk version) bumped: a follower takes the new ISR and keeps fetching as it
    was (no restart, no truncation); the same state again, or an older one, is stale."""
    rm = make_rm(broker_id=2)
    rm.replica_fetcher_manager = CountingFetchers()
    first = leader_state(leader=1, leader_epoch=4, isr=(1, 2, 3), zk_version=9)
    assert (await rm.become_leader_or_follower_async(0, 1, [first])).error_code is ErrorCode.NONE
    assert rm.replica_fetcher_manager.starts == [TP]
    shrunk = leader_state(leader=1, leader_epoch=4, isr=(1, 2), replicas=(1, 2, 3), zk_version=10)
    result = await rm.become_leader_or_follower_async(0, 1, [shrunk])
    assert result.partition_errors[TP] is ErrorCode.NONE
    partition = rm.partitions[TP]
    assert (partition.isr, partition.zk_version, partition.leader_epoch) == ({1, 2}, 10, 4)
    assert rm.replica_fetcher_manager.starts == [TP], "the fetch was not restarted"
    assert TP in rm.replica_fetcher_manager.fetching
    for stale in (shrunk, leader_state(leader=1, leader_epoch=4, isr=(1,), zk_version=8)):
        again = await rm.become_leader_or_follower_async(0, 1, [stale])
        assert again.partition_errors[TP] is ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.partitions[TP].isr == {1, 2}
    # a new leader with the same leader epoch is never taken: a leader change bumps it
    other = leader_state(leader=3, leader_epoch=4, isr=(3, 2), replicas=(1, 2, 3), zk_version=11)
    refused = await rm.become_leader_or_follower_async(0, 1, [other])
    assert refused.partition_errors[TP] is ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.partitions[TP].leader_replica_id == 1


async def test_a_leader_takes_an_isr_shrink_with_the_same_leader_epoch(make_rm):
    """The leader takes the shrunk ISR and the new zk version at the same leader epoch, its
    followers' states kept, and the HW moves past what the removed replica held back."""
    rm = make_rm(broker_id=1)
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(leader_epoch=4, isr=(1, 2, 3), zk_version=9)]
    )
    waiting = asyncio.create_task(produce(rm, batch(2), acks=-1))
    await wait_until(lambda: rm.partitions[TP].log.log_end_offset == 2)
    await rm.fetch_messages(FetchParams(replica_id=2, max_wait_ms=0), {TP: FetchInfo(2, 1 << 20)})
    assert not waiting.done(), "replica 3 has not fetched: the HW waits for it"
    partition = rm.partitions[TP]
    replica_2 = partition.remote_replicas[2]
    shrunk = leader_state(leader_epoch=4, isr=(1, 2), replicas=(1, 2, 3), zk_version=10)
    result = await rm.become_leader_or_follower_async(0, 1, [shrunk])
    assert result.partition_errors[TP] is ErrorCode.NONE
    assert (partition.isr, partition.zk_version, partition.leader_epoch) == ({1, 2}, 10, 4)
    assert partition.remote_replicas[2] is replica_2
    assert (await asyncio.wait_for(waiting, DEADLINE)).error_code is ErrorCode.NONE
    assert partition.log.high_watermark == 2


class AliveBrokers:
    """The metadata cache's view of which brokers are alive."""

    def __init__(self, alive) -> None:
        self.alive = set(alive)

    def get_alive_broker(self, broker_id: int):
        return object() if broker_id in self.alive else None


async def test_a_replica_of_a_broker_not_alive_does_not_join_the_isr(make_rm):
    """A fetch from a broker the metadata cache does not hold alive (a failed broker's fetch
    read late) records its position but never brings it back into the ISR."""
    submitted = []
    rm = make_rm(broker_id=1, metadata_cache=AliveBrokers({1, 2}))
    rm._submit_isr_update = lambda partition, proposal: submitted.append(proposal)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1,), replicas=(1, 2, 3))])
    infos = {TP: FetchInfo(0, 1 << 20)}
    await rm.fetch_messages(FetchParams(replica_id=3, max_wait_ms=0), infos)
    assert submitted == []
    await rm.fetch_messages(FetchParams(replica_id=2, max_wait_ms=0), infos)
    assert [p.isr for p in submitted] == [(1, 2)]
