"""AlterConfigs (key 33, v0-v2): replace a topic's config overrides as a whole.

Topic resources: unknown topic -> UNKNOWN_TOPIC_OR_PARTITION; invalid names or values ->
INVALID_CONFIG; `validate_only` writes nothing; otherwise the controller's admin path writes
`/config/topics/<t>` and a change notification, which every broker applies.
Broker resources (the broker's own id, or "" for the cluster-wide defaults): the level's
dynamic configs replaced as a whole (apis/broker_configs.py). Entries with a null value are
left out, as Kafka does.
Group resources (type 32): the group's overrides replaced as a whole, validated with Kafka's
GroupConfig rules (INVALID_CONFIG) and stored (share/group_configs.py).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.admin_common import RESOURCE_BROKER, RESOURCE_TOPIC
from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.broker_configs import alter_broker_configs
from kafkalite.coord.errors import CoordError
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError
from kafkalite.share.group_configs import GROUP_RESOURCE, validate
from kafkalite.storage.config import validate_topic_configs


async def apply_topic_configs(
    ctx: RequestContext, topic: str, configs: dict[str, str], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Validate and (unless validate_only) store the full override set of `topic`."""
    from kafkalite.zk import admin

    if topic not in ctx.services.metadata_cache.get_all_topics():
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist."
    problem = validate_topic_configs(configs)
    if problem is not None:
        return ErrorCode.INVALID_CONFIG, problem
    if validate_only:
        return ErrorCode.NONE, None
    try:
        await admin.alter_topic_config(ctx.services.store, topic, configs)
    except KafkaError as e:
        return e.error_code, str(e) or None
    return ErrorCode.NONE, None


async def apply_group_configs(
    ctx: RequestContext, group_id: str, configs: dict[str, str], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Validate (Kafka's GroupConfig rules) and (unless validate_only) store the full override
    set of group ``group_id``."""
    store = ctx.services.extra["group_configs"]
    problem = validate(configs, store.defaults, store.bounds)
    if problem is not None:
        return ErrorCode.INVALID_CONFIG, problem
    if validate_only:
        return ErrorCode.NONE, None
    try:
        await store.write(group_id, configs)
    except CoordError as e:
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"The group config could not be stored: {e!r}"
    except RuntimeError as e:
        return ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
    return ErrorCode.NONE, None


def unsupported_resource(resource_type: int) -> tuple[ErrorCode, str]:
    return (
        ErrorCode.INVALID_REQUEST,
        f"AlterConfigs is only supported for topics and brokers, but resource type is "
        f"{resource_type}",
    )


@handles(ApiKey.ALTER_CONFIGS)
async def handle_alter_configs(ctx: RequestContext, request: Any) -> Any:
    responses = []
    for resource in request.resources:
        if resource.resource_type == RESOURCE_TOPIC:
            configs = {c.name: c.value for c in resource.configs}
            error, message = await apply_topic_configs(
                ctx, resource.resource_name, configs, request.validate_only
            )
        elif resource.resource_type == RESOURCE_BROKER:
            props = {c.name: c.value for c in resource.configs if c.value is not None}
            error, message = await alter_broker_configs(
                ctx, resource.resource_name, props, request.validate_only
            )
        elif (
            resource.resource_type == GROUP_RESOURCE
            and ctx.services.extra.get("group_configs") is not None
        ):
            if not resource.resource_name:
                error, message = ErrorCode.INVALID_REQUEST, "Group name must not be empty"
            else:
                props = {c.name: c.value for c in resource.configs if c.value is not None}
                error, message = await apply_group_configs(
                    ctx, resource.resource_name, props, request.validate_only
                )
        else:
            error, message = unsupported_resource(resource.resource_type)
        responses.append(
            {
                "error_code": error,
                "error_message": message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
        )
    return ctx.response(throttle_time=0, responses=responses)
