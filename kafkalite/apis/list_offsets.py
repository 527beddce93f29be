"""ListOffsets (key 2, v1-v9): offset by timestamp; -2 earliest, -1 latest, -3 max timestamp,

Per partition the ReplicaManager answers (leader only unless replica_id is the debugging
consumer -2); unknown partitions and leadership errors come back as error codes.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.broker.types import IsolationLevel
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.LIST_OFFSETS)
def handle_list_offsets(ctx: RequestContext, request: Any) -> Any:
    rm = ctx.services.replica_manager
    isolation = IsolationLevel(getattr(request, "isolation_level", 0))
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            result = rm.list_offset(
                TopicPartition(topic.name, p.partition_index),
                p.timestamp,
                isolation_level=isolation,
                current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                replica_id=request.replica_id,
            )
            partitions.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": result.error_code,
                    "timestamp": result.timestamp,
                    "offset": result.offset,
                    "leader_epoch": result.leader_epoch,
                }
            )
        topics.append({"name": topic.name, "partitions": partitions})
    return ctx.response(topics=topics, throttle_time=0)
