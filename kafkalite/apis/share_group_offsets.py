"""DescribeShareGroupOffsets (key 90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets
(92), v0: what the admin client and the CLI use to see and reset where a share group stands.

Sent to the group's coordinator (NOT_COORDINATOR elsewhere). The start offset of each
share-partition is read from, and written to, its share coordinator through the persister:

- Describe: the start offset (-1 for a partition the group never read) and the leader epoch of
  the last write; ``topics`` null means every topic the group's members subscribe to;
- Alter: the group must have no members (NON_EMPTY_GROUP); each partition's state is replaced by
  an empty one at the given start offset under a higher state epoch, which fences a leader still
  holding the old state;
- Delete: the group must have no members; every partition's state of each topic is deleted
  (DeleteShareGroupState), so the group starts again at ``share.auto.offset.reset``.

Authorisation as Kafka: Describe needs DESCRIBE on the group and on each topic, Alter READ on the
group and on each topic, Delete DELETE on the group and READ on each topic
(GROUP_AUTHORIZATION_FAILED for the group, TOPIC_AUTHORIZATION_FAILED per topic).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.share_group import allowed, coordinates_group, share_service
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode

_OP = AclOperation
_GROUP, _TOPIC = ResourceType.GROUP, ResourceType.TOPIC


def _msg(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.NONE else error.message


def _group_error(ctx: RequestContext, group_id: str, op: AclOperation) -> ErrorCode:
    if not allowed(ctx, op, _GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if share_service(ctx) is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return coordinates_group(ctx, group_id)


def _topic(ctx: RequestContext, name: str, op: AclOperation) -> tuple[ErrorCode, Any, int]:
    """(error, topic id, partition count) of a named topic, the ACL checked first."""
    if not allowed(ctx, op, _TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, None, 0
    found = share_service(ctx).topic_lookup(name)
    if found is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, 0
    return ErrorCode.NONE, found[0], found[1]


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
async def handle_describe_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    service = share_service(ctx)
    groups = []
    for group in request.groups:
        error = _group_error(ctx, group.group_id, _OP.DESCRIBE)
        if error is not ErrorCode.NONE:
            groups.append(
                {"group_id": group.group_id, "error_code": error, "error_message": _msg(error)}
            )
            continue
        if group.topics is None:
            asked = [(name, None) for name in sorted(service.subscribed_topics(group.group_id))]
        else:
            asked = [(t.topic_name, list(t.partitions)) for t in group.topics]
        topics = []
        for name, partitions in asked:
            terror, topic_id, count = _topic(ctx, name, _OP.DESCRIBE)
            wanted = partitions if partitions is not None else list(range(count))
            parts = []
            for p in wanted:
                if terror is not ErrorCode.NONE:
                    perror, start, epoch = terror, -1, -1
                elif not 0 <= p < count:
                    perror, start, epoch = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1
                else:
                    perror, start, epoch = await service.start_offset(group.group_id, topic_id, p)
                parts.append(
                    {
                        "partition_index": p,
                        "start_offset": start,
                        "leader_epoch": epoch,
                        "error_code": perror,
                        "error_message": _msg(perror),
                    }
                )
            topics.append({"topic_name": name, "topic_id": topic_id, "partitions": parts})
        groups.append({"group_id": group.group_id, "topics": topics, "error_code": 0})
    return ctx.response(groups=groups)


def _empty_group_error(ctx: RequestContext, service: Any, group_id: str, op: Any) -> ErrorCode:
    """Altering or deleting a share group's offsets: the group's ACL first, then the group must
    have no members (NON_EMPTY_GROUP), as Kafka."""
    error = _group_error(ctx, group_id, op)
    if error is ErrorCode.NONE and not service.group_is_empty(group_id):
        error = ErrorCode.NON_EMPTY_GROUP
    return error


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
async def handle_alter_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    service = share_service(ctx)
    error = _empty_group_error(ctx, service, request.group_id, _OP.READ)
    if error is not ErrorCode.NONE:
        return ctx.response(error_code=error, error_message=_msg(error))
    responses = []
    for topic in request.topics:
        terror, topic_id, count = _topic(ctx, topic.topic_name, _OP.READ)
        parts = []
        for p in topic.partitions:
            if terror is not ErrorCode.NONE:
                perror = terror
            elif not 0 <= p.partition_index < count:
                perror = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                perror = await service.reset_start_offset(
                    request.group_id, topic_id, p.partition_index, p.start_offset
                )
            parts.append(
                {
                    "partition_index": p.partition_index,
                    "error_code": perror,
                    "error_message": _msg(perror),
                }
            )
        responses.append(
            {"topic_name": topic.topic_name, "topic_id": topic_id, "partitions": parts}
        )
    return ctx.response(error_code=ErrorCode.NONE, responses=responses)


@handles(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
async def handle_delete_share_group_offsets(ctx: RequestContext, request: Any) -> Any:
    service = share_service(ctx)
    error = _empty_group_error(ctx, service, request.group_id, _OP.DELETE)
    if error is not ErrorCode.NONE:
        return ctx.response(error_code=error, error_message=_msg(error))
    responses = []
    for topic in request.topics:
        terror, topic_id, count = _topic(ctx, topic.topic_name, _OP.READ)
        if terror is ErrorCode.NONE:
            for p in range(count):
                e = await service.delete_state(request.group_id, topic_id, p)
                if e is not ErrorCode.NONE:
                    terror = e
        responses.append(
            {
                "topic_name": topic.topic_name,
                "topic_id": topic_id,
                "error_code": terror,
                "error_message": _msg(terror),
            }
        )
    return ctx.response(error_code=ErrorCode.NONE, responses=responses)
