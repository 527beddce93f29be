"""ControllerCore: the KafkaController's decisions, sans-I/O.

Every callback of Kafka's ``KafkaController`` that decides something lives here as a method
taking what the store said (already read by the I/O shell) and returning a ``ControllerResult``
(store writes + broker requests, see ``results.py``). ``kafka_controller.KafkaController`` reads
the store, calls these methods from its single event task, applies the writes in one fenced
multi and then hands the requests to the channel manager.

The callbacks, as Kafka's ``KafkaController`` has them:

- ``on_controller_failover``: after the context is loaded: topic deletions resumed, an
  UpdateMetadata to every broker, replica state machine started (LeaderAndIsr to every live
  replica), partition state machine started (leaders elected for New/Offline partitions).
- ``process_broker_change`` -> ``on_broker_startup`` / ``on_broker_failure`` (Kafka's
  onBrokerStartup and onBrokerFailure): a new broker gets the full metadata and a LeaderAndIsr for every replica it hosts, then
  leaderless partitions get leaders and the reassignments whose target includes it resume; a
  dead broker's partitions get new leaders (ISR first, unclean only if enabled), it leaves
  every ISR, and the survivors get LeaderAndIsr.
  A broker whose registration epoch grew (it bounced) is handled as a failure then a startup.
- ``process_topic_change`` / ``process_partition_modifications`` -> ``on_new_partition_creation``
  (Kafka's onNewPartitionCreation): New -> Online with leader = first live replica, ISR = live replicas.
- ``process_topic_deletion`` -> ``TopicDeletionManager``.
- ``process_isr_change_notification``: leaders changed ISRs in the store; refresh and tell
  every broker (UpdateMetadata).
- ``controlled_shutdown``: move leadership off a broker that asks to stop.
- ``on_stop_replica_response`` / ``on_leader_and_isr_response``: broker answers.
- ``elect_preferred_leaders`` / ``check_and_trigger_auto_leader_rebalance``.

Nothing here special-cases a single broker: one broker is a cluster of one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkalite.protocol.errors import BrokerNotAvailableError, ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import Broker, LeaderIsrAndControllerEpoch, ReplicaAssignment
from kafkalite.zk.writes import (
    DeleteIsrChangeNotifications,
    DeleteLogDirEventNotifications,
    DeleteTopicDeletions,
    SetTopicAssignment,
    UpdatePartitionState,
    UpdateReassignPartitions,
)

from .broker_request_batch import ControllerBrokerRequestBatch, update_metadata_requests
from .context import ControllerContext, PartitionAndReplica
from .election import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from .partition_state_machine import (
    NEW_PARTITION,
    OFFLINE_PARTITION,
    ONLINE_PARTITION,
    PartitionStateMachine,
    is_valid_partition_transition,
)
from .replica_state_machine import (
    NEW_REPLICA,
    NON_EXISTENT_REPLICA,
    OFFLINE_REPLICA,
    ONLINE_REPLICA,
    REPLICA_DELETION_STARTED,
    REPLICA_DELETION_SUCCESSFUL,
    ReplicaStateMachine,
    is_valid_replica_transition,
)
from .results import ControllerResult
from .topic_deletion_manager import TopicDeletionManager


@dataclass(frozen=True)
class BrokerChanges:
    """What a ``/brokers/ids`` change means, computed against the context."""

    new: tuple[int, ...] = ()
    dead: tuple[int, ...] = ()
    bounced: tuple[int, ...] = ()
    """Registered before and now, with a larger broker epoch: the broker restarted in between."""

    @property
    def is_empty(self) -> bool:
        return not (self.new or self.dead or self.bounced)


@dataclass
class ControlledShutdownResult:
    remaining_partitions: list[TopicPartition] = field(default_factory=list)
    """Partitions the broker still leads (no other eligible leader): it must wait and retry."""
    result: ControllerResult = field(default_factory=ControllerResult)


class ControllerCore:
    """The decisions of one elected controller. Owned by one task; not thread-safe."""

    def __init__(
        self,
        controller_id: int,
        ctx: ControllerContext | None = None,
        *,
        delete_topic_enable: bool = True,
        leader_imbalance_per_broker_percentage: int = 10,
    ) -> None:
        self.controller_id = controller_id
        self.ctx = ctx if ctx is not None else ControllerContext()
        self.partition_state_machine = PartitionStateMachine(controller_id, self.ctx)
        self.replica_state_machine = ReplicaStateMachine(controller_id, self.ctx)
        self.topic_deletion_manager = TopicDeletionManager(
            self.ctx, self.partition_state_machine, self.replica_state_machine, delete_topic_enable
        )
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage

    @property
    def psm(self) -> PartitionStateMachine:
        return self.partition_state_machine

    @property
    def rsm(self) -> ReplicaStateMachine:
        return self.replica_state_machine

    def update_metadata(
        self, broker_ids: Iterable[int], partitions: Iterable[TopicPartition] = ()
    ) -> ControllerResult:
        """Kafka's ``sendUpdateMetadataRequest`` as a result."""
        return ControllerResult(
            requests=update_metadata_requests(self.ctx, self.controller_id, broker_ids, partitions)
        )

    # -- failover / resignation --

    def topics_ineligible_for_deletion(self, topics: Iterable[str] | None = None) -> set[str]:
        """On failover: topics (of ``topics``, default all) with a replica on a dead broker,
        or being reassigned."""
        ctx = self.ctx
        with_offline = {
            topic
            for topic in (ctx.all_topics if topics is None else set(topics) & ctx.all_topics)
            if any(
                not ctx.is_replica_online(r.replica, r.topic_partition)
                for r in ctx.replicas_for_topic(topic)
            )
        }
        return with_offline | {tp.topic for tp in ctx.partitions_being_reassigned}

    def on_controller_failover(
        self,
        topics_to_be_deleted: Iterable[str],
        reassignments: Mapping[TopicPartition, Iterable[int]] | None = None,
    ) -> ControllerResult:
        """Called once the context holds what the store says (brokers, topics, assignments,
        leadership). ``topics_to_be_deleted``: the children of ``/admin/delete_topics``;
        ``reassignments``: the content of ``/admin/reassign_partitions``."""
        ctx = self.ctx
        to_delete = set(topics_to_be_deleted)
        result = ControllerResult()
        unknown = sorted(to_delete - ctx.all_topics)
        if unknown:
            result.writes.append(DeleteTopicDeletions(tuple(unknown)))
        to_delete &= ctx.all_topics
        # Only the topics being deleted can be ineligible for deletion: the others' replicas
        # are not walked (every replica of the cluster, at a failover).
        result += self.topic_deletion_manager.init(
            to_delete, self.topics_ineligible_for_deletion(to_delete) if to_delete else ()
        )
        result += self.update_metadata(ctx.live_or_shutting_down_broker_ids)
        # The partition state machine first (Kafka starts the replica state machine first):
        # the elections of the dead brokers' partitions then drop those brokers from the ISR
        # in the same write, where the replica state machine's Offline transition first wrote
        # each such partition leaderless and the election wrote it again (two writes, and an
        # announced state of leader -1, per partition the dead brokers led); its Offline
        # transition then finds them out of the ISR already. Neither machine reads the other's
        # states: the elections read the live brokers and the leaderships.
        result.announce_elections(self.partition_state_machine.startup())
        result += self.replica_state_machine.startup()
        result += self.initialize_partition_reassignments(reassignments or {})
        result += self.topic_deletion_manager.try_topic_deletion()
        return result

    def on_controller_resignation(self) -> None:
        self.partition_state_machine.shutdown()
        self.replica_state_machine.shutdown()
        self.ctx.reset()

    # -- brokers --

    def broker_changes(self, current: Mapping[int, tuple[Broker, int]]) -> BrokerChanges:
        """Compare the registered brokers (id -> (broker, broker epoch)) with the context."""
        known = self.ctx.live_or_shutting_down_broker_ids
        current_ids = set(current)
        bounced = sorted(
            b
            for b in current_ids & known
            if current[b][1] > self.ctx.live_broker_epochs.get(b, current[b][1])
        )
        return BrokerChanges(
            new=tuple(sorted(current_ids - known)),
            dead=tuple(sorted(known - current_ids)),
            bounced=tuple(bounced),
        )

    def process_broker_change(
        self, current: Mapping[int, tuple[Broker, int]]
    ) -> tuple[BrokerChanges, ControllerResult]:
        """Kafka's ``processBrokerChange``. The caller adds/removes the brokers' channels
        (from the returned ``BrokerChanges``) before sending the requests."""
        ctx = self.ctx
        changes = self.broker_changes(current)
        result = ControllerResult()
        if changes.new:
            ctx.add_live_brokers([current[b] for b in changes.new])
            result += self.on_broker_startup(changes.new)
        if changes.bounced:
            ctx.remove_live_brokers(changes.bounced)
            result += self.on_broker_failure(changes.bounced)
            ctx.add_live_brokers([current[b] for b in changes.bounced])
            result += self.on_broker_startup(changes.bounced)
        if changes.dead:
            ctx.remove_live_brokers(changes.dead)
            result += self.on_broker_failure(changes.dead)
        # Endpoint or rack changes of live brokers (Kafka's BrokerModifications) are picked up
        # silently; the next UpdateMetadata carries them.
        for broker_id, (broker, _) in current.items():
            if broker_id in ctx.live_brokers and ctx.live_brokers[broker_id] != broker:
                ctx.live_brokers[broker_id] = broker
                result += self.update_metadata(ctx.live_or_shutting_down_broker_ids)
        return changes, result

    def on_broker_startup(self, new_brokers: Iterable[int]) -> ControllerResult:
        ctx = self.ctx
        new = set(new_brokers)
        for broker_id in new:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        existing = ctx.live_or_shutting_down_broker_ids - new
        # The existing brokers learn about the new ones; the new ones get every partition state.
        result = self.update_metadata(existing)
        result += self.update_metadata(new, ctx.partitions_with_leaders())
        replicas = ctx.replicas_on_brokers(new)
        # Replicas of a topic being deleted may be in a deletion state; they stay there.
        startable = [
            r
            for r in replicas
            if is_valid_replica_transition(self.rsm.replica_state(r), ONLINE_REPLICA)
        ]
        result += self.rsm.handle_state_changes(startable, ONLINE_REPLICA)
        result += self.psm.trigger_online_partition_state_change()
        # Kafka's maybeResumeReassignments: an adding replica on a broker that was down got its
        # LeaderAndIsr nowhere, and New -> Online sends none; resuming the reassignment tells it.
        for tp in sorted(ctx.partitions_being_reassigned):
            target = ctx.partition_full_replica_assignment(tp).target_replicas
            if new.intersection(target):
                result += self.on_partition_reassignment(tp, target)
        topics_to_resume = {
            r.topic for r in replicas if ctx.is_topic_queued_up_for_deletion(r.topic)
        }
        if topics_to_resume:
            result += self.topic_deletion_manager.resume_deletion_for_topics(topics_to_resume)
        return result

    def on_broker_failure(self, dead_brokers: Iterable[int]) -> ControllerResult:
        ctx = self.ctx
        dead = set(dead_brokers)
        for broker_id in dead:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        ctx.shutting_down_broker_ids -= dead
        return self.on_replicas_become_offline(ctx.replicas_on_brokers(dead))

    def on_replicas_become_offline(
        self, new_offline_replicas: Iterable[PartitionAndReplica]
    ) -> ControllerResult:
        ctx = self.ctx
        replicas = list(new_offline_replicas)
        for_deletion = [r for r in replicas if ctx.is_topic_queued_up_for_deletion(r.topic)]
        not_for_deletion = [r for r in replicas if not ctx.is_topic_queued_up_for_deletion(r.topic)]
        result = self.psm.handle_state_changes(
            ctx.partitions_with_offline_leader(), OFFLINE_PARTITION
        )
        online = self.psm.trigger_online_partition_state_change()
        result.announce_elections(online)
        result += self.rsm.handle_state_changes(
            [
                r
                for r in not_for_deletion
                if is_valid_replica_transition(self.rsm.replica_state(r), OFFLINE_REPLICA)
            ],
            OFFLINE_REPLICA,
        )
        if for_deletion:
            result += self.topic_deletion_manager.fail_replica_deletion(for_deletion)
        if not online.leadership:
            # No election announced the new broker set (its UpdateMetadata goes to every
            # broker, naming the live ones). Every broker learns it first, before any ISR
            # shrink's LeaderAndIsr: a dead broker's replica leaves an ISR at the same leader
            # epoch (decision 0068), so a fetch it sent before it died, answered after the
            # shrink, is kept out of the ISR only by the leader's metadata cache no longer
            # holding it alive. When nothing changed leader or ISR, this is the only request.
            result.first_requests.extend(
                self.update_metadata(ctx.live_or_shutting_down_broker_ids).requests
            )
        return result

    def redecide_after_lost_race(
        self,
        partitions: Iterable[TopicPartition],
        new_brokers: Iterable[int] = (),
    ) -> ControllerResult:
        """Decide again for partitions whose compare-and-set write lost a race (a leader
        changed their ISR between the cached read and our write): the caller has re-read their
        state nodes into the context. Whatever the first decision was (an election after a
        broker change, an ISR shrink, a new partition's first state), the outcome it aimed at
        is the same: a live leader from the ISR, no dead broker in the ISR. So: partitions
        whose stored leader is not online are moved Offline and elected again (offline
        strategy; the topic's unclean setting applies), dead replicas leave the ISR, replicas
        on ``new_brokers`` get a LeaderAndIsr (their request was dropped with the lost write),
        and every broker gets the partitions' metadata. The writes are again compare-and-set on
        the freshly read versions."""
        ctx = self.ctx
        parts = sorted(
            tp
            for tp in set(partitions)
            if ctx.partition_replica_assignment(tp)
            and tp in ctx.partition_leadership_info
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        )
        result = ControllerResult()
        if not parts:
            return result
        offline = [
            tp
            for tp in parts
            if not ctx.is_replica_online(
                ctx.partition_leadership_info[tp].leader_and_isr.leader, tp
            )
            and is_valid_partition_transition(self.psm.partition_state(tp), OFFLINE_PARTITION)
        ]
        result += self.psm.handle_state_changes(offline, OFFLINE_PARTITION)
        elected = self.psm.handle_state_changes(
            offline, ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(allow_unclean=False)
        )
        result += elected
        dead_in_isr = [
            replica
            for tp in parts
            for r in ctx.partition_leadership_info[tp].leader_and_isr.isr
            if not ctx.is_replica_online(r, tp)
            and is_valid_replica_transition(
                self.rsm.replica_state(replica := PartitionAndReplica(tp, r)), OFFLINE_REPLICA
            )
        ]
        result += self.rsm.handle_state_changes(dead_in_isr, OFFLINE_REPLICA)
        new = set(new_brokers)
        if new:
            told = [
                replica
                for tp in parts
                if tp not in elected.leadership
                for r in ctx.partition_replica_assignment(tp)
                if r in new
                and ctx.is_replica_online(r, tp)
                and is_valid_replica_transition(
                    self.rsm.replica_state(replica := PartitionAndReplica(tp, r)), ONLINE_REPLICA
                )
            ]
            result += self.rsm.handle_state_changes(told, ONLINE_REPLICA)
        result += self.update_metadata(ctx.live_or_shutting_down_broker_ids, parts)
        return result

    # -- topics and partitions --

    def on_new_partition_creation(
        self, new_partitions: Iterable[TopicPartition]
    ) -> ControllerResult:
        partitions = sorted(set(new_partitions))
        replicas = self.ctx.replicas_for_partition(partitions)
        result = self.psm.handle_state_changes(partitions, NEW_PARTITION)
        result += self.rsm.handle_state_changes(replicas, NEW_REPLICA)
        result += self.psm.handle_state_changes(
            partitions,
            ONLINE_PARTITION,
            OfflinePartitionLeaderElectionStrategy(allow_unclean=False),
        )
        result += self.rsm.handle_state_changes(
            [r for r in replicas if self.rsm.replica_state(r) is NEW_REPLICA], ONLINE_REPLICA
        )
        return result

    def process_topic_change(
        self,
        topics: Iterable[str],
        new_topic_assignments: Mapping[str, tuple[str | None, Mapping[int, ReplicaAssignment]]],
    ) -> ControllerResult:
        """``topics``: the children of ``/brokers/topics``; ``new_topic_assignments``: topic id and
        assignment of each topic the context does not know yet (``new_topics``)."""
        new_partitions = self.register_topic_change(topics, new_topic_assignments)
        if new_partitions:
            return self.on_new_partition_creation(new_partitions)
        return ControllerResult()

    def register_topic_change(
        self,
        topics: Iterable[str],
        new_topic_assignments: Mapping[str, tuple[str | None, Mapping[int, ReplicaAssignment]]],
    ) -> list[TopicPartition]:
        """The context part of ``process_topic_change``: forget deleted topics, record the new
        ones' ids and assignments. Returns the new partitions, which the caller brings online
        with ``on_new_partition_creation`` (the I/O shell does it in slices, yielding to the
        event loop between them)."""
        ctx = self.ctx
        topics = set(topics)
        deleted = ctx.all_topics - topics
        ctx.set_all_topics(topics)
        for topic in deleted:
            ctx.remove_topic(topic)
        new_partitions: list[TopicPartition] = []
        for topic, (topic_id, assignment) in sorted(new_topic_assignments.items()):
            if topic not in topics:
                continue
            if topic_id is not None:
                ctx.topic_ids[topic] = topic_id
            for partition, replicas in sorted(assignment.items()):
                tp = TopicPartition(topic, partition)
                ctx.update_partition_full_replica_assignment(tp, replicas)
                new_partitions.append(tp)
        return new_partitions

    def new_topics(self, topics: Iterable[str]) -> set[str]:
        return set(topics) - self.ctx.all_topics

    def process_partition_modifications(
        self, topic: str, assignment: Mapping[int, ReplicaAssignment]
    ) -> ControllerResult:
        """``/brokers/topics/<topic>`` changed: start the partitions the context lacks. Adding
        partitions to a topic queued for deletion is undone (the old assignment is written back)."""
        ctx = self.ctx
        if topic not in ctx.all_topics:
            return ControllerResult()
        to_add = {
            TopicPartition(topic, p): a
            for p, a in assignment.items()
            if not ctx.partition_replica_assignment(TopicPartition(topic, p))
        }
        if ctx.is_topic_queued_up_for_deletion(topic):
            if to_add:
                existing = {
                    tp.partition: a
                    for tp, a in ctx.partition_full_replica_assignment_for_topic(topic).items()
                }
                return ControllerResult(
                    writes=[SetTopicAssignment(topic, ctx.topic_ids.get(topic), existing)]
                )
            return ControllerResult()
        for tp, a in to_add.items():
            ctx.update_partition_full_replica_assignment(tp, a)
        if to_add:
            return self.on_new_partition_creation(to_add)
        return ControllerResult()

    def process_topic_deletion(self, topics: Iterable[str]) -> ControllerResult:
        """``topics``: the children of ``/admin/delete_topics``."""
        ctx = self.ctx
        to_delete = set(topics)
        result = ControllerResult()
        non_existent = sorted(to_delete - ctx.all_topics)
        if non_existent:
            result.writes.append(DeleteTopicDeletions(tuple(non_existent)))
        to_delete -= set(non_existent)
        if not to_delete:
            return result
        if self.topic_deletion_manager.is_delete_topic_enabled:
            # A topic being reassigned waits until the reassignment is over.
            ctx.queue_topic_deletion(to_delete)
            reassigning = {tp.topic for tp in ctx.partitions_being_reassigned} & to_delete
            self.topic_deletion_manager.mark_topic_ineligible_for_deletion(reassigning)
            result += self.topic_deletion_manager.resume_deletions()
        else:
            result.writes.append(DeleteTopicDeletions(tuple(sorted(to_delete))))
        return result

    def process_log_dir_event_notification(
        self, broker_ids: Iterable[int], sequence_numbers: Iterable[str]
    ) -> ControllerResult:
        """Brokers reported a failed log directory (Kafka's onBrokerLogDirFailure): every
        replica they hold is moved to Online again, which sends them LeaderAndIsr; those on the
        failed directory answer KAFKA_STORAGE_ERROR, go offline (``on_leader_and_isr_response``)
        and their partitions get other leaders."""
        result = ControllerResult()
        seqs = tuple(sequence_numbers)
        if seqs:
            result.writes.append(DeleteLogDirEventNotifications(seqs))
        live = set(broker_ids) & self.ctx.live_or_shutting_down_broker_ids
        replicas = [
            r
            for r in self.ctx.replicas_on_brokers(live)
            if is_valid_replica_transition(self.rsm.replica_state(r), ONLINE_REPLICA)
        ]
        if replicas:
            result += self.rsm.handle_state_changes(replicas, ONLINE_REPLICA)
        return result

    def process_isr_change_notification(
        self,
        leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch | None],
        sequence_numbers: Iterable[str],
    ) -> ControllerResult:
        """Leaders changed ISRs (``/isr_change_notification``): ``leaderships`` is the fresh
        content of the named partitions' state nodes (None when gone)."""
        self.update_leader_and_isr_cache(leaderships)
        partitions = [tp for tp in sorted(leaderships) if tp in self.ctx.partition_leadership_info]
        result = ControllerResult()
        seqs = tuple(sequence_numbers)
        if seqs:
            result.writes.append(DeleteIsrChangeNotifications(seqs))
        if partitions:
            result += self.update_metadata(self.ctx.live_or_shutting_down_broker_ids, partitions)
        result += self.maybe_complete_reassignments(partitions)
        return result

    def update_leader_and_isr_cache(
        self, leaderships: Mapping[TopicPartition, LeaderIsrAndControllerEpoch | None]
    ) -> None:
        """Store the leadership read from partition state nodes (only for known partitions)."""
        ctx = self.ctx
        for tp, info in leaderships.items():
            if not ctx.partition_replica_assignment(tp):
                continue
            if info is None:
                ctx.partition_leadership_info.pop(tp, None)
            else:
                ctx.put_partition_leadership_info(tp, info)

    # -- controlled shutdown --

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1
    ) -> ControlledShutdownResult:
        """Kafka's ``doControlledShutdown``: leadership moves to other ISR members, the broker
        leaves the ISRs it follows in. Raises ``BrokerNotAvailableError`` for an unknown broker
        and a STALE_BROKER_EPOCH error for an old incarnation's request."""
        ctx = self.ctx
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"Broker id {broker_id} does not exist.")
        cached_epoch = ctx.live_broker_epochs[broker_id]
        if broker_epoch != -1 and broker_epoch < cached_epoch:
            raise KafkaError(
                f"Received controlled shutdown request from an old broker epoch {broker_epoch} for broker "
                f"{broker_id}. Current broker epoch is {cached_epoch}.",
                error_code=ErrorCode.STALE_BROKER_EPOCH,
            )
        ctx.shutting_down_broker_ids.add(broker_id)
        acted_on = [
            tp
            for tp in ctx.partitions_on_broker(broker_id)
            if len(ctx.partition_replica_assignment(tp)) > 1
            and tp in ctx.partition_leadership_info
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
        ]
        led = [
            tp
            for tp in acted_on
            if ctx.partition_leadership_info[tp].leader_and_isr.leader == broker_id
        ]
        led_set = set(led)
        followed = [tp for tp in acted_on if tp not in led_set]
        # The leadership moves are written and announced first, the ISR shrinks after them,
        # as Kafka sends the partition state machine's batch before the replica state
        # machine's; the shell answers the stopping broker once the moves are delivered.
        result = ControllerResult().announce_elections(
            self.psm.handle_state_changes(
                led, ONLINE_PARTITION, ControlledShutdownPartitionLeaderElectionStrategy()
            )
        )
        followers = [PartitionAndReplica(tp, broker_id) for tp in followed]
        result += self.rsm.handle_state_changes(
            [
                r
                for r in followers
                if is_valid_replica_transition(self.rsm.replica_state(r), OFFLINE_REPLICA)
            ],
            OFFLINE_REPLICA,
        )
        remaining = [
            tp
            for tp, info in sorted(ctx.partition_leadership_info.items())
            if info.leader_and_isr.leader == broker_id
            and len(ctx.partition_replica_assignment(tp)) > 1
        ]
        return ControlledShutdownResult(remaining, result)

    # -- broker responses --

    def on_stop_replica_response(
        self, broker_id: int, request_error: int, partition_errors: Mapping[TopicPartition, int]
    ) -> ControllerResult:
        """A StopReplica(delete=true) answered (``processTopicDeletionStopReplicaResponseReceived``)."""
        if request_error != ErrorCode.NONE:
            in_error = set(partition_errors)
        else:
            in_error = {tp for tp, err in partition_errors.items() if err != ErrorCode.NONE}
        result = self.topic_deletion_manager.fail_replica_deletion(
            [PartitionAndReplica(tp, broker_id) for tp in sorted(in_error)]
        )
        deleted = sorted(set(partition_errors) - in_error)
        if deleted:
            result += self.topic_deletion_manager.complete_replica_deletion(
                [PartitionAndReplica(tp, broker_id) for tp in deleted]
            )
        return result

    def on_leader_and_isr_response(
        self, broker_id: int, partition_errors: Mapping[TopicPartition, int]
    ) -> ControllerResult:
        """Replicas on a failed log dir (KAFKA_STORAGE_ERROR) go offline; replicas that answered
        NONE are online again."""
        ctx = self.ctx
        if broker_id not in ctx.replicas_on_offline_dirs and not any(partition_errors.values()):
            # Every partition answered NONE (0) and none of the broker's replicas was offline:
            # nothing to change (the usual answer, of 10,000 partitions after a failover).
            return ControllerResult()
        offline = {
            tp for tp, err in partition_errors.items() if err == ErrorCode.KAFKA_STORAGE_ERROR
        }
        online = {tp for tp, err in partition_errors.items() if err == ErrorCode.NONE}
        previous = set(ctx.replicas_on_offline_dirs.get(broker_id, ()))
        current = (previous - online) | offline
        if current:
            ctx.replicas_on_offline_dirs[broker_id] = current
        else:
            ctx.replicas_on_offline_dirs.pop(broker_id, None)
        new_offline = sorted(current - previous)
        if new_offline:
            return self.on_replicas_become_offline(
                [PartitionAndReplica(tp, broker_id) for tp in new_offline]
            )
        return ControllerResult()

    # -- preferred leaders --

    def elect_preferred_leaders(self, partitions: Iterable[TopicPartition]) -> ControllerResult:
        """Move leadership back to the preferred (first assigned) replica where it is live and in
        the ISR. Partitions already led by it, unknown, or of topics being deleted are skipped.
        A partition being reassigned is not (Kafka's onReplicaElection has no such filter; only
        the automatic rebalance leaves those alone)."""
        ctx = self.ctx
        eligible = []
        for tp in sorted(set(partitions)):
            info = ctx.partition_leadership_info.get(tp)
            replicas = ctx.partition_replica_assignment(tp)
            if info is None or not replicas or ctx.is_topic_queued_up_for_deletion(tp.topic):
                continue
            if info.leader_and_isr.leader == replicas[0]:
                continue
            if self.psm.partition_state(tp) not in (ONLINE_PARTITION, OFFLINE_PARTITION):
                continue
            eligible.append(tp)
        return self.psm.handle_state_changes(
            eligible, ONLINE_PARTITION, PreferredReplicaPartitionLeaderElectionStrategy()
        )

    def elect_unclean_leaders(self, partitions: Iterable[TopicPartition]) -> ControllerResult:
        """ElectLeaders with UNCLEAN: partitions without a live leader get one, from the ISR if
        possible, else any live assigned replica (records may be lost). Partitions that have a
        live leader are left alone (Kafka: ELECTION_NOT_NEEDED)."""
        ctx = self.ctx
        eligible = [
            tp
            for tp in sorted(set(partitions))
            if (info := ctx.partition_leadership_info.get(tp)) is not None
            and not ctx.is_replica_online(info.leader_and_isr.leader, tp)
            and not ctx.is_topic_queued_up_for_deletion(tp.topic)
            and self.psm.partition_state(tp) in (ONLINE_PARTITION, OFFLINE_PARTITION)
        ]
        return self.psm.handle_state_changes(
            eligible, ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(allow_unclean=True)
        )

    def elect_leaders(
        self, partitions: Iterable[TopicPartition], unclean: bool = False
    ) -> tuple[ControllerResult, dict[TopicPartition, ErrorCode]]:
        """The ElectLeaders API: preferred (or unclean) elections with a per-partition answer:
        NONE (elected), ELECTION_NOT_NEEDED (already led by the preferred replica / by a live
        leader), UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (topic being deleted, as
        Kafka's ``processReplicaLeaderElection``), or PREFERRED_LEADER_NOT_AVAILABLE /
        ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica qualified."""
        ctx = self.ctx
        requested = sorted(set(partitions))
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp in requested:
            info = ctx.partition_leadership_info.get(tp)
            replicas = ctx.partition_replica_assignment(tp)
            if not replicas:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif ctx.is_topic_queued_up_for_deletion(tp.topic):
                errors[tp] = ErrorCode.INVALID_TOPIC_EXCEPTION
            elif info is not None and (
                ctx.is_replica_online(info.leader_and_isr.leader, tp)
                if unclean
                else info.leader_and_isr.leader == replicas[0]
            ):
                errors[tp] = ErrorCode.ELECTION_NOT_NEEDED
        candidates = [tp for tp in requested if tp not in errors]
        result = (
            self.elect_unclean_leaders(candidates)
            if unclean
            else self.elect_preferred_leaders(candidates)
        )
        failed = (
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            if unclean
            else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        )
        for tp in candidates:
            errors[tp] = ErrorCode.NONE if tp in result.leadership else failed
        return result, errors

    def check_and_trigger_auto_leader_rebalance(self) -> ControllerResult:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for each live preferred leader whose
        share of not-led partitions exceeds ``leader.imbalance.per.broker.percentage``, elect
        the preferred leaders of its partitions."""
        ctx = self.ctx
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.all_partitions():
            if ctx.is_topic_queued_up_for_deletion(tp.topic):
                continue
            replicas = ctx.partition_replica_assignment(tp)
            if replicas:
                by_preferred.setdefault(replicas[0], []).append(tp)
        result = ControllerResult()
        for broker_id, tps in sorted(by_preferred.items()):
            if broker_id not in ctx.live_broker_ids:
                continue
            not_led = [tp for tp in tps if ctx.partition_leader(tp) != broker_id]
            ratio = len(not_led) / len(tps)
            if ratio * 100 > self.leader_imbalance_per_broker_percentage:
                candidates = [
                    tp
                    for tp in not_led
                    if (info := ctx.partition_leadership_info.get(tp)) is not None
                    and broker_id in info.leader_and_isr.isr
                    and tp not in ctx.partitions_being_reassigned
                ]
                result += self.elect_preferred_leaders(candidates)
        return result

    # -- partition reassignment (``/admin/reassign_partitions``) --------------------------------

    def process_zk_partition_reassignment(
        self, requested: Mapping[TopicPartition, Iterable[int]]
    ) -> ControllerResult:
        """``/admin/reassign_partitions`` holds ``requested`` (partition -> target replicas):
        start the reassignments not started yet. Invalid ones (unknown partition, topic being
        deleted, empty or duplicate replicas) are dropped from the node, as Kafka does."""
        ctx = self.ctx
        result = ControllerResult()
        dropped = False
        for tp, replicas in sorted(requested.items()):
            target = tuple(replicas)
            if ctx.zk_reassignments.get(tp) == target:
                continue
            if (
                not target
                or len(set(target)) != len(target)
                or not ctx.partition_replica_assignment(tp)
                or ctx.is_topic_queued_up_for_deletion(tp.topic)
            ):
                result.failed[tp] = f"invalid reassignment of {tp} to {list(target)}"
                dropped = True
                continue
            ctx.zk_reassignments[tp] = target
            result += self.on_partition_reassignment(tp, target)
        if dropped and not any(isinstance(w, UpdateReassignPartitions) for w in result.writes):
            result.writes.append(UpdateReassignPartitions(dict(ctx.zk_reassignments)))
        return result

    def initialize_partition_reassignments(
        self, requested: Mapping[TopicPartition, Iterable[int]]
    ) -> ControllerResult:
        """On failover: resume the reassignments found in the assignments (adding/removing
        replicas) and in ``/admin/reassign_partitions``."""
        ctx = self.ctx
        targets = {
            tp: ctx.partition_full_replica_assignment(tp).target_replicas
            for tp in sorted(ctx.partitions_being_reassigned)
        }
        result = ControllerResult()
        refused = False
        for tp, replicas in requested.items():
            if ctx.partition_replica_assignment(tp) and not ctx.is_topic_queued_up_for_deletion(
                tp.topic
            ):
                targets[tp] = tuple(replicas)
                ctx.zk_reassignments[tp] = tuple(replicas)
            else:
                refused = True
        if refused:
            # Kafka's maybeRemoveFromZkReassignment: an entry for an unknown partition or one of
            # a topic being deleted goes (it would start on a later topic of the same name).
            result.writes.append(UpdateReassignPartitions(dict(ctx.zk_reassignments)))
        for tp, target in sorted(targets.items()):
            result += self.on_partition_reassignment(tp, target)
        return result

    def is_reassignment_complete(self, tp: TopicPartition, assignment: ReplicaAssignment) -> bool:
        """Kafka's isReassignmentComplete: nothing to add or remove (a cancellation, a reorder,
        the current replicas) is complete at once, whatever the ISR; else every target replica
        must be in the ISR."""
        if not assignment.is_being_reassigned:
            return True
        info = self.ctx.partition_leadership_info.get(tp)
        return info is not None and set(assignment.target_replicas) <= set(info.leader_and_isr.isr)

    def maybe_complete_reassignments(
        self, partitions: Iterable[TopicPartition]
    ) -> ControllerResult:
        """Called when ISRs changed: finish the reassignments whose targets all caught up."""
        result = ControllerResult()
        for tp in sorted(set(partitions) & self.ctx.partitions_being_reassigned):
            assignment = self.ctx.partition_full_replica_assignment(tp)
            if self.is_reassignment_complete(tp, assignment):
                result += self.on_partition_reassignment(tp, assignment.target_replicas)
        return result

    def on_partition_reassignment(
        self, tp: TopicPartition, target: Iterable[int]
    ) -> ControllerResult:
        """Kafka's ``onPartitionReassignment`` (RS = replicas, ORS = original, TRS = target,
        AR = adding = TRS - ORS, RR = removing = ORS - TRS):

        Until every TRS replica is in the ISR: A1 assignment := ORS + TRS with AR/RR, A2 bump
        the leader epoch and send LeaderAndIsr to ORS + TRS, A3 AR replicas -> NewReplica (they
        start fetching). Once TRS is in the ISR: B1 AR -> OnlineReplica, B2/B3 assignment := TRS
        and a leader from TRS (re-elected if the leader is not in TRS or dead, else epoch bump),
        B4 RR replicas -> Offline -> deleted, B5 write the assignment, B6 drop the request from
        ``/admin/reassign_partitions``, B7 UpdateMetadata to every broker."""
        ctx = self.ctx
        target = tuple(target)
        current = ctx.partition_full_replica_assignment(tp)
        reassignment = reassign_to(current, target)
        ctx.partitions_being_reassigned.add(tp)
        result = ControllerResult()
        unneeded = [r for r in current.replicas if r not in reassignment.replicas]
        if unneeded:
            # Kafka's updateCurrentReassignment: a new target, or a cancellation, drops replicas
            # the previous reassignment was adding; they are stopped and deleted now. Unlike
            # Kafka, the leader epoch is bumped first (LeaderAndIsr to the replicas that stay),
            # so the replicas that stay learn the new replica set before the dropped ones stop.
            ctx.update_partition_full_replica_assignment(tp, reassignment)
            result.writes.append(self._topic_assignment_write(tp.topic))
            result += self._update_leader_epoch_and_send_request(tp, reassignment.replicas)
            result += self._stop_removed_replicas(tp, unneeded)
            result += self._elect_if_leaderless(tp)
            current = reassignment
        if self.is_reassignment_complete(tp, reassignment):
            result += self._complete_reassignment(tp, reassignment)
            return result
        if current != reassignment:
            ctx.update_partition_full_replica_assignment(tp, reassignment)
            result.writes.append(self._topic_assignment_write(tp.topic))
        result += self._update_leader_epoch_and_send_request(tp, reassignment.replicas)
        adding = [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas]
        result += self.rsm.handle_state_changes(
            [
                r
                for r in adding
                if is_valid_replica_transition(self.rsm.replica_state(r), NEW_REPLICA)
            ],
            NEW_REPLICA,
        )
        return result

    def _complete_reassignment(
        self, tp: TopicPartition, reassignment: ReplicaAssignment
    ) -> ControllerResult:
        ctx = self.ctx
        target = reassignment.target_replicas
        adding = [PartitionAndReplica(tp, r) for r in reassignment.adding_replicas]
        result = self.rsm.handle_state_changes(
            [
                r
                for r in adding
                if is_valid_replica_transition(self.rsm.replica_state(r), ONLINE_REPLICA)
            ],
            ONLINE_REPLICA,
        )
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment(target))
        info = ctx.partition_leadership_info.get(tp)
        if info is not None:
            leader = info.leader_and_isr.leader
            if leader not in target or not ctx.is_replica_online(leader, tp):
                if self.psm.partition_state(tp) in (ONLINE_PARTITION, OFFLINE_PARTITION):
                    result += self.psm.handle_state_changes(
                        [tp], ONLINE_PARTITION, ReassignPartitionLeaderElectionStrategy()
                    )
            else:
                result += self._update_leader_epoch_and_send_request(tp, target)
        result += self._stop_removed_replicas(tp, reassignment.removing_replicas)
        result.writes.append(self._topic_assignment_write(tp.topic))
        ctx.partitions_being_reassigned.discard(tp)
        if ctx.zk_reassignments.pop(tp, None) is not None:
            result.writes.append(UpdateReassignPartitions(dict(ctx.zk_reassignments)))
        result += self.update_metadata(ctx.live_or_shutting_down_broker_ids, [tp])
        if ctx.is_topic_queued_up_for_deletion(tp.topic) and not any(
            p.topic == tp.topic for p in ctx.partitions_being_reassigned
        ):
            result += self.topic_deletion_manager.resume_deletion_for_topics([tp.topic])
        return result

    def _stop_removed_replicas(
        self, tp: TopicPartition, replicas: Iterable[int]
    ) -> ControllerResult:
        """Kafka's ``stopRemovedReplicasOfReassignedPartition``: the replicas go Offline (out of
        the ISR, StopReplica), then through deletion to NonExistent."""
        removed = [PartitionAndReplica(tp, r) for r in replicas]
        result = ControllerResult()
        for state in (
            OFFLINE_REPLICA,
            REPLICA_DELETION_STARTED,
            REPLICA_DELETION_SUCCESSFUL,
            NON_EXISTENT_REPLICA,
        ):
            result += self.rsm.handle_state_changes(
                [
                    r
                    for r in removed
                    if is_valid_replica_transition(self.rsm.replica_state(r), state)
                ],
                state,
            )
        return result

    def _elect_if_leaderless(self, tp: TopicPartition) -> ControllerResult:
        """A stopped replica may have been the leader (an adding replica elected while the
        original ones were down): elect one of the remaining replicas, as for an offline
        partition, rather than leave the partition leaderless until the next broker change."""
        info = self.ctx.partition_leadership_info.get(tp)
        if (
            info is None
            or self.ctx.is_replica_online(info.leader_and_isr.leader, tp)
            or self.psm.partition_state(tp) not in (ONLINE_PARTITION, OFFLINE_PARTITION)
        ):
            return ControllerResult()
        return self.psm.handle_state_changes(
            [tp], ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(allow_unclean=False)
        )

    # -- the reassignment APIs (AlterPartitionReassignments, ListPartitionReassignments) -------

    def process_api_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, Iterable[int] | None]
    ) -> tuple[ControllerResult, dict[TopicPartition, tuple[ErrorCode, str | None]]]:
        """Kafka's ``processApiPartitionReassignment``: per partition, a target replica list
        (start or replace a reassignment) or None (cancel: back to the original replicas).

        Answers: INVALID_REPLICA_ASSIGNMENT for an empty list, duplicates, a negative id or
        added replicas on brokers that are not live; NO_REASSIGNMENT_IN_PROGRESS for a cancel
        of a partition not being reassigned; UNKNOWN_TOPIC_OR_PARTITION for an unknown
        partition or a topic being deleted; NONE once the reassignment is started. The API
        takes precedence over ``/admin/reassign_partitions``: its partitions are removed from
        that node."""
        ctx = self.ctx
        answers: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        targets: dict[TopicPartition, tuple[int, ...]] = {}
        for tp, replicas in reassignments.items():
            current = ctx.partition_full_replica_assignment(tp)
            if replicas is not None:
                target = tuple(replicas)
                problem = self._invalid_reassignment_reason(current, target)
                if problem is not None:
                    answers[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
                    continue
                targets[tp] = target
            elif current.is_being_reassigned:
                targets[tp] = current.origin_replicas
            else:
                # Kafka's ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS): the default message.
                answers[tp] = (
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS.message,
                )
        result = ControllerResult()
        overridden = [tp for tp in targets if tp in ctx.zk_reassignments]
        for tp in overridden:
            del ctx.zk_reassignments[tp]
        if overridden:
            result.writes.append(UpdateReassignPartitions(dict(ctx.zk_reassignments)))
        for tp, target in targets.items():
            if ctx.is_topic_queued_up_for_deletion(
                tp.topic
            ) or not ctx.partition_replica_assignment(tp):
                answers[tp] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    "The partition does not exist.",
                )
                continue
            result += self.on_partition_reassignment(tp, target)
            answers[tp] = (ErrorCode.NONE, None)
        return result, answers

    def _invalid_reassignment_reason(
        self, current: ReplicaAssignment, target: tuple[int, ...]
    ) -> str | None:
        """Kafka's ``validateReplicas`` (its messages)."""
        if not target:
            return "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return (
                "Duplicate replica ids in partition reassignment replica list: "
                f"{_scala_seq(target)}"
            )
        if any(r < 0 for r in target):
            return f"Invalid broker id in replica list: {_scala_seq(target)}"
        adding = reassign_to(current, target).adding_replicas
        live = self.ctx.live_broker_ids
        if not set(adding) <= set(live):
            live_text = ", ".join(str(b) for b in sorted(live))
            return (
                f"Replica assignment has brokers that are not alive. Replica list: "
                f"{_scala_seq(adding)}, live broker list: Set({live_text})"
            )
        return None

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """Kafka's ``processListPartitionReassignments``: the assignments (replicas, adding,
        removing) of the given partitions (None: all) that are being reassigned."""
        ctx = self.ctx
        chosen = ctx.partitions_being_reassigned if partitions is None else partitions
        out = {}
        for tp in sorted(set(chosen)):
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                out[tp] = assignment
        return out

    def _topic_assignment_write(self, topic: str) -> SetTopicAssignment:
        ctx = self.ctx
        return SetTopicAssignment(
            topic,
            ctx.topic_ids.get(topic),
            {
                tp.partition: a
                for tp, a in ctx.partition_full_replica_assignment_for_topic(topic).items()
            },
        )

    def _update_leader_epoch_and_send_request(
        self, tp: TopicPartition, replicas: Iterable[int]
    ) -> ControllerResult:
        """Bump the leader epoch (same leader and ISR) and send LeaderAndIsr to ``replicas``, so
        they learn the new replica set (Kafka's ``updateLeaderEpochAndSendRequest``)."""
        ctx = self.ctx
        result = ControllerResult()
        info = ctx.partition_leadership_info.get(tp)
        if info is None or info.controller_epoch > ctx.epoch:
            result.failed[tp] = f"cannot bump the leader epoch of {tp}: no usable leadership"
            return result
        current = info.leader_and_isr
        bumped = LeaderIsrAndControllerEpoch(
            current.new_leader_and_isr(current.leader, current.isr).with_zk_version(
                current.zk_version + 1
            ),
            ctx.epoch,
        )
        result.writes.append(UpdatePartitionState(tp, bumped, current.zk_version))
        ctx.put_partition_leadership_info(tp, bumped)
        result.leadership[tp] = bumped.leader_and_isr
        batch = ControllerBrokerRequestBatch(self.controller_id, ctx)
        batch.add_leader_and_isr_request_for_brokers(
            replicas, tp, bumped, ctx.partition_full_replica_assignment(tp), is_new=False
        )
        result.requests.extend(batch.build_requests(ctx.epoch))
        return result


def reassign_to(current: ReplicaAssignment, target: Iterable[int]) -> ReplicaAssignment:
    """Kafka's ``ReplicaAssignment.reassignTo``: the full set is the target then the original
    replicas; adding = full - original, removing = full - target."""
    target = tuple(target)
    origin = current.origin_replicas if current.is_being_reassigned else current.replicas
    return ReplicaAssignment(
        tuple(dict.fromkeys(target + origin)),
        tuple(r for r in target if r not in origin),
        tuple(r for r in origin if r not in target),
    )


def _scala_seq(values: Iterable[int]) -> str:
    """How Kafka's messages print a Scala Seq/Set of broker ids."""
    return "List(" + ", ".join(str(v) for v in values) + ")"
