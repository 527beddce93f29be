"""DeleteGroups (key 42, v0-v2): delete empty groups and their committed offsets (tombstones in
``__consumer_offsets``). Per group: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (members remain),
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    names = list(request.groups_names)
    results = await ctx.services.group_coordinator.delete_groups(names)
    return ctx.response(
        results=[{"group_id": g, "error_code": results[g]} for g in dict.fromkeys(names)]
    )
