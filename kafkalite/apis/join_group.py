"""JoinGroup (key 11, v0-v9): a member joins (or rejoins) a group; answered when the rebalance
completes (the coordinator holds the request until every member has joined or the rebalance
timeout passes).

Versions, as Kafka's KafkaApis maps them: v0 has no rebalance timeout (the session timeout is
used: -1 is passed); v4+ require the KIP-394 round trip (a first join with an empty member id
gets MEMBER_ID_REQUIRED and the id to use); v5+ carry ``group.instance.id`` (KIP-345 static
membership); v7+ answer the protocol type and a nullable protocol name (before v7 a missing name
is ""); v8+ carry a reason; v9+ may tell the leader to skip the assignment (KIP-814). The client
host is recorded as Kafka prints an InetAddress ("/127.0.0.1").
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.protocol.api import ApiKey


@handles(ApiKey.JOIN_GROUP)
async def handle_join_group(ctx: RequestContext, request: Any) -> Any:
    version = ctx.api_version
    session_timeout_ms = millis(request.session_timeout)
    result = await ctx.services.group_coordinator.join_group(
        request.group_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
        version >= 4,
        ctx.client_id or "",
        f"/{ctx.connection.client_host}",
        millis(request.rebalance_timeout) if version >= 1 else -1,
        session_timeout_ms,
        request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        getattr(request, "reason", None),
        version >= 9,
        # a classic member joining a consumer group is reconciled against the topics
        topics=ctx.services.metadata_cache,
    )
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""
    return ctx.response(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "metadata": m.metadata,
            }
            for m in result.members
        ],
    )
