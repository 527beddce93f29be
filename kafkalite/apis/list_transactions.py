"""ListTransactions (key 66, v0-v1, KIP-664): the transactional ids this broker coordinates,
filtered by state names, producer ids and (v1, KIP-994) running for at least a duration."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.LIST_TRANSACTIONS)
def handle_list_transactions(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.txn_coordinator
    if coordinator is None:
        return ctx.response(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error, unknown, listed = coordinator.list_transactions(
        request.state_filters,
        request.producer_id_filters,
        int(getattr(request, "duration_filter", -1)),
    )
    return ctx.response(
        error_code=error,
        unknown_state_filters=unknown,
        transaction_states=[
            {
                "transactional_id": t.transactional_id,
                "producer_id": t.producer_id,
                "transaction_state": t.state,
            }
            for t in listed
        ],
    )
