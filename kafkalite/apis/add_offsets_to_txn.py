"""AddOffsetsToTxn (key 25, v0-v3): put the group's ``__consumer_offsets`` partition into the
transaction, so that its TxnOffsetCommit becomes visible only with the commit marker."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.protocol.types import TopicPartition


@handles(ApiKey.ADD_OFFSETS_TO_TXN)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.txn_coordinator
    groups = ctx.services.group_coordinator
    if coordinator is None or groups is None:
        return ctx.response(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    tp = TopicPartition(GROUP_METADATA_TOPIC_NAME, groups.partition_for(request.group_id))
    error = await coordinator.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [tp]
    )
    if error is ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return ctx.response(error_code=error)
