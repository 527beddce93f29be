"""ListGroups (key 16, v0-v5): the groups this broker coordinates, with protocol type, state (v4+,
filterable by state) and group type (v5+: "classic" or "consumer"; filterable by type, case
insensitively). Consumer groups (KIP-848) show protocol type "consumer" and their own states
(Empty, Assigning, Reconciling, Stable). COORDINATOR_LOAD_IN_PROGRESS while an offsets partition
is still being loaded (the groups listed may be incomplete then).

Other group coordinators plug in through ``ctx.services.extra["group_listers"]``: callables
``(states, types) -> (error, [GroupOverview-like objects])`` whose groups are listed too (share
groups register one there).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.LIST_GROUPS)
def handle_list_groups(ctx: RequestContext, request: Any) -> Any:
    states = getattr(request, "states_filter", None) or None
    types = getattr(request, "types_filter", None) or None
    error, groups = ctx.services.group_coordinator.list_groups(states, types)
    groups = list(groups)
    for lister in ctx.services.extra.get("group_listers", ()):
        other_error, other = lister(states, types)
        groups.extend(other)
        if error is ErrorCode.NONE:
            error = other_error
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
