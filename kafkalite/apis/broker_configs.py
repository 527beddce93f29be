"""The BROKER resource of AlterConfigs, IncrementalAlterConfigs and DescribeConfigs (Kafka's
ZkAdminManager.alterBrokerConfigs and ConfigHelper's broker entries, ZooKeeper era).

The resource name is a broker id (that broker's own level, ``/config/brokers/<id>``) or ""
(the cluster-wide defaults, ``/config/brokers/<default>``). As in Kafka, a broker alters only
its own level or the defaults: another id is INVALID_REQUEST ("Unexpected broker id ..."),
and clients send a per-broker request to that broker. Validation is the DynamicBrokerConfig's
(server/dynamic_config.py, reached through ``services.extra["dynamic_config"]``): any refusal
is INVALID_CONFIG with Kafka's "Invalid config value for resource ..." message. Nothing is
applied here: the write and its change notification reach every broker's config watcher,
this one included.
"""

from __future__ import annotations

from typing import Any

from kafkalite.apis.base import RequestContext
from kafkalite.protocol.errors import ErrorCode

RELOADABLE_FILE_CONFIGS = ("ssl.keystore.location", "ssl.truststore.location")


def dynamic_config(ctx: RequestContext) -> Any:
    """The broker's DynamicBrokerConfig (the server puts it in ``services.extra``; a handler
    test without a server gets one over the static config)."""
    from kafkalite.server.dynamic_config import DynamicBrokerConfig

    extra = ctx.services.extra
    if "dynamic_config" not in extra:
        extra["dynamic_config"] = DynamicBrokerConfig(ctx.services.config)
    return extra["dynamic_config"]


def resource_text(name: str) -> str:
    return f"ConfigResource(type=BROKER, name='{name}')"


def broker_level(ctx: RequestContext, name: str) -> tuple[int | None, ErrorCode, str | None]:
    """(broker id or None for the defaults, error, message) of a BROKER resource name."""
    if not name:
        return None, ErrorCode.NONE, None
    try:
        broker_id = int(name)
    except ValueError:
        return None, ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
    if broker_id != ctx.services.broker_id:
        return (
            None,
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.services.broker_id}, but received {name}",
        )
    return broker_id, ErrorCode.NONE, None


async def stored_level(ctx: RequestContext, broker_id: int | None) -> dict[str, str]:
    """The level's current dynamic configs, passwords decoded (Kafka's fetchEntityConfig and
    fromPersistentProps)."""
    from kafkalite.zk.broker_configs import get_broker_config

    stored = await get_broker_config(ctx.services.store, broker_id)
    return dynamic_config(ctx).from_persistent(stored, per_broker=broker_id is not None)


async def alter_broker_configs(
    ctx: RequestContext, name: str, props: dict[str, str], validate_only: bool
) -> tuple[ErrorCode, str | None]:
    """Replace a level's dynamic configs with `props` (validated; not written when
    validate_only)."""
    from kafkalite.server.dynamic_config import InvalidDynamicConfig
    from kafkalite.zk.broker_configs import set_broker_config

    broker_id, error, message = broker_level(ctx, name)
    if error != ErrorCode.NONE:
        return error, message
    dynamic = dynamic_config(ctx)
    per_broker = broker_id is not None
    try:
        new = dynamic.validate(props, per_broker)
        persistent = dynamic.to_persistent(props)
    except InvalidDynamicConfig as e:
        return (
            ErrorCode.INVALID_CONFIG,
            f"Invalid config value for resource {resource_text(name)}: {e}",
        )
    if validate_only:
        return ErrorCode.NONE, None
    if per_broker:
        # Kafka's reloadUpdatedFilesWithoutConfigChange: a keystore named again with the
        # same path is read again (its file was replaced: certificate rotation)
        listeners = {
            key.split(".")[2].upper()
            for key in props
            if key.startswith("listener.name.") and key.endswith(RELOADABLE_FILE_CONFIGS)
        }
        dynamic.reload_tls(new, sorted(listeners))
    await set_broker_config(ctx.services.store, broker_id, persistent)
    return ErrorCode.NONE, None
