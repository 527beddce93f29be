"""ReplicaStateMachine: the transition table, illegal moves, and the decisions of each move."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.controller.context import ControllerContext, PartitionAndReplica
from kafkalite.controller.partition_state_machine import IllegalStateTransition
from kafkalite.controller.replica_state_machine import (
    NEW_REPLICA,
    NON_EXISTENT_REPLICA,
    OFFLINE_REPLICA,
    ONLINE_REPLICA,
    REPLICA_DELETION_INELIGIBLE,
    REPLICA_DELETION_STARTED,
    REPLICA_DELETION_SUCCESSFUL,
    ReplicaState,
    ReplicaStateMachine,
    is_valid_replica_transition,
)
from kafkalite.controller.results import ControllerResult
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from kafkalite.zk.writes import UpdatePartitionState

from .support import broker, leader_and_isr_states, stop_replica_states, update_metadata_brokers

TP = TopicPartition("t", 0)
PREVIOUS = {
    NEW_REPLICA: {NON_EXISTENT_REPLICA},
    ONLINE_REPLICA: {NEW_REPLICA, ONLINE_REPLICA, OFFLINE_REPLICA, REPLICA_DELETION_INELIGIBLE},
    OFFLINE_REPLICA: {NEW_REPLICA, ONLINE_REPLICA, OFFLINE_REPLICA, REPLICA_DELETION_INELIGIBLE},
    REPLICA_DELETION_STARTED: {OFFLINE_REPLICA},
    REPLICA_DELETION_SUCCESSFUL: {REPLICA_DELETION_STARTED},
    REPLICA_DELETION_INELIGIBLE: {OFFLINE_REPLICA, REPLICA_DELETION_STARTED},
    NON_EXISTENT_REPLICA: {REPLICA_DELETION_SUCCESSFUL},
}
LEGAL = {(prev, target) for target, prevs in PREVIOUS.items() for prev in prevs}


def machine(live=(0, 1, 2), replicas=(0, 1, 2), leadership=None, epoch=3):
    ctx = ControllerContext(epoch=epoch)
    ctx.add_live_brokers([(broker(b), 50 + b) for b in live])
    ctx.set_all_topics(["t"])
    ctx.update_partition_full_replica_assignment(TP, ReplicaAssignment(replicas))
    if leadership is not None:
        ctx.put_partition_leadership_info(TP, LeaderIsrAndControllerEpoch(leadership, 2))
    return ReplicaStateMachine(0, ctx)


def test_transition_table_is_kafkas():
    for current, target in itertools.product(ReplicaState, repeat=2):
        assert is_valid_replica_transition(current, target) == ((current, target) in LEGAL), (
            current,
            target,
        )
    assert str(NON_EXISTENT_REPLICA) == "NonExistentReplica"


@pytest.mark.parametrize(
    ("current", "target"), sorted(set(itertools.product(ReplicaState, repeat=2)) - LEGAL, key=str)
)
def test_illegal_moves_raise_and_change_nothing(current, target):
    rsm = machine(leadership=LeaderAndIsr(0, 1, (0, 1, 2), 5))
    replica = PartitionAndReplica(TP, 1)
    if current is not NON_EXISTENT_REPLICA:
        rsm.ctx.replica_states[replica] = current
    with pytest.raises(IllegalStateTransition):
        rsm.handle_state_changes([replica], target)
    assert rsm.replica_state(replica) is current
    assert rsm.ctx.partition_leadership_info[TP].leader_and_isr.zk_version == 5


def test_new_replica_gets_a_leader_and_isr_as_new_follower():
    rsm = machine(leadership=LeaderAndIsr(0, 1, (0, 1), 5))
    result = rsm.handle_state_changes([PartitionAndReplica(TP, 2)], NEW_REPLICA)
    [(key, state)] = leader_and_isr_states(result).items()
    assert key == (2, TP) and state.is_new and state.leader == 0
    assert rsm.replica_state(PartitionAndReplica(TP, 2)) is NEW_REPLICA


def test_leader_cannot_become_a_new_replica():
    rsm = machine(leadership=LeaderAndIsr(0, 1, (0, 1), 5))
    result = rsm.handle_state_changes([PartitionAndReplica(TP, 0)], NEW_REPLICA)
    assert PartitionAndReplica(TP, 0) in result.failed
    assert rsm.replica_state(PartitionAndReplica(TP, 0)) is NON_EXISTENT_REPLICA


def test_online_replica_is_told_the_current_leadership():
    rsm = machine(leadership=LeaderAndIsr(0, 1, (0, 1, 2), 5))
    replica = PartitionAndReplica(TP, 2)
    rsm.ctx.replica_states[replica] = OFFLINE_REPLICA
    result = rsm.handle_state_changes([replica], ONLINE_REPLICA)
    assert set(leader_and_isr_states(result)) == {(2, TP)}
    assert not leader_and_isr_states(result)[(2, TP)].is_new
    assert rsm.replica_state(replica) is ONLINE_REPLICA


def test_new_to_online_adds_a_missing_replica_to_the_assignment_quietly():
    rsm = machine(replicas=(0, 1))
    replica = PartitionAndReplica(TP, 2)
    rsm.ctx.replica_states[replica] = NEW_REPLICA
    result = rsm.handle_state_changes([replica], ONLINE_REPLICA)
    assert result.requests == []
    assert rsm.ctx.partition_replica_assignment(TP) == (0, 1, 2)


def test_offline_follower_leaves_the_isr():
    # broker 2 has failed (not registered): the leader stays, so only the partition epoch (the
    # zk version) moves; the leader epoch is kept, as Kafka's KRaft controller keeps it
    rsm = machine(live=(0, 1), leadership=LeaderAndIsr(0, 4, (0, 1, 2), 9))
    replica = PartitionAndReplica(TP, 2)
    rsm.ctx.replica_states[replica] = ONLINE_REPLICA
    result = rsm.handle_state_changes([replica], OFFLINE_REPLICA)
    [write] = result.writes
    assert write == UpdatePartitionState(
        TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 4, (0, 1), 10), 3), 9
    )
    assert stop_replica_states(result)[(2, TP)].delete_partition is False
    assert set(leader_and_isr_states(result)) == {(0, TP), (1, TP)}
    assert update_metadata_brokers(result) == {0, 1}
    assert rsm.replica_state(replica) is OFFLINE_REPLICA


@pytest.mark.parametrize("shutting_down", [False, True])
def test_a_registered_brokers_replica_leaves_the_isr_with_the_leader_epoch_bumped(shutting_down):
    # a controlled shutdown (or a reassignment's removal) takes a live broker's replica out:
    # the bump fences any fetch it still has in flight, which could bring it back in
    rsm = machine(live=(0, 1, 2), leadership=LeaderAndIsr(0, 4, (0, 1, 2), 9))
    if shutting_down:
        rsm.ctx.shutting_down_broker_ids.add(2)
    replica = PartitionAndReplica(TP, 2)
    rsm.ctx.replica_states[replica] = ONLINE_REPLICA
    result = rsm.handle_state_changes([replica], OFFLINE_REPLICA)
    [write] = result.writes
    assert write.leader_isr_and_controller_epoch.leader_and_isr == LeaderAndIsr(0, 5, (0, 1), 10)
    assert result.leadership[TP] == LeaderAndIsr(0, 5, (0, 1), 10)


def test_a_failed_brokers_replica_that_led_leaves_with_the_leader_epoch_bumped():
    rsm = machine(live=(1, 2), leadership=LeaderAndIsr(0, 4, (0, 1, 2), 9))
    replica = PartitionAndReplica(TP, 0)
    rsm.ctx.replica_states[replica] = ONLINE_REPLICA
    result = rsm.handle_state_changes([replica], OFFLINE_REPLICA)
    assert result.leadership[TP] == LeaderAndIsr(NO_LEADER, 5, (1, 2), 10)


def test_offline_leader_leaves_no_leader_and_the_last_isr_member_stays():
    rsm = machine(live=(), replicas=(0,), leadership=LeaderAndIsr(0, 4, (0,), 9))
    replica = PartitionAndReplica(TP, 0)
    rsm.ctx.replica_states[replica] = ONLINE_REPLICA
    result = rsm.handle_state_changes([replica], OFFLINE_REPLICA)
    assert result.leadership[TP] == LeaderAndIsr(NO_LEADER, 5, (0,), 10)


def test_offline_without_leadership_only_updates_metadata():
    rsm = machine(live=(0, 1))
    replica = PartitionAndReplica(TP, 2)
    rsm.ctx.replica_states[replica] = NEW_REPLICA
    result = rsm.handle_state_changes([replica], OFFLINE_REPLICA)
    assert result.writes == []
    assert rsm.replica_state(replica) is OFFLINE_REPLICA


def test_deletion_moves():
    rsm = machine(leadership=LeaderAndIsr(0, 4, (0, 1, 2), 9))
    replica = PartitionAndReplica(TP, 1)
    rsm.ctx.replica_states[replica] = OFFLINE_REPLICA
    started = rsm.handle_state_changes([replica], REPLICA_DELETION_STARTED)
    assert stop_replica_states(started)[(1, TP)].delete_partition is True
    assert rsm.handle_state_changes([replica], REPLICA_DELETION_SUCCESSFUL).requests == []
    rsm.handle_state_changes([replica], NON_EXISTENT_REPLICA)
    assert replica not in rsm.ctx.replica_states
    assert rsm.ctx.partition_replica_assignment(TP) == (0, 2)


@settings(max_examples=200, deadline=None)
@given(targets=st.lists(st.sampled_from(list(ReplicaState)), max_size=15))
def test_random_move_sequences_follow_the_table(targets):
    rsm = machine(leadership=LeaderAndIsr(0, 4, (0, 1, 2), 9))
    replica = PartitionAndReplica(TP, 1)
    for target in targets:
        before = rsm.replica_state(replica)
        if (before, target) not in LEGAL:
            with pytest.raises(IllegalStateTransition):
                rsm.handle_state_changes([replica], target)
            assert rsm.replica_state(replica) is before
            continue
        rsm.handle_state_changes([replica], target)
        assert rsm.replica_state(replica) is target
        if target is NON_EXISTENT_REPLICA:
            return  # the replica left the assignment


@settings(max_examples=200, deadline=None)
@given(
    cases=st.lists(
        st.tuples(
            st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True),  # ISR
            st.sampled_from([NO_LEADER, 0, 1, 2]),  # leader
            st.sampled_from(["led", "missing", "newer epoch"]),
            st.booleans(),  # its topic is queued for deletion
        ),
        min_size=1,
        max_size=10,
    ),
    replica_id=st.integers(0, 3),
    failed=st.booleans(),  # the replica's broker is gone (else registered, e.g. shutting down)
)
def test_offline_replicas_shrink_each_isr_as_one_removal_at_a_time(cases, replica_id, failed):
    """The OfflineReplica pass (``_remove_replica_from_isr`` inlined) writes, records and
    reports exactly what removing each replica on its own does."""

    def build():
        ctx = ControllerContext(epoch=5)
        ctx.add_live_brokers(
            [(broker(b), 50 + b) for b in range(4) if not (failed and b == replica_id)]
        )
        ctx.set_all_topics(["t", "gone"])
        ctx.topic_ids.update({"t": "tid", "gone": "gid"})
        replicas = []
        for i, (isr, leader, leadership, deleting) in enumerate(cases):
            tp = TopicPartition("gone" if deleting else "t", i)
            ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment((0, 1, 2, 3)))
            if leadership != "missing":
                ctx.put_partition_leadership_info(
                    tp,
                    LeaderIsrAndControllerEpoch(
                        LeaderAndIsr(leader, 4, tuple(isr), 8),
                        6 if leadership == "newer epoch" else 4,
                    ),
                )
            if deleting:
                ctx.topics_to_be_deleted.add("gone")
            r = PartitionAndReplica(tp, replica_id)
            ctx.replica_states[r] = ONLINE_REPLICA
            replicas.append(r)
        return ReplicaStateMachine(0, ctx), replicas

    batch_machine, replicas = build()
    got = batch_machine.handle_state_changes(replicas, OFFLINE_REPLICA)
    one_machine, _ = build()
    expected = ControllerResult()
    for r in sorted(replicas):  # the machine's order: by partition within a replica id
        info = one_machine.ctx.partition_leadership_info.get(r.topic_partition)
        if info is not None:
            one_machine._remove_replica_from_isr(replica_id, r, info, expected)
    expected_failed, expected_leadership = expected.failed, expected.leadership
    assert got.writes == expected.writes
    assert got.failed == expected_failed
    assert got.leadership == expected_leadership
    assert batch_machine.ctx.partition_leadership_info == one_machine.ctx.partition_leadership_info
    shrunk = {
        (b, tp): (ps.leader, tuple(ps.isr), ps.leader_epoch, ps.partition_epoch)
        for (b, tp), ps in leader_and_isr_states(got).items()
    }
    for r in replicas:
        tp = r.topic_partition
        info = one_machine.ctx.partition_leadership_info.get(tp)
        if info is None or tp.topic == "gone" or r in got.failed:
            assert not any(key[1] == tp for key in shrunk)
            continue
        lai = info.leader_and_isr
        for b in (0, 1, 2, 3):
            if b != replica_id:
                assert shrunk[(b, tp)] == (lai.leader, lai.isr, lai.leader_epoch, lai.zk_version)
