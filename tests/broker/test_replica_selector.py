"""Follower fetching (KIP-392): the rack-aware choice (hypothesis over racks, ISR and log end
offsets), the leader's preferred read replica and a follower serving consumers, on a
ReplicaManager with a manual clock."""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkalite.broker.replica_selector import (
    LEADER_SELECTOR,
    RACK_AWARE_REPLICA_SELECTOR,
    ReplicaView,
    preferred_read_replica,
    select_rack_aware,
)
from kafkalite.broker.types import FetchInfo, FetchParams, IsolationLevel
from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.records import Record, build_batch
from kafkalite.protocol.types import TopicPartition

from .conftest import batch, leader_state, wait_until

TP = TopicPartition("t", 0)
RACKS = st.sampled_from(["r1", "r2", "r3"])

# -- the choice -------------------------------------------------------------------------------

followers_st = st.lists(
    st.builds(
        ReplicaView,
        broker_id=st.integers(2, 50),
        rack=st.one_of(st.none(), RACKS),
        log_end_offset=st.integers(0, 5),
        time_since_last_caught_up_ms=st.integers(0, 3),
    ),
    max_size=6,
    unique_by=lambda r: r.broker_id,
)


@given(
    client_rack=st.one_of(st.none(), st.just(""), RACKS),
    leader_rack=st.one_of(st.none(), RACKS),
    followers=followers_st,
)
def test_rack_aware_choice(client_rack, leader_rack, followers):
    leader = ReplicaView(1, leader_rack, 5)
    chosen = select_rack_aware(client_rack, leader, followers)
    same_rack = [f for f in followers if client_rack and f.rack == client_rack]
    if not client_rack or leader_rack == client_rack or not same_rack:
        assert chosen == leader
        return
    # The most caught-up follower of the client's rack: highest log end offset, then the
    # shortest time since it was caught up, then the highest id.
    assert chosen in same_rack
    for other in same_rack:
        assert (other.log_end_offset, -other.time_since_last_caught_up_ms, other.broker_id) <= (
            chosen.log_end_offset,
            -chosen.time_since_last_caught_up_ms,
            chosen.broker_id,
        )


@given(
    selector=st.sampled_from([None, LEADER_SELECTOR, RACK_AWARE_REPLICA_SELECTOR]),
    client_rack=st.one_of(st.none(), RACKS),
    leader_rack=st.one_of(st.none(), RACKS),
    followers=followers_st,
)
def test_preferred_read_replica_is_never_the_leader(selector, client_rack, leader_rack, followers):
    leader = ReplicaView(1, leader_rack, 5)
    chosen = preferred_read_replica(selector, client_rack, leader, followers)
    if selector != RACK_AWARE_REPLICA_SELECTOR:
        assert chosen is None
    else:
        assert chosen != leader.broker_id
        assert chosen is None or chosen in {f.broker_id for f in followers}


def test_replica_selector_class_is_validated():
    assert BrokerConfig().replica_selector_class is None
    for name in (RACK_AWARE_REPLICA_SELECTOR, LEADER_SELECTOR):
        config = BrokerConfig.load(overrides=[f"replica.selector.class={name}"], environ={})
        assert config.replica_selector_class == name
    with pytest.raises(ConfigError) as info:
        BrokerConfig.load(overrides=["replica.selector.class=com.example.Mine"], environ={})
    assert info.value.key == "replica.selector.class"


# -- the leader's answer ----------------------------------------------------------------------


class Brokers:
    """The metadata cache's view the replica manager asks: alive brokers and their racks."""

    def __init__(self, racks: dict[int, str | None]) -> None:
        self.racks = racks

    def get_alive_broker(self, broker_id: int):
        if broker_id not in self.racks:
            return None
        return SimpleNamespace(id=broker_id, rack=self.racks[broker_id])


def _rack_aware(rm):
    rm.config = dataclasses.replace(rm.config, replica_selector_class=RACK_AWARE_REPLICA_SELECTOR)
    return rm


async def _leader_with_followers(make_rm, racks, isr=(1, 2, 3)):
    rm = _rack_aware(make_rm(metadata_cache=Brokers(racks)))
    await rm.become_leader_or_follower_async(0, 1, [leader_state(isr=isr, replicas=(1, 2, 3))])
    await rm.append_records(1000, 1, {TP: batch(4)})
    # Followers 2 and 3 fetch up to the log end: HW 4.
    for follower in (2, 3):
        await rm.fetch_messages(FetchParams(replica_id=follower), {TP: FetchInfo(4, 1 << 20, 0)})
    assert rm.partitions[TP].log.high_watermark == 4
    return rm


def consumer(rack: str | None, **kw) -> FetchParams:
    return FetchParams(client_rack=rack, **kw)


async def test_leader_names_the_in_sync_follower_of_the_client_rack(make_rm):
    rm = await _leader_with_followers(make_rm, {1: "r1", 2: "r2", 3: "r3"})
    # A long poll is answered at once: the client must move.
    data = (
        await rm.fetch_messages(consumer("r2", max_wait_ms=60_000), {TP: FetchInfo(0, 1 << 20)})
    )[TP]
    assert data.error_code is ErrorCode.NONE
    assert data.preferred_read_replica == 2
    assert data.records_size == 0
    assert (data.high_watermark, data.log_start_offset) == (4, 0)
    assert rm.fetch_purgatory.delayed == 0
    for rack in ("r1", "", "r9"):  # the leader's rack, no rack, a rack nobody is in
        data = (await rm.fetch_messages(consumer(rack), {TP: FetchInfo(0, 1 << 20)}))[TP]
        assert data.preferred_read_replica == -1 and data.records_size > 0, rack
    # Fetch v10 and older carry no client metadata: the leader serves them.
    data = (await rm.fetch_messages(consumer(None), {TP: FetchInfo(0, 1 << 20)}))[TP]
    assert data.preferred_read_replica == -1 and data.records_size > 0
    # A stale leader epoch is fenced before any choice.
    data = (await rm.fetch_messages(consumer("r2"), {TP: FetchInfo(0, 1 << 20, -1, 7)}))[TP]
    assert data.error_code is ErrorCode.UNKNOWN_LEADER_EPOCH


async def test_leader_does_not_name_a_follower_out_of_the_isr_dead_or_behind(make_rm):
    rm = await _leader_with_followers(make_rm, {1: "r1", 2: "r2", 3: "r2"})
    fetch = {TP: FetchInfo(0, 1 << 20)}

    async def preferred(infos=fetch) -> int:
        return (await rm.fetch_messages(consumer("r2"), infos))[TP].preferred_read_replica

    assert await preferred() == 3  # both caught up at once: the higher id, as Kafka
    rm.partitions[TP].isr = frozenset({1, 2})
    assert await preferred() == 2
    rm.metadata_cache.racks.pop(2)  # broker 2 died
    data = (await rm.fetch_messages(consumer("r2"), fetch))[TP]
    assert data.preferred_read_replica == -1 and data.records_size > 0
    # The most caught-up follower of the rack is named.
    rm.metadata_cache.racks[2] = "r2"
    rm.partitions[TP].isr = frozenset({1, 2, 3})
    await rm.append_records(1000, 1, {TP: batch(2)})
    await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(6, 1 << 20, 0)})
    assert await preferred() == 2
    # A follower that does not hold the fetch offset yet is not named.
    assert await preferred({TP: FetchInfo(5, 1 << 20)}) == 2
    rm.partitions[TP].isr = frozenset({1, 3})
    assert await preferred({TP: FetchInfo(5, 1 << 20)}) == -1  # 3 has 0-3 only
    assert await preferred({TP: FetchInfo(4, 1 << 20)}) == 3


async def test_leader_selector_keeps_consumers_on_the_leader(make_rm):
    rm = await _leader_with_followers(make_rm, {1: "r1", 2: "r2", 3: "r3"})
    rm.config = dataclasses.replace(rm.config, replica_selector_class=LEADER_SELECTOR)
    data = (await rm.fetch_messages(consumer("r2"), {TP: FetchInfo(0, 1 << 20)}))[TP]
    assert data.preferred_read_replica == -1 and data.records_size > 0


# -- a follower serving consumers ---------------------------------------------------------------


def _batch_at(base_offset: int, n: int) -> bytearray:
    """A batch as the leader sends it: offsets assigned."""
    records = [Record(offset_delta=i, timestamp_delta=i, key=None, value=b"v") for i in range(n)]
    return bytearray(build_batch(records, base_offset=base_offset, base_timestamp=1_000))


async def _follower(make_rm, epoch=3):
    rm = make_rm()
    await rm.become_leader_or_follower_async(
        0, 1, [leader_state(leader=2, leader_epoch=epoch, isr=(1, 2), replicas=(1, 2))]
    )
    partition = rm.partitions[TP]
    partition.append_records_to_follower(_batch_at(0, 3))
    partition.append_records_to_follower(_batch_at(3, 2))
    partition.update_follower_high_watermark(3)  # the leader said HW 3; this log has 5
    return rm


async def test_follower_serves_consumers_up_to_its_high_watermark(make_rm):
    rm = await _follower(make_rm)
    data = (await rm.fetch_messages(consumer("r1"), {TP: FetchInfo(0, 1 << 20, -1, 3)}))[TP]
    assert data.error_code is ErrorCode.NONE
    assert data.high_watermark == 3
    assert data.records_size == len(batch(3))  # the first batch only: the second is past HW
    assert data.preferred_read_replica == -1
    # At its HW a consumer waits, and the follower's HW moving answers it.
    waiting = asyncio.create_task(
        rm.fetch_messages(consumer("r1", max_wait_ms=60_000), {TP: FetchInfo(3, 1 << 20)})
    )
    await wait_until(lambda: rm.fetch_purgatory.delayed == 1)
    rm.partitions[TP].update_follower_high_watermark(5)
    rm.fetch_purgatory.check_and_complete(TP)
    data = (await asyncio.wait_for(waiting, 5))[TP]
    assert data.high_watermark == 5 and data.records_size == len(batch(2))


async def test_follower_checks_epoch_offsets_and_client_metadata(make_rm):
    rm = await _follower(make_rm, epoch=3)

    async def code(params, info):
        return (await rm.fetch_messages(params, {TP: info}))[TP]

    assert (await code(consumer("r1"), FetchInfo(0, 1 << 20, -1, 2))).error_code is (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (await code(consumer("r1"), FetchInfo(0, 1 << 20, -1, 4))).error_code is (
        ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    # Past the follower's log end (a client ahead of it, on the leader's word): out of range,
    # with or without a leader epoch, as Kafka; the client then asks the leader.
    for epoch in (3, -1):
        assert (await code(consumer("r1"), FetchInfo(9, 1 << 20, -1, epoch))).error_code is (
            ErrorCode.OFFSET_OUT_OF_RANGE
        )
    # Between its HW and its log end: nothing yet, no error.
    between = await code(consumer("r1"), FetchInfo(4, 1 << 20, -1, 3))
    assert between.error_code is ErrorCode.NONE and between.records_size == 0
    # Without client metadata (Fetch v10 and older) a consumer reads from the leader only.
    assert (await code(consumer(None), FetchInfo(0, 1 << 20))).error_code is (
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    )


async def test_follower_serves_read_committed_up_to_its_last_stable_offset(make_rm):
    rm = await _follower(make_rm)  # offsets 0-4, HW 3
    partition = rm.partitions[TP]
    records = [Record(offset_delta=0, timestamp_delta=0, key=None, value=b"t")]
    open_txn = build_batch(
        records,
        base_offset=5,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
        base_timestamp=1_000,
    )
    partition.append_records_to_follower(bytearray(open_txn))
    partition.append_records_to_follower(_batch_at(6, 1))
    partition.update_follower_high_watermark(7)
    committed = FetchParams(client_rack="r1", isolation_level=IsolationLevel.READ_COMMITTED)
    data = (await rm.fetch_messages(committed, {TP: FetchInfo(0, 1 << 20)}))[TP]
    assert (data.high_watermark, data.last_stable_offset) == (7, 5)
    assert data.records_size == len(_batch_at(0, 3)) + len(_batch_at(3, 2))  # stops at the LSO
    assert data.aborted_transactions == []
