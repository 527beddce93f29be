"""OffsetFetch (key 9, v1-v9): a group's committed offsets, with leader epoch (v5+) and the
metadata string exactly as committed.

v1 names the partitions; v2+ may ask for every partition the group committed (``topics`` null)
and carry a group-level error code (v1 has none: a group-level error is put on every requested
partition, as Kafka's response builder does for old versions). v7+ may require stable offsets
(UNSTABLE_OFFSET_COMMIT while transactional commits are pending). v8+ ask for several groups in
one request and get one entry per group; v9+ may name a consumer group member and its epoch
(STALE_MEMBER_EPOCH / UNKNOWN_MEMBER_ID when they are not current; -1 for admin clients). A partition without a committed offset is answered
with offset -1 and no error.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


def fetch_group(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    require_stable: bool,
    member_id: str | None = None,
    member_epoch: int = -1,
) -> tuple[ErrorCode, list[dict[str, Any]]]:
    """One group's answer: (group error, topics entries)."""
    requested = None
    if topics is not None:
        requested = [TopicPartition(t.name, p) for t in topics for p in t.partition_indexes]
    error, offsets = ctx.services.group_coordinator.fetch_offsets(
        group_id, requested, require_stable, member_id, member_epoch
    )
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for tp in requested if requested is not None else sorted(offsets):
        data = offsets.get(tp)
        entry: dict[str, Any] = {"partition_index": tp.partition}
        if data is None:
            entry.update(committed_offset=-1, committed_leader_epoch=-1, metadata="")
            entry["error_code"] = error if ctx.api_version < 2 else ErrorCode.NONE
        else:
            entry.update(
                committed_offset=data.offset,
                committed_leader_epoch=data.leader_epoch,
                metadata=data.metadata,
                error_code=data.error,
            )
            if ctx.api_version < 2 and error is not ErrorCode.NONE:
                entry["error_code"] = error
        by_topic.setdefault(tp.topic, []).append(entry)
    if error is not ErrorCode.NONE and ctx.api_version >= 2:
        by_topic = {}  # Kafka answers a group-level error with no partitions
    return error, [{"name": n, "partitions": ps} for n, ps in by_topic.items()]


@handles(ApiKey.OFFSET_FETCH)
def handle_offset_fetch(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 8:
        groups = []
        for group in request.groups:
            error, topics = fetch_group(
                ctx,
                group.group_id,
                group.topics,
                request.require_stable,
                getattr(group, "member_id", None),
                getattr(group, "member_epoch", -1),
            )
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return ctx.response(groups=groups)
    error, topics = fetch_group(
        ctx, request.group_id, request.topics, getattr(request, "require_stable", False)
    )
    return ctx.response(topics=topics, error_code=error)
