"""ListPartitionReassignments (key 46, v0): the reassignments in progress (KIP-455).

As Kafka's ZooKeeper-mode ``KafkaApis.handleListPartitionReassignmentsRequest`` and
``KafkaController.processListPartitionReassignments``: the active controller lists, for the
named partitions (``topics`` null: every partition), those being reassigned with their full
replica set, the replicas being added and those being removed. Partitions not being reassigned
(or unknown) are left out; topics are grouped. Reassignments started through
``/admin/reassign_partitions`` are listed too. A broker that is not the controller forwards the
request to it (controller_forwarding.py), or answers a top-level NOT_CONTROLLER.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.apis.controller_forwarding import controller_is_active, forward_to_controller
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS)
async def handle_list_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    if not controller_is_active(ctx):
        forwarded = await forward_to_controller(ctx, request, millis(request.timeout))
        if forwarded is not None:
            return forwarded
        return top_level_error(ctx, ErrorCode.NOT_CONTROLLER)
    partitions = None
    if request.topics is not None:
        partitions = [
            TopicPartition(t.name, int(p)) for t in request.topics for p in t.partition_indexes
        ]
    try:
        ongoing = await ctx.services.controller.list_partition_reassignments(partitions)
    except KafkaError as e:  # NOT_CONTROLLER: the controller moved while the request waited
        return top_level_error(ctx, e.error_code)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp, assignment in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(
            {
                "partition_index": tp.partition,
                "replicas": list(assignment.replicas),
                "adding_replicas": list(assignment.adding_replicas),
                "removing_replicas": list(assignment.removing_replicas),
            }
        )
    return ctx.response(
        throttle_time=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        topics=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    )


def top_level_error(ctx: RequestContext, error: ErrorCode) -> Any:
    """Kafka's ``ApiError(error)``: the code with its default message, nothing listed."""
    return ctx.response(throttle_time=0, error_code=error, error_message=error.message, topics=[])
