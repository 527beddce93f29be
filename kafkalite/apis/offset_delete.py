"""OffsetDelete (key 47, v0): delete a group's committed offsets for some partitions (KIP-496).

Allowed for an empty group, or for partitions of topics the group's consumers are no longer
subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise); GROUP_ID_NOT_FOUND for an unknown group,
NON_EMPTY_GROUP for a group not using the consumer protocol. Partitions of unknown topics are
UNKNOWN_TOPIC_OR_PARTITION (Kafka's handler filters them before the coordinator). A group-level
error is answered without partitions, as Kafka does.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.OFFSET_DELETE)
async def handle_offset_delete(ctx: RequestContext, request: Any) -> Any:
    cache = ctx.services.metadata_cache
    results: dict[TopicPartition, ErrorCode] = {}
    known: list[TopicPartition] = []
    order: list[TopicPartition] = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            order.append(tp)
            if cache.contains_partition(tp.topic, tp.partition):
                known.append(tp)
            else:
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    result = await ctx.services.group_coordinator.delete_offsets(request.group_id, known)
    if result.error is not ErrorCode.NONE:
        return ctx.response(error_code=result.error)
    results.update(result.partitions)
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": results.get(tp, ErrorCode.NONE)}
        )
    return ctx.response(
        error_code=ErrorCode.NONE,
        topics=[{"name": n, "partitions": ps} for n, ps in topics.items()],
    )
