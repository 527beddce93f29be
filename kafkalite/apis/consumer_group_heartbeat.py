"""ConsumerGroupHeartbeat (key 68, v0-v1): a member of a consumer group (KIP-848) joins (epoch
0), heartbeats (its current epoch, with its owned partitions when they changed) or leaves (-1;
-2 for a static member that will come back). The answer carries the member's epoch, the
heartbeat interval (``group.consumer.heartbeat.interval.ms``) and, when it changed, the
partitions the member may now own, by topic id. A leave is answered with the member id and
epoch only (heartbeat interval 0, no assignment), as Kafka does.

v0 lets the coordinator choose the member id of a joining member that sends none; v1 members
choose their own (an empty one is INVALID_REQUEST). The subscribed topics are resolved against
this broker's metadata (names, ids, partition counts). Errors are answered with Kafka's codes
and messages: UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID,
FENCED_INSTANCE_ID, GROUP_ID_NOT_FOUND (a classic group with members), UNSUPPORTED_ASSIGNOR,
INVALID_REGULAR_EXPRESSION, INVALID_REQUEST, GROUP_MAX_SIZE_REACHED, and the coordinator errors.

The group's own ``consumer.session.timeout.ms``, ``consumer.heartbeat.interval.ms``,
``consumer.assignment.interval.ms`` and ``consumer.assignor.offload.enable`` (GROUP config
resources, share/group_configs.py) override the broker's settings for it.
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT)
async def handle_consumer_group_heartbeat(ctx: RequestContext, request: Any) -> Any:
    coordinator = ctx.services.group_coordinator
    member_id = request.member_id
    if ctx.api_version == 0 and not member_id and request.member_epoch == 0:
        member_id = str(uuid.uuid4())  # v0: the coordinator names a new member
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for tp in request.topic_partitions:
            if tp.topic_id is not None:
                owned[tp.topic_id] = frozenset(tp.partitions)
    overrides = _group_overrides(ctx, request.group_id)
    result = await coordinator.consumer_group_heartbeat(
        request.group_id,
        member_id,
        request.member_epoch,
        topics=ctx.services.metadata_cache,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topic_names=list(request.subscribed_topic_names)
        if request.subscribed_topic_names is not None
        else None,
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.connection.client_host}",
        **overrides,
    )
    assignment = None
    if result.error is ErrorCode.NONE and result.assignment is not None:
        assignment = {
            "topic_partitions": [
                {"topic_id": topic_id, "partitions": sorted(parts)}
                for topic_id, parts in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))
            ]
        }
    ok = result.error is ErrorCode.NONE
    # Kafka's answer to a leave (epoch -1 or -2) carries the member id and epoch only: no
    # heartbeat interval (0) and no assignment, as the member is not to heartbeat again.
    leaving = request.member_epoch < 0
    return ctx.response(
        throttle_time=0,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id if ok else None,
        member_epoch=result.member_epoch if ok else -1,
        heartbeat_interval=coordinator.core.consumer_heartbeat_interval_ms(request.group_id)
        if ok and not leaving
        else 0,
        assignment=None if leaving else assignment,
    )


def _group_overrides(ctx: RequestContext, group_id: str) -> dict[str, Any]:
    """The group's own settings (GROUP config resources), as the coordinator's keyword
    arguments; None where the group keeps the broker's."""
    store = ctx.services.extra.get("group_configs")
    overrides = store.overrides.get(group_id, {}) if store is not None else {}

    def number(name: str) -> int | None:
        value = overrides.get(name)
        return int(value) if value is not None else None

    offload = overrides.get("consumer.assignor.offload.enable")
    return {
        "assignment_interval_ms": number("consumer.assignment.interval.ms"),
        "assignor_offload": str(offload).strip().lower() == "true" if offload is not None else None,
        "session_timeout_ms": number("consumer.session.timeout.ms"),
        "heartbeat_interval_ms": number("consumer.heartbeat.interval.ms"),
    }
