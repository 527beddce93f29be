"""DescribeTransactions (key 65, v0, KIP-664): the state of transactional ids this broker
coordinates (others: NOT_COORDINATOR; unknown: TRANSACTIONAL_ID_NOT_FOUND). The start time of
an id with no transaction started is 0 where Kafka writes -1 (see below)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.DESCRIBE_TRANSACTIONS)
def handle_describe_transactions(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.txn_coordinator
    states = []
    for txn_id in request.transactional_ids:
        if coordinator is None:
            states.append(
                {"transactional_id": txn_id, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE}
            )
            continue
        d = coordinator.describe(txn_id)
        topics: dict[str, list[int]] = {}
        for tp in d.partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        states.append(
            {
                "transactional_id": txn_id,
                "error_code": d.error,
                "transaction_state": d.state,
                "transaction_timeout": d.timeout_ms,
                # Kafka writes -1 for a transactional id with no transaction started; kio
                # (and so kafkalite's own tools) cannot read a negative timestamp: 0 instead,
                # also Kafka's default for an entry with an error
                "transaction_start_time": max(d.start_time_ms, 0),
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            }
        )
    return ctx.response(transaction_states=states)
