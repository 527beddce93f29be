"""AddPartitionsToTxn (key 24, v0-v3): add partitions to the producer's open transaction.

Kafka's KafkaApis: partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED; otherwise every partition gets the coordinator's answer. (v4+, the
batched inter-broker form of KIP-890, is not advertised.)
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


def _results(by_topic: dict[str, dict[int, ErrorCode]]) -> list[dict]:
    return [
        {
            "name": topic,
            "results_by_partition": [
                {"partition_index": p, "partition_error_code": e} for p, e in parts.items()
            ],
        }
        for topic, parts in by_topic.items()
    ]


@handles(ApiKey.ADD_PARTITIONS_TO_TXN)
async def handle_add_partitions_to_txn(ctx: RequestContext, request: Any) -> Any:
    txn_id = request.v3_and_below_transactional_id
    partitions = [
        TopicPartition(t.name, p) for t in request.v3_and_below_topics for p in t.partitions
    ]
    cache = ctx.services.metadata_cache
    coordinator = ctx.services.txn_coordinator
    unknown = {tp for tp in partitions if cache.get_partition_info(tp.topic, tp.partition) is None}
    if coordinator is None:
        errors = dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    elif unknown:
        errors = {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if tp in unknown
            else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in partitions
        }
    else:
        error = await coordinator.add_partitions(
            txn_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            partitions,
        )
        if error is ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
            error = ErrorCode.INVALID_PRODUCER_EPOCH  # the pre-KIP-588 clients' name for it
        errors = dict.fromkeys(partitions, error)
    by_topic: dict[str, dict[int, ErrorCode]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = error
    return ctx.response(results_by_topic_v3_and_below=_results(by_topic))
