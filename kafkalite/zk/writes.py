"""The znode writes a controller decision makes, as data (applied by ``zk.client``).

Each names the znode it changes semantically; ``zk.client.apply_writes`` and
``apply_partition_state_writes`` translate them into store operations (Kafka's
``KafkaZkClient`` methods: ``createTopicPartitionStatesRaw``, ``updateLeaderAndIsr``,
``setTopicAssignmentRaw``, ``deleteTopicZNode``, ...), fenced by the controller epoch's version.

One write is made here directly, because partition leaders (not the controller) make it:
``update_leader_and_isr_batch``, the ISR changes of many partitions and ONE ISR change
notification in one multi (Kafka's leaders batch their notifications, ``isrChangeSet``; the
controller then reads one notification, not one per partition).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kafkalite.coord.base import CoordSession, CreateOp, Op, SetDataOp, SetDataResult
from kafkalite.coord.errors import BadVersion, NoNode
from kafkalite.protocol.types import TopicPartition
from kafkalite.zk import data as paths
from kafkalite.zk.types import LeaderIsrAndControllerEpoch, ReplicaAssignment

ISR_BATCH_MAX_PARTITIONS = 500
"""Partitions per ISR multi: each operation is about 150 bytes of a request ZooKeeper caps at
1 MiB (``jute.maxbuffer``), with the notification naming them all."""


async def update_leader_and_isr_batch(
    session: CoordSession, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch]
) -> dict[TopicPartition, int] | None:
    """Partition leaders' ISR changes, all or none: one multi that compare-and-sets each
    partition state node on ``state.leader_and_isr.zk_version`` and creates one
    ``/isr_change_notification/isr_change_<seq>`` naming them all.

    Returns each node's new version; None when a compare-and-set failed (a node moved on or is
    gone): then nothing was written, and the caller writes each partition alone
    (``zk.client.update_leader_and_isr``, which tells which one lost and recognises a write of
    its own whose answer was lost). At most ``ISR_BATCH_MAX_PARTITIONS`` partitions; other
    store errors propagate."""
    if not states:
        return {}
    if len(states) > ISR_BATCH_MAX_PARTITIONS:
        raise ValueError(f"at most {ISR_BATCH_MAX_PARTITIONS} partitions per ISR batch")
    order = list(states)
    ops: list[Op] = [
        SetDataOp(
            paths.partition_state_path(tp.topic, tp.partition),
            paths.encode_partition_state(states[tp]),
            states[tp].leader_and_isr.zk_version,
        )
        for tp in order
    ]
    ops.append(
        CreateOp(paths.isr_change_sequence_path(), paths.encode_isr_change(order), sequential=True)
    )
    await session.ensure_path(paths.ISR_CHANGE_NOTIFICATION)
    try:
        results = await session.multi(ops)
    except (BadVersion, NoNode):
        return None
    versions: dict[TopicPartition, int] = {}
    for tp, result in zip(order, results, strict=False):
        assert isinstance(result, SetDataResult)
        versions[tp] = result.stat.version
    return versions


@dataclass(frozen=True, slots=True)
class CreatePartitionState:
    """Create ``/brokers/topics/<t>/partitions/<p>/state`` (and its missing parents)."""

    topic_partition: TopicPartition
    leader_isr_and_controller_epoch: LeaderIsrAndControllerEpoch


@dataclass(slots=True, unsafe_hash=True)  # never assigned; not frozen for a cheaper __init__
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
