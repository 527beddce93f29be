"""The share-group state APIs served by the share coordinator (kafkalite/share/coordinator.py):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85),
DeleteShareGroupState (86) and ReadShareGroupStateSummary (87), v0 (v1 of Write and Summary).

Broker-to-broker APIs: CLUSTER_ACTION on the cluster, as Kafka (CLUSTER_AUTHORIZATION_FAILED on
every partition otherwise). Each partition is answered on its own: NOT_COORDINATOR when its key's
``__share_group_state`` partition is led elsewhere, COORDINATOR_LOAD_IN_PROGRESS while it loads,
FENCED_STATE_EPOCH / FENCED_LEADER_EPOCH for a stale writer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.acl import AclOperation, ResourceType
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.security.acl import CLUSTER_NAME
from kafkalite.share.partition import StateBatch


def _refusal(ctx: RequestContext) -> ErrorCode | None:
    coordinator = ctx.services.extra.get("share_coordinator")
    auth = ctx.services.extra.get("authorizer")
    if auth is not None and not auth.allowed(
        ctx.connection, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return None


def _partition(error: ErrorCode, partition: int, **extra: Any) -> dict[str, Any]:
    return {
        "partition": partition,
        "error_code": error,
        "error_message": None if error is ErrorCode.NONE else error.message,
        **extra,
    }


async def _answer_each(
    ctx: RequestContext,
    request: Any,
    answer: Callable[[Any, tuple[str, Any, int], Any], Awaitable[dict[str, Any]]],
    **refused_fields: Any,
) -> Any:
    """Every partition of the request answered by ``answer(coordinator, key, partition)``, or
    refused (with ``refused_fields``) when the caller may not use these APIs."""
    refused = _refusal(ctx)
    coordinator = ctx.services.extra.get("share_coordinator")
    results = []
    for topic in request.topics:
        parts = []
        for p in topic.partitions:
            if refused is not None:
                parts.append(_partition(refused, p.partition, **refused_fields))
            else:
                key = (request.group_id, topic.topic_id, p.partition)
                parts.append(await answer(coordinator, key, p))
        results.append({"topic_id": topic.topic_id, "partitions": parts})
    return ctx.response(results=results)


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE)
async def handle_initialize(ctx: RequestContext, request: Any) -> Any:
    async def answer(coordinator: Any, key: Any, p: Any) -> dict[str, Any]:
        error = await coordinator.initialize(key, p.state_epoch, p.start_offset)
        return _partition(error, p.partition)

    return await _answer_each(ctx, request, answer)


def _batches(batches: Any) -> list[dict[str, int]]:
    return [
        {
            "first_offset": b.first_offset,
            "last_offset": b.last_offset,
            "delivery_state": b.delivery_state,
            "delivery_count": b.delivery_count,
        }
        for b in batches
    ]


@handles(ApiKey.READ_SHARE_GROUP_STATE)
async def handle_read(ctx: RequestContext, request: Any) -> Any:
    async def answer(coordinator: Any, key: Any, p: Any) -> dict[str, Any]:
        r = coordinator.read(key, p.leader_epoch)
        return _partition(
            r.error,
            p.partition,
            state_epoch=r.state_epoch,
            start_offset=r.start_offset,
            state_batches=_batches(r.state_batches),
        )

    return await _answer_each(ctx, request, answer, start_offset=-1)


@handles(ApiKey.WRITE_SHARE_GROUP_STATE)
async def handle_write(ctx: RequestContext, request: Any) -> Any:
    async def answer(coordinator: Any, key: Any, p: Any) -> dict[str, Any]:
        batches = [
            StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
            for b in p.state_batches
        ]
        error = await coordinator.write(key, p.state_epoch, p.leader_epoch, p.start_offset, batches)
        return _partition(error, p.partition)

    return await _answer_each(ctx, request, answer)


@handles(ApiKey.DELETE_SHARE_GROUP_STATE)
async def handle_delete(ctx: RequestContext, request: Any) -> Any:
    async def answer(coordinator: Any, key: Any, p: Any) -> dict[str, Any]:
        return _partition(await coordinator.delete(key), p.partition)

    return await _answer_each(ctx, request, answer)


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY)
async def handle_read_summary(ctx: RequestContext, request: Any) -> Any:
    async def answer(coordinator: Any, key: Any, p: Any) -> dict[str, Any]:
        r = coordinator.read_summary(key, p.leader_epoch)
        return _partition(
            r.error,
            p.partition,
            state_epoch=r.state_epoch,
            leader_epoch=r.leader_epoch,
            start_offset=r.start_offset,
        )

    return await _answer_each(ctx, request, answer, start_offset=-1, leader_epoch=-1)
