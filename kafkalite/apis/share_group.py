"""ShareGroupHeartbeat (key 76, v1) and ShareGroupDescribe (key 77, v1): share-group membership
(kafkalite/share/group.py).

The coordinator of share group ``g`` is the coordinator of a consumer group of that name: the
leader of ``__consumer_offsets-<partition_for(g)>`` (FindCoordinator key type 0, as Kafka), so a
heartbeat elsewhere is answered NOT_COORDINATOR. The first heartbeat also creates
``__share_group_state`` (the share coordinator's topic) if it does not exist yet.

Authorisation as Kafka: READ on the group for a heartbeat, DESCRIBE on each group for a describe
(GROUP_AUTHORIZATION_FAILED); a heartbeat's subscribed topics need DESCRIBE
(TOPIC_AUTHORIZATION_FAILED), and READ on the topics is checked when records are fetched.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


def authorizer(ctx: RequestContext) -> Any:
    return ctx.services.extra.get("authorizer")


def allowed(ctx: RequestContext, op: AclOperation, rtype: ResourceType, name: str) -> bool:
    auth = authorizer(ctx)
    return auth is None or auth.allowed(ctx.connection, op, rtype, name)


def share_service(ctx: RequestContext) -> Any:
    return ctx.services.extra.get("share_groups")


def coordinates_group(ctx: RequestContext, group_id: str) -> ErrorCode:
    """NONE when this broker coordinates ``group_id`` (leads its ``__consumer_offsets``
    partition); NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE otherwise."""
    from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME

    groups = ctx.services.group_coordinator
    if groups is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    info = ctx.services.metadata_cache.get_partition_info(
        GROUP_METADATA_TOPIC_NAME, groups.partition_for(group_id)
    )
    if info is None or info.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if info.leader != ctx.services.broker_id:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


def is_other_kind_of_group(ctx: RequestContext, group_id: str) -> bool:
    """Whether ``group_id`` is a consumer group (classic or not) on the group coordinator: a
    share group cannot take its name, as in Kafka."""
    core = getattr(ctx.services.group_coordinator, "core", None)
    return group_id in getattr(core, "groups", {})


async def ensure_state_topic(ctx: RequestContext) -> bool:
    from kafkalite.apis.find_coordinator import ensure_internal_topic
    from kafkalite.share.records import SHARE_GROUP_STATE_TOPIC_NAME

    config = ctx.services.config
    return await ensure_internal_topic(
        ctx,
        SHARE_GROUP_STATE_TOPIC_NAME,
        config.share_coordinator_state_topic_num_partitions,
        config.share_coordinator_state_topic_replication_factor,
        lambda rf: {
            "cleanup.policy": "compact",
            "min.insync.replicas": str(min(2, rf)),
            "segment.bytes": "104857600",
        },
    )


def _error(ctx: RequestContext, error: ErrorCode) -> Any:
    return ctx.response(
        error_code=error,
        error_message=None if error is ErrorCode.NONE else error.message,
        member_epoch=0,
        heartbeat_interval=0,
    )


@handles(ApiKey.SHARE_GROUP_HEARTBEAT)
async def handle_share_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    service = share_service(ctx)
    if not allowed(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id):
        return _error(ctx, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    topics = request.subscribed_topic_names
    for topic in topics or ():
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic):
            return _error(ctx, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if service is None:
        return _error(ctx, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    error = coordinates_group(ctx, request.group_id)
    if error is not ErrorCode.NONE:
        return _error(ctx, error)
    if is_other_kind_of_group(ctx, request.group_id):
        return _error(ctx, ErrorCode.GROUP_ID_NOT_FOUND)  # Kafka: "... is not a share group"
    await ensure_state_topic(ctx)
    result = service.heartbeat(
        request.group_id,
        request.member_id,
        request.member_epoch,
        request.rack_id,
        tuple(topics) if topics is not None else None,
        ctx.client_id or "",
        ctx.connection.client_host if ctx.connection is not None else "",
    )
    if result.error is not ErrorCode.NONE:
        return _error(ctx, result.error)
    assignment = None
    if result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": list(partitions)}
                for topic_id, partitions in sorted(result.assignment.items())
            ]
        }
    return ctx.response(
        error_code=ErrorCode.NONE,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=service.heartbeat_interval_ms(request.group_id),
        assignment=assignment,
    )


@handles(ApiKey.SHARE_GROUP_DESCRIBE)
async def handle_share_group_describe(ctx: RequestContext, request: Any) -> Any:
    service = share_service(ctx)
    include_ops = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.group_ids:
        entry: dict[str, Any] = {
            "group_id": group_id,
            "group_state": "Dead",
            "assignor_name": "simple",
            "authorized_operations": -2147483648,
        }
        if not allowed(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif service is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            error = coordinates_group(ctx, group_id)
        group = service.groups.groups.get(group_id) if service is not None else None
        if error is ErrorCode.NONE and group is None:
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error is not ErrorCode.NONE:
            described.append({**entry, "error_code": error, "error_message": error.message})
            continue
        auth = authorizer(ctx)
        if include_ops and auth is not None:
            entry["authorized_operations"] = auth.operations(
                ctx.connection, ResourceType.GROUP, group_id
            )
        members = []
        for member in group.members.values():
            members.append(
                {
                    "member_id": member.member_id,
                    "rack_id": member.rack_id,
                    "member_epoch": member.member_epoch,
                    "client_id": member.client_id,
                    "client_host": member.client_host,
                    "subscribed_topic_names": list(member.subscribed),
                    "assignment": {
                        "topic_partitions": [
                            {
                                "topic_id": topic_id,
                                "topic_name": service.topic_name(topic_id) or "",
                                "partitions": list(partitions),
                            }
                            for topic_id, partitions in sorted(member.assignment.items())
                        ]
                    },
                }
            )
        described.append(
            {
                **entry,
                "error_code": ErrorCode.NONE,
                "group_state": group.state,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "members": members,
            }
        )
    return ctx.response(groups=described)
