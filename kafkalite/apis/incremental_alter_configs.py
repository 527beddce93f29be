"""IncrementalAlterConfigs (key 44, v0-v1): SET / DELETE / APPEND / SUBTRACT single configs.

Applied to the topic's current overrides, then stored like AlterConfigs. APPEND and SUBTRACT
apply to list configs only (cleanup.policy), starting from the current value (override or
default), else INVALID_CONFIG; an unknown operation is INVALID_REQUEST.

Broker resources: the operations apply to the level's stored dynamic configs (the broker's own
id, or "" for the cluster-wide defaults), APPEND/SUBTRACT starting from Kafka's default of a
list setting; the result is then validated and stored like AlterConfigs
(apis/broker_configs.py).

Group resources (type 32): the operations apply to the group's stored overrides; the result is
validated with Kafka's GroupConfig rules (INVALID_CONFIG) and stored (share/group_configs.py).
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.admin_common import (
    LIST_CONFIGS,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    broker_topic_defaults,
    read_topic_config_overrides,
)
from kafkalite.apis.alter_configs import (
    apply_group_configs,
    apply_topic_configs,
    unsupported_resource,
)
from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.broker_configs import (
    alter_broker_configs,
    broker_level,
    dynamic_config,
    stored_level,
)
from kafkalite.apis.describe_configs import group_store
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.group_configs import GROUP_RESOURCE

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


BROKER_LIST_CONFIGS = frozenset(
    {
        "log.cleanup.policy",
        "metric.reporters",
        "sasl.enabled.mechanisms",
        "ssl.enabled.protocols",
        "ssl.cipher.suites",
        "sasl.kerberos.principal.to.local.rules",
        "listeners",
        "advertised.listeners",
    }
)
"""Kafka's LIST-type broker settings that may be altered dynamically."""


def apply_ops(
    current: dict[str, str],
    defaults: dict[str, str],
    ops: list[tuple[str, int, str | None]],
    list_configs: frozenset[str] = LIST_CONFIGS,
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
            base_name = name.split(".", 3)[3] if name.startswith("listener.name.") else name
            if name not in list_configs and base_name not in list_configs:
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
        elif resource.resource_type == RESOURCE_BROKER:
            error, message = await _alter_broker(ctx, resource, request.validate_only)
        elif resource.resource_type == GROUP_RESOURCE and group_store(ctx) is not None:
            error, message = await _alter_group(ctx, resource, request.validate_only)
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


async def _alter_broker(
    ctx: RequestContext, resource: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    broker_id, error, message = broker_level(ctx, resource.resource_name)
    if error != ErrorCode.NONE:
        return error, message
    current = await stored_level(ctx, broker_id)
    new, error, message = apply_ops(
        current,
        dynamic_config(ctx).default_props,
        [(c.name, c.config_operation, c.value) for c in resource.configs],
        BROKER_LIST_CONFIGS,
    )
    if new is None:
        return error, message
    return await alter_broker_configs(ctx, resource.resource_name, new, validate_only)


async def _alter_group(
    ctx: RequestContext, resource: Any, validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """The operations applied to the group's stored overrides (no group config is a list, so
    APPEND/SUBTRACT are INVALID_CONFIG), then validated and stored (apis/alter_configs.py)."""
    if not resource.resource_name:
        return ErrorCode.INVALID_REQUEST, "Group name must not be empty"
    store = group_store(ctx)
    current = await store.read(resource.resource_name)
    new, error, message = apply_ops(
        current,
        store.defaults,
        [(c.name, c.config_operation, c.value) for c in resource.configs],
        frozenset(),
    )
    if new is None:
        return error, message
    return await apply_group_configs(ctx, resource.resource_name, new, validate_only)
