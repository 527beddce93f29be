"""ControllerCore: the decisions for topic creation, deletion, partition addition, broker
failure and start, controlled shutdown, ISR notifications and failover (Kafka's
KafkaController)."""

import signal
from datetime import timedelta
from pathlib import Path

import hypothesis.internal.conjecture.engine as hypothesis_engine
import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from kafkalite.controller.broker_request_batch import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequestData,
    StopReplicaRequestData,
    UpdateMetadataRequestData,
)
from kafkalite.controller.channel_manager import AnsweredNone
from kafkalite.controller.context import PartitionAndReplica
from kafkalite.controller.controller_core import ControllerCore
from kafkalite.controller.partition_state_machine import (
    NEW_PARTITION,
    OFFLINE_PARTITION,
    ONLINE_PARTITION,
)
from kafkalite.controller.replica_state_machine import (
    NON_EXISTENT_REPLICA,
    OFFLINE_REPLICA,
    ONLINE_REPLICA,
    REPLICA_DELETION_INELIGIBLE,
    REPLICA_DELETION_STARTED,
)
from kafkalite.protocol.errors import BrokerNotAvailableError, ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import (
    LEADER_DURING_DELETE,
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kafkalite.zk.writes import (
    CreatePartitionState,
    DeleteIsrChangeNotifications,
    DeleteLogDirEventNotifications,
    DeleteTopic,
    DeleteTopicDeletions,
    SetTopicAssignment,
    UpdatePartitionState,
)

from .support import (
    broker,
    create_topic,
    leader_and_isr_states,
    new_cluster,
    requests_of,
    stop_replica_states,
    update_metadata_brokers,
)

NO_REASSIGNMENT = "No partition reassignment is in progress."  # Kafka's default message


def registered(*ids, epochs=None):
    epochs = epochs or {}
    return {b: (broker(b), epochs.get(b, 100 + b)) for b in ids}


def tp(topic, p):
    return TopicPartition(topic, p)


# -- topic creation ----------------------------------------------------------------------------


def test_single_broker_topic_creation_is_the_cluster_path():
    core, store = new_cluster([0])
    result = create_topic(core, store, "orders", {0: [0], 1: [0], 2: [0]})
    assert [type(w) for w in result.writes] == [CreatePartitionState] * 3
    assert {p: store.partition_states[tp("orders", p)][0].leader_and_isr for p in range(3)} == {
        p: LeaderAndIsr(0, 0, (0,), 0) for p in range(3)
    }
    # the controller's own broker gets LeaderAndIsr then UpdateMetadata, like any other broker
    assert [type(r) for r in result.requests_to(0)] == [
        LeaderAndIsrRequestData,
        UpdateMetadataRequestData,
    ]
    [lai] = requests_of(result, LeaderAndIsrRequestData)
    assert all(s.is_new for s in lai.partition_states) and len(lai.partition_states) == 3
    assert core.ctx.topic_ids["orders"] == "id-orders"
    assert all(core.psm.partition_state(tp("orders", p)) is ONLINE_PARTITION for p in range(3))
    assert all(state is ONLINE_REPLICA for state in core.ctx.replica_states.values())
    store.assert_matches(core)


def test_multi_broker_topic_creation_sends_to_every_replica_and_metadata_to_all():
    core, store = new_cluster([0, 1, 2, 3])
    result = create_topic(core, store, "t", {0: [1, 2], 1: [2, 3]})
    assert set(leader_and_isr_states(result)) == {
        (1, tp("t", 0)),
        (2, tp("t", 0)),
        (2, tp("t", 1)),
        (3, tp("t", 1)),
    }
    assert update_metadata_brokers(result) == {0, 1, 2, 3}
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == 1
    [um] = requests_of(result, UpdateMetadataRequestData, 0)
    assert {s.topic_partition for s in um.partition_states} == {tp("t", 0), tp("t", 1)}
    assert [b.id for b in um.live_brokers] == [0, 1, 2, 3]


def test_topic_created_while_its_replicas_are_down_waits_for_them():
    core, store = new_cluster([0])
    result = create_topic(core, store, "t", {0: [1]})
    assert tp("t", 0) in result.failed and result.writes == []
    assert core.psm.partition_state(tp("t", 0)) is NEW_PARTITION
    changes, result = core.process_broker_change(registered(0, 1))
    store.apply(result)
    assert changes.new == (1,)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr == LeaderAndIsr(1, 0, (1,), 0)
    assert core.psm.partition_state(tp("t", 0)) is ONLINE_PARTITION
    assert (1, tp("t", 0)) in leader_and_isr_states(result)


# -- brokers -----------------------------------------------------------------------------------


def test_broker_failure_elects_from_the_isr_and_shrinks_it():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1, 2], 1: [1, 2, 0]})
    changes, result = core.process_broker_change(registered(1, 2))
    store.apply(result)
    assert changes.dead == (0,)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr == LeaderAndIsr(1, 1, (1, 2), 1)
    # partition 1 kept its leader; broker 0 just left its ISR: the leader epoch is kept, the
    # partition epoch (zk version) moves
    assert store.partition_states[tp("t", 1)][0].leader_and_isr == LeaderAndIsr(1, 0, (1, 2), 1)
    states = leader_and_isr_states(result)
    assert {b for b, _ in states} == {1, 2}  # never the dead broker
    assert states[(2, tp("t", 0))].leader == 1 and states[(2, tp("t", 0))].partition_epoch == 1
    assert 0 not in update_metadata_brokers(result)
    # every write comes before the LeaderAndIsr that announces it: the result keeps them apart
    assert all(isinstance(w, UpdatePartitionState) for w in result.writes)
    assert core.rsm.replica_state(PartitionAndReplica(tp("t", 0), 0)) is OFFLINE_REPLICA
    store.assert_matches(core)


def test_a_dead_follower_is_announced_dead_to_every_broker_before_its_isr_shrinks():
    """A broker that led nothing dies: no election's UpdateMetadata tells the others, so one
    naming the live brokers goes to each of them first, before the LeaderAndIsr of the ISR
    shrinks (which keep the leader epoch): the leader's cache then keeps a fetch the dead
    broker sent before it died from putting it back in the ISR."""
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1, 2], 1: [1, 0, 2]})
    _, result = core.process_broker_change(registered(0, 1))
    store.apply(result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr == LeaderAndIsr(0, 0, (0, 1), 1)
    assert not result.announce_first
    announced = [r for r in result.first_requests if isinstance(r, UpdateMetadataRequestData)]
    assert sorted(r.broker_id for r in announced) == [0, 1]
    assert all([b.id for b in r.live_brokers] == [0, 1] for r in announced)
    assert not any(isinstance(r, LeaderAndIsrRequestData) for r in result.first_requests)
    assert {b for b, _ in leader_and_isr_states(result)} == {0, 1}


def test_last_isr_member_dies_partition_goes_offline_then_comes_back_clean():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0]})
    _, result = core.process_broker_change(registered(1))
    store.apply(result)
    assert core.psm.partition_state(tp("t", 0)) is OFFLINE_PARTITION
    assert store.partition_states[tp("t", 0)][0].leader_and_isr == LeaderAndIsr(
        NO_LEADER, 1, (0,), 1
    )
    assert update_metadata_brokers(result) == {1}
    _, result = core.process_broker_change(registered(0, 1))
    store.apply(result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr == LeaderAndIsr(0, 2, (0,), 2)
    assert core.psm.partition_state(tp("t", 0)) is ONLINE_PARTITION
    store.assert_matches(core)


def test_unclean_election_only_when_enabled():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1]})
    # broker 1 fell out of the ISR earlier (the leader wrote it)
    core.update_leader_and_isr_cache(
        {tp("t", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0,), 1), 1)}
    )
    store.partition_states[tp("t", 0)] = (core.ctx.partition_leadership_info[tp("t", 0)], 1)
    _, result = core.process_broker_change(registered(1))
    store.apply(result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == NO_LEADER
    core.ctx.unclean_leader_election_topics.add("t")
    result = core.psm.trigger_online_partition_state_change()
    store.apply(result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == 1
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.isr == (1,)


def test_new_broker_gets_full_metadata_and_its_replicas():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0]})
    _, result = core.process_broker_change(registered(0))
    store.apply(result)
    _, result = core.process_broker_change(registered(0, 1))
    store.apply(result)
    full = requests_of(result, UpdateMetadataRequestData, 1)[0]  # the first one it receives
    assert {s.topic_partition for s in full.partition_states} >= {tp("t", 0), tp("t", 1)}
    assert {p for (b, p) in leader_and_isr_states(result) if b == 1} == {tp("t", 0), tp("t", 1)}
    assert all(
        core.rsm.replica_state(r) is ONLINE_REPLICA for r in core.ctx.replicas_for_topic("t")
    )
    store.assert_matches(core)


def test_bounced_broker_is_a_failure_then_a_startup():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [1, 0]})
    changes, result = core.process_broker_change(registered(0, 1, epochs={1: 999}))
    store.apply(result)
    assert changes.bounced == (1,) and not changes.new and not changes.dead
    assert core.ctx.live_broker_epochs[1] == 999
    lai = requests_of(result, LeaderAndIsrRequestData, 1)
    assert lai and lai[-1].broker_epoch == 999
    store.assert_matches(core)


# -- partitions added, topics deleted ----------------------------------------------------------


def test_partition_addition_creates_only_the_new_partitions():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1]})
    store.topics["t"][1] = ReplicaAssignment((1, 0))
    result = core.process_partition_modifications("t", store.topics["t"])
    store.apply(result)
    assert [w.topic_partition for w in result.writes] == [tp("t", 1)]
    assert core.psm.partition_state(tp("t", 1)) is ONLINE_PARTITION
    assert core.process_partition_modifications("t", store.topics["t"]).is_empty


def test_topic_deletion_stops_and_deletes_every_replica_then_the_topic():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0]})
    store.delete_markers.add("t")
    result = core.process_topic_deletion(["t"])
    store.apply(result)
    stops = stop_replica_states(result)
    assert {k for k, s in stops.items() if s.delete_partition} == {
        (b, tp("t", p)) for b in (0, 1) for p in (0, 1)
    }
    assert all(s.leader_epoch == -2 for s in stops.values())
    um = requests_of(result, UpdateMetadataRequestData)
    assert any(s.leader == LEADER_DURING_DELETE for r in um for s in r.partition_states)
    assert core.ctx.is_topic_queued_up_for_deletion("t")
    result = core.on_stop_replica_response(0, ErrorCode.NONE, {tp("t", 0): 0, tp("t", 1): 0})
    store.apply(result)
    assert "t" in store.topics and not any(isinstance(w, DeleteTopic) for w in result.writes)
    result = core.on_stop_replica_response(1, ErrorCode.NONE, {tp("t", 0): 0, tp("t", 1): 0})
    store.apply(result)
    assert DeleteTopic("t") in result.writes
    assert "t" not in store.topics and not store.delete_markers
    assert "t" not in core.ctx.all_topics and not core.ctx.replicas_for_topic("t")
    assert not any(pr.topic == "t" for pr in core.ctx.replica_states)


def test_topic_deletion_waits_for_a_dead_broker_and_resumes_when_it_returns():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1]})
    _, result = core.process_broker_change(registered(0))
    store.apply(result)
    result = core.process_topic_deletion(["t"])
    store.apply(result)
    assert core.rsm.replica_state(PartitionAndReplica(tp("t", 0), 1)) is REPLICA_DELETION_INELIGIBLE
    assert "t" in core.ctx.topics_ineligible_for_deletion
    store.apply(core.on_stop_replica_response(0, ErrorCode.NONE, {tp("t", 0): 0}))
    assert "t" in core.ctx.all_topics
    _, result = core.process_broker_change(registered(0, 1))
    store.apply(result)
    assert stop_replica_states(result, 1)[(1, tp("t", 0))].delete_partition
    result = core.on_stop_replica_response(1, ErrorCode.NONE, {tp("t", 0): 0})
    store.apply(result)
    assert DeleteTopic("t") in result.writes and "t" not in core.ctx.all_topics


def test_failed_stop_replica_is_retried():
    core, store = new_cluster([0])
    create_topic(core, store, "t", {0: [0]})
    store.apply(core.process_topic_deletion(["t"]))
    replica = PartitionAndReplica(tp("t", 0), 0)
    result = core.on_stop_replica_response(
        0, ErrorCode.NONE, {tp("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}
    )
    store.apply(result)
    assert core.rsm.replica_state(replica) is OFFLINE_REPLICA  # failed, then queued for retry
    assert "t" in core.ctx.topics_ineligible_for_deletion
    store.apply(core.topic_deletion_manager.resume_deletion_for_topics(["t"]))
    assert core.rsm.replica_state(replica) is REPLICA_DELETION_STARTED
    result = core.on_stop_replica_response(0, ErrorCode.NONE, {tp("t", 0): 0})
    assert DeleteTopic("t") in result.writes


def test_deletion_markers_of_unknown_topics_are_removed_and_additions_refused():
    core, store = new_cluster([0])
    result = core.process_topic_deletion(["ghost"])
    assert result.writes == [DeleteTopicDeletions(("ghost",))]
    create_topic(core, store, "t", {0: [0]})
    core.ctx.queue_topic_deletion(["t"])
    result = core.process_partition_modifications(
        "t", {0: ReplicaAssignment((0,)), 1: ReplicaAssignment((0,))}
    )
    assert result.writes == [SetTopicAssignment("t", "id-t", {0: ReplicaAssignment((0,))})]


def test_deletion_disabled_only_clears_markers():
    core, store = new_cluster([0], delete_topic_enable=False)
    create_topic(core, store, "t", {0: [0]})
    result = core.process_topic_deletion(["t"])
    assert result.writes == [DeleteTopicDeletions(("t",))] and result.requests == []
    assert not core.ctx.is_topic_queued_up_for_deletion("t")


# -- ISR notifications, controlled shutdown, failover, responses -------------------------------


def test_isr_change_notification_refreshes_and_broadcasts():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1]})
    shrunk = LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0,), 1), 1)
    result = core.process_isr_change_notification(
        {tp("t", 0): shrunk, tp("gone", 0): None}, ["0000000003"]
    )
    assert result.writes == [DeleteIsrChangeNotifications(("0000000003",))]
    assert core.ctx.partition_leadership_info[tp("t", 0)] == shrunk
    [um] = requests_of(result, UpdateMetadataRequestData, 1)
    assert [(s.topic_partition, s.isr) for s in um.partition_states] == [(tp("t", 0), (0,))]


def test_controlled_shutdown_moves_leaders_away():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0], 2: [0]})
    outcome = core.controlled_shutdown(0, 100)
    store.apply(outcome.result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr == LeaderAndIsr(1, 1, (1,), 1)
    assert store.partition_states[tp("t", 1)][0].leader_and_isr.isr == (1,)
    assert outcome.remaining_partitions == []  # t-2 has one replica: nothing to do
    assert stop_replica_states(outcome.result, 0)[(0, tp("t", 1))].delete_partition is False
    assert 0 in core.ctx.shutting_down_broker_ids and 0 not in core.ctx.live_broker_ids
    with pytest.raises(BrokerNotAvailableError):
        core.controlled_shutdown(7)
    with pytest.raises(KafkaError) as info:
        core.controlled_shutdown(1, 5)
    assert info.value.error_code == ErrorCode.STALE_BROKER_EPOCH


def test_failover_from_store_state_tells_everyone_and_elects_where_needed():
    core = ControllerCore(1)
    ctx = core.ctx
    ctx.epoch = 2
    ctx.add_live_brokers([(broker(b), 100 + b) for b in (1, 2)])
    ctx.set_all_topics(["t"])
    for p, replicas in {0: (0, 1), 1: (1, 2)}.items():
        ctx.update_partition_full_replica_assignment(tp("t", p), ReplicaAssignment(replicas))
    ctx.put_partition_leadership_info(
        tp("t", 0), LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 3, (0, 1), 4), 1)
    )
    ctx.put_partition_leadership_info(
        tp("t", 1), LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 1)
    )
    result = core.on_controller_failover(["t-old"])
    assert DeleteTopicDeletions(("t-old",)) in result.writes
    assert update_metadata_brokers(result) == {1, 2}
    elected = [
        w
        for w in result.writes
        if isinstance(w, UpdatePartitionState) and w.topic_partition == tp("t", 0)
    ]
    # the partition state machine starts first (Kafka starts the replica state machine first,
    # which writes the partition leaderless before the election writes it again): one write
    # elects the new leader and drops the dead one from the ISR
    assert len(elected) == 1
    assert elected[0].leader_isr_and_controller_epoch.leader_and_isr.leader == 1
    assert elected[0].leader_isr_and_controller_epoch.leader_and_isr.isr == (1,)
    assert elected[0].leader_isr_and_controller_epoch.controller_epoch == 2
    assert elected[0].expected_version == 4
    assert tp("t", 0) in result.announce_first
    assert {(1, tp("t", 1)), (2, tp("t", 1)), (1, tp("t", 0))} <= set(leader_and_isr_states(result))
    assert NO_LEADER not in {s.leader for s in leader_and_isr_states(result).values()}


def test_storage_error_in_leader_and_isr_response_takes_the_replica_offline():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1]})
    result = core.on_leader_and_isr_response(0, {tp("t", 0): ErrorCode.KAFKA_STORAGE_ERROR})
    store.apply(result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == 1
    assert not core.ctx.is_replica_online(0, tp("t", 0))
    assert core.on_leader_and_isr_response(0, {tp("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}).is_empty
    core.on_leader_and_isr_response(0, {tp("t", 0): ErrorCode.NONE})
    assert core.ctx.is_replica_online(0, tp("t", 0))


def test_an_answer_of_every_partition_none_brings_offline_replicas_back():
    """The channel's AnsweredNone (every partition answered NONE, listed only when asked) is
    read as the dict would be: the broker's replicas on a failed dir are online again."""
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0]})
    store.apply(core.on_leader_and_isr_response(0, {tp("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}))
    assert not core.ctx.is_replica_online(0, tp("t", 0))
    states = tuple(LeaderAndIsrPartitionState("t", p, 1, 1, 1, (1, 0), 1, (1, 0)) for p in (0, 1))
    assert core.on_leader_and_isr_response(0, AnsweredNone(states)).is_empty
    assert core.ctx.is_replica_online(0, tp("t", 0))
    assert 0 not in core.ctx.replicas_on_offline_dirs


def test_a_log_dir_event_asks_the_broker_about_each_of_its_replicas():
    """Kafka's onBrokerLogDirFailure: LeaderAndIsr to every replica of the reporting broker;
    its storage errors then move leadership away; the events are deleted."""
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0]})
    result = core.process_log_dir_event_notification([0], ["0000000003"])
    store.apply(result)
    assert any(isinstance(w, DeleteLogDirEventNotifications) for w in result.writes)
    asked = {t_p for (broker, t_p) in leader_and_isr_states(result) if broker == 0}
    assert asked == {tp("t", 0), tp("t", 1)}
    store.apply(core.on_leader_and_isr_response(0, {tp("t", 0): ErrorCode.KAFKA_STORAGE_ERROR}))
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == 1
    # an event of a broker that is not alive asks nobody
    assert not leader_and_isr_states(core.process_log_dir_event_notification([7], []))
    store.assert_matches(core)


def test_preferred_leader_election_and_auto_rebalance():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [0, 1]})
    store.apply(core.process_broker_change(registered(1))[1])
    store.apply(core.process_broker_change(registered(0, 1))[1])
    # 0 is back but broker 1 leads both partitions; 0 rejoined the ISR through the leader
    for p in (0, 1):
        info, version = store.partition_states[tp("t", p)]
        rejoined = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(1, info.leader_and_isr.leader_epoch, (1, 0), version + 1), 1
        )
        store.partition_states[tp("t", p)] = (rejoined, version + 1)
        core.update_leader_and_isr_cache({tp("t", p): rejoined})
    result = core.check_and_trigger_auto_leader_rebalance()
    store.apply(result)
    assert {store.partition_states[tp("t", p)][0].leader_and_isr.leader for p in (0, 1)} == {0}
    assert core.check_and_trigger_auto_leader_rebalance().is_empty
    store.assert_matches(core)


def test_unclean_election_on_request_only_for_leaderless_partitions():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0]})
    for p in (0, 1):  # broker 1 left both ISRs
        info, version = store.partition_states[tp("t", p)]
        shrunk = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(
                info.leader_and_isr.leader,
                info.leader_and_isr.leader_epoch,
                (info.leader_and_isr.leader,),
                version + 1,
            ),
            1,
        )
        store.partition_states[tp("t", p)] = (shrunk, version + 1)
        core.update_leader_and_isr_cache({tp("t", p): shrunk})
    store.apply(core.process_broker_change(registered(1))[1])
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == NO_LEADER
    result = core.elect_unclean_leaders([tp("t", 0), tp("t", 1)])
    store.apply(result)
    assert store.partition_states[tp("t", 0)][0].leader_and_isr.leader == 1
    assert [w.topic_partition for w in result.writes] == [tp("t", 0)]  # t-1 had a live leader
    store.assert_matches(core)


# -- partition reassignment -------------------------------------------------------------------


def catch_up(core, store, t_p, members):
    """The leader adds ``members`` to the ISR (a CAS in the store) and notifies the controller."""
    info, version = store.partition_states[t_p]
    lai = info.leader_and_isr
    isr = tuple(dict.fromkeys(lai.isr + tuple(members)))
    grown = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(lai.leader, lai.leader_epoch, isr, version + 1), info.controller_epoch
    )
    store.partition_states[t_p] = (grown, version + 1)
    result = core.process_isr_change_notification({t_p: grown}, [])
    store.apply(result)
    return result


def test_reassignment_moves_replicas_and_leadership():
    core, store = new_cluster([0, 1, 2, 3])
    create_topic(core, store, "t", {0: [0, 1]})
    t0 = tp("t", 0)
    store.reassignments = {t0: (2, 3)}
    started = core.process_zk_partition_reassignment(store.reassignments)
    store.apply(started)
    assert store.topics["t"][0] == ReplicaAssignment(
        (2, 3, 0, 1), adding_replicas=(2, 3), removing_replicas=(0, 1)
    )
    states = leader_and_isr_states(started)
    assert {b for b, _ in states} == {0, 1, 2, 3}
    assert states[(2, t0)].is_new and states[(3, t0)].is_new
    assert store.partition_states[t0][0].leader_and_isr.leader_epoch == 1  # bumped
    assert t0 in core.ctx.partitions_being_reassigned
    # only one of the new replicas caught up: nothing moves yet
    assert not catch_up(core, store, t0, [2]).writes[1:]
    done = catch_up(core, store, t0, [3])
    lai = store.partition_states[t0][0].leader_and_isr
    assert lai.leader == 2 and set(lai.isr) == {2, 3}
    assert store.topics["t"][0] == ReplicaAssignment((2, 3))
    assert store.reassignments == {}
    stops = stop_replica_states(done)
    assert stops[(0, t0)].delete_partition and stops[(1, t0)].delete_partition
    assert t0 not in core.ctx.partitions_being_reassigned
    assert {r.replica for r in core.ctx.replicas_for_topic("t")} == {2, 3}
    store.assert_matches(core)


def test_reassignment_keeping_the_leader_only_bumps_the_epoch_and_bad_requests_are_dropped():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1]})
    t0 = tp("t", 0)
    store.reassignments = {t0: (0, 2), tp("t", 9): (0,), tp("x", 0): (1,)}
    result = core.process_zk_partition_reassignment(store.reassignments)
    store.apply(result)
    assert store.reassignments == {t0: (0, 2)}
    assert {tp("t", 9), tp("x", 0)} <= set(result.failed)
    catch_up(core, store, t0, [2])
    lai = store.partition_states[t0][0].leader_and_isr
    assert lai.leader == 0 and set(lai.isr) == {0, 2}
    assert store.topics["t"][0] == ReplicaAssignment((0, 2))
    store.assert_matches(core)


def test_a_reassignment_to_a_broker_that_is_down_resumes_when_it_starts():
    """/admin/reassign_partitions does not check that the target brokers are alive. The
    LeaderAndIsr that starts the adding replica goes nowhere while its broker is down, and its
    startup moves the replica New -> Online, which sends nothing: Kafka's onBrokerStartup
    resumes the reassignments whose target includes the new broker (maybeResumeReassignments),
    so the replica is told again and can catch up."""
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0]})
    store.apply(core.process_broker_change(registered(0))[1])
    t0 = tp("t", 0)
    store.reassignments = {t0: (0, 1)}
    store.apply(core.process_zk_partition_reassignment(store.reassignments))
    assert store.topics["t"][0] == ReplicaAssignment((0, 1), adding_replicas=(1,))
    epoch = store.partition_states[t0][0].leader_and_isr.leader_epoch
    _, result = core.process_broker_change(registered(0, 1))
    store.apply(result)
    told = leader_and_isr_states(result, 1)
    assert (1, t0) in told and told[(1, t0)].leader_epoch > epoch
    catch_up(core, store, t0, [1])
    assert store.topics["t"][0] == ReplicaAssignment((0, 1))
    assert store.reassignments == {}
    store.assert_matches(core)


def test_reassignment_resumes_after_failover():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0]})
    t0 = tp("t", 0)
    store.reassignments = {t0: (1,)}
    store.apply(core.process_zk_partition_reassignment(store.reassignments))
    fresh = ControllerCore(0)
    fresh.ctx.epoch = 2
    fresh.ctx.add_live_brokers([(broker(b), 100 + b) for b in (0, 1, 2)])
    fresh.ctx.set_all_topics(["t"])
    fresh.ctx.update_partition_full_replica_assignment(t0, store.topics["t"][0])
    fresh.ctx.partitions_being_reassigned.add(t0)
    info, version = store.partition_states[t0]
    fresh.ctx.put_partition_leadership_info(
        t0, LeaderIsrAndControllerEpoch(info.leader_and_isr.with_zk_version(version), 1)
    )
    result = fresh.on_controller_failover([], store.reassignments)
    store.apply(result)
    assert (1, t0) in leader_and_isr_states(result)
    catch_up(fresh, store, t0, [1])
    assert store.topics["t"][0] == ReplicaAssignment((1,))
    assert store.partition_states[t0][0].leader_and_isr.leader == 1
    store.assert_matches(fresh)


def test_api_reassignment_lists_and_cancels_stopping_the_added_replica():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0], 1: [1]})
    t0, t1 = tp("t", 0), tp("t", 1)
    result, answers = core.process_api_partition_reassignment({t0: (0, 2), t1: None})
    store.apply(result)
    assert answers == {
        t0: (ErrorCode.NONE, None),
        t1: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT),
    }
    told = leader_and_isr_states(result)[(2, t0)].leader_epoch  # what replica 2 knows
    being = ReplicaAssignment((0, 2), adding_replicas=(2,))
    assert store.topics["t"][0] == being
    assert core.list_partition_reassignments(None) == {t0: being}
    assert core.list_partition_reassignments([t0, t1, tp("x", 0)]) == {t0: being}
    catch_up(core, store, t0, [])  # 2 is not in the ISR yet: still reassigning
    # cancel: back to [0]; replica 2, which was being added, is stopped and deleted
    result, answers = core.process_api_partition_reassignment({t0: None})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    assert store.topics["t"][0] == ReplicaAssignment((0,))
    stop = stop_replica_states(result)[(2, t0)]
    # a newer epoch than replica 2 has, or its broker would ignore the StopReplica
    assert stop.delete_partition and stop.leader_epoch > told
    assert core.list_partition_reassignments(None) == {}
    assert {r.replica for r in core.ctx.replicas_for_topic("t") if r.topic_partition == t0} == {0}
    _, answers = core.process_api_partition_reassignment({t0: None})
    assert answers == {t0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT)}
    store.assert_matches(core)


def shrink_isr(core, store, t_p, isr):
    """The leader drops replicas from the ISR (a CAS in the store) and notifies the controller."""
    info, version = store.partition_states[t_p]
    lai = info.leader_and_isr
    shrunk = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(lai.leader, lai.leader_epoch, tuple(isr), version + 1), info.controller_epoch
    )
    store.partition_states[t_p] = (shrunk, version + 1)
    store.apply(core.process_isr_change_notification({t_p: shrunk}, []))


@pytest.mark.parametrize(
    "target",
    [(1, 0, 2), (0, 1, 2)],  # a reorder; the current replicas
)
def test_a_reassignment_moving_no_replica_completes_whatever_the_isr(target):
    """Kafka's isReassignmentComplete: nothing to add or remove is complete at once, even with a
    replica out of the ISR (it was left 'in progress' for ever, blocking deletion)."""
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1, 2]})
    t0 = tp("t", 0)
    shrink_isr(core, store, t0, [0, 1])
    result, answers = core.process_api_partition_reassignment({t0: target})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    assert store.topics["t"][0] == ReplicaAssignment(target)
    assert t0 not in core.ctx.partitions_being_reassigned
    assert core.list_partition_reassignments(None) == {}
    store.apply(core.process_topic_deletion(["t"]))
    assert "t" not in core.ctx.topics_ineligible_for_deletion
    store.assert_matches(core)


def test_cancelling_while_an_original_replica_is_out_of_the_isr_completes():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1]})
    t0 = tp("t", 0)
    result, _ = core.process_api_partition_reassignment({t0: (0, 1, 2)})
    store.apply(result)
    shrink_isr(core, store, t0, [0])  # replica 1 falls behind before the cancel
    result, answers = core.process_api_partition_reassignment({t0: None})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    assert store.topics["t"][0] == ReplicaAssignment((0, 1))
    assert t0 not in core.ctx.partitions_being_reassigned
    assert stop_replica_states(result)[(2, t0)].delete_partition
    _, answers = core.process_api_partition_reassignment({t0: None})
    assert answers == {t0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, NO_REASSIGNMENT)}
    store.assert_matches(core)


def test_preferred_election_of_a_partition_being_reassigned():
    """Kafka's onReplicaElection elects the preferred replica of a partition being reassigned
    (only the automatic rebalance leaves such partitions alone)."""
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1]})
    t0 = tp("t", 0)
    result, _ = core.process_api_partition_reassignment({t0: (1, 0, 2)})
    store.apply(result)
    assert store.topics["t"][0] == ReplicaAssignment((1, 0, 2), adding_replicas=(2,))
    assert core.ctx.partition_leadership_info[t0].leader_and_isr.leader == 0
    result, errors = core.elect_leaders([t0])
    store.apply(result)
    assert errors == {t0: ErrorCode.NONE}
    assert core.ctx.partition_leadership_info[t0].leader_and_isr.leader == 1
    assert t0 in core.ctx.partitions_being_reassigned  # replica 2 has not caught up yet
    store.assert_matches(core)


def test_failover_drops_zk_reassignments_it_cannot_start():
    """Kafka's maybeRemoveFromZkReassignment: an entry for an unknown partition (its topic was
    deleted) goes, or it would start on a later topic of the same name."""
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0]})
    store.reassignments = {tp("gone", 0): (1,), tp("t", 0): (1,)}
    store.apply(core.initialize_partition_reassignments(store.reassignments))
    assert tp("gone", 0) not in store.reassignments
    assert store.topics["t"][0].adding_replicas == (1,)  # the valid one was started


def test_api_reassignment_replaces_a_target_and_the_zk_request():
    core, store = new_cluster([0, 1, 2, 3])
    create_topic(core, store, "t", {0: [0]})
    t0 = tp("t", 0)
    store.reassignments = {t0: (1,)}
    store.apply(core.process_zk_partition_reassignment(store.reassignments))
    assert store.topics["t"][0] == ReplicaAssignment((1, 0), (1,), (0,))
    result, answers = core.process_api_partition_reassignment({t0: (2, 0)})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    assert store.reassignments == {}  # the API takes precedence over /admin/reassign_partitions
    assert store.topics["t"][0] == ReplicaAssignment((2, 0), (2,), ())
    assert stop_replica_states(result)[(1, t0)].delete_partition  # was being added
    catch_up(core, store, t0, [2])
    assert store.topics["t"][0] == ReplicaAssignment((2, 0))
    assert core.list_partition_reassignments(None) == {}
    store.assert_matches(core)


def test_api_reassignment_errors():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0]})
    t0 = tp("t", 0)
    _, answers = core.process_api_partition_reassignment(
        {t0: (), tp("t", 1): (0,), tp("t", 2): (5,), tp("t", 3): (0, 0), tp("t", 4): (-1,)}
    )
    assert answers == {
        t0: (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Empty replica list specified in partition reassignment.",
        ),
        tp("t", 1): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."),
        tp("t", 2): (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Replica assignment has brokers that are not alive. Replica list: List(5), "
            "live broker list: Set(0, 1)",
        ),
        tp("t", 3): (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Duplicate replica ids in partition reassignment replica list: List(0, 0)",
        ),
        tp("t", 4): (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Invalid broker id in replica list: List(-1)",
        ),
    }
    core.ctx.topics_to_be_deleted.add("t")
    result, answers = core.process_api_partition_reassignment({t0: (1,)})
    assert answers == {t0: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")}
    assert not result.writes and not result.requests


def controller_from_store(store, live_epochs, epoch):
    """A newly elected controller whose context holds what the store says (its
    initializeControllerContext); the caller runs ``on_controller_failover``."""
    core = ControllerCore(0)
    ctx = core.ctx
    ctx.epoch = epoch
    ctx.add_live_brokers([(broker(b), e) for b, e in sorted(live_epochs.items())])
    ctx.set_all_topics(store.topics)
    for topic, assignment in store.topics.items():
        for p, a in assignment.items():
            ctx.update_partition_full_replica_assignment(TopicPartition(topic, p), a)
            if a.is_being_reassigned:
                ctx.partitions_being_reassigned.add(TopicPartition(topic, p))
    for t_p, (info, version) in store.partition_states.items():
        ctx.put_partition_leadership_info(
            t_p,
            LeaderIsrAndControllerEpoch(
                info.leader_and_isr.with_zk_version(version), info.controller_epoch
            ),
        )
    return core


def fail_over(core, store, live):
    fresh = controller_from_store(store, {b: 100 + b for b in live}, core.ctx.epoch + 1)
    store.apply(fresh.on_controller_failover(sorted(store.delete_markers), store.reassignments))
    store.assert_matches(fresh)
    return fresh


def leaderless_after_a_cancelled_move():
    """The start both shrunk ControllerModel failures share: t-0 is created on broker 0 while 0
    is down (New, no leader), a reassignment to (0, 1) starts (no state node: nothing to bump),
    a new controller initializes it from the full replica set (leader 1, the adding replica),
    then the reassignment is dropped (API: back to (0,)), which stops replica 1."""
    core, store = new_cluster([0, 1, 2, 3])
    store.apply(core.process_broker_change(registered(1, 2, 3))[1])
    create_topic(core, store, "t", {0: [0]})
    t0 = tp("t", 0)
    store.reassignments = {t0: (0, 1)}
    store.apply(core.process_zk_partition_reassignment(store.reassignments))
    assert t0 not in store.partition_states
    assert store.topics["t"][0] == ReplicaAssignment((0, 1), adding_replicas=(1,))
    core = fail_over(core, store, [1, 2, 3])
    assert store.partition_states[t0][0].leader_and_isr.leader == 1
    return core, store, t0


@pytest.mark.parametrize("cancel", [False, True])
def test_a_reassignment_dropping_the_leader_leaves_the_partition_leaderless_as_kafka(cancel):
    """Kafka's updateCurrentReassignment stops the replicas the new target drops
    (stopRemovedReplicasOfReassignedPartition -> OfflineReplica: leader -1, an ISR of one
    kept); moveReassignedPartitionLeaderIfRequired finds no live target replica in the ISR, and
    the failed election leaves the partition Online."""
    core, store, t0 = leaderless_after_a_cancelled_move()
    result, answers = core.process_api_partition_reassignment({t0: None if cancel else (0,)})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    assert store.topics["t"][0] == ReplicaAssignment((0,))
    assert store.partition_states[t0][0].leader_and_isr.leader == NO_LEADER
    assert store.partition_states[t0][0].leader_and_isr.isr == (1,)
    assert core.psm.partition_state(t0) is ONLINE_PARTITION
    store.assert_matches(core)


def test_a_reassignment_adding_back_the_last_isr_member_does_not_elect():
    """The first shrunk ControllerModel failure: after a failover (the partition is then
    Offline), an API reassignment adds replica 1, the ISR's only member, back. Kafka's
    onPartitionReassignment phase A only bumps the leader epoch (updateLeaderEpochAndSendRequest)
    and starts the new replicas: no election. The next trigger elects replica 1."""
    core, store, t0 = leaderless_after_a_cancelled_move()
    store.apply(core.process_api_partition_reassignment({t0: (0,)})[0])
    core = fail_over(core, store, [1, 2, 3])
    assert core.psm.partition_state(t0) is OFFLINE_PARTITION  # no assigned replica is eligible
    result, answers = core.process_api_partition_reassignment({t0: (0, 1)})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    lai = store.partition_states[t0][0].leader_and_isr
    assert (lai.leader, lai.isr, lai.leader_epoch) == (NO_LEADER, (1,), 4)  # epoch bumped
    assert store.topics["t"][0] == ReplicaAssignment((0, 1), adding_replicas=(1,))
    assert leader_and_isr_states(result)[(1, t0)].is_new
    # Offline: any broker change elects it (here broker 2 starting again)
    store.apply(core.process_broker_change(registered(1, 3))[1])
    assert store.partition_states[t0][0].leader_and_isr.leader == 1
    store.assert_matches(core)


def test_a_zk_reassignment_after_a_cancel_does_not_elect_until_a_broker_fails():
    """The second shrunk ControllerModel failure: no failover after the cancel, so the
    leaderless partition is still Online when /admin/reassign_partitions adds replica 1 back.
    As in Kafka, neither that reassignment nor a broker startup (onBrokerStartup elects New and
    Offline partitions only) elects it; a broker failure does (partitionsWithOfflineLeader)."""
    core, store, t0 = leaderless_after_a_cancelled_move()
    store.apply(core.process_api_partition_reassignment({t0: None})[0])
    store.reassignments = {t0: (0, 1)}
    result = core.process_zk_partition_reassignment(store.reassignments)
    store.apply(result)
    lai = store.partition_states[t0][0].leader_and_isr
    assert (lai.leader, lai.isr) == (NO_LEADER, (1,))
    assert core.psm.partition_state(t0) is ONLINE_PARTITION
    assert store.topics["t"][0] == ReplicaAssignment((0, 1), adding_replicas=(1,))
    store.apply(core.process_broker_change(registered(0, 1, 2, 3))[1])  # 0 starts
    assert store.partition_states[t0][0].leader_and_isr.leader == NO_LEADER
    store.apply(core.process_broker_change(registered(0, 1, 2))[1])  # 3 fails
    assert store.partition_states[t0][0].leader_and_isr.leader == 1  # 0 is not in the ISR
    assert core.psm.partition_state(t0) is ONLINE_PARTITION
    store.assert_matches(core)


def test_a_replica_assigned_again_while_in_the_isr_is_never_started_nor_stopped_as_in_kafka():
    """Found by the randomized ControllerModel. A cancel stops replica 0 while it is the ISR's
    last member (it stays there, leaderless); a reassignment to (0,) then completes at once, and
    its step B1 (adding replicas -> OnlineReplica) is not a valid move from NonExistentReplica:
    Kafka's ReplicaStateMachine logs it and skips the replica, which leads but stays
    NonExistent. When a later reassignment removes it, B4's OfflineReplica is refused the same
    way: no StopReplica, and it stays in the ISR (the new leader's ISR shrink drops it)."""
    core, store = new_cluster([0, 1, 2, 3])
    store.apply(core.process_broker_change(registered(0, 1, 2))[1])
    create_topic(core, store, "t", {0: [3]})
    t0 = tp("t", 0)
    zero = PartitionAndReplica(t0, 0)
    store.apply(core.process_api_partition_reassignment({t0: (0, 3)})[0])
    store.apply(core.process_broker_change(registered(0, 1))[1])  # any change elects: 0 leads
    store.apply(core.process_api_partition_reassignment({t0: None})[0])
    lai = store.partition_states[t0][0].leader_and_isr
    assert (lai.leader, lai.isr) == (NO_LEADER, (0,))
    assert core.rsm.replica_state(zero) is NON_EXISTENT_REPLICA
    result, answers = core.process_api_partition_reassignment({t0: (0,)})
    store.apply(result)
    assert answers == {t0: (ErrorCode.NONE, None)}
    assert store.topics["t"][0] == ReplicaAssignment((0,))
    assert store.partition_states[t0][0].leader_and_isr.leader == 0
    assert core.rsm.replica_state(zero) is NON_EXISTENT_REPLICA
    store.apply(core.process_api_partition_reassignment({t0: (1,)})[0])
    done = catch_up(core, store, t0, [1])
    lai = store.partition_states[t0][0].leader_and_isr
    assert (lai.leader, lai.isr) == (1, (0, 1))
    assert store.topics["t"][0] == ReplicaAssignment((1,))
    assert (0, t0) not in stop_replica_states(done)
    store.assert_matches(core)


# -- random event sequences against the store model --------------------------------------------


class StepBudgetExceeded(Exception):
    pass


class StepBudget:
    """At most ``cpu_seconds`` of CPU time per state-machine step (a step takes about a
    millisecond): a step that loops or crawls is interrupted by SIGVTALRM and fails like any
    other step, so hypothesis reports the example with its blob instead of pytest-timeout
    killing the run with none. CPU time (ITIMER_VIRTUAL), not wall time: a loaded machine does
    not make a step fail; pytest-timeout's SIGALRM timer is left alone. Only armed inside
    ``with``, where the model's invariants restart it after each step and teardown stops it."""

    def __init__(self, cpu_seconds: float):
        self.cpu_seconds = cpu_seconds
        self.active = False
        self.previous = None

    def __enter__(self):
        if hasattr(signal, "setitimer"):
            self.previous = signal.signal(signal.SIGVTALRM, self._expired)
            self.active = True
        return self

    def __exit__(self, *exc):
        if self.active:
            self.stop()
            signal.signal(signal.SIGVTALRM, self.previous)
            self.active = False

    def restart(self):
        if self.active:
            signal.setitimer(signal.ITIMER_VIRTUAL, self.cpu_seconds)

    def stop(self):
        if self.active:
            signal.setitimer(signal.ITIMER_VIRTUAL, 0)

    def _expired(self, signum, frame):
        raise StepBudgetExceeded(f"a step used more than {self.cpu_seconds} s of CPU time")


STEP_BUDGET = StepBudget(cpu_seconds=5)


class ControllerModel(RuleBasedStateMachine):
    """Any sequence of broker starts/stops, topic creations and deletions, broker answers,
    reassignments (/admin/reassign_partitions and the API, cancellations included), ISR
    expansions and failovers keeps the context equal to the store, every compare-and-set valid
    and the leadership sane, and leaves no electable partition leaderless after an election
    trigger (a broker change, a failover)."""

    BROKERS = (0, 1, 2, 3)

    def __init__(self):
        super().__init__()
        self.core, self.store = new_cluster(list(self.BROKERS))
        self.live = set(self.BROKERS)
        self.epochs = {b: 100 + b for b in self.BROKERS}
        self.counter = 0
        self.pending_stop: list[StopReplicaRequestData] = []
        self.left_leaderless_by_reassignment: set[TopicPartition] = set()
        """Partitions a reassignment left with leader -1 that no election has looked at since
        (see ``leadership_is_sane``)."""
        self.never_started: set[PartitionAndReplica] = set()
        """Assigned replicas a reassignment left NonExistent in the replica state machine (see
        ``leadership_is_sane``)."""

    def apply(self, result):
        self.store.apply(result)
        for r in result.requests:
            if (
                isinstance(r, StopReplicaRequestData)
                and r.deletes_partitions
                and r.broker_id in self.live
            ):
                self.pending_stop.append(r)
        for r in result.requests:
            if isinstance(r, LeaderAndIsrRequestData):
                for s in r.partition_states:
                    info = self.core.ctx.partition_leadership_info.get(s.topic_partition)
                    assert info is None or s.leader_epoch <= info.leader_and_isr.leader_epoch
        # The last UpdateMetadata state of a partition a step sends a live broker is the
        # leadership the step ends with (a batch that changes a partition twice, e.g. two of
        # its replicas leaving the ISR at once, announces the second change).
        ctx = self.core.ctx
        last = {}
        for r in result.requests:
            if isinstance(r, UpdateMetadataRequestData):
                for s in r.partition_states:
                    last[r.broker_id, s.topic_partition] = s
        for (b, t_p), s in last.items():
            info = ctx.partition_leadership_info.get(t_p)
            if (
                b not in ctx.live_or_shutting_down_broker_ids  # dropped: no channel to it
                or info is None
                or ctx.is_topic_queued_up_for_deletion(t_p.topic)
            ):
                continue
            lai = info.leader_and_isr
            announced = (s.leader, s.leader_epoch, s.isr, s.zk_version)
            assert announced == (lai.leader, lai.leader_epoch, lai.isr, lai.zk_version), (t_p, b)

    @rule(data=st.data())
    def create(self, data):
        n = data.draw(st.integers(1, 3))
        rf = data.draw(st.integers(1, len(self.BROKERS)))
        topic = f"t{self.counter}"
        self.counter += 1
        assignment = {p: data.draw(st.permutations(self.BROKERS))[:rf] for p in range(n)}
        self.apply(create_topic(self.core, self.store, topic, assignment, apply=False))

    @rule(b=st.sampled_from(BROKERS))
    def toggle_broker(self, b):
        self.toggle_registrations([b])

    def toggle_registrations(self, brokers):
        """The brokers' registrations flip (a live one dies, a dead one comes back with a new
        epoch) in one broker change event, decided and checked."""
        for b in brokers:
            if b in self.live:
                self.live.discard(b)
            else:
                self.live.add(b)
                self.epochs[b] += 10
                self.pending_stop = [r for r in self.pending_stop if r.broker_id != b]
        changes, result = self.core.process_broker_change(
            registered(*sorted(self.live), epochs=self.epochs)
        )
        self.pending_stop = [r for r in self.pending_stop if r.broker_id in self.live]
        self.apply(result)
        # Kafka's onBrokerFailure (onReplicasBecomeOffline) takes every partition whose leader
        # is not live Offline, then elects; onBrokerStartup elects New and Offline ones only.
        self.assert_elections_done(every_state=bool(changes.dead))
        self.track_reassignment_leftovers()

    @rule(pair=st.lists(st.sampled_from(BROKERS), min_size=2, max_size=2, unique=True))
    def toggle_two_brokers(self, pair):
        """Two brokers' registrations change in one broker change event (both die, both come
        back, or one of each)."""
        self.toggle_registrations(pair)

    @precondition(lambda self: self.store.topics)
    @rule(data=st.data())
    def delete(self, data):
        topic = data.draw(st.sampled_from(sorted(self.store.topics)))
        self.store.delete_markers.add(topic)
        self.apply(self.core.process_topic_deletion(sorted(self.store.delete_markers)))

    @precondition(lambda self: self.pending_stop)
    @rule(data=st.data(), fail=st.booleans())
    def answer_stop_replica(self, data, fail):
        request = self.pending_stop.pop(data.draw(st.integers(0, len(self.pending_stop) - 1)))
        errors = {
            s.topic_partition: (ErrorCode.KAFKA_STORAGE_ERROR if fail else 0)
            for s in request.partition_states
        }
        self.apply(self.core.on_stop_replica_response(request.broker_id, ErrorCode.NONE, errors))

    @precondition(lambda self: self.store.topics)
    @rule(data=st.data())
    def reassign(self, data):
        topic = data.draw(st.sampled_from(sorted(self.store.topics)))
        partition = data.draw(st.sampled_from(sorted(self.store.topics[topic])))
        rf = data.draw(st.integers(1, 3))
        target = tuple(data.draw(st.permutations(self.BROKERS))[:rf])
        requested = dict(self.store.reassignments)
        requested.setdefault(TopicPartition(topic, partition), target)
        self.store.reassignments = requested
        self.apply(self.core.process_zk_partition_reassignment(requested))
        self.track_reassignment_leftovers(TopicPartition(topic, partition))

    @precondition(lambda self: self.store.topics)
    @rule(data=st.data(), cancel=st.booleans())
    def api_reassign(self, data, cancel):
        """AlterPartitionReassignments: a new target, or a cancellation (None)."""
        topic = data.draw(st.sampled_from(sorted(self.store.topics)))
        partition = data.draw(st.sampled_from(sorted(self.store.topics[topic])))
        rf = data.draw(st.integers(1, 3))
        target = None if cancel else tuple(data.draw(st.permutations(self.BROKERS))[:rf])
        result, answers = self.core.process_api_partition_reassignment(
            {TopicPartition(topic, partition): target}
        )
        self.apply(result)
        self.track_reassignment_leftovers(TopicPartition(topic, partition))
        assert set(answers) == {TopicPartition(topic, partition)}
        for t_p in self.core.list_partition_reassignments(None):
            assert self.store.topics[t_p.topic][t_p.partition].is_being_reassigned

    @precondition(lambda self: self.core.ctx.partitions_being_reassigned)
    @rule(data=st.data())
    def leader_expands_isr(self, data):
        """A partition leader lets live caught-up replicas into the ISR (CAS + notification)."""
        t_p = data.draw(st.sampled_from(sorted(self.core.ctx.partitions_being_reassigned)))
        if t_p not in self.store.partition_states:
            return
        info, version = self.store.partition_states[t_p]
        lai = info.leader_and_isr
        if lai.leader < 0 or lai.leader not in self.live:
            return
        assigned = self.store.topics[t_p.topic][t_p.partition].replicas
        joining = [r for r in assigned if r in self.live and r not in lai.isr]
        grown = LeaderIsrAndControllerEpoch(
            LeaderAndIsr(lai.leader, lai.leader_epoch, lai.isr + tuple(joining), version + 1),
            info.controller_epoch,
        )
        self.store.partition_states[t_p] = (grown, version + 1)
        self.apply(self.core.process_isr_change_notification({t_p: grown}, []))
        self.track_reassignment_leftovers(t_p)

    @rule()
    def failover(self):
        """A new controller loads the context from the store and takes over."""
        core = controller_from_store(
            self.store, {b: self.epochs[b] for b in self.live}, self.core.ctx.epoch + 1
        )
        self.core = core
        self.pending_stop = []
        self.apply(
            core.on_controller_failover(sorted(self.store.delete_markers), self.store.reassignments)
        )
        # initializePartitionState makes every partition without a live leader Offline and
        # triggerOnlinePartitionStateChange elects
        self.assert_elections_done(every_state=True)
        self.left_leaderless_by_reassignment.clear()

    def track_reassignment_leftovers(self, reassigned: TopicPartition | None = None):
        info = self.core.ctx.partition_leadership_info
        leaderless = {t_p for t_p, i in info.items() if i.leader_and_isr.leader == NO_LEADER}
        self.left_leaderless_by_reassignment &= leaderless
        if reassigned in leaderless:
            self.left_leaderless_by_reassignment.add(reassigned)
        if reassigned is not None:
            for r in self.core.ctx.partition_replica_assignment(reassigned):
                replica = PartitionAndReplica(reassigned, r)
                if self.core.rsm.replica_state(replica) is NON_EXISTENT_REPLICA:
                    self.never_started.add(replica)

    def assert_elections_done(self, every_state: bool):
        """After an election trigger no partition is left without a live leader while it has an
        eligible one (a live assigned ISR member; for a New partition, any live assigned
        replica). ``every_state``: the trigger covered every partition without a live leader
        (a broker failure, a failover), else only New and Offline ones (a broker startup)."""
        ctx = self.core.ctx
        for t_p, state in ctx.partition_states.items():
            if ctx.is_topic_queued_up_for_deletion(t_p.topic):
                continue
            assignment = ctx.partition_replica_assignment(t_p)
            info = ctx.partition_leadership_info.get(t_p)
            if info is None:
                assert state is NEW_PARTITION, t_p
                assert not set(assignment) & self.live, (t_p, assignment)
                continue
            lai = info.leader_and_isr
            if lai.leader in self.live:
                continue
            if state is ONLINE_PARTITION and not every_state:
                continue
            assert state is not ONLINE_PARTITION, (t_p, lai)
            eligible = [r for r in assignment if r in self.live and r in lai.isr]
            assert not eligible, (t_p, lai, assignment)

    @invariant()
    def restart_step_budget(self):
        STEP_BUDGET.restart()

    def teardown(self):
        STEP_BUDGET.stop()

    @invariant()
    def context_matches_store(self):
        self.store.assert_matches(self.core)
        ctx = self.core.ctx
        assert set(ctx.all_topics) == set(self.store.topics)

    @invariant()
    def leadership_is_sane(self):
        ctx = self.core.ctx
        for t_p, info in ctx.partition_leadership_info.items():
            lai = info.leader_and_isr
            assert lai.isr, t_p
            assignment = ctx.partition_replica_assignment(t_p)
            if not set(lai.isr) <= set(assignment) and len(lai.isr) == 1:
                # Kafka's removeReplicasFromIsr never empties an ISR: a replica that a changed
                # or cancelled reassignment stops while it is the ISR's last member stays there,
                # leaderless, as the record of who holds the acknowledged data.
                assert lai.leader == NO_LEADER, (t_p, lai, assignment)
                continue
            for r in set(lai.isr) - set(assignment):
                # Such a replica, assigned again by a reassignment that completes at once (its
                # target is in the ISR already), is never started: Kafka's step B1 moves the
                # adding replicas to OnlineReplica, which is not a valid move from
                # NonExistentReplica (ReplicaStateMachine logs it and skips the replica). When a
                # later reassignment removes it, B4's OfflineReplica is refused the same way, so
                # the controller leaves it in the ISR; the leader drops it at its next ISR
                # shrink (a replica outside the assignment is never in sync).
                assert PartitionAndReplica(t_p, r) in self.never_started, (t_p, lai, assignment)
            if lai.leader >= 0:
                assert lai.leader in lai.isr and lai.leader in assignment
            if ctx.is_topic_queued_up_for_deletion(t_p.topic):
                continue
            if t_p in self.left_leaderless_by_reassignment:
                # Kafka leaves such a partition leaderless until the next broker failure or
                # failover, even once a live ISR member is assigned again:
                # stopRemovedReplicasOfReassignedPartition takes the leader Offline
                # (removeReplicasFromIsr: leader -1, an ISR of one kept), the re-election of
                # moveReassignedPartitionLeaderIfRequired finds no live target replica in the
                # ISR and the failed election leaves the partition state as it was (Online);
                # onPartitionReassignment's phase A for a later target only bumps the epoch
                # (updateLeaderEpochAndSendRequest) and never elects; onBrokerStartup elects
                # New and Offline partitions only. assert_elections_done checks the triggers.
                assert lai.leader == NO_LEADER, (t_p, lai)
                continue
            if self.core.psm.partition_state(t_p) is ONLINE_PARTITION:
                assert lai.leader in self.live, (t_p, lai)
            live_isr = [r for r in lai.isr if r in self.live and r in assignment]
            if live_isr:
                assert lai.leader in self.live, (t_p, lai)


class Draws:
    """Stands in for hypothesis' ``data()`` in a replay: hands out the recorded draws in order."""

    def __init__(self, *values):
        self.values = list(values)

    def draw(self, strategy):
        return self.values.pop(0)


def replay(steps):
    """Run ``(rule, arguments)`` steps on a ControllerModel, checking the invariants after each
    step as hypothesis does."""
    model = ControllerModel()
    model.context_matches_store()
    model.leadership_is_sane()
    for name, kwargs in steps:
        getattr(model, name)(**kwargs)
        model.context_matches_store()
        model.leadership_is_sane()
    return model


EVERY_BROKER = [0, 1, 2, 3]  # a permutation draw; the rules take its first rf brokers


def leaderless_after_a_dropped_move_steps():
    """The steps both shrunk failing examples start with (see leaderless_after_a_cancelled_move)."""
    return [
        ("toggle_broker", {"b": 0}),
        ("create", {"data": Draws(3, 1, EVERY_BROKER, EVERY_BROKER, EVERY_BROKER)}),  # t0 on [0]
        ("create", {"data": Draws(1, 1, EVERY_BROKER)}),  # t1-0 on [0]
        ("reassign", {"data": Draws("t1", 0, 2, EVERY_BROKER)}),  # to (0, 1)
        ("failover", {}),  # leader 1
    ]


def test_model_replay_api_reassignment_adding_back_the_last_isr_member():
    """The first shrunk failing example (hypothesis 6.170.17, seed 1159)."""
    model = replay(
        leaderless_after_a_dropped_move_steps()
        + [
            ("api_reassign", {"cancel": False, "data": Draws("t1", 0, 1, EVERY_BROKER)}),
            ("failover", {}),
            ("create", {"data": Draws(1, 1, EVERY_BROKER)}),
            ("api_reassign", {"cancel": False, "data": Draws("t1", 0, 2, EVERY_BROKER)}),
        ]
    )
    assert model.core.ctx.partition_leadership_info[tp("t1", 0)].leader_and_isr.leader == -1
    model.toggle_broker(0)  # the next broker change elects
    assert model.core.ctx.partition_leadership_info[tp("t1", 0)].leader_and_isr.leader == 1


def test_model_replay_zk_reassignment_after_a_cancel():
    """The second shrunk failing example (hypothesis 6.170.17, seed 1159)."""
    model = replay(
        leaderless_after_a_dropped_move_steps()
        + [
            ("api_reassign", {"cancel": True, "data": Draws("t1", 0, 1)}),
            ("reassign", {"data": Draws("t1", 0, 2, EVERY_BROKER)}),
        ]
    )
    assert model.core.ctx.partition_leadership_info[tp("t1", 0)].leader_and_isr.leader == -1
    model.toggle_broker(3)  # a failure elects
    assert model.core.ctx.partition_leadership_info[tp("t1", 0)].leader_and_isr.leader == 1


def test_model_replay_replica_assigned_again_while_in_the_isr():
    """A randomized run's failing example (hypothesis 6.170.17, seed 1), cut down by hand."""
    model = replay(
        [
            ("toggle_broker", {"b": 3}),
            ("create", {"data": Draws(1, 1, [3, 0, 1, 2])}),  # t0-0 on [3]
            ("api_reassign", {"cancel": False, "data": Draws("t0", 0, 2, [0, 3, 1, 2])}),
            ("toggle_broker", {"b": 2}),  # 0 leads
            ("api_reassign", {"cancel": True, "data": Draws("t0", 0, 1)}),
            ("api_reassign", {"cancel": False, "data": Draws("t0", 0, 1, EVERY_BROKER)}),
            ("api_reassign", {"cancel": False, "data": Draws("t0", 0, 1, [1, 0, 2, 3])}),
            ("leader_expands_isr", {"data": Draws(tp("t0", 0))}),
        ]
    )
    assert model.core.ctx.partition_leadership_info[tp("t0", 0)].leader_and_isr.isr == (0, 1)


def test_the_step_budget_interrupts_a_step_that_spins():
    budget = StepBudget(cpu_seconds=0.2)
    with budget, pytest.raises(StepBudgetExceeded):
        budget.restart()
        while True:
            pass
    budget.restart()  # outside ``with``: does nothing


# Random sequences on every run, in CI too: hypothesis' "ci" profile (loaded when $CI is set)
# would derandomize and drop the database, so both are set here. A failure prints its
# @reproduce_failure blob (put it on ControllerModel to replay) and is saved in the
# (gitignored) .hypothesis database of the checkout, which replays it first on the next run.
# A run takes about 2 s. Time limits, so that a failure is reported inside pytest-timeout's
# 300 s: STEP_BUDGET per step, ``deadline`` per example, and shrinking capped at
# SHRINK_SECONDS (hypothesis' own cap, MAX_SHRINKING_SECONDS, is 300 s: one failing example
# whose shrinking ran that long is why a CI run once went past pytest-timeout).
CONTROLLER_MODEL_SETTINGS = settings(
    max_examples=100,
    stateful_step_count=30,
    derandomize=False,
    database=DirectoryBasedExampleDatabase(
        Path(__file__).resolve().parents[2] / ".hypothesis" / "examples"
    ),
    print_blob=True,
    deadline=timedelta(seconds=30),
    phases=tuple(Phase),
)
SHRINK_SECONDS = 60


def test_controller_model(monkeypatch):
    monkeypatch.setattr(hypothesis_engine, "MAX_SHRINKING_SECONDS", SHRINK_SECONDS)
    with STEP_BUDGET:
        run_state_machine_as_test(ControllerModel, settings=CONTROLLER_MODEL_SETTINGS)


def test_deleting_a_topic_under_reassignment_waits_for_it():
    core, store = new_cluster([0, 1, 2])
    create_topic(core, store, "t", {0: [0, 1]})
    t0 = tp("t", 0)
    store.reassignments = {t0: (2, 1)}
    store.apply(core.process_zk_partition_reassignment(store.reassignments))
    store.delete_markers.add("t")
    result = core.process_topic_deletion(["t"])
    store.apply(result)
    assert not any(s.delete_partition for s in stop_replica_states(result).values())
    assert "t" in core.ctx.topics_ineligible_for_deletion
    info, version = store.partition_states[t0]
    grown = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(
            info.leader_and_isr.leader, info.leader_and_isr.leader_epoch, (0, 1, 2), version + 1
        ),
        1,
    )
    store.partition_states[t0] = (grown, version + 1)
    done = core.process_isr_change_notification({t0: grown}, [])
    store.apply(done)
    assert "t" not in core.ctx.topics_ineligible_for_deletion
    deleting = {k for k, s in stop_replica_states(done).items() if s.delete_partition}
    assert {(1, t0), (2, t0)} <= deleting


def test_elect_leaders_answers_per_partition():
    core, store = new_cluster([0, 1])
    create_topic(core, store, "t", {0: [0, 1], 1: [1, 0], 2: [0]})
    store.apply(core.process_broker_change(registered(1))[1])
    store.apply(core.process_broker_change(registered(0, 1))[1])
    # broker 0 was away: t-0 is led by 1 and 0 is not back in its ISR yet; pretend t-1's
    # leadership moved to 0 meanwhile, with 1 (its preferred replica) in the ISR
    info, version = store.partition_states[tp("t", 1)]
    rejoined = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(0, info.leader_and_isr.leader_epoch, (0, 1), version + 1), 1
    )
    store.partition_states[tp("t", 1)] = (rejoined, version + 1)
    core.update_leader_and_isr_cache({tp("t", 1): rejoined})
    result, errors = core.elect_leaders([tp("t", 0), tp("t", 1), tp("nope", 0)])
    store.apply(result)
    assert errors == {
        tp("t", 0): ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        tp("t", 1): ErrorCode.NONE,
        tp("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert store.partition_states[tp("t", 1)][0].leader_and_isr.leader == 1
    _, unclean = core.elect_leaders([tp("t", 2)], unclean=True)
    assert unclean == {tp("t", 2): ErrorCode.ELECTION_NOT_NEEDED}
    store.apply(core.process_broker_change(registered(1))[1])
    _, unclean = core.elect_leaders([tp("t", 2)], unclean=True)
    assert unclean == {
        tp("t", 2): ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    }  # its only replica is down
    core.ctx.topics_to_be_deleted.add("t")  # Kafka: "The topic is being deleted"
    _, deleting = core.elect_leaders([tp("t", 0), tp("nope", 0)])
    assert deleting == {
        tp("t", 0): ErrorCode.INVALID_TOPIC_EXCEPTION,
        tp("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


def test_two_replicas_leaving_one_isr_in_one_event_announce_the_second_change():
    """Brokers 1 and 2 die together: the replica state machine removes replica 1 from the ISR,
    then replica 2, in one batch; the UpdateMetadata carries the ISR after both (a partition's
    state is computed again when its leadership changed since it was added)."""
    core, store = new_cluster([1, 2, 3])
    create_topic(core, store, "t", {0: [3, 1, 2], 1: [3, 2, 1]})
    _, result = core.process_broker_change(registered(3, epochs={3: 103}))
    store.apply(result)
    for p in (0, 1):
        t_p = TopicPartition("t", p)
        lai = core.ctx.partition_leadership_info[t_p].leader_and_isr
        assert (lai.leader, lai.isr) == (3, (3,))
        [um] = [
            s
            for r in requests_of(result, UpdateMetadataRequestData, 3)
            for s in r.partition_states
            if s.topic_partition == t_p
        ][-1:]
        assert (um.leader, um.leader_epoch, um.isr, um.zk_version) == (
            lai.leader,
            lai.leader_epoch,
            lai.isr,
            lai.zk_version,
        )
