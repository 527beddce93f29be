"""DeleteGroups (key 42, v0-v2): delete empty groups and their committed offsets (tombstones in
``__consumer_offsets``). Per group: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (members remain),
NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID.

A share group coordinated here is deleted by the share-group service, as Kafka's group
coordinator deletes one: refused while it has members, else the persisted state of its
share-partitions first (DeleteShareGroupState), then the group."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.share_group import coordinates_group
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.DELETE_GROUPS)
async def handle_delete_groups(ctx: RequestContext, request: Any) -> Any:
    names = list(dict.fromkeys(request.groups_names))
    share = ctx.services.extra.get("share_groups")
    shared = [
        g
        for g in names
        if share is not None
        and share.is_share_group(g)
        and coordinates_group(ctx, g) is ErrorCode.NONE
    ]
    others = [g for g in names if g not in shared]
    results = dict(await ctx.services.group_coordinator.delete_groups(others)) if others else {}
    for g in shared:
        results[g] = await share.delete_group(g)
    return ctx.response(results=[{"group_id": g, "error_code": results[g]} for g in names])
