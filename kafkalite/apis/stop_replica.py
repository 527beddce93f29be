"""StopReplica (key 5, v2-v4): stop replicas; with delete_partition also delete their logs.

v2 lists partitions per topic with one delete flag for the whole request; v3+ carry a leader
epoch and a delete flag per partition. Applied by the ReplicaManager (`stop_replicas_async`:
in slices that yield to the event loop, deleted logs removed in a worker thread; the answer's
entities are made in slices too).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.leader_and_isr import answer_partition_errors, element_class
from kafkalite.broker.replica_manager import LEADER_AND_ISR_SLICE, LEADER_AND_ISR_SLICE_SECONDS
from kafkalite.broker.types import StopReplicaPartitionState, StopReplicaResult
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition
from kafkalite.storage.loop_slices import LoopSlices
from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME


@handles(ApiKey.STOP_REPLICA)
async def handle_stop_replica(ctx: RequestContext, request: Any) -> Any:
    states: list[StopReplicaPartitionState] = []
    if ctx.api_version < 3:
        delete = request.delete_partitions
        for topic in request.topics:
            for index in topic.partition_indexes:
                states.append(StopReplicaPartitionState(topic.name, index, -1, delete))
    else:
        for topic in request.topic_states:
            for p in topic.partition_states:
                states.append(
                    StopReplicaPartitionState(
                        topic.topic_name, p.partition_index, p.leader_epoch, p.delete_partition
                    )
                )
    if ctx.broker_epoch_is_stale(request):
        stale = ErrorCode.STALE_BROKER_EPOCH
        result = StopReplicaResult(
            stale, {TopicPartition(s.topic, s.partition): stale for s in states}
        )
    else:
        result = await ctx.services.replica_manager.stop_replicas_async(
            request.controller_id, request.controller_epoch, states
        )
    if ctx.services.group_coordinator is not None and result.error_code == 0:
        _notify_group_coordinator(ctx.services.group_coordinator, states, result.partition_errors)
    share = ctx.services.extra.get("share_groups")
    if share is not None and result.error_code == 0:
        share.on_partitions_deleted(
            TopicPartition(s.topic, s.partition)
            for s in states
            if s.delete_partition
            and result.partition_errors.get(TopicPartition(s.topic, s.partition), 0) == 0
        )
    if ctx.services.txn_coordinator is not None and result.error_code == 0:
        for s in states:
            if (
                s.topic == TRANSACTION_STATE_TOPIC_NAME
                and result.partition_errors.get(TopicPartition(s.topic, s.partition), 0) == 0
            ):
                ctx.services.txn_coordinator.on_resignation(
                    s.partition, s.leader_epoch if s.leader_epoch >= 0 else None
                )
    # The answer's entities made directly and in slices (a StopReplica of a deleted topic
    # names every partition of it).
    error_class = element_class(ctx.response_class, "partition_errors")
    slices = LoopSlices(LEADER_AND_ISR_SLICE, LEADER_AND_ISR_SLICE_SECONDS)
    answered = await answer_partition_errors(error_class, states, result.partition_errors, slices)
    return ctx.response(error_code=result.error_code, partition_errors=answered)


def _notify_group_coordinator(coordinator: Any, states: list, errors: dict) -> None:
    """As Kafka's handleStopReplicaRequest: a deleted ``__consumer_offsets`` partition resigns
    its groups; deleted partitions of other topics lose their committed offsets."""
    deleted = []
    for s in states:
        tp = TopicPartition(s.topic, s.partition)
        if not s.delete_partition or errors.get(tp, 0) != 0:
            continue
        if s.topic == GROUP_METADATA_TOPIC_NAME:
            coordinator.on_resignation(s.partition, s.leader_epoch if s.leader_epoch >= 0 else None)
        else:
            deleted.append(tp)
    if deleted:
        coordinator.on_deleted_partitions(deleted)
