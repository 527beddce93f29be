"""AlterPartitionReassignments (key 45, v0): start, replace or cancel partition reassignments
(KIP-455).

As Kafka's ZooKeeper-mode ``KafkaApis.handleAlterPartitionReassignmentsRequest`` and
``KafkaController.processApiPartitionReassignment`` (the decision is
``ControllerCore.process_api_partition_reassignment``):

- The active controller answers; a broker that is not the controller forwards the request to it
  (controller_forwarding.py), or answers a top-level NOT_CONTROLLER with Kafka's message.
- Per partition, ``replicas`` is the target replica list, or null to cancel a reassignment in
  progress (back to the original replicas; replicas being added are stopped and deleted).
  Errors: INVALID_REPLICA_ASSIGNMENT (empty list, duplicate or negative ids, added replicas on
  brokers that are not alive), NO_REASSIGNMENT_IN_PROGRESS (cancel with nothing to cancel),
  UNKNOWN_TOPIC_OR_PARTITION (unknown partition, topic being deleted).
- NONE means the reassignment was started (its progress is ListPartitionReassignments'); the
  request does not wait for it to finish. A partition named twice counts once (the last entry,
  as Kafka's ``toMap``). A reassignment made here replaces one of the same partition in
  ``/admin/reassign_partitions``, which the controller rewrites without it.
- v1 (``allow_replication_factor_change``, KIP-860) is a KRaft-era version kafkalite does not
  advertise.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.apis.controller_forwarding import controller_is_active, forward_to_controller
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
async def handle_alter_partition_reassignments(ctx: RequestContext, request: Any) -> Any:
    if not controller_is_active(ctx):
        forwarded = await forward_to_controller(ctx, request, millis(request.timeout))
        if forwarded is not None:
            return forwarded
        return top_level_error(ctx, ErrorCode.NOT_CONTROLLER)
    reassignments: dict[TopicPartition, tuple[int, ...] | None] = {}
    for topic in request.topics:
        for p in topic.partitions:
            replicas = tuple(int(r) for r in p.replicas) if p.replicas is not None else None
            reassignments[TopicPartition(topic.name, p.partition_index)] = replicas
    try:
        answers = await ctx.services.controller.alter_partition_reassignments(reassignments)
    except KafkaError as e:  # NOT_CONTROLLER: the controller moved while the request waited
        return top_level_error(ctx, e.error_code)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in reassignments:
        error, message = answers[tp]
        by_topic.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": error, "error_message": message}
        )
    return ctx.response(
        throttle_time=0,
        error_code=ErrorCode.NONE,
        error_message=None,
        responses=[{"name": name, "partitions": parts} for name, parts in by_topic.items()],
    )


def top_level_error(ctx: RequestContext, error: ErrorCode) -> Any:
    """Kafka's ``ApiError(error)``: the code with its default message, no partitions."""
    return ctx.response(
        throttle_time=0, error_code=error, error_message=error.message, responses=[]
    )
