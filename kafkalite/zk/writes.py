"""The znode writes a controller decision makes, as data (applied by ``zk.client``).

Each names the znode it changes semantically; ``zk.client.apply_writes`` and
``apply_partition_state_writes`` translate them into store operations (Kafka's
``KafkaZkClient`` methods: ``createTopicPartitionStatesRaw``, ``updateLeaderAndIsr``,
``setTopicAssignmentRaw``, ``deleteTopicZNode``, ...), fenced by the controller epoch's version.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkalite.protocol.types import TopicPartition
from kafkalite.zk.types import LeaderIsrAndControllerEpoch, ReplicaAssignment


@dataclass(frozen=True, slots=True)
class CreatePartitionState:
    """Create ``/brokers/topics/<t>/partitions/<p>/state`` (and its missing parents)."""

    topic_partition: TopicPartition
    leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch


@dataclass(frozen=True, slots=True)
class UpdatePartitionState:
    """Compare-and-set ``/brokers/topics/<t>/partitions/<p>/state``.

    ``expected_version`` is the version read or written last; the node's version becomes
    ``expected_version + 1``.
    """

    topic_partition: TopicPartition
    leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch
    expected_version: int


@dataclass(frozen=True, slots=True)
class SetTopicAssignment:
    """Overwrite ``/brokers/topics/<t>`` with ``assignment`` (partition -> replicas)."""

    topic: str
    topic_id: str | None
    assignment: dict[int, ReplicaAssignment]


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    """Delete ``/brokers/topics/<t>`` recursively, then ``/config/topics/<t>`` and
    ``/admin/delete_topics/<t>`` (Kafka's ``completeDeleteTopic``)."""

    topic: str


@dataclass(frozen=True, slots=True)
class DeleteTopicDeletions:
    """Delete the ``/admin/delete_topics/<t>`` markers of ``topics``."""

    topics: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteIsrChangeNotifications:
    """Delete the processed ``/isr_change_notification/isr_change_<seq>`` nodes."""

    sequence_numbers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeleteLogDirEventNotifications:
    """Delete the processed ``/log_dir_event_notification/log_dir_event_<seq>`` nodes."""

    sequence_numbers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class UpdateReassignPartitions:
    """Rewrite ``/admin/reassign_partitions`` with the reassignments still to do; delete the
    node when none remain (Kafka's ``removePartitionsFromReassignedPartitions``)."""

    remaining: dict[TopicPartition, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class DeleteLeaderElectionRequest:
    """Delete a leader election request node (``/admin/preferred_replica_election`` or
    ``/admin/unclean_leader_election``) once its elections were made."""

    path: str


StoreWrite = (
    CreatePartitionState
    | UpdatePartitionState
    | SetTopicAssignment
    | DeleteTopic
    | DeleteTopicDeletions
    | DeleteIsrChangeNotifications
    | DeleteLogDirEventNotifications
    | UpdateReassignPartitions
    | DeleteLeaderElectionRequest
)
