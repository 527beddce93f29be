"""UpdateMetadata (key 6, v6-v7): the controller's view of brokers and partitions.

The MetadataCache applies it as a delta, read in slices that yield to the event loop
(`update_metadata_async`; a stale controller epoch -> STALE_CONTROLLER_EPOCH); partitions
the request marks deleted (leader -2) leave the cache, and waiting fetches on them are woken.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError


@handles(ApiKey.UPDATE_METADATA)
async def handle_update_metadata(ctx: RequestContext, request: Any) -> Any:
    if ctx.broker_epoch_is_stale(request):
        return ctx.response(error_code=ErrorCode.STALE_BROKER_EPOCH)
    try:
        await ctx.services.metadata_cache.update_metadata_async(request)
    except KafkaError as e:
        return ctx.response(error_code=e.error_code)
    return ctx.response(error_code=ErrorCode.NONE)
