"""zk/client.py: controller election on the store, fenced writes, and the znodes' contents."""

import asyncio
import json

import pytest

from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.coord.errors import BadVersion
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import client as zk_client
from kafkalite.zk import data as paths
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kafkalite.zk.writes import (
    CreatePartitionState,
    DeleteTopic,
    DeleteTopicDeletions,
    SetTopicAssignment,
    UpdatePartitionState,
    UpdateReassignPartitions,
)

TP = TopicPartition("t", 0)


@pytest.fixture
async def store():
    s = EmbeddedStore(None)
    yield s
    await s.close()


async def test_exactly_one_of_many_wins_the_election(store):
    sessions = [await store.open_session() for _ in range(5)]
    results = await asyncio.gather(
        *(
            zk_client.register_controller_and_increment_controller_epoch(s, i)
            for i, s in enumerate(sessions)
        ),
        return_exceptions=True,
    )
    winners = [i for i, r in enumerate(results) if not isinstance(r, Exception)]
    assert len(winners) == 1
    assert all(
        isinstance(r, zk_client.ControllerMovedError) for r in results if isinstance(r, Exception)
    )
    assert results[winners[0]][0] == 1
    assert await zk_client.get_controller_id(sessions[0]) == winners[0]
    data, _ = await sessions[0].get_data(paths.CONTROLLER_EPOCH)
    assert data == b"1"
    controller = json.loads((await sessions[0].get_data(paths.CONTROLLER))[0])
    assert controller["version"] == 1 and controller["brokerid"] == winners[0]
    await sessions[winners[0]].close()  # the ephemeral goes with the session
    loser = next(i for i in range(5) if i != winners[0])
    epoch, version = await zk_client.register_controller_and_increment_controller_epoch(
        sessions[loser], loser
    )
    assert epoch == 2 and version == (await zk_client.get_controller_epoch(sessions[loser]))[1]


async def with_topic(session):
    await session.ensure_path(paths.BROKER_TOPICS)
    await session.create(
        paths.topic_path("t"),
        zk_client.encode_assignment("t", "id", {0: ReplicaAssignment((0, 1))}),
    )


async def test_writes_are_fenced_by_the_controller_epoch_version(store):
    session = await store.open_session()
    await with_topic(session)
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0, 1)), 1)
    await zk_client.apply_writes(session, [CreatePartitionState(TP, info)], epoch_version)
    stored = await zk_client.get_partition_state(session, TP)
    assert stored == LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0, 1), 0), 1)
    raw = json.loads((await session.get_data(paths.partition_state_path("t", 0)))[0])
    assert raw == {
        "controller_epoch": 1,
        "leader": 0,
        "version": 1,
        "leader_epoch": 0,
        "isr": [0, 1],
    }

    other = await store.open_session()
    await other.set_data(paths.CONTROLLER_EPOCH, b"2", epoch_version)  # a newer controller
    elected = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1,)), 1)
    with pytest.raises(zk_client.ControllerMovedError):
        await zk_client.apply_writes(session, [UpdatePartitionState(TP, elected, 0)], epoch_version)
    assert (await zk_client.get_partition_state(session, TP)).leader_and_isr.leader == 0
    with pytest.raises(BadVersion):
        await zk_client.apply_writes(
            session, [UpdatePartitionState(TP, elected, 5)], epoch_version + 1
        )


async def test_leader_isr_updates_are_compare_and_set_with_a_notification(store):
    session = await store.open_session()
    await with_topic(session)
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    await zk_client.apply_writes(
        session,
        [CreatePartitionState(TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 3, (0, 1)), 1))],
        epoch_version,
    )

    # The partition leader's write (the broker's ReplicaManager.alter_isr), as the controller reads it.
    async def write(isr):
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 3, isr, 0), 1)
        return await zk_client.update_leader_and_isr(session, TP, state)

    assert await write((0,)) == 1
    assert await write((0,)) == 1  # a retry: ours already
    assert await write((0, 1)) is None  # stale version
    stored = await zk_client.get_partition_state(session, TP)
    assert stored == LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 3, (0,), 1), 1)
    seqs = await zk_client.get_isr_change_notifications(session)
    assert len(seqs) == 1
    assert await zk_client.get_partitions_from_isr_change_notifications(session, seqs) == {TP}


async def test_delete_topic_removes_the_tree_config_and_marker(store):
    session = await store.open_session()
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    assignment = {0: ReplicaAssignment((0,)), 1: ReplicaAssignment((0,))}
    await session.ensure_path(paths.BROKER_TOPICS)
    await session.create(paths.topic_path("t"), zk_client.encode_assignment("t", "id", assignment))
    await session.ensure_path(paths.topic_config_path("t"))
    await session.ensure_path(paths.delete_topic_path("t"))
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(0), 1)
    await zk_client.apply_writes(
        session,
        [CreatePartitionState(TopicPartition("t", p), info) for p in (0, 1)],
        epoch_version,
    )
    await zk_client.apply_writes(session, [DeleteTopic("t")], epoch_version)
    for path in (paths.topic_path("t"), paths.topic_config_path("t"), paths.delete_topic_path("t")):
        assert await session.exists(path) is None
    await zk_client.apply_writes(
        session, [DeleteTopicDeletions(("never",))], epoch_version
    )  # absent: no-op


async def test_topic_assignment_round_trip_and_brokers(store):
    session = await store.open_session()
    await session.ensure_path(paths.BROKER_TOPICS)
    await session.create(
        paths.topic_path("t"), zk_client.encode_assignment("t", None, {0: ReplicaAssignment((1,))})
    )
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    new = {0: ReplicaAssignment((1, 2), adding_replicas=(2,)), 1: ReplicaAssignment((2, 1))}
    await zk_client.apply_writes(session, [SetTopicAssignment("t", "abc", new)], epoch_version)
    topic_id, assignment, version = await zk_client.get_topic_assignment(session, "t")
    assert (topic_id, assignment, version) == ("abc", new, 1)
    await session.ensure_path(paths.BROKER_IDS)
    info = paths.BrokerInfo(3, (paths.EndPoint("h", 1234),), rack="r")
    await session.create(paths.broker_path(3), paths.encode_broker(info), ephemeral=True)
    brokers = await zk_client.get_all_brokers_and_epochs(session)
    broker, epoch = brokers[3]
    assert (broker.id, broker.rack, broker.endpoints[0].host, broker.endpoints[0].port) == (
        3,
        "r",
        "h",
        1234,
    )
    assert epoch == (await session.exists(paths.broker_path(3))).czxid
    await session.ensure_path(paths.topic_config_path("t"))
    await session.set_data(
        paths.topic_config_path("t"),
        paths.encode_entity_config({"unclean.leader.election.enable": "true"}),
        -1,
    )
    assert await zk_client.get_unclean_leader_election_topics(session, ["t", "u"], False) == {"t"}
    assert await zk_client.get_unclean_leader_election_topics(session, ["u"], True) == {"u"}


async def test_several_reassignment_node_updates_in_one_batch(store):
    """Two completions in one batch both leave nothing: one delete, not two (the second made
    the whole multi fail with NoNode)."""
    session = await store.open_session()
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    await session.create(
        paths.REASSIGN_PARTITIONS, paths.encode_reassignment({TP: (1,)}), makepath=True
    )
    writes = [UpdateReassignPartitions({}), UpdateReassignPartitions({})]
    await zk_client.apply_writes(session, writes, epoch_version)
    assert await session.exists(paths.REASSIGN_PARTITIONS) is None
    await zk_client.apply_writes(
        session,
        [UpdateReassignPartitions({TP: (2,)}), UpdateReassignPartitions({TP: (3,)})],
        epoch_version,
    )
    assert await zk_client.get_partition_reassignments(session) == {TP: (3,)}


class CountingSession:
    """A session whose reads are counted (the per-partition round trips a big topic must not
    cost)."""

    def __init__(self, session):
        self._session = session
        self.reads = 0

    def __getattr__(self, name):
        attr = getattr(self._session, name)
        if name in ("exists", "get_children", "get_data"):

            async def counted(*args, **kwargs):
                self.reads += 1
                return await attr(*args, **kwargs)

            return counted
        return attr


async def test_partition_states_are_written_in_chunks_and_fail_per_partition(store):
    """Kafka's updateLeaderAndIsr: each partition's write succeeds or fails alone. A leader
    changed partition 3 between the controller's read and its write: only partition 3 fails;
    the other elections (in several chunked multis) are in the store."""
    session = await store.open_session()
    await with_topic(session)
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    partitions = [TopicPartition("t", p) for p in range(10)]
    initial = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0, 1)), 1)
    counting = CountingSession(session)
    failed = await zk_client.apply_partition_state_writes(
        counting,
        [CreatePartitionState(tp, initial) for tp in partitions],
        epoch_version,
        max_ops=4,
    )
    assert failed == set()
    assert counting.reads == 1  # one listing of /brokers/topics/t/partitions, not one per node
    for tp in partitions:
        assert (await zk_client.get_partition_state(session, tp)).leader_and_isr.leader == 0

    leader_write = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0,)), 1)
    await session.set_data(
        paths.partition_state_path("t", 3),
        zk_client.encode_leader_isr_and_controller_epoch(leader_write),
        0,
    )
    elected = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (0, 1), 1), 1)
    failed = await zk_client.apply_partition_state_writes(
        session,
        [UpdatePartitionState(tp, elected, 0) for tp in partitions],
        epoch_version,
        max_ops=3,
    )
    assert failed == {TopicPartition("t", 3)}
    for tp in partitions:
        stored = (await zk_client.get_partition_state(session, tp)).leader_and_isr
        assert stored.leader == (0 if tp.partition == 3 else 1)

    other = await store.open_session()
    await other.set_data(paths.CONTROLLER_EPOCH, b"2", epoch_version)  # a newer controller
    with pytest.raises(zk_client.ControllerMovedError):
        await zk_client.apply_partition_state_writes(
            session, [UpdatePartitionState(TP, elected, 1)], epoch_version
        )


async def test_only_partition_state_writes_are_applied_per_partition():
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(0), 1)
    assert zk_client.can_apply_per_partition(
        [CreatePartitionState(TP, info), UpdatePartitionState(TP, info, 0)]
    )
    assert not zk_client.can_apply_per_partition([CreatePartitionState(TP, info), DeleteTopic("t")])


async def test_a_failing_first_partition_does_not_take_the_topics_partitions_node_along(store):
    """The ``partitions`` node of a new topic is created with its first partition's writes;
    when that partition's writes fail (here a stale compare-and-set after its creation), the
    node is still created for the others, which succeed."""
    session = await store.open_session()
    await with_topic(session)
    await session.create(paths.topic_path("u"), b"{}")
    _, epoch_version = await zk_client.register_controller_and_increment_controller_epoch(
        session, 0
    )
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0, 1)), 1)
    partitions = [TopicPartition("u", p) for p in range(4)]
    stale = UpdatePartitionState(partitions[0], info, 5)
    failed = await zk_client.apply_partition_state_writes(
        session,
        [CreatePartitionState(tp, info) for tp in partitions] + [stale],
        epoch_version,
    )
    assert failed == {partitions[0]}
    assert await zk_client.get_partition_state(session, partitions[0]) is None
    for tp in partitions[1:]:
        assert (await zk_client.get_partition_state(session, tp)).leader_and_isr.leader == 0


async def test_isr_change_notifications_are_read_in_one_batch(store):
    """Hundreds of notifications after a restart: one round trip each in turn held the
    controller's event queue for seconds; they are read in one batch (``get_data_many``: one
    crossing to the coordination thread, the reads sent together)."""
    session = await store.open_session()
    for p in range(5):
        await session.create(
            f"{paths.ISR_CHANGE_NOTIFICATION}/{paths.ISR_CHANGE_PREFIX}",
            paths.encode_isr_change({TopicPartition("t", p)}),
            sequential=True,
            makepath=True,
        )
    batches: list[int] = []
    singles: list[str] = []

    class Counted:
        def __getattr__(self, name):
            return getattr(session, name)

        async def get_data(self, path):
            singles.append(path)
            return await session.get_data(path)

        async def get_data_many(self, paths_):
            batches.append(len(paths_))
            return await session.get_data_many(paths_)

    seqs = await zk_client.get_isr_change_notifications(session)
    seqs.append("9999999999")  # removed meanwhile: skipped
    partitions = await zk_client.get_partitions_from_isr_change_notifications(Counted(), seqs)
    assert partitions == {TopicPartition("t", p) for p in range(5)}
    assert batches == [6] and singles == []


async def test_bulk_assignments_decode_as_one_topic_reads_do(store):
    """get_topic_assignments decodes a node in the brokers' plain form once per distinct
    partitions' JSON; every topic still gets its own id and an assignment equal to the one
    get_topic_assignment decodes (reassigning, id-less and multi-partition nodes included)."""
    session = await store.open_session()
    await session.ensure_path(paths.BROKER_TOPICS)
    shapes = [
        {0: ReplicaAssignment((1,))},
        {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))},
        {0: ReplicaAssignment((1, 2), adding_replicas=(2,))},
        {0: ReplicaAssignment((1, 2), removing_replicas=(1,)), 1: ReplicaAssignment((2,))},
    ]
    topics = {}
    for i in range(12):
        shape = shapes[i % len(shapes)]
        topic_id = None if i == 5 else paths.new_topic_id()
        topics[f"t{i}"] = (topic_id, shape)
        await session.create(
            paths.topic_path(f"t{i}"), zk_client.encode_assignment(f"t{i}", topic_id, shape)
        )
    raw: dict[str, bytes] = {}

    found = await zk_client.get_topic_assignments(session, [*topics, "absent"], raw)

    assert found == topics
    assert set(raw) == set(topics)
    for topic in topics:
        topic_id, assignment, _ = await zk_client.get_topic_assignment(session, topic)
        assert found[topic] == (topic_id, assignment)
        assert raw[topic] == (await session.get_data(paths.topic_path(topic)))[0]
    # each topic has an assignment dict of its own (the controller's context updates it)
    found["t0"][1][7] = ReplicaAssignment((9,))
    assert 7 not in found["t4"][1]


async def test_bulk_unclean_election_topics_decide_each_distinct_config_once(store):
    session = await store.open_session()
    await session.ensure_path(paths.CONFIG_TOPICS)
    configs = {
        "a": {},
        "b": {"unclean.leader.election.enable": "true"},
        "c": {},
        "d": {"unclean.leader.election.enable": " TRUE "},
        "e": {"unclean.leader.election.enable": "false"},
        "f": {"retention.ms": "5"},
    }
    for topic, config in configs.items():
        await session.create(paths.topic_config_path(topic), paths.encode_entity_config(config))
    await session.create(paths.topic_config_path("empty"), b"")
    topics = [*configs, "empty", "absent"]

    assert await zk_client.get_unclean_leader_election_topics(session, topics, False) == {"b", "d"}
    assert await zk_client.get_unclean_leader_election_topics(session, topics, True) == {
        "a",
        "b",
        "c",
        "d",
        "f",
        "empty",
        "absent",
    }


async def test_bulk_partition_states_share_each_distinct_state(store):
    """get_partition_states decodes each distinct (data, version) once: equal nodes share one
    state, a node at another version or with other data gets its own, absent ones are None."""
    session = await store.open_session()
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 3, (0, 1)), 7)
    other = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1,)), 7)
    tps = [TopicPartition(f"t{i}", 0) for i in range(6)]
    for i, tp in enumerate(tps[:5]):
        path = paths.partition_state_path(tp.topic, tp.partition)
        await session.ensure_path(path.rsplit("/", 1)[0])
        await session.create(
            path, zk_client.encode_leader_isr_and_controller_epoch(other if i == 2 else state)
        )
    await session.set_data(
        paths.partition_state_path("t3", 0),
        zk_client.encode_leader_isr_and_controller_epoch(state),
        0,
    )

    found = await zk_client.get_partition_states(session, tps)

    for tp in tps:
        assert found[tp] == await zk_client.get_partition_state(session, tp)
    assert found[tps[5]] is None
    assert found[tps[0]] is found[tps[1]] is found[tps[4]]
    assert found[tps[3]].leader_and_isr.zk_version == 1
    assert found[tps[0]].leader_and_isr.zk_version == 0
    assert found[tps[2]].leader_and_isr.leader == 1
