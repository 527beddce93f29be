"""KafkaController's I/O shell against the embedded coordination store, with fake broker
transports: election and failover, topic creation/deletion/partition addition end to end, broker
failure, fenced writes, ISR change notifications, session expiry, controlled shutdown."""

import asyncio
from types import SimpleNamespace

import pytest

from kafkalite.controller.kafka_controller import KafkaController
from kafkalite.coord.embedded import EmbeddedStore
from kafkalite.coord.errors import ConnectionLoss
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, NotControllerError, ReassignmentInProgressError
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import admin
from kafkalite.zk import client as zk_data
from kafkalite.zk import data as paths
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch
from tests.loop_turns import LoopTurns

from .shell_support import FakeCluster, eventually, register_broker, settle, start_node

pytestmark = pytest.mark.timeout(60)
NO_REASSIGNMENT = "No partition reassignment is in progress."  # Kafka's default message


@pytest.fixture
async def store():
    s = EmbeddedStore(None)
    yield s
    await s.close()


@pytest.fixture
async def cluster(store):
    c = FakeCluster(store)
    c.reader = await store.open_session()
    return c


async def stop(*nodes):
    for node in nodes:
        await node.controller.shutdown()
        if node.session.state.value not in ("expired", "closed"):
            await node.session.close()


def config(**values):
    base = dict(
        delete_topic_enable=True,
        unclean_leader_election_enable=False,
        auto_leader_rebalance_enable=False,
        leader_imbalance_check_interval_seconds=300,
    )
    base.update(values)
    return SimpleNamespace(**base)


async def state(reader, topic, partition):
    return await zk_data.get_partition_state(reader, TopicPartition(topic, partition))


async def test_single_broker_elects_itself_and_brings_a_new_topic_online(store, cluster):
    node = await start_node(store, cluster, 0, config=config())
    reader = cluster.reader
    assert node.controller.is_active and node.controller.epoch == 1
    assert (await zk_data.get_controller_id(reader)) == 0
    assert (await zk_data.get_controller_epoch(reader))[0] == 1

    topic_id = await admin.create_topic(reader, "orders", 3, 1, {"retention.ms": "1000"})
    await eventually(
        lambda: len(cluster.leader_and_isr_partitions(0)) == 3,
        message="LeaderAndIsr for 3 partitions",
    )
    for p in range(3):
        info = await state(reader, "orders", p)
        assert info.leader_and_isr.leader == 0 and info.leader_and_isr.isr == (0,)
        assert info.controller_epoch == 1
    partition_states = [ps for _, _, ps in cluster.leader_and_isr_partitions(0)]
    assert all(ps.is_new and ps.leader == 0 for ps in partition_states)
    lai = cluster.of(ApiKey.LEADER_AND_ISR, 0)[-1].message
    assert lai.controller_id == 0 and lai.controller_epoch == 1
    assert str(lai.topic_states[0].topic_id) and topic_id != admin.ZERO_TOPIC_ID
    await eventually(
        lambda: any(
            t.topic_name == "orders"
            for s in cluster.of(ApiKey.UPDATE_METADATA, 0)
            for t in s.message.topic_states
        ),
        message="UpdateMetadata with the topic",
    )
    assert await zk_data.get_topic_config(reader, "orders") == {"retention.ms": "1000"}
    assert cluster.violations == []
    assert node.controller.event_manager.errors == []
    await stop(node)


async def test_an_election_whose_answer_was_lost_still_takes_office(store, cluster):
    """The election multi is applied but its answer lost (connection loss); the retried event
    finds /controller naming this broker: it is ours (this session's ephemeral node), so the
    broker becomes the active controller instead of leaving the cluster without one."""
    from kafkalite.coord.base import CreateOp

    session = await register_broker(store, 0)
    multi = session.multi

    async def losing_the_first_election_answer(ops):
        if any(isinstance(op, CreateOp) and op.path == paths.CONTROLLER for op in ops):
            if not getattr(session, "lost_once", False):
                session.lost_once = True
                store.fail_next(1, after_apply=True)
        return await multi(ops)

    session.multi = losing_the_first_election_answer
    controller = KafkaController(
        0, session, config(), transport_factory=cluster.transport_factory, retry_backoff=0.001
    )
    await controller.startup()
    await settle(controller)
    assert session.lost_once
    assert controller.is_active and controller.epoch == 1
    await controller.shutdown()
    await session.close()


async def test_a_log_dir_failure_moves_leadership_to_a_healthy_replica(store, cluster):
    """Kafka's log dir event path: the broker writes /log_dir_event_notification, the controller
    asks it about its replicas, the ones on the failed directory answer KAFKA_STORAGE_ERROR and
    get another leader; the event is deleted."""
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "ld", 1, 2, replica_assignment={0: [0, 1]})
    t0 = TopicPartition("ld", 0)

    async def leader() -> int | None:
        info = await state(reader, "ld", 0)
        return info.leader_and_isr.leader if info is not None else None

    await eventually(lambda: _equals(leader(), 0), timeout=30, message="broker 0 leads")
    cluster.offline[0] = {t0}
    await zk_data.propagate_log_dir_event(nodes[0].session, 0)
    await eventually(lambda: _equals(leader(), 1), timeout=30, message="broker 1 leads")
    # the notification is deleted once processed (Kafka deletes it after acting on it), which
    # may come after the new leader's write
    await eventually(
        lambda: _equals(zk_data.get_log_dir_event_notifications(reader), []),
        timeout=30,
        message="the log dir event deleted",
    )
    assert all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*nodes)


async def _equals(value, expected) -> bool:
    return await value == expected


async def test_controlled_shutdown_answers_what_the_store_holds(store, cluster, monkeypatch):
    """The leader changes the partition state between the controller's read and its election
    write: the write loses, and the answer must come from a decision that was applied (it
    said 'nothing remains' while the shutting-down broker still led)."""
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "cs", 1, 2, replica_assignment={0: [1, 0]})
    t0 = TopicPartition("cs", 0)
    await eventually(lambda: zk_data.get_partition_state(reader, t0), message="online")
    await settle(nodes[0].controller)
    raced = []

    def racing(apply):
        async def apply_after_a_leader_write(session, writes, version):
            if not raced:
                raced.append(True)
                info = await zk_data.get_partition_state(reader, t0)
                await reader.set_data(
                    paths.partition_state_path("cs", 0),
                    zk_data.encode_leader_isr_and_controller_epoch(info),
                    info.leader_and_isr.zk_version,
                )
            return await apply(session, writes, version)

        return apply_after_a_leader_write

    for name in ("apply_writes", "apply_partition_state_writes"):
        monkeypatch.setattr(zk_data, name, racing(getattr(zk_data, name)))
    epoch = (await reader.exists(paths.broker_path(1))).czxid
    remaining = await nodes[0].controller.controlled_shutdown(1, epoch)
    info = await zk_data.get_partition_state(reader, t0)
    assert raced and remaining == []
    assert info.leader_and_isr.leader == 0  # really moved before 'nothing remains'
    await stop(*nodes)


async def test_controlled_shutdown_answers_once_the_new_leader_knows(store, cluster):
    """The stopping broker exits on the answer: the brokers taking over must have been told
    first, or clients find its leaderships everywhere after it is gone (and a resigning
    controller's queued requests would die with it)."""
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "cs", 1, 2, replica_assignment={0: [1, 0]})
    t0 = TopicPartition("cs", 0)
    await eventually(lambda: zk_data.get_partition_state(reader, t0), message="online")
    await settle(nodes[0].controller)
    cluster.hold[0] = asyncio.Event()
    epoch = (await reader.exists(paths.broker_path(1))).czxid
    answer = asyncio.create_task(nodes[0].controller.controlled_shutdown(1, epoch))

    async def moved():
        return (await zk_data.get_partition_state(reader, t0)).leader_and_isr.leader == 0

    await eventually(moved, message="the leadership moved in the store")
    await nodes[0].controller.event_manager.wait_idle()
    assert not answer.done()
    cluster.hold[0].set()
    assert await asyncio.wait_for(answer, 10) == []
    assert any(ps.leader == 0 for b, tp, ps in cluster.leader_and_isr_partitions(0) if tp == t0)
    await stop(*nodes)


async def test_controlled_shutdown_does_not_wait_for_the_isr_shrinks(store, cluster):
    """Like Kafka's, the answer waits for the leadership moves' requests, not for the ISR
    shrinks of the partitions the stopping broker followed, which are sent after them: a
    broker holding its shrink does not hold the answer, and the shrink still arrives."""
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    nodes[0].controller.controlled_shutdown_propagation_timeout = 3600.0
    reader = cluster.reader
    await admin.create_topic(reader, "led", 1, 2, replica_assignment={0: [1, 0]})
    await admin.create_topic(reader, "followed", 1, 2, replica_assignment={0: [2, 1]})
    led, followed = TopicPartition("led", 0), TopicPartition("followed", 0)
    for t in (led, followed):
        await eventually(lambda t=t: zk_data.get_partition_state(reader, t), message="online")
    await settle(nodes[0].controller)
    release = asyncio.Event()
    held = []

    async def gate(broker_id, api_key, message):
        if broker_id == 2 and api_key == ApiKey.LEADER_AND_ISR:
            states = [
                (t.topic_name, list(p.isr))
                for t in message.topic_states
                for p in t.partition_states
            ]
            if ("followed", [2]) in states:
                held.append(states)
                await release.wait()

    cluster.gate = gate
    epoch = (await reader.exists(paths.broker_path(1))).czxid
    answer = asyncio.create_task(nodes[0].controller.controlled_shutdown(1, epoch))
    assert await asyncio.wait_for(answer, 30) == []
    assert any(ps.leader == 0 for b, tp, ps in cluster.leader_and_isr_partitions(0) if tp == led)
    info = await zk_data.get_partition_state(reader, followed)
    assert info.leader_and_isr.isr == (2,)  # written before the answer
    await eventually(lambda: len(held) == 1, message="the shrink was sent and is held")

    def shrink_delivered():
        return any(
            tp == followed and list(ps.isr) == [2]
            for b, tp, ps in cluster.leader_and_isr_partitions(2)
        )

    assert not shrink_delivered()
    release.set()
    await eventually(
        shrink_delivered,
        message="the shrink delivered",
    )
    await stop(*nodes)


async def test_requests_naming_partitions_no_store_path_can_hold(store, cluster):
    """ElectLeaders and AlterPartitionReassignments name any partition a client sends, even of
    topic '' or '..': they are unknown, and the store is not asked (its path check raised
    through the handler and closed the client's connection)."""
    [node] = [await start_node(store, cluster, 0, config=config())]
    weird = [TopicPartition("", 0), TopicPartition("..", 0)]
    elected = await node.controller.elect_leaders(weird)
    assert {tp: o.error_code for tp, o in elected.items()} == {
        tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in weird
    }
    answers = await node.controller.alter_partition_reassignments({tp: [0] for tp in weird})
    assert {tp: code for tp, (code, _) in answers.items()} == {
        tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in weird
    }
    assert node.controller.event_manager.errors == []
    await stop(node)


async def test_one_controller_among_three_and_failover_on_its_death(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await settle(*(n.controller for n in nodes))
    assert [n.controller.is_active for n in nodes] == [True, False, False]
    assert {n.controller.active_controller_id for n in nodes} == {0}
    await admin.create_topic(reader, "t", 3, 3, replica_assignment=None)
    await eventually(
        lambda: len(cluster.leader_and_isr_partitions()) >= 9,
        message="LeaderAndIsr to all replicas",
    )
    led_by_0 = [p for p in range(3) if (await state(reader, "t", p)).leader_and_isr.leader == 0]
    assert len(led_by_0) == 1  # round-robin leaders

    await nodes[0].controller.shutdown()
    await nodes[0].session.close()  # broker 0 dies: registration and /controller vanish
    await eventually(
        lambda: any(n.controller.is_active for n in nodes[1:]), message="a new controller"
    )
    active = next(n for n in nodes[1:] if n.controller.is_active)
    assert active.controller.epoch == 2
    for p in led_by_0:

        async def moved(p=p):
            info = await state(reader, "t", p)
            return info.leader_and_isr.leader in (1, 2) and 0 not in info.leader_and_isr.isr

        await eventually(moved, message=f"t-{p} led by a survivor")
        info = await state(reader, "t", p)
        assert info.controller_epoch == 2
    await settle(*(n.controller for n in nodes[1:]))
    assert cluster.violations == []
    assert all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*nodes[1:])


async def test_a_big_topic_is_created_in_slices_with_one_request_of_each_kind_per_broker(
    store, cluster, monkeypatch
):
    """The creation of many partitions yields to the event loop between slices (other tasks,
    such as the session's heartbeats, run meanwhile), yet each broker receives one
    LeaderAndIsr and one UpdateMetadata for the whole topic (Kafka's request batch)."""
    from kafkalite.controller import kafka_controller
    from kafkalite.controller.controller_core import ControllerCore

    monkeypatch.setattr(kafka_controller, "PARTITIONS_PER_SLICE", 4)
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await settle(*(n.controller for n in nodes))
    turns = LoopTurns()  # counts the loop's turns, without a task sleeping

    seen_ticks = []
    create = ControllerCore.on_new_partition_creation

    def recording(self, partitions):
        seen_ticks.append(turns.turns)
        return create(self, partitions)

    monkeypatch.setattr(ControllerCore, "on_new_partition_creation", recording)
    turns.start()
    sent_before = len(cluster.sent)
    await admin.create_topic(reader, "wide", 10, 3, replica_assignment=None)
    await eventually(
        lambda: len(cluster.leader_and_isr_partitions()) >= 30,
        message="LeaderAndIsr for every replica",
    )
    await settle(*(n.controller for n in nodes))
    turns.stop()
    assert len(seen_ticks) == 3  # 10 partitions in slices of 4
    assert seen_ticks == sorted(set(seen_ticks))  # the loop ran between slices
    creation = [(s.broker_id, s.api_key) for s in cluster.sent[sent_before:]]
    for broker_id in (0, 1, 2):
        assert creation.count((broker_id, ApiKey.LEADER_AND_ISR)) == 1
        assert creation.count((broker_id, ApiKey.UPDATE_METADATA)) == 1
    for p in range(10):
        assert (await state(reader, "wide", p)).leader_and_isr.isr
    assert cluster.violations == []
    await stop(*nodes)


async def test_a_new_topics_watch_queues_nothing_for_what_was_read_and_decides_changes_from_content(
    store, cluster, monkeypatch
):
    """The partition-modifications watch of a new topic delivers the node once when it starts:
    that delivery, equal to what the TopicChange just read, queues no event (at 10,000 topics,
    one no-op event per topic held the queue for seconds); a later change is an event decided
    from the watched content, without reading the node again."""
    node = await start_node(store, cluster, 0, config=config())
    reads = []
    get_topic_assignment = zk_data.get_topic_assignment

    async def counted(session, topic):
        reads.append(topic)
        return await get_topic_assignment(session, topic)

    get_topic_assignments = zk_data.get_topic_assignments

    async def counted_many(session, topics, raw=None):
        topics = list(topics)
        reads.extend(topics)
        return await get_topic_assignments(session, topics, raw)

    monkeypatch.setattr(zk_data, "get_topic_assignment", counted)
    monkeypatch.setattr(zk_data, "get_topic_assignments", counted_many)
    processed = []
    process = node.controller.process

    async def recording(event):
        processed.append(type(event).__name__)
        return await process(event)

    node.controller.event_manager._process = recording
    await admin.create_topic(cluster.reader, "t", 2, 1, replica_assignment=None)
    await eventually(lambda: state(cluster.reader, "t", 1), message="the topic's partitions")
    # The watch's first read arms it: once armed, its first delivery has been handled.
    await eventually(
        lambda: store._watches.get(("data", "/brokers/topics/t")), message="the topic's watch"
    )
    await settle(node.controller)
    assert "PartitionModifications" not in processed
    assert reads == ["t"]  # the TopicChange's read only

    await admin.add_partitions(cluster.reader, "t", 3)
    await eventually(
        lambda: "PartitionModifications" in processed, message="the topic's watch event"
    )
    await eventually(lambda: state(cluster.reader, "t", 2), message="the new partition")
    await settle(node.controller)
    assert reads == ["t"]
    assert (await state(cluster.reader, "t", 2)).leader_and_isr.leader == 0
    await stop(node)


async def test_topic_deletion_end_to_end(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "gone", 2, 2)
    await eventually(lambda: state(reader, "gone", 1), message="partition states")
    await admin.delete_topic(reader, "gone")
    await admin.delete_topic(reader, "gone")  # marking twice is harmless

    async def deleted():
        return (
            await reader.exists(paths.topic_path("gone")) is None
            and await reader.exists(paths.delete_topic_path("gone")) is None
            and await reader.exists(paths.topic_config_path("gone")) is None
        )

    await eventually(deleted, message="topic nodes removed")
    stops = [
        (s.broker_id, t.topic_name, p.partition_index)
        for s in cluster.of(ApiKey.STOP_REPLICA)
        for t in s.message.topic_states
        for p in t.partition_states
        if p.delete_partition
    ]
    assert set(stops) == {(b, "gone", p) for b in (0, 1) for p in (0, 1)}
    await settle(nodes[0].controller)
    assert "gone" not in nodes[0].controller.context.all_topics
    with pytest.raises(Exception) as info:
        await admin.delete_topic(reader, "gone")
    assert info.value.error_code.name == "UNKNOWN_TOPIC_OR_PARTITION"
    # the name can be used again
    await admin.create_topic(reader, "gone", 1, 1)
    await eventually(lambda: state(reader, "gone", 0), message="recreated topic online")
    assert all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*nodes)


async def test_partition_addition_continues_the_assignment(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await admin.create_topic(reader, "grow", 2, 2)
    await eventually(lambda: state(reader, "grow", 1), message="initial partitions")
    new = await admin.add_partitions(reader, "grow", 5)
    assert sorted(new) == [2, 3, 4] and all(len(set(r)) == 2 for r in new.values())
    for p in (2, 3, 4):
        await eventually(lambda p=p: state(reader, "grow", p), message=f"grow-{p} online")
        assert (await state(reader, "grow", p)).leader_and_isr.leader == new[p][0]
    assert await admin.add_partitions(reader, "grow", 6, replica_assignment=[[2, 0]]) == {5: [2, 0]}
    await eventually(lambda: state(reader, "grow", 5), message="manual partition online")
    assert (await state(reader, "grow", 5)).leader_and_isr.leader == 2
    await stop(*nodes)


async def test_writes_of_a_deposed_controller_are_fenced(store, cluster):
    node = await start_node(store, cluster, 0, config=config())
    reader = cluster.reader
    # another controller took over in the meantime: the epoch node moved on
    data, stat = await reader.get_data(paths.CONTROLLER_EPOCH)
    await reader.set_data(paths.CONTROLLER_EPOCH, b"7", stat.version)
    await admin.create_topic(reader, "late", 1, 1)
    await eventually(lambda: not node.controller.is_active, message="resignation")
    assert await state(reader, "late", 0) is None
    assert cluster.of(ApiKey.LEADER_AND_ISR) == []
    await stop(node)


async def test_isr_change_from_a_leader_reaches_every_broker(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "isr", 1, 2, replica_assignment={0: [0, 1]})
    await eventually(lambda: state(reader, "isr", 0), message="online")
    current = await state(reader, "isr", 0)
    lai = current.leader_and_isr
    # the leader (broker 0) shrinks the ISR, as its ReplicaManager does through the server
    new_version = await zk_data.update_leader_and_isr(
        nodes[0].session,
        TopicPartition("isr", 0),
        LeaderIsrAndControllerEpoch(
            LeaderAndIsr(0, lai.leader_epoch, (0,), lai.zk_version), current.controller_epoch
        ),
    )
    assert new_version == lai.zk_version + 1
    stale = await zk_data.update_leader_and_isr(
        nodes[0].session,
        TopicPartition("isr", 0),
        LeaderIsrAndControllerEpoch(LeaderAndIsr(0, lai.leader_epoch, (0, 1), lai.zk_version), 1),
    )
    assert stale is None  # a stale CAS loses

    def told(broker):
        return any(
            tuple(p.isr) == (0,)
            for s in cluster.of(ApiKey.UPDATE_METADATA, broker)
            for t in s.message.topic_states
            for p in t.partition_states
        )

    await eventually(lambda: told(0) and told(1), message="UpdateMetadata with the shrunk ISR")
    await settle(nodes[0].controller)

    async def processed():
        return await zk_data.get_isr_change_notifications(reader) == []

    await eventually(processed, message="the notification deleted once processed")
    assert nodes[0].controller.context.partition_leadership_info[
        TopicPartition("isr", 0)
    ].leader_and_isr.isr == (0,)
    await stop(*nodes)


async def test_session_expiry_resigns_and_another_broker_takes_over(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    assert nodes[0].controller.is_active
    store.expire_session(nodes[0].session.session_id)
    await eventually(lambda: not nodes[0].controller.is_active, message="resignation on expiry")
    await eventually(lambda: nodes[1].controller.is_active, message="takeover")
    assert nodes[1].controller.epoch == 2
    await stop(*nodes)


async def test_controlled_shutdown_moves_leadership(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "cs", 2, 2, replica_assignment={0: [1, 0], 1: [0, 1]})
    await eventually(lambda: state(reader, "cs", 1), message="online")
    epoch_1 = (await reader.exists(paths.broker_path(1))).czxid
    remaining = await nodes[0].controller.controlled_shutdown(1, epoch_1)
    assert remaining == []
    info = await state(reader, "cs", 0)
    assert info.leader_and_isr.leader == 0 and info.leader_and_isr.isr == (0,)
    with pytest.raises(NotControllerError):
        await nodes[1].controller.controlled_shutdown(0, -1)
    await stop(*nodes)


async def test_failed_sends_are_retried_in_order(store, cluster):
    cluster.fail_next[0] = 3
    node = await start_node(store, cluster, 0, config=config())
    reader = cluster.reader
    await admin.create_topic(reader, "retry", 1, 1)
    await eventually(
        lambda: cluster.leader_and_isr_partitions(0), message="LeaderAndIsr after retries"
    )
    kinds = [s.api_key for s in cluster.sent if s.broker_id == 0]
    first_lai = kinds.index(ApiKey.LEADER_AND_ISR)
    assert ApiKey.UPDATE_METADATA in kinds[first_lai:]
    assert cluster.fail_next[0] == 0
    await stop(node)


async def test_controller_restart_reloads_from_the_store(store, cluster):
    node = await start_node(store, cluster, 0, config=config())
    reader = cluster.reader
    await admin.create_topic(reader, "kept", 2, 1)
    await eventually(lambda: state(reader, "kept", 1), message="online")
    await stop(node)
    cluster.sent.clear()
    again = await start_node(store, cluster, 0, config=config())
    assert again.controller.epoch == 2
    ctx = again.controller.context
    assert ctx.all_topics == {"kept"} and len(ctx.partition_leadership_info) == 2
    await eventually(
        lambda: len(cluster.leader_and_isr_partitions(0)) == 2, message="LeaderAndIsr on failover"
    )
    await stop(again)


@pytest.mark.parametrize(
    ("failures", "after_apply"), [(1, False), (1, True), (4, False), (4, True)]
)
async def test_lost_store_connections_do_not_lose_decisions(store, cluster, failures, after_apply):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "flaky", 2, 2)
    # the next operations (the controller's reads, its fenced multi, watch re-arms) fail with
    # ConnectionLoss, before or after being applied
    store.fail_next(failures, after_apply=after_apply)

    async def online():
        try:
            return all([await state(reader, "flaky", p) for p in (0, 1)])
        except ConnectionLoss:  # the test's own read may draw an injected failure too
            return False

    await eventually(online, message="partitions online despite connection losses")
    await eventually(
        lambda: len({(b, tp) for b, tp, _ in cluster.leader_and_isr_partitions()}) == 4,
        message="announced",
    )
    await settle(*(n.controller for n in nodes))
    assert nodes[0].controller.is_active
    assert cluster.violations == []
    assert all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*nodes)


async def test_partition_reassignment_through_the_admin_node(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await admin.create_topic(reader, "move", 1, 2, replica_assignment={0: [0, 1]})
    await eventually(lambda: state(reader, "move", 0), message="online")
    t0 = TopicPartition("move", 0)
    await admin.reassign_partitions(reader, {t0: [2, 1]})
    with pytest.raises(ReassignmentInProgressError):
        await admin.reassign_partitions(reader, {t0: [1]})

    async def adding():
        _, assignment, _ = await zk_data.get_topic_assignment(reader, "move")
        return assignment[0].adding_replicas == (2,)

    await eventually(adding, message="replica 2 being added")
    await eventually(
        lambda: any(b == 2 and ps.is_new for b, _, ps in cluster.leader_and_isr_partitions(2)),
        message="new replica told",
    )
    # the leader lets replica 2 into the ISR, as its ReplicaManager would once it caught up
    current = await state(reader, "move", 0)
    lai = current.leader_and_isr
    assert await zk_data.update_leader_and_isr(
        nodes[0].session,
        TopicPartition("move", 0),
        LeaderIsrAndControllerEpoch(
            LeaderAndIsr(lai.leader, lai.leader_epoch, (0, 1, 2), lai.zk_version),
            current.controller_epoch,
        ),
    )

    async def done():
        _, assignment, _ = await zk_data.get_topic_assignment(reader, "move")
        return (
            assignment[0].replicas == (2, 1)
            and await reader.exists(paths.REASSIGN_PARTITIONS) is None
        )

    await eventually(done, message="reassignment completed")
    info = await state(reader, "move", 0)
    assert info.leader_and_isr.leader == 2 and set(info.leader_and_isr.isr) == {1, 2}
    await eventually(
        lambda: any(
            s.broker_id == 0
            and any(p.delete_partition for t in s.message.topic_states for p in t.partition_states)
            for s in cluster.of(ApiKey.STOP_REPLICA)
        ),
        message="StopReplica(delete) to the removed replica",
    )
    assert await admin.get_partition_reassignments(reader) == {}
    assert cluster.violations == [] and all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*nodes)


async def test_api_reassignment_replaces_the_admin_node_and_cancels(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await admin.create_topic(reader, "api", 1, 1, replica_assignment={0: [0]})
    await eventually(lambda: state(reader, "api", 0), message="online")
    t0 = TopicPartition("api", 0)
    await admin.reassign_partitions(reader, {t0: [1]})

    async def adding(replicas):
        _, assignment, _ = await zk_data.get_topic_assignment(reader, "api")
        return assignment[0].adding_replicas == replicas

    await eventually(lambda: adding((1,)), message="replica 1 being added")
    controller = next(n.controller for n in nodes if n.controller.is_active)
    other = next(n.controller for n in nodes if not n.controller.is_active)
    with pytest.raises(NotControllerError):
        await other.alter_partition_reassignments({t0: None})
    with pytest.raises(NotControllerError):
        await other.list_partition_reassignments()
    assert await controller.alter_partition_reassignments({t0: [2]}) == {t0: (ErrorCode.NONE, None)}
    assert await adding((2,))
    assert await reader.exists(paths.REASSIGN_PARTITIONS) is None  # the API took it over
    listed = await controller.list_partition_reassignments()
    assert {
        tp: (a.replicas, a.adding_replicas, a.removing_replicas) for tp, a in listed.items()
    } == {t0: ((2, 0), (2,), (0,))}

    def deleted_on(broker):
        return any(
            s.broker_id == broker
            and any(p.delete_partition for t in s.message.topic_states for p in t.partition_states)
            for s in cluster.of(ApiKey.STOP_REPLICA)
        )

    await eventually(lambda: deleted_on(1), message="StopReplica(delete) to replica 1")
    assert await controller.alter_partition_reassignments({t0: None}) == {
        t0: (ErrorCode.NONE, None)
    }
    _, assignment, _ = await zk_data.get_topic_assignment(reader, "api")
    assert (assignment[0].replicas, assignment[0].is_being_reassigned) == ((0,), False)
    await eventually(lambda: deleted_on(2), message="StopReplica(delete) to replica 2")
    assert await controller.list_partition_reassignments([t0]) == {}
    assert await controller.alter_partition_reassignments({t0: None}) == {
        t0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT)
    }
    assert cluster.violations == [] and all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*nodes)


async def test_preferred_replica_election_through_the_admin_node(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await admin.create_topic(reader, "pref", 1, 2, replica_assignment={0: [1, 2]})
    await eventually(lambda: state(reader, "pref", 0), message="online")
    await nodes[1].controller.shutdown()
    await nodes[1].session.close()  # broker 1 dies: broker 2 leads

    async def led_by(broker):
        info = await state(reader, "pref", 0)
        return info.leader_and_isr.leader == broker

    await eventually(lambda: led_by(2), message="broker 2 leads")
    back = await register_broker(store, 1)  # broker 1 comes back and catches up
    await settle(nodes[0].controller)
    current = await state(reader, "pref", 0)
    lai = current.leader_and_isr
    assert await zk_data.update_leader_and_isr(
        back,
        TopicPartition("pref", 0),
        LeaderIsrAndControllerEpoch(
            LeaderAndIsr(2, lai.leader_epoch, (2, 1), lai.zk_version), current.controller_epoch
        ),
    )
    await settle(nodes[0].controller)
    answer = await nodes[0].controller.elect_preferred_leaders([TopicPartition("pref", 0)])
    assert answer == {TopicPartition("pref", 0): 0}
    assert await led_by(1)
    await admin.request_preferred_replica_election(reader, [TopicPartition("pref", 0)])

    async def node_gone():
        return await reader.exists(paths.PREFERRED_REPLICA_ELECTION) is None

    await eventually(node_gone, message="request node deleted")
    assert all(n.controller.event_manager.errors == [] for n in nodes)
    await back.close()
    await stop(nodes[0], nodes[2])


async def test_a_preferred_election_of_many_partitions_yields_between_slices(
    store, cluster, monkeypatch
):
    from kafkalite.controller import kafka_controller
    from kafkalite.controller.controller_core import ControllerCore

    monkeypatch.setattr(kafka_controller, "PARTITIONS_PER_SLICE", 2)
    # Broker 1, every partition's preferred replica, fails and comes back: broker 0 leads them
    # all; then broker 0, as their leader, takes 1 back into every ISR.
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "many", 5, 2, replica_assignment={p: [1, 0] for p in range(5)})
    for p in range(5):
        await eventually(lambda p=p: state(reader, "many", p), message="online")
    await stop(nodes.pop())

    async def led_by_0():
        return [(await state(reader, "many", p)).leader_and_isr.leader for p in range(5)] == [0] * 5

    await eventually(led_by_0, message="broker 0 leads")
    nodes.append(await start_node(store, cluster, 1, config=config()))
    for p in range(5):
        current = await state(reader, "many", p)
        lai = current.leader_and_isr
        assert lai.leader == 0
        await zk_data.update_leader_and_isr(
            nodes[0].session,
            TopicPartition("many", p),
            type(current)(
                type(lai)(0, lai.leader_epoch, (0, 1), lai.zk_version), current.controller_epoch
            ),
        )
    cached = nodes[0].controller.context.partition_leadership_info
    await eventually(
        lambda: all(
            cached[TopicPartition("many", p)].leader_and_isr.isr == (0, 1) for p in range(5)
        ),
        message="the ISR changes reach the controller",
    )
    turns = LoopTurns()  # counts the loop's turns, without a task sleeping

    seen_ticks = []
    elect = ControllerCore.elect_leaders

    def recording(self, partitions, unclean=False):
        seen_ticks.append(turns.turns)
        return elect(self, partitions, unclean)

    monkeypatch.setattr(ControllerCore, "elect_leaders", recording)
    turns.start()
    answer = await nodes[0].controller.elect_preferred_leaders(None)
    turns.stop()
    assert answer == {TopicPartition("many", p): ErrorCode.NONE for p in range(5)}
    assert len(seen_ticks) == 3 and seen_ticks == sorted(set(seen_ticks))
    for p in range(5):
        assert (await state(reader, "many", p)).leader_and_isr.leader == 1
    await stop(*nodes)


async def test_enabling_unclean_election_elects_leaderless_partitions(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "dirty", 1, 2, replica_assignment={0: [1, 0]})
    await eventually(lambda: state(reader, "dirty", 0), message="online")
    current = await state(reader, "dirty", 0)
    lai = current.leader_and_isr
    # broker 0 fell out of the ISR, then the leader (1) dies: no clean leader left
    assert await zk_data.update_leader_and_isr(
        reader,
        TopicPartition("dirty", 0),
        LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1, lai.leader_epoch, (1,), lai.zk_version), current.controller_epoch
        ),
    )
    await settle(nodes[0].controller)
    await nodes[1].controller.shutdown()
    await nodes[1].session.close()

    async def leader_is(broker):
        return (await state(reader, "dirty", 0)).leader_and_isr.leader == broker

    await eventually(lambda: leader_is(-1), message="partition offline")
    await admin.alter_topic_config(reader, "dirty", {"unclean.leader.election.enable": "true"})
    await eventually(lambda: leader_is(0), message="unclean leader elected")
    assert (await state(reader, "dirty", 0)).leader_and_isr.isr == (0,)
    assert nodes[0].controller.event_manager.errors == []
    await stop(nodes[0])


async def test_a_failover_reads_the_topic_configs_once(store, cluster, monkeypatch):
    """The config change watch's first event after a failover finds the notifications the
    context load read before the configs: it reads no config again (it re-read every topic's
    at every failover). A notification that arrives later is still acted on."""
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "a", 1, 2, configs={"retention.ms": "1000"})
    await admin.create_topic(reader, "b", 1, 2)
    await eventually(lambda: state(reader, "b", 0), message="online")
    assert await reader.get_children("/config/changes")  # a notification exists
    await settle(*(n.controller for n in nodes))
    get_unclean = zk_data.get_unclean_leader_election_topics
    config_reads: list[list[str]] = []

    async def counted_configs(session, topics, default):
        topics = sorted(topics)
        if topics:  # the topics watch's first event reads the configs of no new topic
            config_reads.append(topics)
        return await get_unclean(session, topics, default)

    monkeypatch.setattr(zk_data, "get_unclean_leader_election_topics", counted_configs)
    store.expire_session(nodes[0].session.session_id)
    await eventually(lambda: nodes[1].controller.is_active, message="takeover")
    await settle(nodes[1].controller)
    assert config_reads == [["a", "b"]]  # the new controller's context load, and no other

    await admin.alter_topic_config(reader, "b", {"unclean.leader.election.enable": "true"})
    await eventually(lambda: len(config_reads) == 2, message="the new notification acted on")
    assert nodes[1].controller.event_manager.errors == []
    await stop(*nodes)


async def test_unclean_election_request_node(store, cluster):
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    reader = cluster.reader
    await admin.create_topic(reader, "force", 1, 2, replica_assignment={0: [1, 0]})
    await eventually(lambda: state(reader, "force", 0), message="online")
    current = await state(reader, "force", 0)
    lai = current.leader_and_isr
    assert await zk_data.update_leader_and_isr(
        reader,
        TopicPartition("force", 0),
        LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1, lai.leader_epoch, (1,), lai.zk_version), current.controller_epoch
        ),
    )
    await settle(nodes[0].controller)
    await nodes[1].controller.shutdown()
    await nodes[1].session.close()

    async def leader_is(broker):
        return (await state(reader, "force", 0)).leader_and_isr.leader == broker

    await eventually(lambda: leader_is(-1), message="partition offline")
    await reader.create(
        zk_data.UNCLEAN_LEADER_ELECTION,
        paths.encode_preferred_replica_election([TopicPartition("force", 0)]),
    )
    await eventually(lambda: leader_is(0), message="unclean leader elected on request")

    async def node_gone():
        return await reader.exists(zk_data.UNCLEAN_LEADER_ELECTION) is None

    await eventually(node_gone, message="request node deleted")
    await stop(nodes[0])


async def test_reinitialize_with_a_new_session_after_expiry(store, cluster):
    node = await start_node(store, cluster, 0, config=config())
    store.expire_session(node.session.session_id)
    await eventually(lambda: not node.controller.is_active, message="resigned")
    fresh = await register_broker(store, 0)
    await node.controller.reinitialize(fresh)
    assert node.controller.is_active and node.controller.epoch == 2
    await admin.create_topic(cluster.reader, "after", 1, 1)
    await eventually(
        lambda: state(cluster.reader, "after", 0), message="topic online under the new session"
    )
    node.session = fresh
    await stop(node)


async def test_a_broker_change_that_changes_nothing_reads_no_partition(store, cluster, monkeypatch):
    """The brokers watch's first delivery after a failover (the same brokers the failover
    loaded) decides nothing: it reads no partition state and no topic config (it re-read the
    config of every topic, and the state of every leaderless partition, while the events behind
    it waited). A real change is decided from the cache and reads nothing either."""
    from kafkalite.controller.kafka_controller import BrokerChange

    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1)]
    await admin.create_topic(cluster.reader, "t", 4, 2, replica_assignment=None)
    await eventually(lambda: state(cluster.reader, "t", 3), message="partition states")
    await settle(*(n.controller for n in nodes))
    reads: list[int] = []
    get_partition_states = zk_data.get_partition_states

    async def counted(session, partitions):
        partitions = list(partitions)
        reads.append(len(partitions))
        return await get_partition_states(session, partitions)

    get_unclean = zk_data.get_unclean_leader_election_topics

    async def counted_configs(session, topics, default):
        topics = list(topics)
        config_reads.append(len(topics))
        return await get_unclean(session, topics, default)

    config_reads: list[int] = []
    monkeypatch.setattr(zk_data, "get_partition_states", counted)
    monkeypatch.setattr(zk_data, "get_unclean_leader_election_topics", counted_configs)
    nodes[0].controller.event_manager.put(BrokerChange())
    await settle(nodes[0].controller)
    assert reads == [] and config_reads == []
    await stop(nodes[1])

    async def all_on_0():
        stored = [(await state(cluster.reader, "t", p)).leader_and_isr for p in range(4)]
        return all(lai.leader == 0 and lai.isr == (0,) for lai in stored)

    # A real change is decided from the cached states (fresh here: nothing changed them
    # behind the controller's back), so it reads none either.
    await eventually(all_on_0, message="the dead broker's partitions re-led and shrunk")
    await settle(nodes[0].controller)
    assert reads == []
    assert nodes[0].controller.event_manager.errors == []
    await stop(nodes[0])


def _partitions_of(sent) -> set[tuple[str, int]]:
    return {
        (t.topic_name, p.partition_index)
        for t in sent.message.topic_states
        for p in t.partition_states
    }


def _assert_elections_announced_first(sent, broker_id, elected, others):
    """In what ``broker_id`` received: the elected partitions' LeaderAndIsr and UpdateMetadata
    come before any LeaderAndIsr or UpdateMetadata of the other partitions (ISR shrinks, a new
    controller's resynchronisation of every partition)."""
    mine = [
        s
        for s in sent
        if s.broker_id == broker_id
        and s.api_key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA)
        and _partitions_of(s)
    ]
    first_other = next(i for i, s in enumerate(mine) if _partitions_of(s) & others)
    announced = [s for s in mine[:first_other] if s.api_key == ApiKey.UPDATE_METADATA]
    assert announced, [(s.api_key.name, sorted(_partitions_of(s))) for s in mine]
    assert elected <= set().union(*(_partitions_of(s) for s in announced))


@pytest.mark.parametrize("dying", ["follower", "controller"])
async def test_the_elections_of_a_failure_are_announced_before_its_other_changes(
    store, cluster, dying
):
    """A broker's failure (and a new controller's failover) elects leaders for the dead
    broker's partitions and shrinks the ISRs of the others (and, on failover, tells every
    broker every partition): the elections' LeaderAndIsr and UpdateMetadata go to each broker
    before the rest, so clients find the new leaders without waiting for the bulk."""
    nodes = [await start_node(store, cluster, b, config=config()) for b in (0, 1, 2)]
    reader = cluster.reader
    await settle(*(n.controller for n in nodes))
    await admin.create_topic(reader, "t", 6, 3, replica_assignment=None)
    await eventually(
        lambda: len(cluster.leader_and_isr_partitions()) >= 18, message="all replicas told"
    )
    await settle(*(n.controller for n in nodes))
    dead = nodes[0] if dying == "controller" else nodes[1]
    assert nodes[0].controller.is_active
    led = {
        ("t", p)
        for p in range(6)
        if (await state(reader, "t", p)).leader_and_isr.leader == dead.broker_id
    }
    assert led and len(led) < 6
    before = len(cluster.sent)
    await dead.controller.shutdown()
    await dead.session.close()
    survivors = [n for n in nodes if n is not dead]

    async def all_moved():
        for p in range(6):
            info = (await state(reader, "t", p)).leader_and_isr
            if info.leader == dead.broker_id or dead.broker_id in info.isr:
                return False
        return True

    await eventually(all_moved, message="every partition off the dead broker")
    await settle(*(n.controller for n in survivors))
    sent = cluster.sent[before:]
    others = {("t", p) for p in range(6)} - led
    for node in survivors:
        _assert_elections_announced_first(sent, node.broker_id, led, others)
    assert cluster.violations == []
    assert all(n.controller.event_manager.errors == [] for n in nodes)
    await stop(*survivors)
