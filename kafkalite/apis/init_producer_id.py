"""InitProducerId (key 22, v0-v4): a producer id for an idempotent or transactional producer.

Without a transactional id (idempotence only, kafka-python's and librdkafka's default), Kafka
always hands out a fresh producer id with epoch 0 (also when the request carries an old id and
epoch, KIP-360): the ProducerIdManager allocates it from blocks reserved in the coordination
store. With a transactional id the transaction coordinator answers (kafkalite/txn/): a new id
or an epoch bump, fencing an open transaction of an older instance (CONCURRENT_TRANSACTIONS,
retried by the client), and, v3+, KIP-360's recovery bump when the request carries the producer
id and epoch it had.
"""

from __future__ import annotations

import inspect
from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError


@handles(ApiKey.INIT_PRODUCER_ID)
async def handle_init_producer_id(ctx: RequestContext, request: Any) -> Any:
    if request.transactional_id is not None:
        coordinator = ctx.services.txn_coordinator
        if coordinator is None:
            return ctx.response(
                error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1
            )
        result = await coordinator.init_producer_id(
            request.transactional_id,
            millis(request.transaction_timeout),
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
        )
        return ctx.response(
            error_code=result.error,
            producer_id=result.producer_id,
            producer_epoch=result.producer_epoch,
        )
    try:
        producer_id = ctx.services.producer_id_manager.generate_producer_id()
        if inspect.isawaitable(producer_id):
            producer_id = await producer_id
    except KafkaError as e:
        return ctx.response(error_code=e.error_code, producer_id=-1, producer_epoch=-1)
    return ctx.response(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
