"""TxnOffsetCommit (key 28, v0-v3): a transactional producer commits a group's offsets inside
its transaction (``send_offsets_to_transaction``).

The group coordinator writes them to ``__consumer_offsets`` as a transactional batch of the
producer (the partition's producer state fences an older epoch: PRODUCER_FENCED) and keeps them
pending: OffsetFetch does not see them (require_stable: UNSTABLE_OFFSET_COMMIT) until the
transaction's COMMIT marker reaches that partition; an ABORT marker drops them. v3 carries the
member id, generation and group.instance.id (KIP-447), checked as OffsetCommit checks them.
Partitions of unknown topics are answered UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.group import OffsetAndMetadata
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.TXN_OFFSET_COMMIT)
async def handle_txn_offset_commit(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    coordinator = services.group_coordinator
    cache = services.metadata_cache
    results: dict[TopicPartition, ErrorCode] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    order: list[TopicPartition] = []
    now_ms = coordinator.time.milliseconds() if coordinator is not None else -1
    for topic in request.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            order.append(tp)
            if coordinator is None:
                results[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            elif not cache.contains_partition(topic.name, p.partition_index):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = OffsetAndMetadata.from_request(
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                    now_ms,
                    -1,
                    -1,
                )
    if offsets:
        results.update(
            await coordinator.commit_transactional_offsets(
                request.group_id,
                request.producer_id,
                request.producer_epoch,
                getattr(request, "member_id", ""),
                getattr(request, "group_instance_id", None),
                getattr(request, "generation_id", -1),
                offsets,
            )
        )
    if ctx.api_version < 2:
        results = {
            tp: ErrorCode.INVALID_PRODUCER_EPOCH if e is ErrorCode.PRODUCER_FENCED else e
            for tp, e in results.items()
        }
    topics: dict[str, list[dict[str, Any]]] = {}
    for tp in order:
        topics.setdefault(tp.topic, []).append(
            {"partition_index": tp.partition, "error_code": results.get(tp, ErrorCode.NONE)}
        )
    return ctx.response(topics=[{"name": n, "partitions": ps} for n, ps in topics.items()])
