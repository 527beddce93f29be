"""DescribeConfigs (key 32, v1-v4): topic and broker configs with their sources.

Topic resources (type 2): every topic config, valued by the topic's override
(`/config/topics/<t>`, source TOPIC_CONFIG) or else the broker default (DEFAULT_CONFIG), with
synonyms (v1+, when asked) and types (v3+). Unknown topic -> UNKNOWN_TOPIC_OR_PARTITION.
Broker resources (type 4): with this broker's id, every setting with its effective value and
its source, the highest of DYNAMIC_BROKER_CONFIG (``/config/brokers/<id>``),
DYNAMIC_DEFAULT_BROKER_CONFIG (``/config/brokers/<default>``), STATIC_BROKER_CONFIG and
DEFAULT_CONFIG, synonyms in that order (Kafka's ConfigHelper.configSynonyms), read_only false
for the settings Kafka lets change dynamically; with "" the cluster-wide dynamic defaults only
(Kafka's answer). A topic config's broker synonyms show a dynamic broker default too. Another
broker id -> INVALID_REQUEST.
Group resources (type 32, Kafka's GroupConfig): every group config of the group, its stored
override (DYNAMIC_GROUP_CONFIG) or else the broker's setting (DEFAULT_CONFIG); an empty name ->
INVALID_REQUEST. Other resource types -> INVALID_REQUEST.

Invariant: a sensitive setting (config.SENSITIVE_CONFIGS: Kafka's PASSWORD type, kafkalite's
admin.bearer.token) is answered as Kafka answers it: value null, is_sensitive=true, its synonyms
null too.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.admin_common import (
    CONFIG_TYPES,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    SOURCE_DEFAULT_CONFIG,
    SOURCE_TOPIC_CONFIG,
    broker_topic_defaults,
    default_source,
    read_topic_config_overrides,
    statically_set_topic_defaults,
    topic_config_from_broker_name,
)
from kafkalite.apis.base import RequestContext, handles
from kafkalite.apis.broker_configs import dynamic_config
from kafkalite.config import is_sensitive_config
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode
from kafkalite.share.group_configs import (
    GROUP_CONFIGS,
    GROUP_RESOURCE,
    SOURCE_DYNAMIC_GROUP_CONFIG,
)


@handles(ApiKey.DESCRIBE_CONFIGS)
async def handle_describe_configs(ctx: RequestContext, request: Any) -> Any:
    include_synonyms = getattr(request, "include_synonyms", False)
    results = []
    for resource in request.resources:
        keys = resource.configuration_keys
        wanted = None if keys is None else set(keys)
        result: dict[str, Any] = {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "resource_type": resource.resource_type,
            "resource_name": resource.resource_name,
            "configs": [],
        }
        results.append(result)
        if resource.resource_type == RESOURCE_TOPIC:
            name = resource.resource_name
            if name not in ctx.services.metadata_cache.get_all_topics():
                result.update(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"Topic '{name}' does not exist.",
                )
                continue
            overrides = await read_topic_config_overrides(ctx, name)
            result["configs"] = topic_configs(ctx, overrides, wanted, include_synonyms)
        elif resource.resource_type == RESOURCE_BROKER:
            if resource.resource_name not in ("", str(ctx.services.broker_id)):
                result.update(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message=f"Unexpected broker id, expected {ctx.services.broker_id} "
                    f"or empty string, but received {resource.resource_name}",
                )
                continue
            result["configs"] = broker_configs(
                ctx, wanted, include_synonyms, per_broker=bool(resource.resource_name)
            )
        elif resource.resource_type == GROUP_RESOURCE and group_store(ctx) is not None:
            if not resource.resource_name:
                result.update(
                    error_code=ErrorCode.INVALID_REQUEST,
                    error_message="Group name must not be empty",
                )
                continue
            result["configs"] = await group_configs(
                ctx, resource.resource_name, wanted, include_synonyms
            )
        else:
            result.update(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Unsupported resource type {resource.resource_type}",
            )
    return ctx.response(throttle_time=0, results=results)


def group_store(ctx: RequestContext) -> Any:
    """The group config store (share/group_configs.py), None on a broker without one."""
    return ctx.services.extra.get("group_configs")


async def group_configs(
    ctx: RequestContext, group_id: str, wanted: set[str] | None, include_synonyms: bool
) -> list[dict[str, Any]]:
    """Every group config of ``group_id`` (the group need not exist, as in Kafka): its
    override (DYNAMIC_GROUP_CONFIG, with itself as its one synonym) or the broker's default
    (DEFAULT_CONFIG, no synonyms)."""
    store = group_store(ctx)
    overrides = await store.read(group_id)
    out = []
    for name, kind in sorted(GROUP_CONFIGS.items()):
        if wanted is not None and name not in wanted:
            continue
        if name in overrides:
            value, source = overrides[name], SOURCE_DYNAMIC_GROUP_CONFIG
            synonyms = [{"name": name, "value": value, "source": source}]
        else:
            value, source, synonyms = store.defaults[name], SOURCE_DEFAULT_CONFIG, []
        out.append(config_entry(name, value, source, synonyms if include_synonyms else [], kind))
    return out


def topic_configs(
    ctx: RequestContext,
    overrides: dict[str, str],
    wanted: set[str] | None,
    include_synonyms: bool,
) -> list[dict[str, Any]]:
    defaults = broker_topic_defaults(ctx)
    broker_names = topic_config_from_broker_name()
    static = statically_set_topic_defaults(ctx)
    out = []
    for name in sorted(set(defaults) | set(overrides)):
        if wanted is not None and name not in wanted:
            continue
        synonyms = []
        if name in overrides:
            value, source = overrides[name], SOURCE_TOPIC_CONFIG
            synonyms.append({"name": name, "value": value, "source": SOURCE_TOPIC_CONFIG})
        else:
            value, source = defaults.get(name), default_source(name, static)
        dynamic = ctx.services.extra.get("dynamic_config")
        broker_name = broker_names.get(name)
        if broker_name is not None and dynamic is not None and dynamic.has_dynamic(broker_name):
            # a dynamic broker default: Kafka's synonyms of the broker setting, highest first
            for n, v, src in dynamic.synonyms(broker_name, per_broker=True):
                synonyms.append({"name": n, "value": v, "source": src})
            if name not in overrides:
                source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT_CONFIG
        elif name in broker_names and name in defaults:
            synonyms.append(
                {
                    "name": static.get(name, broker_names[name]),
                    "value": defaults[name],
                    "source": default_source(name, static),
                }
            )
        sensitive = is_sensitive_config(name)
        if sensitive:
            value = None
            synonyms = [{**s, "value": None} for s in synonyms]
        out.append(
            config_entry(
                name,
                value,
                source,
                synonyms if include_synonyms else [],
                CONFIG_TYPES.get(name, 2),
                sensitive=sensitive,
            )
        )
    return out


def broker_configs(
    ctx: RequestContext, wanted: set[str] | None, include_synonyms: bool, per_broker: bool = True
) -> list[dict[str, Any]]:
    dynamic = dynamic_config(ctx)
    from kafkalite.server.dynamic_config import DEFAULT_CONFIG, DYNAMIC_CONFIGS, config_type

    if per_broker:
        names = dynamic.described_names()
    else:
        names = sorted(dynamic.cluster_default)
    out = []
    for name in names:
        if wanted is not None and name not in wanted:
            continue
        sensitive = is_sensitive_config(name)
        synonyms = [
            {"name": n, "value": None if sensitive else v, "source": src}
            for n, v, src in dynamic.synonyms(name, per_broker)
        ]
        if per_broker:
            value = dynamic.current_value(name)
        else:
            value = dynamic.cluster_default.get(name)
        source = synonyms[0]["source"] if synonyms else DEFAULT_CONFIG
        out.append(
            config_entry(
                name,
                None if sensitive else value,
                source,
                synonyms if include_synonyms else [],
                config_type(name),
                sensitive=sensitive,
                read_only=name not in DYNAMIC_CONFIGS,
            )
        )
    return out


def config_entry(
    name: str,
    value: str | None,
    source: int,
    synonyms: list[dict[str, Any]],
    config_type: int,
    *,
    sensitive: bool = False,
    read_only: bool = False,
) -> dict[str, Any]:
    """One described config, as every resource type answers it."""
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_default": source == SOURCE_DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": synonyms,
        "config_type": config_type,
        "documentation": None,
    }
