"""IncrementalAlterConfigs (key 44, v0-v1): SET / DELETE / APPEND / SUBTRACT single configs.

Applied to the topic's current overrides, then stored like AlterConfigs. APPEND and SUBTRACT
apply to list configs only (cleanup.policy), starting from the current value (override or
default), else INVALID_CONFIG; an unknown operation is INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.admin_common import (
    LIST_CONFIGS,
    RESOURCE_TOPIC,
    broker_topic_defaults,
    read_topic_config_overrides,
)
from kafkalite.apis.alter_configs import apply_topic_configs, unsupported_resource
from kafkalite.apis.base import RequestContext, handles
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_ops(
    current: dict[str, str], defaults: dict[str, str], ops: list[tuple[str, int, str | None]]
) -> tuple[dict[str, str] | None, ErrorCode, str | None]:
    """The new override set, or (None, error, message)."""
    new = dict(current)
    for name, op, value in ops:
        if op == SET:
            if value is None:
                return None, ErrorCode.INVALID_CONFIG, f"Null value for {name}"
            new[name] = value
        elif op == DELETE:
            new.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if name not in LIST_CONFIGS:
                return (
                    None,
                    ErrorCode.INVALID_CONFIG,
                    (f"Config value append/subtract is not allowed for config key {name}"),
                )
            base = new.get(name, defaults.get(name, ""))
            items = [v for v in base.split(",") if v]
            given = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[name] = ",".join(items)
        else:
            return None, ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}"
    return new, ErrorCode.NONE, None


@handles(ApiKey.INCREMENTAL_ALTER_CONFIGS)
async def handle_incremental_alter_configs(ctx: RequestContext, request: Any) -> Any:
    responses = []
    for resource in request.resources:
        name = resource.resource_name
        if resource.resource_type == RESOURCE_TOPIC and not name:
            # Kafka's ConfigAdminManager: there are no topic-level defaults to alter this way
            error, message = ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed."
        elif resource.resource_type == RESOURCE_TOPIC and (
            name not in ctx.services.metadata_cache.get_all_topics()
        ):
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist."
        elif resource.resource_type == RESOURCE_TOPIC:
            current = await read_topic_config_overrides(ctx, name)
            new, error, message = apply_ops(
                current,
                broker_topic_defaults(ctx),
                [(c.name, c.config_operation, c.value) for c in resource.configs],
            )
            if new is not None:
                error, message = await apply_topic_configs(ctx, name, new, request.validate_only)
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
