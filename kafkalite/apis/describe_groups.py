"""DescribeGroups (key 15, v0-v5): state, protocol and members (client id and host, metadata and,
when Stable, assignment) of each named group. An unknown group is described as Dead with no
members and no error (Kafka's answer before v6). v3+ may ask for authorized operations
(KIP-430): a group described without error gets every operation the GROUP resource supports
(no authorizer, as Kafka's AuthHelper); otherwise the field keeps Kafka's "not requested" value
(INT32_MIN).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    ResourceType,
    authorized_operations,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.DESCRIBE_GROUPS)
def handle_describe_groups(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.group_coordinator
    asked = getattr(request, "include_authorized_operations", False)
    groups = []
    for group_id in request.groups:
        error, summary = coordinator.describe_group(group_id, ctx.api_version)
        groups.append(
            {
                "error_code": error,
                "group_id": group_id,
                "group_state": summary.state,
                "protocol_type": summary.protocol_type,
                "protocol_data": summary.protocol,
                "members": [
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata,
                        "member_assignment": m.assignment,
                    }
                    for m in summary.members
                ],
                "authorized_operations": authorized_operations(ResourceType.GROUP)
                if asked and error == ErrorCode.NONE
                else AUTHORIZED_OPERATIONS_OMITTED,
            }
        )
    return ctx.response(groups=groups)
