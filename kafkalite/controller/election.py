"""Partition leader election: pure functions, as Kafka's ``Election.scala`` and
``PartitionLeaderElectionAlgorithms``.

The algorithms choose a leader from (assigned replicas, ISR, live replicas, ...) and nothing
else; they never look at a clock, a socket or the store. Assigned replicas are scanned in
preference order (the first assigned replica is the preferred leader), so the result is
deterministic:

- offline (a partition whose leader died, or a new one): the first assigned replica that is
  live and in the ISR; if there is none and unclean leader election is enabled, the first
  live assigned replica (it may lack acknowledged records: data loss is accepted for
  availability). The new ISR is the live part of the old ISR when the leader came from it,
  otherwise just the new leader (Kafka's ``Election.leaderForOffline``: with AR [1..5], ISR
  [1,2,3] and only 4 of them live, an unclean election gives leader 4, ISR [4]).
- reassign: the first replica of the *new* assignment that is live and in the ISR; ISR kept.
- preferred: the first assigned replica, only if it is live and in the ISR; ISR kept.
- controlled shutdown: the first assigned replica that is live (shutting-down brokers count as
  live for this test), in the ISR and not shutting down; the shutting-down brokers leave the ISR.

Each ``leader_for_*`` returns an ``ElectionResult``: the new ``LeaderAndIsr`` (leader epoch
bumped, version unchanged: it is the compare-and-set token of the write) or None when no
replica is eligible, plus the replicas that must receive the LeaderAndIsr request.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch

from .context import ControllerContext


class ElectionType(enum.IntEnum):
    """Kafka's ``ElectionType`` (the ElectLeaders API's ``election_type``)."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class OfflinePartitionLeaderElectionStrategy:
    """Elect for new/offline partitions. ``allow_unclean`` forces unclean election even when the
    topic's ``unclean.leader.election.enable`` is false (ElectLeaders with UNCLEAN)."""

    allow_unclean: bool = False


@dataclass(frozen=True, slots=True)
class ReassignPartitionLeaderElectionStrategy:
    pass


@dataclass(frozen=True, slots=True)
class PreferredReplicaPartitionLeaderElectionStrategy:
    pass


@dataclass(frozen=True, slots=True)
class ControlledShutdownPartitionLeaderElectionStrategy:
    pass


PartitionLeaderElectionStrategy = (
    OfflinePartitionLeaderElectionStrategy
    | ReassignPartitionLeaderElectionStrategy
    | PreferredReplicaPartitionLeaderElectionStrategy
    | ControlledShutdownPartitionLeaderElectionStrategy
)


# -- the algorithms -----------------------------------------------------------------------------


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    unclean_leader_election_enabled: bool,
) -> int | None:
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    for replica in reassignment:
        if replica in live_replicas and replica in isr:
            return replica
    return None


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: Collection[int],
    shutting_down_brokers: Collection[int],
) -> int | None:
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down_brokers:
            return replica
    return None


# -- elections over the controller context ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic_partition: TopicPartition
    leader_and_isr: LeaderAndIsr | None
    """The new leadership, or None when no replica is eligible."""
    live_replicas: tuple[int, ...]
    """The replicas to send the LeaderAndIsr request to."""


def leader_for_offline(
    ctx: ControllerContext,
    partition: TopicPartition,
    current: LeaderIsrAndControllerEpoch | None,
    unclean_leader_election_enabled: bool,
) -> ElectionResult:
    assignment = ctx.partition_replica_assignment(partition)
    live_replicas = tuple(r for r in assignment if ctx.is_replica_online(r, partition))
    if current is None:
        return ElectionResult(partition, None, live_replicas)
    isr = current.leader_and_isr.isr
    leader = offline_partition_leader_election(
        assignment, isr, set(live_replicas), unclean_leader_election_enabled
    )
    if leader is None:
        return ElectionResult(partition, None, live_replicas)
    if leader in isr:
        new_isr = tuple(r for r in isr if ctx.is_replica_online(r, partition))
    else:
        new_isr = (leader,)
    return ElectionResult(
        partition, current.leader_and_isr.new_leader_and_isr(leader, new_isr), live_replicas
    )


def leader_for_reassign(
    ctx: ControllerContext, partition: TopicPartition, current: LeaderIsrAndControllerEpoch
) -> ElectionResult:
    reassignment = ctx.partition_full_replica_assignment(partition).target_replicas
    live_replicas = {r for r in reassignment if ctx.is_replica_online(r, partition)}
    leader = reassign_partition_leader_election(
        reassignment, current.leader_and_isr.isr, live_replicas
    )
    new = current.leader_and_isr.new_leader(leader) if leader is not None else None
    return ElectionResult(partition, new, tuple(reassignment))


def leader_for_preferred_replica(
    ctx: ControllerContext, partition: TopicPartition, current: LeaderIsrAndControllerEpoch
) -> ElectionResult:
    assignment = ctx.partition_replica_assignment(partition)
    live_replicas = {r for r in assignment if ctx.is_replica_online(r, partition)}
    leader = preferred_replica_partition_leader_election(
        assignment, current.leader_and_isr.isr, live_replicas
    )
    new = current.leader_and_isr.new_leader(leader) if leader is not None else None
    return ElectionResult(partition, new, tuple(assignment))


def leader_for_controlled_shutdown(
    ctx: ControllerContext, partition: TopicPartition, current: LeaderIsrAndControllerEpoch
) -> ElectionResult:
    shutting_down = ctx.shutting_down_broker_ids
    assignment = ctx.partition_replica_assignment(partition)
    live_or_shutting_down = tuple(
        r
        for r in assignment
        if ctx.is_replica_online(r, partition, include_shutting_down_brokers=True)
    )
    isr = current.leader_and_isr.isr
    leader = controlled_shutdown_partition_leader_election(
        assignment, isr, set(live_or_shutting_down), shutting_down
    )
    new_isr = tuple(r for r in isr if r not in shutting_down)
    new = current.leader_and_isr.new_leader_and_isr(leader, new_isr) if leader is not None else None
    return ElectionResult(partition, new, live_or_shutting_down)


def elect(
    ctx: ControllerContext,
    partition: TopicPartition,
    current: LeaderIsrAndControllerEpoch,
    strategy: PartitionLeaderElectionStrategy,
) -> ElectionResult:
    """Run ``strategy`` for one partition whose current leadership is ``current``."""
    match strategy:
        case OfflinePartitionLeaderElectionStrategy(allow_unclean=allow_unclean):
            unclean = allow_unclean or ctx.is_unclean_leader_election_enabled(partition.topic)
            return leader_for_offline(ctx, partition, current, unclean)
        case ReassignPartitionLeaderElectionStrategy():
            return leader_for_reassign(ctx, partition, current)
        case PreferredReplicaPartitionLeaderElectionStrategy():
            return leader_for_preferred_replica(ctx, partition, current)
        case ControlledShutdownPartitionLeaderElectionStrategy():
            return leader_for_controlled_shutdown(ctx, partition, current)
    raise TypeError(f"unknown election strategy {strategy!r}")
