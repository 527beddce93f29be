"""Heartbeat (key 12, v0-v4): a member of a generation is alive. REBALANCE_IN_PROGRESS tells it
to rejoin; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION that it was evicted or is behind; v3+ carry
``group.instance.id`` (FENCED_INSTANCE_ID for a replaced static member)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey


@handles(ApiKey.HEARTBEAT)
async def handle_heartbeat(ctx: RequestContext, request: Any) -> Any:
    error = await ctx.services.group_coordinator.heartbeat(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        request.generation_id,
    )
    return ctx.response(error_code=error)
