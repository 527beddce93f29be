"""The leader's ISR write (``zk.client.update_leader_and_isr``, the ReplicaManager's
``alter_isr`` in a server) on the embedded coordination store."""

from __future__ import annotations

import json
from functools import partial

from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.client import update_leader_and_isr
from kafkalite.zk.data import ISR_CHANGE_NOTIFICATION, partition_state_path
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch
from kafkalite.zk.writes import update_leader_and_isr_batch

TP = TopicPartition("t", 0)
PATH = partition_state_path("t", 0)


async def _session():
    store = EmbeddedStore(None)
    session = await store.open_session()
    initial = {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2]}
    await session.create(PATH, json.dumps(initial).encode(), makepath=True)
    return store, session


async def test_cas_write_and_notification():
    store, session = await _session()
    try:
        writer = partial(update_leader_and_isr, session)
        version = await writer(TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1))
        assert version == 1
        data, _ = await session.get_data(PATH)
        assert json.loads(data) == {
            "controller_epoch": 1,
            "leader": 1,
            "version": 1,
            "leader_epoch": 0,
            "isr": [1],
        }
        [name] = await session.get_children(ISR_CHANGE_NOTIFICATION)
        assert name.startswith("isr_change_")
        note, _ = await session.get_data(f"{ISR_CHANGE_NOTIFICATION}/{name}")
        assert json.loads(note) == {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}
        # Retrying the same write at the old version (its answer was lost to a connection
        # loss): the data is ours, so it succeeded, and nothing more is written.
        assert await writer(TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1)) == 1
        assert len(await session.get_children(ISR_CHANGE_NOTIFICATION)) == 1
        # The controller moved on (new leader epoch): the stale leader's CAS fails.
        await session.set_data(
            PATH, b'{"controller_epoch":2,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}', 1
        )
        assert (
            await writer(TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 1), 1)) is None
        )
        assert (
            await writer(
                TopicPartition("gone", 0),
                LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1,), 0), 1),
            )
            is None
        )
    finally:
        await session.close()
        await store.close()


async def test_replica_manager_isr_shrink_through_the_store(make_rm, mock_time):
    """The seed's "two leaders" case end to end: the shrink of a current leader lands in the
    store; a stale leader's shrink fails its CAS and it stops taking writes."""
    from .conftest import batch, leader_state

    store, session = await _session()
    try:
        rm = make_rm(alter_isr=partial(update_leader_and_isr, session), lag_ms=1_000)
        await rm.become_leader_or_follower_async(
            0, 1, [leader_state(isr=(1, 2), replicas=(1, 2), zk_version=0)]
        )
        mock_time.advance(1_001)
        assert rm.maybe_shrink_isr() == 1
        await rm.wait_for_isr_updates()
        data, stat = await session.get_data(PATH)
        assert json.loads(data)["isr"] == [1] and stat.version == 1
        assert rm.partitions[TP].zk_version == 1 and rm.partitions[TP].isr == {1}
        assert len(await session.get_children(ISR_CHANGE_NOTIFICATION)) == 1

        # Broker 2 catches up and rejoins (written through the store too).
        from kafkalite.broker.types import FetchInfo, FetchParams

        await rm.fetch_messages(FetchParams(replica_id=2), {TP: FetchInfo(0, 1 << 20, 0)})
        await rm.wait_for_isr_updates()
        assert rm.partitions[TP].isr == {1, 2} and rm.partitions[TP].zk_version == 2
        # The controller elects broker 2 (epoch 1) without broker 1 hearing about it yet.
        await session.set_data(
            PATH, b'{"controller_epoch":2,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}', 2
        )
        await rm.append_records(1000, 1, {TP: batch()})  # broker 2 (now elsewhere) lags
        mock_time.advance(1_001)
        assert rm.maybe_shrink_isr() == 1
        await rm.wait_for_isr_updates()
        result = (await rm.append_records(1000, 1, {TP: batch()}))[TP]
        assert result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        await session.close()
        await store.close()


async def _session_with(partitions, version=1):
    store = EmbeddedStore(None)
    session = await store.open_session()
    for tp in partitions:
        state = {"controller_epoch": 1, "leader": 1, "version": version, "leader_epoch": 0}
        state["isr"] = [1, 2]
        await session.create(
            partition_state_path(tp.topic, tp.partition), json.dumps(state).encode(), makepath=True
        )
    return store, session


async def _notified(session):
    names = await session.get_children(ISR_CHANGE_NOTIFICATION)
    notes = []
    for name in sorted(names):
        data, _ = await session.get_data(f"{ISR_CHANGE_NOTIFICATION}/{name}")
        notes.append(sorted((p["topic"], p["partition"]) for p in json.loads(data)["partitions"]))
    return notes


async def test_a_batch_writes_all_states_and_one_notification_or_nothing():
    tps = [TopicPartition("t", p) for p in range(3)]
    store, session = await _session_with(tps)
    try:

        def state(isr, version):
            return LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, isr, version), 1)

        versions = await update_leader_and_isr_batch(session, {tp: state((1,), 0) for tp in tps})
        assert versions == {tp: 1 for tp in tps}
        assert await _notified(session) == [[("t", 0), ("t", 1), ("t", 2)]]
        # One stale version: nothing is written, no notification.
        stale = {tps[0]: state((1, 2), 1), tps[1]: state((1, 2), 0), tps[2]: state((1, 2), 1)}
        assert await update_leader_and_isr_batch(session, stale) is None
        for tp in tps:
            data, stat = await session.get_data(partition_state_path(tp.topic, tp.partition))
            assert json.loads(data)["isr"] == [1] and stat.version == 1
        assert len(await _notified(session)) == 1
    finally:
        await session.close()
        await store.close()


async def test_isr_changes_proposed_together_are_one_write_and_a_conflict_fences_only_its_own(
    make_rm, mock_time
):
    from .conftest import batch, leader_state

    tps = [TopicPartition("t", p) for p in range(3)]
    store, session = await _session_with(tps)
    try:
        rm = make_rm(
            alter_isr=partial(update_leader_and_isr, session),
            alter_isr_batch=partial(update_leader_and_isr_batch, session),
            lag_ms=1_000,
        )
        states = [
            leader_state(partition=tp.partition, isr=(1, 2), replicas=(1, 2), zk_version=0)
            for tp in tps
        ]
        await rm.become_leader_or_follower_async(0, 1, states)
        mock_time.advance(1_001)
        assert rm.maybe_shrink_isr() == 3
        await rm.wait_for_isr_updates()
        assert rm.isr_batches_written == 1
        assert await _notified(session) == [[("t", 0), ("t", 1), ("t", 2)]]
        assert all(rm.partitions[tp].isr == {1} and rm.partitions[tp].zk_version == 1 for tp in tps)

        # Broker 2 rejoins every ISR in one follower fetch: one more write.
        from kafkalite.broker.types import FetchInfo, FetchParams

        await rm.fetch_messages(
            FetchParams(replica_id=2), {tp: FetchInfo(0, 1 << 20, 0) for tp in tps}
        )
        await rm.wait_for_isr_updates()
        assert rm.isr_batches_written == 2
        assert all(rm.partitions[tp].isr == {1, 2} for tp in tps)
        assert len(await _notified(session)) == 2

        # The controller moves t-1 on; the next shrink of all three conflicts on t-1 only.
        path = partition_state_path("t", 1)
        await session.set_data(
            path, b'{"controller_epoch":2,"leader":2,"version":1,"leader_epoch":1,"isr":[2]}', 2
        )
        for tp in tps:
            await rm.append_records(1000, 1, {tp: batch()})
        mock_time.advance(1_001)
        assert rm.maybe_shrink_isr() == 3
        await rm.wait_for_isr_updates()
        assert rm.isr_batches_written == 2  # the batch failed as a whole, then one by one
        results = {
            tp: (await rm.append_records(1000, 1, {tp: batch()}))[tp].error_code for tp in tps
        }
        assert results == {
            tps[0]: ErrorCode.NONE,
            tps[1]: ErrorCode.NOT_LEADER_OR_FOLLOWER,
            tps[2]: ErrorCode.NONE,
        }
        assert rm.partitions[tps[0]].isr == {1} and rm.partitions[tps[2]].isr == {1}
    finally:
        await session.close()
        await store.close()
