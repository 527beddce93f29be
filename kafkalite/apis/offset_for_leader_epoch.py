"""OffsetForLeaderEpoch (key 23, v2-v4): the end offset of a leader epoch (KIP-101, KIP-320).

Followers use it to find their truncation point after a leader change; consumers (v3+,
replica_id -1) use it to detect log truncation. Per partition: (leader_epoch, end_offset) as the
leader's epoch cache answers, or an error code (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER, ...).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH)
def handle_offset_for_leader_epoch(ctx: RequestContext, request: Any) -> Any:
    rm = ctx.services.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            result = rm.last_offset_for_leader_epoch(
                TopicPartition(topic.topic, p.partition),
                getattr(p, "current_leader_epoch", -1),
                p.leader_epoch,
                replica_id=getattr(request, "replica_id", -2),
            )
            partitions.append(
                {
                    "error_code": result.error_code,
                    "partition": p.partition,
                    "leader_epoch": result.leader_epoch,
                    "end_offset": result.end_offset,
                }
            )
        topics.append({"topic": topic.topic, "partitions": partitions})
    return ctx.response(topics=topics, throttle_time=0)
