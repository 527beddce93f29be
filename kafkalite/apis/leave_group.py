"""LeaveGroup (key 13, v0-v5): members leave a group (which rebalances without them).

v0-v2 name one member by id; the answer has one error code: the group's, or when that is NONE
the member's (as Kafka answers). v3+ (KIP-345) name a batch of members by member id and/or
``group.instance.id`` and get a result per member; v5+ carry a reason per member.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.group import MemberIdentity
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.LEAVE_GROUP)
async def handle_leave_group(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.group_coordinator
    if ctx.api_version < 3:
        result = await coordinator.leave_group(
            request.group_id, [MemberIdentity(request.member_id)]
        )
        error = result.error
        if error is ErrorCode.NONE and result.members:
            error = result.members[0].error
        return ctx.response(error_code=error)
    result = await coordinator.leave_group(
        request.group_id,
        [
            MemberIdentity(m.member_id, m.group_instance_id, getattr(m, "reason", None))
            for m in request.members
        ],
    )
    return ctx.response(
        error_code=result.error,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "error_code": m.error,
            }
            for m in result.members
        ],
    )
