"""EndTxn (key 26, v0-v3): commit or abort the producer's transaction (answered once the
coordinator wrote PrepareCommit/PrepareAbort; the markers follow)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.END_TXN)
async def handle_end_txn(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.txn_coordinator
    if coordinator is None:
        return ctx.response(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error = await coordinator.end_transaction(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        bool(request.committed),
    )
    if error is ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return ctx.response(error_code=error)
