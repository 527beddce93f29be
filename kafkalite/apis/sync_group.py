"""SyncGroup (key 14, v0-v5): every member of a generation asks for its assignment; the leader's
request carries the assignment of all members (computed client-side: range, roundrobin,
cooperative-sticky, ... are opaque bytes here). Answered once the leader's assignment is
stored (written to ``__consumer_offsets`` with the group metadata).

v3+ carry ``group.instance.id``; v5+ carry the protocol type and name, which must match the
group's (INCONSISTENT_GROUP_PROTOCOL otherwise), and the answer echoes them.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey


@handles(ApiKey.SYNC_GROUP)
async def handle_sync_group(ctx: RequestContext, request: Any) -> Any:
    result = await ctx.services.group_coordinator.sync_group(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        getattr(request, "protocol_type", None),
        getattr(request, "protocol_name", None),
        {a.member_id: a.assignment for a in request.assignments},
    )
    return ctx.response(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
