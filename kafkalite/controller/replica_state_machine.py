"""ReplicaStateMachine: the state of every replica (partition x assigned broker).

Kafka's ``ZkReplicaStateMachine`` made sans-I/O. States:

- NewReplica: created during reassignment or topic creation; may only become a follower.
- OnlineReplica: started and part of the assignment; may become leader or follower.
- OfflineReplica: its broker died (or it is being stopped).
- ReplicaDeletionStarted: StopReplica(delete=true) sent.
- ReplicaDeletionSuccessful: the broker confirmed the deletion.
- ReplicaDeletionIneligible: deletion failed or the broker is down; retried later.
- NonExistentReplica: deleted (or never created).

Legal moves are the table ``VALID_PREVIOUS_STATES``; any other raises ``IllegalStateTransition``:

    NonExistent -> New                 LeaderAndIsr (is_new) with the current leadership to the
                                       replica, unless it is the leader (that is a failure)
    New -> Online                      add the replica to the assignment if missing
    Online, Offline, Ineligible
      -> Online                        LeaderAndIsr with the current leadership to the replica
    New, Online, Offline, Ineligible
      -> Offline                       StopReplica(delete=false) to the replica; remove it from
                                       the ISR (compare-and-set; leader -> NO_LEADER if it led;
                                       an ISR of one is kept) and LeaderAndIsr to the other
                                       replicas; without leadership, UpdateMetadata only
    Offline -> DeletionStarted         StopReplica(delete=true) to the replica
    DeletionStarted -> Successful      mark only
    Offline, DeletionStarted
      -> Ineligible                    mark only
    Successful -> NonExistent          drop the replica from the assignment and the state map
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)

from .broker_request_batch import ControllerBrokerRequestBatch
from .context import ControllerContext, PartitionAndReplica
from .partition_state_machine import bumped_state, check_transitions
from .results import ControllerResult


class ReplicaState(enum.Enum):
    NEW_REPLICA = 1
    ONLINE_REPLICA = 2
    OFFLINE_REPLICA = 3
    REPLICA_DELETION_STARTED = 4
    REPLICA_DELETION_SUCCESSFUL = 5
    REPLICA_DELETION_INELIGIBLE = 6
    NON_EXISTENT_REPLICA = 7

    # Members are singletons compared by identity: the identity hash (a C slot) instead of
    # Enum's hash of the name in Python, which a state lookup per replica paid thousands of
    # times per event.
    __hash__ = object.__hash__

    def __str__(self) -> str:  # Kafka's names, for logs
        return "".join(part.capitalize() for part in self.name.split("_"))


NEW_REPLICA = ReplicaState.NEW_REPLICA
ONLINE_REPLICA = ReplicaState.ONLINE_REPLICA
OFFLINE_REPLICA = ReplicaState.OFFLINE_REPLICA
REPLICA_DELETION_STARTED = ReplicaState.REPLICA_DELETION_STARTED
REPLICA_DELETION_SUCCESSFUL = ReplicaState.REPLICA_DELETION_SUCCESSFUL
REPLICA_DELETION_INELIGIBLE = ReplicaState.REPLICA_DELETION_INELIGIBLE
NON_EXISTENT_REPLICA = ReplicaState.NON_EXISTENT_REPLICA

VALID_PREVIOUS_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    NEW_REPLICA: frozenset({NON_EXISTENT_REPLICA}),
    ONLINE_REPLICA: frozenset(
        {NEW_REPLICA, ONLINE_REPLICA, OFFLINE_REPLICA, REPLICA_DELETION_INELIGIBLE}
    ),
    OFFLINE_REPLICA: frozenset(
        {NEW_REPLICA, ONLINE_REPLICA, OFFLINE_REPLICA, REPLICA_DELETION_INELIGIBLE}
    ),
    REPLICA_DELETION_STARTED: frozenset({OFFLINE_REPLICA}),
    REPLICA_DELETION_SUCCESSFUL: frozenset({REPLICA_DELETION_STARTED}),
    REPLICA_DELETION_INELIGIBLE: frozenset({OFFLINE_REPLICA, REPLICA_DELETION_STARTED}),
    NON_EXISTENT_REPLICA: frozenset({REPLICA_DELETION_SUCCESSFUL}),
}


def is_valid_replica_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in VALID_PREVIOUS_STATES[target]


def without_replica(
    tp: TopicPartition,
    current: LeaderAndIsr,
    replica_id: int,
    registered: bool,
    controller_epoch: int,
    writes: list[Any],
) -> LeaderIsrAndControllerEpoch:
    """``current`` (whose ISR holds ``replica_id``) without the replica, its compare-and-set
    write appended to ``writes``: no leader if it led, and an ISR without it, but never an
    empty one (the last member stays, so the partition keeps a record of which replica holds
    every acknowledged record; it may come back as a clean leader).

    The leader epoch is bumped when the leader changes, and when the replica is a
    ``registered`` broker's (a controlled shutdown, a reassignment's removal): the bump fences
    any fetch it still has in flight, which could otherwise bring it back into the ISR. A
    failed broker's replica leaves with the partition epoch (zk version) alone bumped, as
    Kafka's KRaft controller does for an ISR shrink: its followers keep fetching as they are
    (decision 0068)."""
    isr = current.isr
    was_leader = replica_id == current.leader
    return bumped_state(
        tp,
        current,
        NO_LEADER if was_leader else current.leader,
        isr if len(isr) == 1 else tuple([x for x in isr if x != replica_id]),
        controller_epoch,
        writes,
        bump_leader_epoch=was_leader or registered,
    )


class ReplicaStateMachine:
    """Replica states live in ``ctx.replica_states``; a missing entry is NonExistentReplica."""

    def __init__(self, controller_id: int, ctx: ControllerContext) -> None:
        self.controller_id = controller_id
        self.ctx = ctx
        self._batch = ControllerBrokerRequestBatch(controller_id, ctx)

    # -- lifecycle --

    def startup(self) -> ControllerResult:
        """On election: replicas on live brokers are Online (each gets a LeaderAndIsr), the
        others Offline. Replicas on dead brokers start as Ineligible so a deletion in progress
        does not wait for them."""
        # initialize_replica_state, from the same pass that tells online from offline
        online, offline = self.ctx.online_and_offline_replicas()
        states = self.ctx.replica_states
        states.update(dict.fromkeys(online, ONLINE_REPLICA))
        states.update(dict.fromkeys(offline, REPLICA_DELETION_INELIGIBLE))
        result = self.handle_state_changes(online, ONLINE_REPLICA)
        result += self.handle_state_changes(offline, OFFLINE_REPLICA)
        return result

    def initialize_replica_state(self) -> None:
        ctx = self.ctx
        for tp in ctx.all_partitions():
            for replica in ctx.partition_replica_assignment(tp):
                pr = PartitionAndReplica(tp, replica)
                ctx.replica_states[pr] = (
                    ONLINE_REPLICA
                    if ctx.is_replica_online(replica, tp)
                    else REPLICA_DELETION_INELIGIBLE
                )

    def shutdown(self) -> None:
        self.ctx.replica_states.clear()

    def replica_state(self, replica: PartitionAndReplica) -> ReplicaState:
        return self.ctx.replica_states.get(replica, NON_EXISTENT_REPLICA)

    # -- the state machine --

    def handle_state_changes(
        self, replicas: Iterable[PartitionAndReplica], target_state: ReplicaState
    ) -> ControllerResult:
        replicas = list(dict.fromkeys(replicas))
        result = ControllerResult()
        if not replicas:
            return result
        states = self.ctx.replica_states
        valid = VALID_PREVIOUS_STATES[target_state]
        if any(states.get(r, NON_EXISTENT_REPLICA) not in valid for r in replicas):
            check_transitions(
                replicas, self.replica_state, target_state, VALID_PREVIOUS_STATES, "replicas"
            )
        self._batch.new_batch()
        try:
            # By replica id, then partition (a PartitionAndReplica sorts by its partition first,
            # so within one replica id its own order is the partition's): grouped with a dict
            # and sorted without a key function (10,000s of replicas per broker event).
            by_replica: dict[int, list[PartitionAndReplica]] = {}
            for r in replicas:
                group = by_replica.get(r[1])
                if group is None:
                    by_replica[r[1]] = [r]
                else:
                    group.append(r)
            for replica_id in sorted(by_replica):
                group = by_replica[replica_id]
                group.sort()
                self._do_handle_state_changes(replica_id, group, target_state, result)
            result.requests.extend(self._batch.build_requests(self.ctx.epoch))
        finally:
            self._batch.clear()
        return result

    def _do_handle_state_changes(
        self,
        replica_id: int,
        replicas: list[PartitionAndReplica],
        target_state: ReplicaState,
        result: ControllerResult,
    ) -> None:
        ctx = self.ctx
        states = ctx.replica_states
        batch = self._batch
        if target_state is NEW_REPLICA:
            for r in replicas:
                tp = r.topic_partition
                info = ctx.partition_leadership_info.get(tp)
                if info is not None:
                    if info.leader_and_isr.leader == replica_id:
                        result.failed[r] = (
                            f"replica {replica_id} for partition {tp} cannot be moved to NewReplica "
                            "state as it is being requested to become leader"
                        )
                        continue
                    batch.add_leader_and_isr_request_for_brokers(
                        [replica_id],
                        tp,
                        info,
                        ctx.partition_full_replica_assignment(tp),
                        is_new=True,
                    )
                states[r] = NEW_REPLICA
        elif target_state is ONLINE_REPLICA:
            # The LeaderAndIsr of every replica added in one call (the batch's per-call set-up
            # was most of a failover's cost: 30,000 replicas at 10,000 partitions, RF 3).
            leadership = ctx.partition_leadership_info
            assignments = ctx.partition_assignments
            destination = (replica_id,)
            told: list[tuple[Any, TopicPartition, LeaderIsrAndControllerEpoch, Any]] = []
            for r in replicas:
                tp = r[0]
                if states.get(r, NON_EXISTENT_REPLICA) is NEW_REPLICA:
                    assignment = ctx.partition_full_replica_assignment(tp)
                    if replica_id not in assignment.replicas:
                        ctx.update_partition_full_replica_assignment(
                            tp,
                            ReplicaAssignment(
                                assignment.replicas + (replica_id,),
                                assignment.adding_replicas,
                                assignment.removing_replicas,
                            ),
                        )
                else:
                    info = leadership.get(tp)
                    if info is not None:
                        topic = assignments.get(tp[0])
                        full = topic.get(tp[1]) if topic is not None else None
                        if full is None:
                            full = ReplicaAssignment(())
                        told.append((destination, tp, info, full))
                states[r] = ONLINE_REPLICA
            batch.add_leader_and_isr_requests(told, is_new=False)
        elif target_state is OFFLINE_REPLICA:
            batch.add_stop_replica_requests(replica_id, [r[0] for r in replicas], False)
            shrunk: list[tuple[Any, TopicPartition, LeaderIsrAndControllerEpoch, Any]] = []
            # the other replicas of each distinct assignment (a broker's failure names it in
            # every partition it holds)
            others: dict[tuple[int, ...], list[int]] = {}
            leadership = ctx.partition_leadership_info
            assignments = ctx.partition_assignments
            deleting = ctx.topics_to_be_deleted
            epoch = ctx.epoch
            writes = result.writes
            led = result.leadership
            no_assignment = ReplicaAssignment(())
            registered = replica_id in ctx.live_or_shutting_down_broker_ids
            for r in replicas:
                tp = r[0]
                info = leadership.get(tp)
                if info is None:
                    batch.add_update_metadata_request_for_brokers(
                        ctx.live_or_shutting_down_broker_ids, [tp]
                    )
                    states[r] = OFFLINE_REPLICA
                    continue
                # _remove_replica_from_isr inlined (one call per partition the broker held)
                current = info.leader_and_isr
                isr = current.isr
                if info.controller_epoch > epoch:
                    self._remove_replica_from_isr(replica_id, r, info, result)  # reports it
                    continue
                if replica_id in isr:
                    updated = leadership[tp] = without_replica(
                        tp, current, replica_id, registered, epoch, writes
                    )
                    led[tp] = updated.leader_and_isr
                else:
                    updated = info
                if tp[0] not in deleting:
                    topic_assignments = assignments.get(tp[0])
                    full = topic_assignments.get(tp[1]) if topic_assignments is not None else None
                    if full is None:
                        full = no_assignment
                    recipients = others.get(full.replicas)
                    if recipients is None:
                        recipients = others[full.replicas] = [
                            x for x in full.replicas if x != replica_id
                        ]
                    shrunk.append((recipients, tp, updated, full))
                states[r] = OFFLINE_REPLICA
            # (one call for the replica's partitions: each is added after its own decision and
            # no later one changes it)
            batch.add_leader_and_isr_requests(shrunk, is_new=False)
        elif target_state is REPLICA_DELETION_STARTED:
            for r in replicas:
                states[r] = REPLICA_DELETION_STARTED
            batch.add_stop_replica_requests(replica_id, [r[0] for r in replicas], True)
        elif target_state in (REPLICA_DELETION_INELIGIBLE, REPLICA_DELETION_SUCCESSFUL):
            for r in replicas:
                states[r] = target_state
        elif target_state is NON_EXISTENT_REPLICA:
            for r in replicas:
                tp = r.topic_partition
                ctx.update_partition_full_replica_assignment(
                    tp, ctx.partition_full_replica_assignment(tp).remove_replica(replica_id)
                )
                states.pop(r, None)

    def _remove_replica_from_isr(
        self,
        replica_id: int,
        replica: PartitionAndReplica,
        current: LeaderIsrAndControllerEpoch,
        result: ControllerResult,
    ) -> LeaderIsrAndControllerEpoch | None:
        """Shrink the ISR without the replica (Kafka's ``doRemoveReplicasFromIsr``).

        Returns the leadership to announce, or None when the state was written by a newer
        controller (the change is then reported in ``result.failed``).
        """
        ctx = self.ctx
        tp = replica.topic_partition
        if current.controller_epoch > ctx.epoch:
            result.failed[replica] = (
                f"cannot remove replica {replica_id} from the ISR of {tp}: its state was written by "
                f"a controller with epoch {current.controller_epoch} > {ctx.epoch}"
            )
            return None
        leader_and_isr = current.leader_and_isr
        if replica_id not in leader_and_isr.isr:
            return current
        updated = without_replica(
            tp,
            leader_and_isr,
            replica_id,
            replica_id in ctx.live_or_shutting_down_broker_ids,
            ctx.epoch,
            result.writes,
        )
        ctx.put_partition_leadership_info(tp, updated)
        result.leadership[tp] = updated.leader_and_isr
        return updated
