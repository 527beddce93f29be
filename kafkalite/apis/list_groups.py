"""ListGroups (key 16, v0-v5): the groups this broker coordinates, with protocol type, state (v4+,
filterable by state) and group type (v5+, "classic"; filterable by type). COORDINATOR_LOAD_IN_PROGRESS
while an offsets partition is still being loaded (the groups listed may be incomplete then)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey


@handles(ApiKey.LIST_GROUPS)
def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    states = getattr(request, "states_filter", None) or None
    types = getattr(request, "types_filter", None) or None
    error, groups = ctx.services.group_coordinator.list_groups(states, types)
    groups = [*groups, *getattr(ctx.services.extra.get("share_groups"), "overviews", lambda *_: [])(states, types)]  # fmt: skip
    return ctx.response(
        error_code=error,
        groups=[
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type,
                "group_state": g.state,
                "group_type": g.group_type,
            }
            for g in groups
        ],
    )
