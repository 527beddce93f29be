"""WriteTxnMarkers (key 27, v1): the inter-broker request a transaction coordinator sends to
partition leaders to end a transaction there (kafkalite/txn/markers.py does the writing)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.types import TopicPartition
from kafkalite.txn.markers import TxnMarker, append_txn_markers


def offsets_txn_completion(services: Any):
    groups = services.group_coordinator
    if groups is None:
        return None
    return groups.complete_transaction


@handles(ApiKey.WRITE_TXN_MARKERS)
async def handle_write_txn_markers(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    markers = [
        TxnMarker(
            m.producer_id,
            m.producer_epoch,
            bool(m.transaction_result),
            m.coordinator_epoch,
            tuple(TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes),
        )
        for m in request.markers
    ]
    timeout = (
        services.txn_coordinator.config.request_timeout_ms if services.txn_coordinator else 30000
    )
    results = await append_txn_markers(
        services.replica_manager, markers, timeout, offsets_txn_completion(services)
    )
    out = []
    for marker, errors in zip(markers, results, strict=True):
        by_topic: dict[str, list[dict]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(
                {"partition_index": tp.partition, "error_code": error}
            )
        out.append(
            {
                "producer_id": marker.producer_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return ctx.response(markers=out)
