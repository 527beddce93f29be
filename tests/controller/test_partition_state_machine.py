"""PartitionStateMachine: the transition table, illegal moves, and the decisions of each move."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.controller.broker_request_batch import (
    LeaderAndIsrRequestData,
    UpdateMetadataRequestData,
)
from kafkalite.controller.context import ControllerContext
from kafkalite.controller.election import OfflinePartitionLeaderElectionStrategy
from kafkalite.controller.partition_state_machine import (
    NEW_PARTITION,
    NON_EXISTENT_PARTITION,
    OFFLINE_PARTITION,
    ONLINE_PARTITION,
    VALID_PREVIOUS_STATES,
    IllegalStateTransition,
    PartitionState,
    PartitionStateMachine,
    is_valid_partition_transition,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kafkalite.zk.writes import CreatePartitionState, UpdatePartitionState

from .support import broker, leader_and_isr_states, update_metadata_brokers

TP = TopicPartition("t", 0)
OFFLINE = OfflinePartitionLeaderElectionStrategy()

# Kafka's table, written out (from -> to) so the module's table is checked, not restated.
LEGAL = {
    (NON_EXISTENT_PARTITION, NEW_PARTITION),
    (NEW_PARTITION, ONLINE_PARTITION),
    (ONLINE_PARTITION, ONLINE_PARTITION),
    (OFFLINE_PARTITION, ONLINE_PARTITION),
    (NEW_PARTITION, OFFLINE_PARTITION),
    (ONLINE_PARTITION, OFFLINE_PARTITION),
    (OFFLINE_PARTITION, OFFLINE_PARTITION),
    (OFFLINE_PARTITION, NON_EXISTENT_PARTITION),
}


def machine(live=(0, 1, 2), replicas=(0, 1, 2), epoch=3):
    ctx = ControllerContext(epoch=epoch)
    ctx.add_live_brokers([(broker(b), 50 + b) for b in live])
    ctx.set_all_topics(["t"])
    ctx.topic_ids["t"] = "tid"
    ctx.update_partition_full_replica_assignment(TP, ReplicaAssignment(replicas))
    return PartitionStateMachine(0, ctx)


def test_transition_table_is_kafkas():
    for current, target in itertools.product(PartitionState, repeat=2):
        assert is_valid_partition_transition(current, target) == ((current, target) in LEGAL), (
            current,
            target,
        )
    assert set(VALID_PREVIOUS_STATES) == set(PartitionState)


@pytest.mark.parametrize(
    ("current", "target"), sorted(set(itertools.product(PartitionState, repeat=2)) - LEGAL, key=str)
)
def test_illegal_moves_raise_and_change_nothing(current, target):
    psm = machine()
    if current is not NON_EXISTENT_PARTITION:
        psm.ctx.partition_states[TP] = current
    with pytest.raises(IllegalStateTransition):
        psm.handle_state_changes([TP], target, OFFLINE)
    assert psm.partition_state(TP) is current
    assert psm.ctx.partition_leadership_info == {}


def test_new_to_online_writes_leader_and_isr_then_announces():
    psm = machine(live=(1, 2), replicas=(0, 1, 2))
    psm.handle_state_changes([TP], NEW_PARTITION)
    result = psm.handle_state_changes([TP], ONLINE_PARTITION)
    expected = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 3)
    assert result.writes == [CreatePartitionState(TP, expected)]
    assert psm.ctx.partition_leadership_info[TP] == expected
    assert psm.partition_state(TP) is ONLINE_PARTITION
    states = leader_and_isr_states(result)
    assert set(states) == {(1, TP), (2, TP)}  # the ISR, not the dead replica 0
    for state in states.values():
        assert (
            state.leader,
            state.leader_epoch,
            state.isr,
            state.partition_epoch,
            state.is_new,
        ) == (1, 0, (1, 2), 0, True)
        assert state.replicas == (0, 1, 2)
    assert update_metadata_brokers(result) == {1, 2}
    kinds = [type(r) for r in result.requests]
    assert kinds.index(UpdateMetadataRequestData) > kinds.index(LeaderAndIsrRequestData)
    lai = [r for r in result.requests if isinstance(r, LeaderAndIsrRequestData)][0]
    assert lai.controller_epoch == 3 and lai.broker_epoch == 50 + lai.broker_id
    assert [b.id for b in lai.live_leaders] == [1] and lai.topic_ids == {"t": "tid"}


def test_new_to_online_without_live_replicas_fails_as_data():
    psm = machine(live=(5,), replicas=(0, 1))
    psm.handle_state_changes([TP], NEW_PARTITION)
    result = psm.handle_state_changes([TP], ONLINE_PARTITION)
    assert TP in result.failed and "no assigned replica is alive" in result.failed[TP]
    assert result.writes == [] and result.requests == []
    assert psm.partition_state(TP) is NEW_PARTITION


def test_offline_to_online_compare_and_sets_and_bumps_the_epoch():
    psm = machine(live=(1, 2))
    psm.ctx.put_partition_leadership_info(
        TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 6, (0, 1, 2), 11), 2)
    )
    psm.initialize_partition_state()
    assert psm.partition_state(TP) is OFFLINE_PARTITION
    result = psm.trigger_online_partition_state_change()
    [write] = result.writes
    assert isinstance(write, UpdatePartitionState) and write.expected_version == 11
    assert write.leader_isr_and_controller_epoch.leader_and_isr == LeaderAndIsr(1, 7, (1, 2), 12)
    assert write.leader_isr_and_controller_epoch.controller_epoch == 3
    assert psm.ctx.partition_leadership_info[TP].leader_and_isr.zk_version == 12
    assert result.leadership == {TP: LeaderAndIsr(1, 7, (1, 2), 12)}
    assert {b for b, _ in leader_and_isr_states(result)} == {1, 2}
    assert psm.partition_state(TP) is ONLINE_PARTITION


def test_election_aborts_when_a_newer_controller_wrote_the_state():
    psm = machine(live=(1, 2), epoch=3)
    psm.ctx.put_partition_leadership_info(
        TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 6, (0, 1), 11), 4)
    )
    psm.ctx.partition_states[TP] = OFFLINE_PARTITION
    result = psm.handle_state_changes([TP], ONLINE_PARTITION, OFFLINE)
    assert TP in result.failed and result.writes == []
    assert psm.partition_state(TP) is OFFLINE_PARTITION


def test_online_needs_a_strategy_for_elected_partitions():
    psm = machine()
    psm.ctx.partition_states[TP] = OFFLINE_PARTITION
    with pytest.raises(ValueError):
        psm.handle_state_changes([TP], ONLINE_PARTITION)


def test_partitions_of_topics_being_deleted_are_not_triggered():
    psm = machine()
    psm.ctx.partition_states[TP] = NEW_PARTITION
    psm.ctx.queue_topic_deletion(["t"])
    assert psm.trigger_online_partition_state_change().is_empty
    assert psm.partition_state(TP) is NEW_PARTITION


@settings(max_examples=200, deadline=None)
@given(
    targets=st.lists(st.sampled_from(list(PartitionState)), max_size=12),
    live=st.sets(st.integers(0, 2)),
)
def test_random_move_sequences_follow_the_table(targets, live):
    psm = machine(live=tuple(sorted(live)))
    for target in targets:
        before = psm.partition_state(TP)
        if (before, target) not in LEGAL:
            with pytest.raises(IllegalStateTransition):
                psm.handle_state_changes([TP], target, OFFLINE)
            assert psm.partition_state(TP) is before
            continue
        result = psm.handle_state_changes([TP], target, OFFLINE)
        after = psm.partition_state(TP)
        if target is not ONLINE_PARTITION:
            assert after is target and result.writes == []
        elif TP in result.failed:
            assert after is before and result.writes == []
        else:
            assert after is ONLINE_PARTITION and len(result.writes) == 1
            info = psm.ctx.partition_leadership_info[TP]
            assert info.leader_and_isr.leader in live
            assert info.leader_and_isr.leader in info.leader_and_isr.isr


PARTITION_CASES = st.lists(
    st.tuples(
        st.lists(st.integers(0, 3), min_size=0, max_size=3, unique=True),  # assignment
        st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True),  # ISR
        st.sampled_from(["led", "missing", "newer epoch"]),
        st.booleans(),  # the topic allows unclean election
        st.booleans(),  # broker 1's log dir holding it is offline
    ),
    min_size=1,
    max_size=12,
)


def _offline_machine(cases, live, shutting_down, offline_dirs):
    ctx = ControllerContext(epoch=5)
    ctx.add_live_brokers([(broker(b), 50 + b) for b in live])
    ctx.shutting_down_broker_ids.update(b for b in shutting_down if b in live)
    topics = ["t", "u"]
    ctx.set_all_topics(topics)
    for t in topics:
        ctx.topic_ids[t] = f"{t}-id"
    partitions = []
    for i, (assignment, isr, leadership, unclean, dir_offline) in enumerate(cases):
        topic = topics[i % 2]
        tp = TopicPartition(topic, i)
        partitions.append(tp)
        if assignment:
            ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(tuple(assignment)))
        if leadership != "missing":
            controller_epoch = 6 if leadership == "newer epoch" else 4
            ctx.put_partition_leadership_info(
                tp,
                LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(isr[0], 7, tuple(isr), 9), controller_epoch
                ),
            )
        if unclean:
            ctx.unclean_leader_election_topics.add(topic)
        if dir_offline and offline_dirs:
            ctx.replicas_on_offline_dirs.setdefault(1, set()).add(tp)
        ctx.partition_states[tp] = OFFLINE_PARTITION
    return PartitionStateMachine(0, ctx), partitions


@settings(max_examples=200, deadline=None)
@given(
    cases=PARTITION_CASES,
    live=st.sets(st.integers(0, 3)),
    shutting_down=st.sets(st.integers(0, 3), max_size=1),
    offline_dirs=st.booleans(),
    allow_unclean=st.booleans(),
)
def test_the_offline_elections_in_one_pass_decide_as_one_at_a_time(
    cases, live, shutting_down, offline_dirs, allow_unclean
):
    """The offline strategy's one-pass elections (``_elect_offline_leaders``) write, record,
    fail and announce exactly what electing each partition through ``elect`` does."""
    strategy = OfflinePartitionLeaderElectionStrategy(allow_unclean=allow_unclean)
    fast, partitions = _offline_machine(cases, live, shutting_down, offline_dirs)
    each, _ = _offline_machine(cases, live, shutting_down, offline_dirs)
    each._elect_offline_leaders = lambda ps, s, r: each._elect_each(ps, s, r)
    got = fast.handle_state_changes(partitions, ONLINE_PARTITION, strategy)
    expected = each.handle_state_changes(partitions, ONLINE_PARTITION, strategy)
    assert got.writes == expected.writes
    assert got.failed == expected.failed
    assert got.leadership == expected.leadership
    assert got.requests == expected.requests
    assert fast.ctx.partition_leadership_info == each.ctx.partition_leadership_info
    assert fast.ctx.partition_states == each.ctx.partition_states
