"""PartitionStateMachine: the states of every partition and the legal moves between them.

Kafka's ``ZkPartitionStateMachine`` made sans-I/O. States (Kafka's
``PartitionState``):

- NonExistentPartition: never created, or created and deleted.
- NewPartition: created; replicas assigned, no leader/ISR yet.
- OnlinePartition: a leader is elected.
- OfflinePartition: the elected leader died.

Legal moves are the table ``VALID_PREVIOUS_STATES`` (target -> states it may be entered from);
asking for any other move raises ``IllegalStateTransition`` before anything is decided:

    NonExistent -> New                    assignment known (nothing to write)
    New -> Online                         leader = first live assigned replica, ISR = live
                                          assigned replicas; CREATE the partition state node;
                                          LeaderAndIsr (is_new) to the ISR, UpdateMetadata to all
    Online, Offline -> Online             elect with a strategy (election.py); compare-and-set
                                          the partition state node; LeaderAndIsr to the
                                          election's recipients, UpdateMetadata to all
    New, Online, Offline -> Offline       mark only
    Offline -> NonExistent                mark only

Every decision is returned as a ``ControllerResult`` (writes, then requests); the context is
updated as if the writes succeed (see ``results.py``). The leader/ISR is always in the writes
of the same result as the LeaderAndIsr that announces it, and the caller applies writes before
sending: persist before announce.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kafkalite.zk.writes import CreatePartitionState, UpdatePartitionState

from .broker_request_batch import ControllerBrokerRequestBatch
from .context import ControllerContext
from .election import (
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    elect,
    offline_partition_leader_election,
)
from .results import ControllerResult


class PartitionState(enum.Enum):
    NEW_PARTITION = 0
    ONLINE_PARTITION = 1
    OFFLINE_PARTITION = 2
    NON_EXISTENT_PARTITION = 3

    # Members are singletons compared by identity: the identity hash (a C slot) instead of
    # Enum's hash of the name in Python, which a state lookup per replica paid thousands of
    # times per event.
    __hash__ = object.__hash__

    def __str__(self) -> str:  # Kafka's names, for logs
        return {
            0: "NewPartition",
            1: "OnlinePartition",
            2: "OfflinePartition",
            3: "NonExistentPartition",
        }[self.value]


NEW_PARTITION = PartitionState.NEW_PARTITION
ONLINE_PARTITION = PartitionState.ONLINE_PARTITION
OFFLINE_PARTITION = PartitionState.OFFLINE_PARTITION
NON_EXISTENT_PARTITION = PartitionState.NON_EXISTENT_PARTITION

VALID_PREVIOUS_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    NEW_PARTITION: frozenset({NON_EXISTENT_PARTITION}),
    ONLINE_PARTITION: frozenset({NEW_PARTITION, ONLINE_PARTITION, OFFLINE_PARTITION}),
    OFFLINE_PARTITION: frozenset({NEW_PARTITION, ONLINE_PARTITION, OFFLINE_PARTITION}),
    NON_EXISTENT_PARTITION: frozenset({OFFLINE_PARTITION}),
}


class IllegalStateTransition(Exception):
    """A state machine was asked for a move its table does not allow."""


def check_transitions(
    items: Iterable[Any],
    state_of: Callable[[Any], Any],
    target: Any,
    valid_previous: Mapping[Any, frozenset[Any]],
    noun: str,
) -> None:
    """Raise IllegalStateTransition naming every item whose state cannot move to ``target``."""
    illegal = [(item, state_of(item)) for item in items]
    illegal = [(item, state) for item, state in illegal if state not in valid_previous[target]]
    if illegal:
        raise IllegalStateTransition(
            f"{noun} must be in one of {sorted(str(s) for s in valid_previous[target])} "
            f"before moving to {target}: "
            + ", ".join(f"{item} is {state}" for item, state in illegal)
        )


def is_valid_partition_transition(current: PartitionState, target: PartitionState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def bumped_state(
    tp: TopicPartition,
    current: LeaderAndIsr,
    leader: int,
    isr: tuple[int, ...],
    controller_epoch: int,
    writes: list[Any],
    bump_leader_epoch: bool = True,
) -> LeaderIsrAndControllerEpoch:
    """A partition's next state with ``leader`` and ``isr`` (its zk version, the partition
    epoch, one more than ``current``'s, and its leader epoch too unless ``bump_leader_epoch``
    is False), its compare-and-set write appended to ``writes``: the one step of an offline
    election and of an ISR shrink, each done for thousands of partitions in one pass."""
    expected_version = current.zk_version
    info = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(
            leader,
            current.leader_epoch + 1 if bump_leader_epoch else current.leader_epoch,
            isr,
            expected_version + 1,
            current.leader_recovery_state,
        ),
        controller_epoch,
    )
    writes.append(UpdatePartitionState(tp, info, expected_version))
    return info


class PartitionStateMachine:
    """Partition states live in ``ctx.partition_states``; a missing entry is NonExistentPartition."""

    def __init__(self, controller_id: int, ctx: ControllerContext) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self._batch = ControllerBrokerRequestBatch(controller_id, ctx)

    # -- lifecycle --

    def startup(self) -> ControllerResult:
        """On election: derive every partition's state from the context, then elect leaders
        for the New and Offline ones."""
        self.initialize_partition_state()
        return self.trigger_online_partition_state_change()

    def initialize_partition_state(self) -> None:
        ctx = self.ctx
        for tp in ctx.all_partitions():
            info = ctx.partition_leadership_info.get(tp)
            if info is None:
                ctx.partition_states[tp] = NEW_PARTITION
            elif ctx.is_replica_online(info.leader_and_isr.leader, tp):
                ctx.partition_states[tp] = ONLINE_PARTITION
            else:
                ctx.partition_states[tp] = OFFLINE_PARTITION

    def shutdown(self) -> None:
        self.ctx.partition_states.clear()

    def partition_state(self, tp: TopicPartition) -> PartitionState:
        return self.ctx.partition_states.get(tp, NON_EXISTENT_PARTITION)

    # -- triggers --

    def trigger_online_partition_state_change(self, topic: str | None = None) -> ControllerResult:
        """Try to move every New or Offline partition (of ``topic``, or all) Online, except the
        partitions of topics queued for deletion."""
        ctx = self.ctx
        # filtered, then sorted: the few leaderless ones, not every partition
        partitions = sorted(
            tp
            for tp, state in ctx.partition_states.items()
            if (state is NEW_PARTITION or state is OFFLINE_PARTITION)
            and (topic is None or tp.topic == topic)
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        )
        return self.handle_state_changes(
            partitions,
            ONLINE_PARTITION,
            OfflinePartitionLeaderElectionStrategy(allow_unclean=False),
        )

    # -- the state machine --

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target_state: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None = None,
    ) -> ControllerResult:
        partitions = list(dict.fromkeys(partitions))
        result = ControllerResult()
        if not partitions:
            return result
        check_transitions(
            partitions, self.partition_state, target_state, VALID_PREVIOUS_STATES, "partitions"
        )
        if target_state is ONLINE_PARTITION and strategy is None:
            uninitialized = [tp for tp in partitions if self.partition_state(tp) is NEW_PARTITION]
            if len(uninitialized) != len(partitions):
                raise ValueError("electing a leader for Online/Offline partitions needs a strategy")
        self._batch.new_batch()
        try:
            self._do_handle_state_changes(partitions, target_state, strategy, result)
            result.requests.extend(self._batch.build_requests(self.ctx.epoch))
        finally:
            self._batch.clear()
        return result

    def _do_handle_state_changes(
        self,
        partitions: list[TopicPartition],
        target_state: PartitionState,
        strategy: PartitionLeaderElectionStrategy | None,
        result: ControllerResult,
    ) -> None:
        states = self.ctx.partition_states
        if target_state is ONLINE_PARTITION:
            uninitialized = [tp for tp in partitions if self.partition_state(tp) is NEW_PARTITION]
            to_elect = [tp for tp in partitions if self.partition_state(tp) is not NEW_PARTITION]
            for tp in self._initialize_leader_and_isr_for_partitions(uninitialized, result):
                states[tp] = ONLINE_PARTITION
            if to_elect:
                assert strategy is not None
                for tp in self._elect_leader_for_partitions(to_elect, strategy, result):
                    states[tp] = ONLINE_PARTITION
        else:
            for tp in partitions:
                states[tp] = target_state

    def _initialize_leader_and_isr_for_partitions(
        self, partitions: list[TopicPartition], result: ControllerResult
    ) -> list[TopicPartition]:
        ctx = self.ctx
        initialized = []
        told: list[tuple[Any, TopicPartition, LeaderIsrAndControllerEpoch, Any]] = []
        for tp in partitions:
            replicas = ctx.partition_replica_assignment(tp)
            live = tuple(r for r in replicas if ctx.is_replica_online(r, tp))
            if not live:
                result.failed[tp] = (
                    f"controller {self.controller_id} epoch {ctx.epoch} cannot move {tp} from "
                    f"NewPartition to OnlinePartition: assigned replicas are {list(replicas)}, "
                    f"live brokers are {sorted(ctx.live_broker_ids)}; no assigned replica is alive"
                )
                continue
            leader_and_isr = LeaderAndIsr(leader=live[0], isr=live)
            info = LeaderIsrAndControllerEpoch(leader_and_isr, ctx.epoch)
            result.writes.append(CreatePartitionState(tp, info))
            ctx.put_partition_leadership_info(tp, info)
            result.leadership[tp] = leader_and_isr
            told.append((leader_and_isr.isr, tp, info, ctx.partition_full_replica_assignment(tp)))
            initialized.append(tp)
        # One call for all (each partition's state is set before it is added, and no later
        # partition changes it)
        self._batch.add_leader_and_isr_requests(told, is_new=True)
        return initialized

    def _elect_leader_for_partitions(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
        result: ControllerResult,
    ) -> list[TopicPartition]:
        if type(strategy) is OfflinePartitionLeaderElectionStrategy:
            return self._elect_offline_leaders(partitions, strategy, result)
        return self._elect_each(partitions, strategy, result)

    def _elect_offline_leaders(
        self,
        partitions: list[TopicPartition],
        strategy: OfflinePartitionLeaderElectionStrategy,
        result: ControllerResult,
    ) -> list[TopicPartition]:
        """``_elect_each`` with the offline strategy (a broker's failure: thousands of
        partitions) in one pass over the context: the same decisions, writes, leaderships and
        requests (a test compares the two), without an ``ElectionResult`` and a second
        ``LeaderAndIsr`` per partition, and with the live replicas of each distinct assignment
        computed once while no replica is on an offline log dir."""
        ctx = self.ctx
        epoch = ctx.epoch
        leadership = ctx.partition_leadership_info
        assignments = ctx.partition_assignments
        live_epochs = ctx.live_broker_epochs
        shutting_down = ctx.shutting_down_broker_ids
        offline_dirs = ctx.replicas_on_offline_dirs
        unclean_topics = ctx.unclean_leader_election_topics
        allow_unclean = strategy.allow_unclean
        writes = result.writes
        failed = result.failed
        led = result.leadership
        live_of: dict[tuple[int, ...], tuple[int, ...]] = {}
        no_assignment = ReplicaAssignment(())
        elected: list[TopicPartition] = []
        told: list[tuple[Any, TopicPartition, LeaderIsrAndControllerEpoch, Any]] = []
        for tp in partitions:
            current = leadership.get(tp)
            if current is None:
                failed[tp] = (
                    f"LeaderAndIsr information doesn't exist for partition {tp} in {self.partition_state(tp)} state"
                )
                continue
            if current.controller_epoch > epoch:
                failed[tp] = (
                    f"aborted leader election for partition {tp}: its state was written by a "
                    f"controller with epoch {current.controller_epoch} > {epoch}"
                )
                continue
            topic_assignments = assignments.get(tp[0])
            full = topic_assignments.get(tp[1]) if topic_assignments is not None else None
            if full is None:
                full = no_assignment
            replicas = full.replicas
            current_lai = current.leader_and_isr
            isr = current_lai.isr
            if offline_dirs:
                live = tuple(r for r in replicas if ctx.is_replica_online(r, tp))
                leader = offline_partition_leader_election(
                    replicas, isr, live, allow_unclean or tp[0] in unclean_topics
                )
                if leader is not None:
                    new_isr = (
                        tuple(r for r in isr if ctx.is_replica_online(r, tp))
                        if leader in isr
                        else (leader,)
                    )
            else:
                live = live_of.get(replicas)
                if live is None:
                    live = live_of[replicas] = tuple(
                        r for r in replicas if r in live_epochs and r not in shutting_down
                    )
                leader = offline_partition_leader_election(
                    replicas, isr, live, allow_unclean or tp[0] in unclean_topics
                )
                if leader is not None:
                    new_isr = (
                        tuple(r for r in isr if r in live_epochs and r not in shutting_down)
                        if leader in isr
                        else (leader,)
                    )
            if leader is None:
                failed[tp] = f"failed to elect leader for partition {tp} under strategy {strategy}"
                continue
            info = leadership[tp] = bumped_state(tp, current_lai, leader, new_isr, epoch, writes)
            led[tp] = info.leader_and_isr
            told.append((live, tp, info, full))
            elected.append(tp)
        self._batch.add_leader_and_isr_requests(told, is_new=False)
        return elected

    def _elect_each(
        self,
        partitions: list[TopicPartition],
        strategy: PartitionLeaderElectionStrategy,
        result: ControllerResult,
    ) -> list[TopicPartition]:
        ctx = self.ctx
        elected = []
        told: list[tuple[Any, TopicPartition, LeaderIsrAndControllerEpoch, Any]] = []
        for tp in partitions:
            current = ctx.partition_leadership_info.get(tp)
            if current is None:
                result.failed[tp] = (
                    f"LeaderAndIsr information doesn't exist for partition {tp} in {self.partition_state(tp)} state"
                )
                continue
            if current.controller_epoch > ctx.epoch:
                result.failed[tp] = (
                    f"aborted leader election for partition {tp}: its state was written by a "
                    f"controller with epoch {current.controller_epoch} > {ctx.epoch}"
                )
                continue
            election = elect(ctx, tp, current, strategy)
            if election.leader_and_isr is None:
                result.failed[tp] = (
                    f"failed to elect leader for partition {tp} under strategy {strategy}"
                )
                continue
            expected_version = current.leader_and_isr.zk_version
            info = LeaderIsrAndControllerEpoch(
                election.leader_and_isr.with_zk_version(expected_version + 1), ctx.epoch
            )
            result.writes.append(UpdatePartitionState(tp, info, expected_version))
            ctx.put_partition_leadership_info(tp, info)
            result.leadership[tp] = info.leader_and_isr
            told.append(
                (election.live_replicas, tp, info, ctx.partition_full_replica_assignment(tp))
            )
            elected.append(tp)
        self._batch.add_leader_and_isr_requests(told, is_new=False)
        return elected
