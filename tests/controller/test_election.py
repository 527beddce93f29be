"""Leader election (kafkalite/controller/election.py) against Kafka's documented examples and its
rules, with hypothesis oracles."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkalite.controller.context import ControllerContext
from kafkalite.controller.election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
    controlled_shutdown_partition_leader_election,
    elect,
    leader_for_offline,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)

TP = TopicPartition("t", 0)


def context(live, assignment, isr, leader, *, shutting_down=(), unclean_topics=(), epoch=1):
    ctx = ControllerContext(epoch=epoch)
    ctx.add_live_brokers([(Broker(b, (EndPoint("127.0.0.1", 9000 + b),)), 10 + b) for b in live])
    ctx.shutting_down_broker_ids.update(shutting_down)
    ctx.set_all_topics(["t"])
    ctx.update_partition_full_replica_assignment(TP, ReplicaAssignment(tuple(assignment)))
    ctx.put_partition_leadership_info(
        TP, LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 4, tuple(isr), zk_version=7), epoch)
    )
    ctx.unclean_leader_election_topics.update(unclean_topics)
    return ctx


def test_example_leader_from_live_isr():
    # AR=[1,2,3,4,5], ISR=[1,2,3], live=[2,3,5] -> leader 2, ISR [2,3]
    ctx = context([2, 3, 5], [1, 2, 3, 4, 5], [1, 2, 3], leader=1)
    result = leader_for_offline(ctx, TP, ctx.partition_leadership_info[TP], False)
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3), zk_version=7)
    assert result.live_replicas == (2, 3, 5)


def test_example_unclean_leader_from_live_assigned_replicas():
    # AR=[1,2,3,4,5], ISR=[1,2,3], live=[4,6,7] -> leader 4, ISR [4] (may lose data)
    ctx = context([4, 6, 7], [1, 2, 3, 4, 5], [1, 2, 3], leader=1)
    current = ctx.partition_leadership_info[TP]
    assert leader_for_offline(ctx, TP, current, False).leader_and_isr is None
    unclean = leader_for_offline(ctx, TP, current, True)
    assert unclean.leader_and_isr == LeaderAndIsr(4, 5, (4,), zk_version=7)


def test_offline_strategy_reads_the_topic_unclean_setting():
    ctx = context([4], [1, 4], [1], leader=1, unclean_topics=["t"])
    current = ctx.partition_leadership_info[TP]
    assert (
        elect(ctx, TP, current, OfflinePartitionLeaderElectionStrategy()).leader_and_isr.leader == 4
    )
    ctx.unclean_leader_election_topics.clear()
    assert elect(ctx, TP, current, OfflinePartitionLeaderElectionStrategy()).leader_and_isr is None
    assert (
        elect(
            ctx, TP, current, OfflinePartitionLeaderElectionStrategy(allow_unclean=True)
        ).leader_and_isr.leader
        == 4
    )


def test_offline_without_leadership_elects_nothing():
    ctx = context([1], [1], [1], leader=1)
    assert leader_for_offline(ctx, TP, None, True).leader_and_isr is None


def test_preferred_replica_only_the_first_assigned():
    assert preferred_replica_partition_leader_election([3, 1, 2], [1, 2, 3], {1, 2, 3}) == 3
    assert preferred_replica_partition_leader_election([3, 1, 2], [1, 2], {1, 2, 3}) is None
    assert preferred_replica_partition_leader_election([3, 1, 2], [1, 2, 3], {1, 2}) is None
    assert preferred_replica_partition_leader_election([], [1], {1}) is None
    ctx = context([1, 2, 3], [3, 1, 2], [1, 2, 3], leader=1)
    result = elect(
        ctx,
        TP,
        ctx.partition_leadership_info[TP],
        PreferredReplicaPartitionLeaderElectionStrategy(),
    )
    assert result.leader_and_isr == LeaderAndIsr(3, 5, (1, 2, 3), zk_version=7)  # ISR kept
    assert result.live_replicas == (3, 1, 2)


def test_controlled_shutdown_moves_leadership_and_isr_off_shutting_down_brokers():
    ctx = context([1, 2, 3], [1, 2, 3], [1, 2, 3], leader=1, shutting_down=[1])
    result = elect(
        ctx,
        TP,
        ctx.partition_leadership_info[TP],
        ControlledShutdownPartitionLeaderElectionStrategy(),
    )
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3), zk_version=7)
    assert result.live_replicas == (1, 2, 3)  # the shutting-down broker still hears about it
    only = context([1, 2], [1, 2], [1], leader=1, shutting_down=[1])
    assert (
        elect(
            only,
            TP,
            only.partition_leadership_info[TP],
            ControlledShutdownPartitionLeaderElectionStrategy(),
        ).leader_and_isr
        is None
    )


def test_reassign_uses_the_target_replicas():
    ctx = context([1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], leader=1)
    ctx.update_partition_full_replica_assignment(
        TP, ReplicaAssignment((1, 2, 3, 4), adding_replicas=(3, 4), removing_replicas=(1, 2))
    )
    result = elect(
        ctx, TP, ctx.partition_leadership_info[TP], ReassignPartitionLeaderElectionStrategy()
    )
    assert result.leader_and_isr.leader == 3
    assert result.live_replicas == (3, 4)
    assert reassign_partition_leader_election([3, 4], [4], {3, 4}) == 4


replica_lists = st.lists(st.integers(0, 8), min_size=0, max_size=6, unique=True)
replica_sets = st.sets(st.integers(0, 8), max_size=9)


@settings(max_examples=300, deadline=None)
@given(assignment=replica_lists, isr=replica_sets, live=replica_sets, unclean=st.booleans())
def test_offline_election_oracle(assignment, isr, live, unclean):
    leader = offline_partition_leader_election(assignment, isr, live, unclean)
    clean = [r for r in assignment if r in live and r in isr]
    dirty = [r for r in assignment if r in live]
    if clean:
        assert leader == clean[0]
    elif unclean and dirty:
        assert leader == dirty[0]
    else:
        assert leader is None


@settings(max_examples=300, deadline=None)
@given(assignment=replica_lists, isr=replica_sets, live=replica_sets, shutting=replica_sets)
def test_controlled_shutdown_and_preferred_oracles(assignment, isr, live, shutting):
    leader = controlled_shutdown_partition_leader_election(assignment, isr, live, shutting)
    eligible = [r for r in assignment if r in live and r in isr and r not in shutting]
    assert leader == (eligible[0] if eligible else None)
    preferred = preferred_replica_partition_leader_election(assignment, isr, live)
    assert preferred == (
        assignment[0] if assignment and assignment[0] in live and assignment[0] in isr else None
    )
    assert reassign_partition_leader_election(
        assignment, isr, live
    ) == offline_partition_leader_election(assignment, isr, live, False)


@settings(max_examples=200, deadline=None)
@given(assignment=st.lists(st.integers(0, 6), min_size=1, max_size=5, unique=True), data=st.data())
def test_elected_leadership_invariants(assignment, data):
    isr = data.draw(st.lists(st.sampled_from(assignment), min_size=1, unique=True))
    live = data.draw(st.sets(st.integers(0, 6)))
    ctx = context(sorted(live), assignment, isr, leader=isr[0])
    current = ctx.partition_leadership_info[TP]
    for unclean in (False, True):
        result = leader_for_offline(ctx, TP, current, unclean)
        new = result.leader_and_isr
        if new is None:
            continue
        assert new.leader in live and new.leader in assignment
        assert new.leader in new.isr and set(new.isr) <= live
        assert new.leader_epoch == current.leader_and_isr.leader_epoch + 1
        assert new.zk_version == current.leader_and_isr.zk_version
        if not unclean:
            assert new.leader in isr
