"""DeleteRecords (key 21, v0-v2): move partitions' log start offsets forward.

offset -1 means "up to the high watermark". Each partition's new low watermark or an error code
(OFFSET_OUT_OF_RANGE beyond the HW, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ...).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.DELETE_RECORDS)
async def handle_delete_records(ctx: RequestContext, request: Any) -> Any:
    offsets = {
        TopicPartition(t.name, p.partition_index): p.offset
        for t in request.topics
        for p in t.partitions
    }
    results = await ctx.services.replica_manager.delete_records(millis(request.timeout), offsets)
    topics = []
    for t in request.topics:
        partitions = []
        for p in t.partitions:
            r = results[TopicPartition(t.name, p.partition_index)]
            partitions.append(
                {
                    "partition_index": p.partition_index,
                    "low_watermark": r.low_watermark,
                    "error_code": r.error_code,
                }
            )
        topics.append({"name": t.name, "partitions": partitions})
    return ctx.response(topics=topics, throttle_time=0)
