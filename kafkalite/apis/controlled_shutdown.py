"""ControlledShutdown (key 7, v3): a broker asks the controller to move its leaderships away.

Only the active controller answers it (others: NOT_CONTROLLER); the controller's event queue
does the work and returns the partitions that still have this broker as leader (the broker
retries until none remain or it gives up).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError


@handles(ApiKey.CONTROLLED_SHUTDOWN)
async def handle_controlled_shutdown(ctx: RequestContext, request: Any) -> Any:
    controller = ctx.services.controller
    if controller is None or not controller.is_active:
        return ctx.response(error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[])
    try:
        remaining = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
    except KafkaError as e:
        return ctx.response(error_code=e.error_code, remaining_partitions=[])
    return ctx.response(
        error_code=ErrorCode.NONE,
        remaining_partitions=[
            {"topic_name": tp.topic, "partition_index": tp.partition} for tp in remaining
        ],
    )
