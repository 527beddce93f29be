"""A broker's hosted partitions and the garbage collector's freezer.

- What the broker drops is freed by reference counting, with the cyclic collector off: the
  Partition, Log, segment, indexes, epoch cache and producer state of a deleted partition
  (StopReplica with deletion), and the follower states of a partition made follower. A
  frozen object in a reference cycle would never be freed (kafkalite/observability/gc_freeze.py).
- The freezer freezes after a full collection that left many objects (a LeaderAndIsr of many
  partitions), not otherwise; the partitions frozen are still freed when deleted.

No timing is asserted (bench/broker_loop_bench.py measures the collector's passes).
"""

from __future__ import annotations

import gc
import weakref

import pytest

from kafkalite.broker.partition import Partition, ReplicaState
from kafkalite.broker.producer_state import AppendOrigin
from kafkalite.broker.types import StopReplicaPartitionState
from kafkalite.config import BrokerConfig, ConfigError
from kafkalite.observability.gc_freeze import (
    FULL_PASS_AFTER_MIDDLE,
    GcFreezer,
    gc_freezer,
    install_gc_freezer,
    uninstall_gc_freezer,
)
from kafkalite.protocol.records import Record, build_batch, build_end_txn_marker_batch
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.config import LogConfig
from kafkalite.storage.log import Log
from tests.broker.conftest import MockTime, batch, leader_state
from tests.collector import collector_off

BROKER = 1


async def host(rm, topic: str, n: int) -> None:
    """``n`` partitions of ``topic``: the even ones led here (an idempotent producer's batch
    in each), the odd ones followed (their leader broker 2)."""
    states = [
        leader_state(topic, p, leader=BROKER, isr=(BROKER, 2))
        if p % 2 == 0
        else leader_state(topic, p, leader=2, isr=(BROKER, 2))
        for p in range(n)
    ]
    result = await rm.become_leader_or_follower_async(2, 1, states)
    assert set(result.partition_errors.values()) == {0}
    for p in range(0, n, 2):
        records = batch(3, producer_id=1000 + p, producer_epoch=0, base_sequence=0)
        await rm.append_records(0, 1, {TopicPartition(topic, p): records})


def weak_graph(rm, topic: str) -> dict[tuple[str, int], weakref.ref]:
    """Weak references to each hosted partition's own objects."""
    refs = {}
    for tp, partition in rm.partitions.items():
        if tp.topic != topic:
            continue
        log = partition.log
        for name, obj in (
            ("Partition", partition),
            ("Log", log),
            ("ProducerStateManager", partition.producer_state),
            ("LeaderEpochFileCache", log.leader_epoch_cache),
            ("LogSegment", log.active_segment),
        ):
            refs[name, tp.partition] = weakref.ref(obj)
    return refs


def alive(refs) -> set[str]:
    return {name for (name, _), ref in refs.items() if ref() is not None}


async def delete(rm, topic: str, n: int) -> None:
    result = await rm.stop_replicas_async(
        2, 1, [StopReplicaPartitionState(topic, p, -2, True) for p in range(n)]
    )
    assert set(result.partition_errors.values()) == {0}


async def test_a_deleted_partitions_objects_are_freed_by_reference_counting(make_rm):
    rm = make_rm(broker_id=BROKER)
    await host(rm, "doomed", 12)
    await host(rm, "kept", 2)
    refs = weak_graph(rm, "doomed")
    assert alive(refs) == {
        "Partition",
        "Log",
        "ProducerStateManager",
        "LeaderEpochFileCache",
        "LogSegment",
    }
    gc.collect()
    with collector_off():
        await delete(rm, "doomed", 12)
        assert alive(refs) == set()  # freed without the cyclic collector
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        cyclic = {type(o).__module__ for o in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    assert not {m for m in cyclic if m.startswith(("kafkalite.broker", "kafkalite.storage"))}
    assert [tp.topic for tp in rm.partitions] == ["kept", "kept"]


async def test_a_partition_made_follower_frees_its_follower_states(make_rm):
    rm = make_rm(broker_id=BROKER)
    await host(rm, "t", 1)
    partition = rm.partitions[TopicPartition("t", 0)]
    assert len(partition.remote_replicas) == 1
    gc.collect()

    def replica_states() -> int:
        return sum(1 for o in gc.get_objects() if type(o) is ReplicaState)

    with collector_off():
        before = replica_states()
        result = await rm.become_leader_or_follower_async(
            2, 1, [leader_state("t", 0, leader=2, leader_epoch=1, isr=(BROKER, 2))]
        )
        assert result.partition_errors[TopicPartition("t", 0)] == 0
        assert not partition.is_leader
        assert replica_states() == before - 1


@pytest.fixture
def unfrozen_after():
    """Whatever a test froze is unfrozen after it (the freeze is process-wide)."""
    yield
    gc.unfreeze()


async def test_a_bulk_leader_and_isr_is_frozen_and_its_partitions_still_freed(
    make_rm, unfrozen_after
):
    rm = make_rm(broker_id=BROKER)
    gc.collect()
    unfrozen = len(gc.get_objects())
    n = 300
    freezer = GcFreezer(min_objects=unfrozen + 10 * n)  # ~40 tracked objects a partition
    freezer.install()
    try:
        frozen_before = gc.get_freeze_count()
        gc.collect()
        assert (freezer.freezes, gc.get_freeze_count()) == (0, frozen_before)  # not many yet
        await host(rm, "bulk", n)
        gc.collect()
        assert freezer.freezes == 1
        assert gc.get_freeze_count() >= frozen_before + unfrozen + 10 * n
        partitions = {id(p) for p in rm.partitions.values()}
        assert not any(id(o) in partitions for o in gc.get_objects())  # all frozen
        refs = weak_graph(rm, "bulk")
        with collector_off():
            await delete(rm, "bulk", n)
            assert alive(refs) == set()  # frozen, and still freed by reference counting
        gc.collect()
        assert freezer.freezes == 1  # few objects since: no second freeze
    finally:
        freezer.uninstall()


def test_the_process_freezer_and_its_config_key(unfrozen_after):
    assert BrokerConfig.load(environ={}).gc_freeze_min_objects == 10_000
    config = BrokerConfig.load(environ={}, overrides=["gc.freeze.min.objects=0"])
    assert config.gc_freeze_min_objects == 0
    with pytest.raises(ConfigError, match="gc.freeze.min.objects"):
        BrokerConfig.load(environ={}, overrides=["gc.freeze.min.objects=-1"])
    assert gc_freezer() is None  # only `kafkalite serve` installs it
    thresholds = gc.get_threshold()
    gc.unfreeze()
    try:
        freezer = install_gc_freezer(1_000_000_000)
        assert freezer is not None and gc_freezer() is freezer
        # full passes after every FULL_PASS_AFTER_MIDDLE middle ones while it freezes
        assert gc.get_threshold() == (*thresholds[:2], FULL_PASS_AFTER_MIDDLE)
        assert gc.get_freeze_count() > 0  # what start-up made, frozen at once
        assert len(gc.get_objects()) < gc.get_freeze_count()
        assert gc.callbacks.count(freezer.on_collection) == 1
        assert install_gc_freezer(2_000_000_000) is freezer
        assert gc.callbacks.count(freezer.on_collection) == 1
        assert freezer.min_objects == 2_000_000_000
        # Nothing is frozen by these collections: the count does not grow (it may shrink, when
        # garbage another thread of the worker left held the last reference to a frozen object).
        frozen = gc.get_freeze_count()
        gc.collect()
        assert freezer.freezes == 0 and gc.get_freeze_count() <= frozen
        frozen = gc.get_freeze_count()
        assert install_gc_freezer(0) is freezer  # 0: nothing frozen any more
        assert gc.get_threshold() == thresholds  # and CPython's thresholds back
        allocated = [[i] for i in range(1000)]  # survives the collection
        gc.collect()
        assert freezer.freezes == 0 and gc.get_freeze_count() <= frozen
        assert freezer.longest_full_pass_seconds > 0
        del allocated
        install_gc_freezer(5)  # freezing again, then removed: the thresholds restored
        assert gc.get_threshold()[2] == FULL_PASS_AFTER_MIDDLE
    finally:
        uninstall_gc_freezer()
    assert gc_freezer() is None and freezer.on_collection not in gc.callbacks
    assert gc.get_threshold() == thresholds


async def test_a_hosted_partition_makes_no_objects_it_does_not_need(make_rm, tmp_path):
    """Fewer objects for the collector: one ISR set shared by the partitions that have it,
    no transaction index object for a segment without a file, no list for completed
    transactions while there is none; the index is made at its first aborted transaction."""
    rm = make_rm(broker_id=BROKER)
    await host(rm, "t", 4)
    partitions = [rm.partitions[TopicPartition("t", p)] for p in range(4)]
    assert len({id(p.isr) for p in partitions}) == 1 and partitions[0].isr == {BROKER, 2}
    for partition in partitions:
        assert partition.log.active_segment._txn_index is None
        assert partition.producer_state.completed_txns == ()
    log = Log(tmp_path / "alone-0", LogConfig())
    partition = Partition(TopicPartition("alone", 0), BROKER, MockTime())
    partition.make_leader(leader_state("alone", 0, isr=(BROKER,)), log)
    records = build_batch(
        [Record(offset_delta=0, value=b"t")],
        producer_id=100,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )
    partition.append_records_to_leader(bytearray(records), AppendOrigin.CLIENT, 1)
    assert log.active_segment._txn_index is None
    abort = build_end_txn_marker_batch(
        producer_id=100, producer_epoch=0, commit=False, coordinator_epoch=0
    )
    partition.append_records_to_leader(bytearray(abort), AppendOrigin.COORDINATOR, 1)
    assert [e.producer_id for e in log.active_segment.txn_index.entries] == [100]
    assert [p.name for p in log.dir.glob("*.txnindex")] == ["00000000000000000000.txnindex"]
    assert partition.producer_state.completed_txns == ()  # taken and indexed
    log.close()


def test_the_end_of_start_up_freezes_what_it_made_without_a_full_collection(unfrozen_after):
    freezer = GcFreezer(min_objects=1_000)
    gc.collect()
    gc.disable()  # as during a broker's start-up
    try:
        made = [[i] for i in range(5_000)]
        full_passes = gc.get_stats()[2]["collections"]
        frozen = gc.get_freeze_count()
        freezer.freeze_now(at="started")
        assert gc.get_stats()[2]["collections"] == full_passes  # nothing walked
        assert gc.get_freeze_count() - frozen >= len(made)
        assert freezer.freezes == 1 and freezer.frozen_objects >= len(made)
    finally:
        gc.enable()


def test_a_start_up_that_made_few_objects_is_collected_instead(unfrozen_after):
    freezer = GcFreezer(min_objects=1_000_000_000)
    gc.collect()
    full_passes = gc.get_stats()[2]["collections"]
    frozen = gc.get_freeze_count()
    freezer.freeze_now(at="started")
    assert gc.get_stats()[2]["collections"] == full_passes + 1
    assert gc.get_freeze_count() == frozen and freezer.freezes == 0


def test_no_freeze_at_the_end_of_start_up_with_the_key_at_zero(unfrozen_after):
    freezer = GcFreezer(min_objects=0)
    frozen = gc.get_freeze_count()
    freezer.freeze_now(at="started")
    assert gc.get_freeze_count() == frozen and freezer.freezes == 0
