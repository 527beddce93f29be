"""OffsetCommit (key 8, v2-v9): store committed offsets (with their metadata strings) for a group.

Each partition becomes an ``OffsetAndMetadata`` (v2-v4: an explicit ``retention_time`` sets the
expire timestamp; v6+ carry the committed leader epoch; v7+ ``group.instance.id``). As in
Kafka's handler, partitions of topics the broker does not know are answered
UNKNOWN_TOPIC_OR_PARTITION and not committed; the rest go to the coordinator, which checks the
member and generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS; generation
-1 with an empty member id is a simple/admin commit, allowed only for groups without members),
the metadata size (OFFSET_METADATA_TOO_LARGE above offset.metadata.max.bytes) and writes them to
``__consumer_offsets`` before answering. For a consumer group (KIP-848) the generation is the
member epoch (v9+; STALE_MEMBER_EPOCH when it is not current, UNSUPPORTED_VERSION for a member
committing below v9).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.group import OffsetAndMetadata
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.OFFSET_COMMIT)
async def handle_offset_commit(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    coordinator = services.group_coordinator
    cache = services.metadata_cache
    now_ms = coordinator.time.milliseconds()
    retention_ms = -1
    if 2 <= ctx.api_version <= 4:
        retention_ms = millis(request.retention_time)
    results: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    order: list[TopicPartition] = []
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            order.append(tp)
            if not cache.contains_partition(topic.name, p.partition_index):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets[tp] = OffsetAndMetadata.from_request(
                p.committed_offset,
                getattr(p, "committed_leader_epoch", -1),
                p.committed_metadata,
                now_ms,
                -1,
                retention_ms,
            )
    if offsets:
        results.update(
            await coordinator.commit_offsets(
                request.group_id,
                request.member_id,
                getattr(request, "group_instance_id", None),
                request.generation_id_or_member_epoch,
                offsets,
                ctx.api_version,
            )
        )
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": results.get(tp, ErrorCode.NONE)}
        )
    return ctx.response(topics=[{"name": n, "partitions": ps} for n, ps in topics.items()])
