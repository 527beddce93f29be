"""ConsumerGroupDescribe (key 69, v0-v1): the state of consumer groups (KIP-848): group and
assignment epochs, the assignor, and per member its epoch, subscription, current and target
assignments (topic id and name). An unknown group, or a classic one, is GROUP_ID_NOT_FOUND, as
Kafka answers. With an authorizer, a group the principal may not DESCRIBE is answered
GROUP_AUTHORIZATION_FAILED on its own (the others are described), as Kafka's handler does.
``include_authorized_operations`` gets the GROUP operations the principal has (every one
without an authorizer)."""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.acl import (
    AUTHORIZED_OPERATIONS_OMITTED,
    AclOperation,
    ResourceType,
    authorized_operations,
)
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


def _assignment(cache: Any, assignment: dict) -> dict[str, Any]:
    out = []
    for topic_id, parts in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        name = cache.get_topic_name(topic_id) if cache is not None else None
        out.append({"topic_id": topic_id, "topic_name": name or "", "partitions": sorted(parts)})
    return {"topic_partitions": out}


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE)
def handle_consumer_group_describe(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.group_coordinator
    cache = ctx.services.metadata_cache
    asked = request.include_authorized_operations
    authorizer = ctx.services.extra.get("authorizer")
    groups = []
    for group_id in request.group_ids:
        if authorizer is not None and not authorizer.allowed(
            ctx.connection, AclOperation.DESCRIBE, ResourceType.GROUP, group_id
        ):
            error, message, cg = ErrorCode.GROUP_AUTHORIZATION_FAILED, None, None
        else:
            error, message, cg = coordinator.consumer_group_describe(group_id)
        if error is not ErrorCode.NONE or cg is None:
            groups.append(
                {
                    "error_code": error,
                    "error_message": message,
                    "group_id": group_id,
                    "group_state": "",
                    "group_epoch": -1,
                    "assignment_epoch": -1,
                    "assignor_name": "",
                    "members": [],
                    "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
                }
            )
            continue
        groups.append(
            {
                "error_code": ErrorCode.NONE,
                "group_id": group_id,
                "group_state": cg.state,
                "group_epoch": cg.group_epoch,
                "assignment_epoch": cg.assignment_epoch,
                "assignor_name": cg.preferred_assignor(),
                "members": [
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": list(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": _assignment(cache, m.assigned),
                        "target_assignment": _assignment(cache, cg.target.get(m.member_id, {})),
                        # 0: a classic member inside the consumer group, 1: a consumer one
                        "member_type": 0 if m.is_classic else 1,
                    }
                    for m in cg.members.values()
                ],
                "authorized_operations": AUTHORIZED_OPERATIONS_OMITTED
                if not asked
                else authorizer.operations(ctx.connection, ResourceType.GROUP, group_id)
                if authorizer is not None
                else authorized_operations(ResourceType.GROUP),
            }
        )
    return ctx.response(throttle_time=0, groups=groups)
