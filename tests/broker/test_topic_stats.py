"""The replica manager records into its TopicStats (Kafka's BrokerTopicStats): messages and bytes
appended as leader per topic, and the ISR changes it commits; retried duplicates and refused
appends are not counted."""

from __future__ import annotations

from kafkalite.broker.types import FetchInfo, FetchParams
from kafkalite.observability import TopicStats
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition

from .conftest import batch, leader_state

TP = TopicPartition("t", 0)


async def test_appends_as_leader_are_counted_per_topic(make_rm):
    rm = make_rm()
    assert isinstance(rm.topic_stats, TopicStats)
    await rm.become_leader_or_follower_async(0, 1, [leader_state()])
    first = batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    second = batch(2, producer_id=7, producer_epoch=0, base_sequence=3)
    for records in (first, second, first):  # the third is a retried duplicate
        result = (await rm.append_records(1000, 1, {TP: records}))[TP]
        assert result.error_code is ErrorCode.NONE
    refused = await rm.append_records(1000, 1, {TopicPartition("u", 0): batch(4)})
    assert refused[TopicPartition("u", 0)].error_code is not ErrorCode.NONE
    assert rm.topic_stats.messages_in == {"t": 5}
    assert rm.topic_stats.bytes_in == {"t": len(first) + len(second)}


async def test_committed_isr_changes_are_counted(make_rm, mock_time):
    committed = []

    async def alter_isr(tp, state):
        committed.append(state.leader_and_isr.isr)
        return state.leader_and_isr.zk_version + 1

    stats = TopicStats()
    rm = make_rm(alter_isr=alter_isr, lag_ms=1_000)
    rm.topic_stats = stats  # as the composition root passes its own
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2), replicas=(1, 2))])
    mock_time.advance(1_001)
    assert rm.maybe_shrink_isr() == 1
    await rm.wait_for_isr_updates()
    assert (stats.isr_shrinks, stats.isr_expands) == (1, 0)
    await rm.append_records(1000, 1, {TP: batch(2)})
    await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(2, 1 << 20, 0)})
    await rm.wait_for_isr_updates()
    assert committed == [(1,), (1, 2)]
    assert (stats.isr_shrinks, stats.isr_expands) == (1, 1)


async def test_an_isr_change_the_store_refused_is_not_counted(make_rm, mock_time):
    async def alter_isr(tp, state):
        return None  # the compare-and-set failed: someone else wrote the node

    rm = make_rm(alter_isr=alter_isr, lag_ms=1_000)
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=(1, 2), replicas=(1, 2))])
    mock_time.advance(1_001)
    assert rm.maybe_shrink_isr() == 1
    await rm.wait_for_isr_updates()
    assert (rm.topic_stats.isr_shrinks, rm.topic_stats.isr_expands) == (0, 0)
