"""ControllerContext: the active controller's in-memory picture of the cluster.

Loaded once from the coordination store when a broker wins the controller election
(``KafkaController._initialize_controller_context``), then kept current by the controller's
single event-processing task; nothing else reads or writes it, so it has no locks (CONTRIBUTING.md,
convention 3). It mirrors Kafka's ``kafka.controller.ControllerContext``:

- live brokers (``Broker``: id, endpoints, rack) with their broker epochs (the czxid of the
  ``/brokers/ids/<id>`` registration, so a bounced broker is told apart from a live one);
- brokers in controlled shutdown (``shutting_down_broker_ids``): still registered, no longer
  eligible as leaders;
- topics, topic ids, and the replica assignment of every partition (``ReplicaAssignment``:
  replicas in preference order, the first is the preferred leader; adding/removing replicas
  while a reassignment is in flight);
- the leadership of every partition that has one (``LeaderIsrAndControllerEpoch``: leader,
  leader epoch, ISR, the version of the partition state node it was read from or written to,
  and the epoch of the controller that wrote it);
- the partition and replica state machines' states (keys: ``TopicPartition`` and
  ``PartitionAndReplica``; values: ``PartitionState`` / ``ReplicaState``);
- topic deletion bookkeeping (queued, started, ineligible).

Invariants the code keeps:
- ``partition_leadership_info`` only holds partitions that have an assignment;
- the ``zk_version`` of a ``LeaderAndIsr`` is the version its partition state node had when the
  controller last read or wrote it: it is the compare-and-set token for the next write;
- a partition's leader is either ``NO_LEADER`` / ``LEADER_DURING_DELETE`` or one of its
  assigned replicas.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import (
    INITIAL_CONTROLLER_EPOCH,
    Broker,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)

if TYPE_CHECKING:
    from .partition_state_machine import PartitionState
    from .replica_state_machine import ReplicaState

NO_EPOCH = -1
EPOCH_DURING_DELETE = -2
"""StopReplica's leader epoch sentinel for a topic queued for deletion: overrides any epoch."""
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


class PartitionAndReplica(NamedTuple):
    """One replica of one partition: the unit of the replica state machine."""

    topic_partition: TopicPartition
    replica: int

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    def __str__(self) -> str:
        return f"[{self.topic_partition}, replica {self.replica}]"


@dataclass
class ControllerContext:
    """See the module docstring. Not safe to share between tasks: one owner, the event loop task."""

    epoch: int = INITIAL_CONTROLLER_EPOCH
    epoch_zk_version: int = INITIAL_CONTROLLER_EPOCH_ZK_VERSION

    live_brokers: dict[int, Broker] = field(default_factory=dict)
    live_broker_epochs: dict[int, int] = field(default_factory=dict)
    shutting_down_broker_ids: set[int] = field(default_factory=set)
    replicas_on_offline_dirs: dict[int, set[TopicPartition]] = field(default_factory=dict)

    all_topics: set[str] = field(default_factory=set)
    topic_ids: dict[str, str] = field(default_factory=dict)
    """topic -> topic id (base64url, as Kafka writes it in /brokers/topics/<topic>)."""
    partition_assignments: dict[str, dict[int, ReplicaAssignment]] = field(default_factory=dict)
    partition_leadership_info: dict[TopicPartition, LeaderIsrAndControllerEpoch] = field(
        default_factory=dict
    )
    partitions_being_reassigned: set[TopicPartition] = field(default_factory=set)
    zk_reassignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    """What ``/admin/reassign_partitions`` asks for and is not finished yet."""

    partition_states: dict[TopicPartition, PartitionState] = field(default_factory=dict)
    replica_states: dict[PartitionAndReplica, ReplicaState] = field(default_factory=dict)

    topics_to_be_deleted: set[str] = field(default_factory=set)
    topics_with_deletion_started: set[str] = field(default_factory=set)
    topics_ineligible_for_deletion: set[str] = field(default_factory=set)

    unclean_leader_election_topics: set[str] = field(default_factory=set)
    """Topics whose config (or the broker default) enables unclean leader election."""

    # -- brokers --

    @property
    def live_broker_ids(self) -> set[int]:
        """Registered brokers that are not shutting down: the ones eligible as leaders."""
        return set(self.live_broker_epochs) - self.shutting_down_broker_ids

    @property
    def live_or_shutting_down_broker_ids(self) -> set[int]:
        return set(self.live_broker_epochs)

    @property
    def live_or_shutting_down_brokers(self) -> list[Broker]:
        return [self.live_brokers[i] for i in sorted(self.live_brokers)]

    def add_live_brokers(
        self, brokers_and_epochs: dict[Broker, int] | Iterable[tuple[Broker, int]]
    ) -> None:
        items = (
            brokers_and_epochs.items()
            if isinstance(brokers_and_epochs, dict)
            else brokers_and_epochs
        )
        for broker, broker_epoch in items:
            self.live_brokers[broker.id] = broker
            self.live_broker_epochs[broker.id] = broker_epoch

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self.live_brokers.pop(broker_id, None)
            self.live_broker_epochs.pop(broker_id, None)

    def set_live_brokers(self, brokers_and_epochs: dict[Broker, int]) -> None:
        self.live_brokers.clear()
        self.live_broker_epochs.clear()
        self.add_live_brokers(brokers_and_epochs)

    def is_replica_online(
        self,
        broker_id: int,
        topic_partition: TopicPartition,
        include_shutting_down_brokers: bool = False,
    ) -> bool:
        """Kafka's ``isReplicaOnline``: the broker is live and the replica's log dir is not offline."""
        if broker_id not in self.live_broker_epochs or (
            not include_shutting_down_brokers and broker_id in self.shutting_down_broker_ids
        ):
            return False
        offline_dirs = self.replicas_on_offline_dirs
        return not offline_dirs or topic_partition not in offline_dirs.get(broker_id, ())

    # -- topics and assignments --

    def partition_replica_assignment(self, topic_partition: TopicPartition) -> tuple[int, ...]:
        """The assigned replicas, or () for an unknown partition."""
        assignment = self.partition_assignments.get(topic_partition.topic, {}).get(
            topic_partition.partition
        )
        return assignment.replicas if assignment is not None else ()

    def partition_full_replica_assignment(
        self, topic_partition: TopicPartition
    ) -> ReplicaAssignment:
        assignment = self.partition_assignments.get(topic_partition.topic, {}).get(
            topic_partition.partition
        )
        return assignment if assignment is not None else ReplicaAssignment(())

    def update_partition_full_replica_assignment(
        self, topic_partition: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        self.partition_assignments.setdefault(topic_partition.topic, {})[
            topic_partition.partition
        ] = assignment

    def partition_full_replica_assignment_for_topic(
        self, topic: str
    ) -> dict[TopicPartition, ReplicaAssignment]:
        return {
            TopicPartition(topic, p): a
            for p, a in sorted(self.partition_assignments.get(topic, {}).items())
        }

    def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self.partition_assignments.get(topic, {}))]

    def all_partitions(self) -> list[TopicPartition]:
        return [
            TopicPartition(topic, p)
            for topic in sorted(self.partition_assignments)
            for p in sorted(self.partition_assignments[topic])
        ]

    def partition_count(self, topic: str) -> int:
        return len(self.partition_assignments.get(topic, {}))

    def replicas_for_partition(
        self, partitions: Iterable[TopicPartition]
    ) -> list[PartitionAndReplica]:
        return [
            PartitionAndReplica(tp, replica)
            for tp in partitions
            for replica in self.partition_replica_assignment(tp)
        ]

    def replicas_for_topic(self, topic: str) -> list[PartitionAndReplica]:
        return self.replicas_for_partition(self.partitions_for_topic(topic))

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> list[PartitionAndReplica]:
        wanted = set(broker_ids)
        return [
            PartitionAndReplica(tp, replica)
            for tp in self.all_partitions()
            for replica in self.partition_replica_assignment(tp)
            if replica in wanted
        ]

    def partitions_on_broker(self, broker_id: int) -> list[TopicPartition]:
        return [
            tp for tp in self.all_partitions() if broker_id in self.partition_replica_assignment(tp)
        ]

    def all_live_replicas(self) -> list[PartitionAndReplica]:
        return [
            r
            for r in self.replicas_on_brokers(self.live_broker_ids)
            if self.is_replica_online(r.replica, r.topic_partition)
        ]

    def online_and_offline_replicas(
        self,
    ) -> tuple[list[PartitionAndReplica], list[PartitionAndReplica]]:
        online: list[PartitionAndReplica] = []
        offline: list[PartitionAndReplica] = []
        # is_replica_online inlined: one pass over every replica at a failover
        live = self.live_broker_epochs
        shutting_down = self.shutting_down_broker_ids
        offline_dirs = self.replicas_on_offline_dirs
        assignments = self.partition_assignments
        for topic in sorted(assignments):
            partitions = assignments[topic]
            for p in sorted(partitions):
                tp = TopicPartition(topic, p)
                for replica in partitions[p].replicas:
                    is_online = (
                        replica in live
                        and replica not in shutting_down
                        and (not offline_dirs or tp not in offline_dirs.get(replica, ()))
                    )
                    (online if is_online else offline).append(PartitionAndReplica(tp, replica))
        return online, offline

    def set_all_topics(self, topics: Iterable[str]) -> None:
        self.all_topics = set(topics)

    def remove_topic(self, topic: str) -> None:
        """Forget every trace of ``topic`` (after its deletion completed, or when it vanished)."""
        for tp in self.partitions_for_topic(topic):
            self.partition_leadership_info.pop(tp, None)
            self.partition_states.pop(tp, None)
            self.partitions_being_reassigned.discard(tp)
            self.zk_reassignments.pop(tp, None)
        for pr in [pr for pr in self.replica_states if pr.topic == topic]:
            del self.replica_states[pr]
        self.partition_assignments.pop(topic, None)
        self.all_topics.discard(topic)
        self.topic_ids.pop(topic, None)
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.unclean_leader_election_topics.discard(topic)

    # -- leadership --

    def put_partition_leadership_info(
        self,
        topic_partition: TopicPartition,
        leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch,
    ) -> None:
        self.partition_leadership_info[topic_partition] = leader_isr_and_controller_epoch

    def partition_leader(self, topic_partition: TopicPartition) -> int | None:
        info = self.partition_leadership_info.get(topic_partition)
        return info.leader_and_isr.leader if info is not None else None

    def partitions_with_leaders(self) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if tp in self.partition_leadership_info]

    def partitions_with_offline_leader(self) -> list[TopicPartition]:
        """Partitions whose leader is not online, except topics queued for deletion."""
        return [
            tp
            for tp, info in sorted(self.partition_leadership_info.items())
            if not self.is_replica_online(info.leader_and_isr.leader, tp)
            and not self.is_topic_queued_up_for_deletion(tp.topic)
        ]

    def is_unclean_leader_election_enabled(self, topic: str) -> bool:
        return topic in self.unclean_leader_election_topics

    # -- states --

    def replicas_in_state(self, topic: str, state: ReplicaState) -> list[PartitionAndReplica]:
        return sorted(
            pr for pr, s in self.replica_states.items() if pr.topic == topic and s is state
        )

    def is_any_replica_in_state(self, topic: str, state: ReplicaState) -> bool:
        return any(pr.topic == topic and s is state for pr, s in self.replica_states.items())

    def are_all_replicas_in_state(self, topic: str, state: ReplicaState) -> bool:
        return all(self.replica_states.get(pr) is state for pr in self.replicas_for_topic(topic))

    def partitions_in_state(self, state: PartitionState) -> list[TopicPartition]:
        return sorted(tp for tp, s in self.partition_states.items() if s is state)

    # -- topic deletion --

    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_to_be_deleted.update(topics)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_with_deletion_started.update(topics)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_started(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    # -- whole-context --

    def reset(self) -> None:
        """Forget everything (controller resignation)."""
        fresh = ControllerContext()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))
