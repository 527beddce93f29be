"""FindCoordinator (key 10, v0-v4): which broker coordinates a consumer group.

The coordinator of group ``g`` is the leader of ``__consumer_offsets-<partition_for(g)>``
(abs(java hashCode(g)) % offsets.topic.num.partitions), as in Kafka, so Kafka tooling agrees on
the partition. v0-v3 ask for one key (v0: always a group; v1+ carry ``key_type``); v4+ ask for a
batch of keys of one type and get one entry per key.

``__consumer_offsets`` is created on first use through the controller's admin path, like any
topic (offsets.topic.num.partitions partitions, compacted, the coordinator's topic configs).
Replication factor: offsets.topic.replication.factor, capped at the number of live brokers as
Kafka did before 0.11 (KIP-115 made Kafka refuse instead), so a single broker with the default
settings serves groups. Until the topic exists, its partition has a live leader, and (when the
leader is this broker) the coordinator has loaded the partition, the answer is
COORDINATOR_NOT_AVAILABLE, which clients retry.

Key type TRANSACTION (1): the coordinator of transactional id ``t`` is the leader of
``__transaction_state-<abs(hashCode(t)) % transaction.state.log.num.partitions>``, created on
first use the same way (``transaction.state.log.*`` settings; its replication factor capped at
the live brokers and its min.insync.replicas at that factor, so one broker works out of the box).
Any other key type is INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from kafkalite.apis.base import RequestContext, handles
from kafkalite.group.config import GROUP_METADATA_TOPIC_NAME
from kafkalite.protocol.api import ApiKey
from kafkalite.protocol.errors import ErrorCode, KafkaError, TopicAlreadyExistsError

log = structlog.get_logger("kafkalite.apis")

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


async def ensure_internal_topic(
    ctx: RequestContext,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: Callable[[int], dict[str, str]],
) -> bool:
    """True when the coordinator topic ``name`` is known to the metadata cache; otherwise ask
    the controller to create it (once; concurrent callers see TopicAlreadyExists) and return
    False. Its replication factor is capped at the live brokers, so one broker works out of the
    box; ``configs(replication_factor)`` gives its topic configs."""
    from kafkalite.zk import admin

    services = ctx.services
    if services.metadata_cache.contains_topic(name):
        return True
    alive = len(services.metadata_cache.get_alive_brokers())
    replication_factor = min(replication_factor, max(alive, 1))
    try:
        await admin.create_topic(
            services.store, name, partitions, replication_factor, configs(replication_factor)
        )
        log.info(
            "creating a coordinator topic",
            topic=name,
            partitions=partitions,
            replication_factor=replication_factor,
        )
    except TopicAlreadyExistsError:
        pass
    except KafkaError as e:
        log.warning("creating a coordinator topic failed", topic=name, error=str(e))
    return False


def coordinator_node(
    ctx: RequestContext, topic: str, partition: int, loaded: Callable[[], bool]
) -> tuple[ErrorCode, int, str, int]:
    """(error, node id, host, port) of the leader of ``topic``-``partition``, the coordinator of
    a key; ``loaded()`` tells whether this broker, when it leads, has loaded the partition."""
    services = ctx.services
    info = services.metadata_cache.get_partition_info(topic, partition)
    if info is None or info.leader < 0:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    endpoint = services.metadata_cache.get_alive_broker_node(
        info.leader, ctx.connection.listener_name
    )
    if endpoint is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    if info.leader == services.broker_id and not loaded():
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1  # still loading the partition
    return ErrorCode.NONE, info.leader, endpoint.host, endpoint.port


async def group_coordinator(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, int, str, int]:
    coordinator = ctx.services.group_coordinator
    config = coordinator.offset_config
    created = await ensure_internal_topic(
        ctx,
        GROUP_METADATA_TOPIC_NAME,
        config.offsets_topic_num_partitions,
        config.offsets_topic_replication_factor,
        lambda _: config.offsets_topic_configs(),
    )
    if not created:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return coordinator_node(
        ctx,
        GROUP_METADATA_TOPIC_NAME,
        coordinator.partition_for(group_id),
        lambda: coordinator.core.is_group_local(group_id),
    )


async def txn_coordinator(
    ctx: RequestContext, transactional_id: str
) -> tuple[ErrorCode, int, str, int]:
    from kafkalite.txn.config import TRANSACTION_STATE_TOPIC_NAME

    coordinator = ctx.services.txn_coordinator
    config = coordinator.config
    created = await ensure_internal_topic(
        ctx,
        TRANSACTION_STATE_TOPIC_NAME,
        config.transaction_state_log_num_partitions,
        config.transaction_state_log_replication_factor,
        config.topic_configs,
    )
    if not created:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return coordinator_node(
        ctx,
        TRANSACTION_STATE_TOPIC_NAME,
        coordinator.partition_for(transactional_id),
        lambda: coordinator.is_local(transactional_id),
    )


async def find(ctx: RequestContext, key: str, key_type: int) -> tuple[ErrorCode, int, str, int]:
    if key_type == KEY_TYPE_TRANSACTION:
        if not key:
            return ErrorCode.INVALID_REQUEST, -1, "", -1
        if ctx.services.txn_coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        return await txn_coordinator(ctx, key)
    if key_type != KEY_TYPE_GROUP:
        return ErrorCode.INVALID_REQUEST, -1, "", -1
    if ctx.services.group_coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
    return await group_coordinator(ctx, key)


def _message(error: ErrorCode) -> str | None:
    return None if error is ErrorCode.NONE else error.message


@handles(ApiKey.FIND_COORDINATOR)
async def handle_find_coordinator(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, node_id, host, port = await find(ctx, key, request.key_type)
            coordinators.append(
                {
                    "key": key,
                    "node_id": node_id,
                    "host": host,
                    "port": port,
                    "error_code": error,
                    "error_message": _message(error),
                }
            )
        return ctx.response(coordinators=coordinators)
    key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
    error, node_id, host, port = await find(ctx, request.key, key_type)
    return ctx.response(
        error_code=error, error_message=_message(error), node_id=node_id, host=host, port=port
    )
