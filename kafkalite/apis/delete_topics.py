"""DeleteTopics (key 20, v1-v6): mark topics for deletion (`/admin/delete_topics/<t>`).

The controller's TopicDeletionManager does the work (StopReplica, then the nodes are removed).
Each topic is answered once it has left this broker's metadata, or REQUEST_TIMED_OUT.
Unknown topic (in neither this broker's metadata nor the store, which decides for a topic just
created that this broker has not been told of yet) -> UNKNOWN_TOPIC_OR_PARTITION; v6 may name
topics by id (UNKNOWN_TOPIC_ID when the id is unknown); `delete.topic.enable=false` ->
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, as Kafka).
"""

from __future__ import annotations

import uuid
from typing import Any

from kafkalite.apis.admin_common import topic_absent, wait_for_all
from kafkalite.apis.base import RequestContext, handles, millis
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, InvalidTopicError, KafkaError

ZERO_UUID = uuid.UUID(int=0)


@handles(ApiKey.DELETE_TOPICS)
async def handle_delete_topics(ctx: RequestContext, request: Any) -> Any:
    from kafkalite.zk import admin

    cache = ctx.services.metadata_cache
    timeout_ms = millis(request.timeout)
    if ctx.api_version >= 6:
        entries = [(t.name, t.topic_id) for t in request.topics]
    else:
        entries = [(name, None) for name in request.topic_names]
    results = []
    pending = []
    for name, topic_id in entries:
        result: dict[str, Any] = {
            "name": name,
            "topic_id": topic_id or ZERO_UUID,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        results.append(result)
        if name is None and topic_id is not None and topic_id != ZERO_UUID:
            name = cache.get_topic_name(topic_id)
            if name is None:
                result["error_code"] = ErrorCode.UNKNOWN_TOPIC_ID
                continue
            result["name"] = name
        if not ctx.services.config.delete_topic_enable:
            # Kafka: v3+ names the reason; older clients do not know that code
            result["error_code"] = (
                ErrorCode.TOPIC_DELETION_DISABLED
                if ctx.api_version >= 3
                else ErrorCode.INVALID_REQUEST
            )
            continue
        if not await _topic_exists(ctx, name):
            result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        result["topic_id"] = cache.get_topic_id(name) or ZERO_UUID
        try:
            await admin.delete_topic(ctx.services.store, name)
        except KafkaError as e:
            result.update(error_code=e.error_code, error_message=str(e) or None)
            continue
        pending.append(result)
    done = await wait_for_all(
        [lambda r=result: topic_absent(ctx, r["name"]) for result in pending], timeout_ms
    )
    for result, absent in zip(pending, done, strict=True):
        if not absent:
            result["error_code"] = ErrorCode.REQUEST_TIMED_OUT
    return ctx.response(throttle_time=0, responses=results)


async def _topic_exists(ctx: RequestContext, name: str | None) -> bool:
    """Whether topic ``name`` exists: in this broker's metadata, or else in the store, which
    decides for a topic this broker has not been told of yet (the controller's UpdateMetadata
    of a new topic reaches the brokers one at a time, so a client that saw the topic led
    through one broker may ask another too soon). A name no topic can have is never looked up
    in the store."""
    if name in ctx.services.metadata_cache.get_all_topics():
        return True
    if not isinstance(name, str):
        return False
    from kafkalite.zk import admin

    try:
        admin.validate_topic_name(name)
    except InvalidTopicError:
        return False
    return await admin.topic_exists(ctx.services.store, name)
